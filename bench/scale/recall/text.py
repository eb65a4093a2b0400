"""``bench.scale.recall_scale --text-dataset``: a heavy dataset of real text and vectors,
windows of consecutive LoCoMo turns with MiniLM's vectors (late-chunked, or each text on
its own; kept in an .npz), loaded in batches (``load_text``); its queries are LoCoMo's
questions (``text_questions``), and ``_shared_turns`` tells how alike its exact top 10s
are."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from bench.scale.recall.common import (
    DIM,
    TEXT,
    TEXT_TURNS,
    log,
)


def text_windows(
    count: int, seed: int, turns: tuple[int, int] = TEXT_TURNS
) -> tuple[list[Any], list[tuple[int, int, int]], int]:
    """--text-dataset's episodes: LoCoMo's sessions (every conversation's, in order) and
    ``count`` windows ``(session, first turn, turns)`` of ``turns`` consecutive turns, every
    distinct window of the corpus once in a seeded shuffle (another shuffled pass, i.e.
    repeated texts, only when ``count`` exceeds them); and how many distinct windows exist."""
    from bench.harness import locomo

    sessions = [s for c in locomo.load() for s in c.sessions]
    lo, hi = turns
    every = [
        (k, first, n)
        for k, session in enumerate(sessions)
        for n in range(lo, hi + 1)
        for first in range(len(session.messages) - n + 1)
    ]
    rng = random.Random(seed)
    out: list[tuple[int, int, int]] = []
    while len(out) < count:
        batch = every[:]
        rng.shuffle(batch)
        out.extend(batch[: count - len(out)])
    return sessions, out, len(every)


def text_vectors(
    sessions: list[Any],
    spans: set[tuple[int, int, int]],
    mode: str,
    cache: str | None = None,
) -> dict[tuple[int, int, int], np.ndarray]:
    """MiniLM vectors of the turn ranges ``(session, first, last)`` (inclusive) of
    ``sessions``: ``late``, each session read once and each range pooled from its tokens
    (``embed_spans``, the Summariser's late chunking, over the whole session), or
    ``separate``, each range's text (its turns, one per line) embedded on its own.
    ``cache``: an .npz of vectors computed before (same corpus and mode), extended and saved
    again."""
    from episodic.config import EmbeddingSettings
    from episodic.providers import SpanDocument, make_embedder

    out: dict[tuple[int, int, int], np.ndarray] = {}
    if cache and Path(cache).is_file():
        stored = np.load(cache)
        if str(stored["mode"]) == mode and int(stored["sessions"]) == len(sessions):
            for key, vector in zip(stored["keys"], stored["vectors"], strict=True):
                out[(int(key[0]), int(key[1]), int(key[2]))] = vector
            log(f"  {len(out)} text vectors from {cache}")
    wanted = sorted(spans - set(out))
    embedder = make_embedder(
        EmbeddingSettings(embedding_threads=2, embedding_batch_size=128), DIM, bulk=True
    )
    started = time.monotonic()
    texts = [[m.text for m in s.messages] for s in sessions]
    if mode == "late":
        by_session: dict[int, list[tuple[int, int, int]]] = {}
        for key in wanted:
            by_session.setdefault(key[0], []).append(key)
        order = sorted(by_session)
        for g in range(0, len(order), 16):
            documents, groups = [], []
            for k in order[g : g + 16]:
                starts, offset = [], 0
                for t in texts[k]:
                    starts.append(offset)
                    offset += len(t) + 1
                ranges = by_session[k]
                spans_k = tuple((starts[a], starts[b] + len(texts[k][b])) for _, a, b in ranges)
                documents.append(SpanDocument("\n".join(texts[k]), spans_k))
                groups.append(ranges)
            for ranges, vectors in zip(groups, embedder.embed_spans(documents), strict=True):  # type: ignore[attr-defined]
                out.update(zip(ranges, vectors, strict=True))
            done = sum(len(by_session[k]) for k in order[: g + 16])
            log(
                f"  late vectors: {done}/{len(wanted)} ranges, {min(g + 16, len(order))}/"
                f"{len(order)} sessions ({time.monotonic() - started:.0f}s)"
            )
    elif mode == "separate":
        step = 512
        for g in range(0, len(wanted), step):
            keys = wanted[g : g + step]
            vectors = embedder.embed(["\n".join(texts[k][a : b + 1]) for k, a, b in keys])
            out.update(zip(keys, vectors, strict=True))
            log(
                f"  separate vectors: {g + len(keys)}/{len(wanted)} "
                f"({time.monotonic() - started:.0f}s)"
            )
            if cache and (g // step) % 8 == 7:  # an interrupted run keeps most of its work
                _save_vectors(cache, mode, len(sessions), out)
    else:
        raise ValueError(f"--text-vectors: {mode!r} (late or separate)")
    if cache and wanted:
        _save_vectors(cache, mode, len(sessions), out)
    return out


def _save_vectors(
    path: str, mode: str, sessions: int, vectors: dict[tuple[int, int, int], np.ndarray]
) -> None:
    keys = sorted(vectors)
    np.savez(
        path,
        mode=mode,
        sessions=sessions,
        keys=np.asarray(keys, dtype=np.int32),
        vectors=np.stack([vectors[k] for k in keys]).astype(np.float32),
    )


def load_text(
    conn: psycopg.Connection,
    *,
    first: int,
    count: int,
    seed: int,
    mode: str = "late",
    turns: tuple[int, int] = TEXT_TURNS,
    cache: str | None = None,
) -> dict[str, float]:
    """--text-dataset: ``count`` threads and episodes of LoCoMo text in ``TEXT``, numbered
    from ``first`` (the rows :func:`load` writes, with the text's document, chunks and
    MiniLM vectors; see the module docstring); returns seconds per phase."""
    from episodic.store.recall_index import make_chunks

    timings: dict[str, float] = {}
    started = time.monotonic()
    sessions, windows, distinct = text_windows(count, seed, turns)
    repeated = count - len(set(windows))
    log(
        f"  {TEXT}: {count} windows of {turns[0]}-{turns[1]} turns from {len(sessions)} LoCoMo "
        f"sessions ({distinct} distinct windows; {repeated} repeated)"
    )
    episodes = []  # (i, turns, text, key, [(start, end, text, key)])
    for offset, (k, a, n) in enumerate(windows):
        turns_k = sessions[k].messages[a : a + n]
        chunks = []
        for chunk in make_chunks([(j + 1, m.text) for j, m in enumerate(turns_k)]):
            assert chunk.start_offset == 0  # LoCoMo's turns are shorter than CHUNK_WORDS
            key = (k, a + chunk.start_sequence - 1, a + chunk.end_sequence - 1)
            chunks.append((chunk.start_sequence, chunk.end_sequence, chunk.text, key))
        text = "\n".join(m.text for m in turns_k)
        episodes.append((first + offset, n, text, (k, a, a + n - 1), chunks))
    spans = {e[3] for e in episodes} | {c[3] for e in episodes for c in e[4]}
    log(
        f"  {TEXT}: {sum(len(e[4]) for e in episodes)} chunks; {len(spans)} distinct texts "
        f"to embed ({mode})"
    )
    vectors = text_vectors(sessions, spans, mode, cache)
    timings["text embed"] = time.monotonic() - started
    t = time.monotonic()
    rng = random.Random(seed + 1)
    register_vector(conn)
    step = 2000
    for b in range(0, len(episodes), step):
        part = episodes[b : b + step]
        conn.execute(
            """
            INSERT INTO threads (thread_id, dataset, label, last_sequence, captured_sequence,
                                 last_message_at, last_activity_at)
            SELECT md5('t' || u.i)::uuid, %(dataset)s,
                   '\\x00'::bytea || convert_to('thread-' || u.i, 'UTF8'), u.n, u.n, now(), now()
            FROM unnest(%(ids)s::bigint[], %(ns)s::int[]) u(i, n)
            """,
            {"dataset": TEXT, "ids": [e[0] for e in part], "ns": [e[1] for e in part]},
        )
        conn.execute(
            """
            INSERT INTO episodes (episode_id, thread_id, dataset, status, semantic_status,
                                  trigger, start_sequence, end_sequence, message_count,
                                  started_at, ended_at, summary, embedding, completed_at,
                                  search_vector, search_length)
            SELECT md5('e' || u.i)::uuid, md5('t' || u.i)::uuid, %(dataset)s, 'completed',
                   'skipped', 'explicit', 1, u.n, u.n, u.ended - interval '10 minutes',
                   u.ended, '\\x00'::bytea || convert_to(u.body, 'UTF8'), u.v, now(), d.v,
                   (SELECT sum(coalesce(array_length(x.positions, 1), 1)) FROM unnest(d.v) x)
            FROM unnest(%(ids)s::bigint[], %(ns)s::int[], %(ages)s::float8[], %(bodies)s::text[],
                        %(vectors)s::vector[]) u0(i, n, age, body, v)
            CROSS JOIN LATERAL (SELECT u0.*, now() - make_interval(secs => u0.age) AS ended) u
            CROSS JOIN LATERAL (SELECT to_tsvector('english', u.body) AS v) d
            """,
            {
                "dataset": TEXT,
                "ids": [e[0] for e in part],
                "ns": [e[1] for e in part],
                # ended within the last year, as load()'s episodes (seeded here)
                "ages": [float(int(rng.random() * 365 * 86400)) for _ in part],
                "bodies": [e[2] for e in part],
                "vectors": [vectors[e[3]] for e in part],
            },
        )
        rows = [(e[0], *c) for e in part for c in e[4]]
        conn.execute(
            """
            INSERT INTO message_chunks (thread_id, start_sequence, start_offset, end_sequence,
                                        dataset, embedding, search_vector, search_length)
            SELECT md5('t' || u.i)::uuid, u.s, 0, u.e, %(dataset)s, u.v, d.v,
                   (SELECT sum(coalesce(array_length(x.positions, 1), 1)) FROM unnest(d.v) x)
            FROM unnest(%(ids)s::bigint[], %(starts)s::bigint[], %(ends)s::bigint[],
                        %(bodies)s::text[], %(vectors)s::vector[]) u(i, s, e, body, v)
            CROSS JOIN LATERAL (SELECT to_tsvector('english', u.body) AS v) d
            """,
            {
                "dataset": TEXT,
                "ids": [r[0] for r in rows],
                "starts": [r[1] for r in rows],
                "ends": [r[2] for r in rows],
                "bodies": [r[3] for r in rows],
                "vectors": [vectors[r[4]] for r in rows],
            },
        )
        log(f"  {TEXT} episodes {b + len(part)} ({time.monotonic() - started:.0f}s)")
    timings["text load"] = time.monotonic() - t
    return timings


def text_questions() -> list[str]:
    """--text-dataset's queries: every LoCoMo question (bench/locomo.py keeps those with
    evidence, adversarial ones left out)."""
    from bench.harness import locomo

    return [q.question for c in locomo.load() for q in c.questions]


def _shared_turns(sql: psycopg.Connection, episodes: list[object]) -> float:
    """The share of pairs of ``TEXT``'s ``episodes`` whose texts (one turn a line, stored
    as the summary) have a turn in common."""
    turns = [
        set(r[0].split("\n"))
        for r in sql.execute(
            "SELECT convert_from(substring(summary FROM 2), 'UTF8') FROM episodes "
            "WHERE dataset = %s AND episode_id = ANY(%s)",
            (TEXT, episodes),
        )
    ]
    pairs = [(a, b) for k, a in enumerate(turns) for b in turns[k + 1 :]]
    return sum(1 for a, b in pairs if a & b) / len(pairs) if pairs else 0.0
