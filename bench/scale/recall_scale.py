"""Recall at scale: many normal datasets and one heavy one, exact ranking vs the approximate
candidate path, side by side in one run.

    .venv/bin/python -m bench.recall_scale [--episodes 1000000] [--datasets 10000]
        [--heavy 100000] [--queries 300] [--keep DIR]

Builds a synthetic store directly in SQL (no model, no messages: Recall never reads them):
``--episodes`` completed episodes spread over ``--datasets`` normal datasets, plus one heavy
dataset of ``--heavy`` episodes; each episode has a random summary vector, a lexical
document of 60 Zipf-distributed words and 3 message chunks (20 words each, random vectors)
— the rows ``index_episode`` writes. The HNSW indexes are dropped during the load and built
afterwards (with a generous ``maintenance_work_mem``), as a bulk import would.

Then, for random 3-word queries (query vectors from the hashing embedder: random-looking,
as the stored ones are), sequentially on one connection:

- ``normal exact``: Recall's statement on a random normal dataset (the exact formula over
  every candidate), timed in-process (``episodic.store.recall_queries.rank``: the SQL plus
  the row handling), and the bare statement through psycopg for the ratio;
- ``heavy exact`` and ``heavy approximate``: the same on the heavy dataset, the approximate
  path forced (``approximate_above`` 0) against the exact one forced (``approximate_above``
  above any size), and the bare statements of both;
- recall@5 and recall@10 of the approximate top N against the exact top N, over the same
  queries on the heavy dataset.

Prints the load average, p50/p99 per path and the ratios.

``--text-dataset N`` adds one more heavy dataset, ``heavy-text``, of real text and real
vectors: each of its N episodes is a window of 3–8 consecutive LoCoMo turns
(``bench/locomo.py``; every window of the corpus at most once, in a seeded shuffle), its
lexical document ``to_tsvector('english', text)`` and its chunks the store's own
(``make_chunks`` over the window's turns), and its summary and chunk vectors MiniLM's (the
default embedder): by default late-chunked, each LoCoMo session read by the model once and
every window's vector pooled from its tokens (what the Summariser does for chunks by
default, ``EPISODIC_CHUNK_VECTORS=late``; ``--text-vectors separate`` embeds each text on
its own: ~35× the model time, ~70 minutes for 25k episodes on 2 loaded cores). Its queries are LoCoMo's questions, embedded as Recall does
(``embed_query``); recall@N is measured on it beside the other heavy datasets.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from bench.harness import REPO
from bench.harness.grpc_echo import echo_server

HEAVY = "heavy-0000"
CLUSTERED = "heavy-clustered"
DIM = 384
# Clustered vectors: CENTROIDS topics; each vector is its topic's unit centroid plus uniform
# noise of per-dimension width NOISE_SCALE (norm ~ NOISE_SCALE * sqrt(DIM / 12) ~ 1), so a
# text's cosine to its topic is ~0.7 and to another text of the topic ~0.5, about what
# MiniLM gives sentences on one subject.
CENTROIDS = 500
NOISE_SCALE = 0.18
TEXT = "heavy-text"
#: --text-dataset: each episode is this many consecutive LoCoMo turns (inclusive range). The
#: corpus holds ~28k distinct windows of 3–8 turns (~20k of 3–6), so 25k episodes need no
#: repeated text.
TEXT_TURNS = (3, 8)


def _episode_ids(cursor: Any) -> list[object]:
    """The ranked episodes' ids of a ranking statement's executed cursor, found by the
    column's name: the count row's columns come first and grow (``abstain_applied`` joined
    them), and an older checkout's statement (``--before``) has fewer."""
    at = [c.name for c in cursor.description].index("episode_id")
    return [r[at] for r in cursor.fetchall() if r[at] is not None]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _words(count: int, seed_column: str) -> str:
    """SQL: ``count`` Zipf-distributed words (a few common, most rare), as text."""
    return (
        f"(SELECT string_agg('w' || (1 + floor(5000 * power(random(), 3)))::int, ' ') "
        f"FROM generate_series(1, {count}) k WHERE {seed_column} IS NOT NULL)"
    )


def _vector(seed_column: str, centroid: str | None = None) -> str:
    """SQL: a random unit vector (the correlated WHERE makes it one per row); with
    ``centroid`` (an SQL expression numbering a row of ``scale_centroids``), that centroid
    plus noise (``NOISE_SCALE``), normalised: a topic's texts, as real embeddings
    cluster."""
    if centroid is None:
        return (
            f"(SELECT l2_normalize(array_agg(random() - 0.5)::vector) "
            f"FROM generate_series(1, {DIM}) d WHERE {seed_column} IS NOT NULL)"
        )
    return (
        f"(SELECT l2_normalize(sc.v + array_agg((random() - 0.5) * {NOISE_SCALE})::vector) "
        f"FROM generate_series(1, {DIM}) d, scale_centroids sc "
        f"WHERE sc.n = {centroid} AND {seed_column} IS NOT NULL GROUP BY sc.v)"
    )


def load(
    conn: psycopg.Connection,
    *,
    first: int,
    count: int,
    dataset_sql: str,
    chunks: int = 3,
    clustered: bool = False,
) -> None:
    """``count`` threads, episodes and ``chunks`` chunks each, numbered from ``first``;
    ``dataset_sql`` gives episode ``i``'s dataset; ``clustered``: vectors around episode
    ``i``'s topic (a centroid) instead of uniformly random."""
    params = {"first": first, "last": first + count - 1}
    topic = f"mod(i * 7919, {CENTROIDS})" if clustered else None
    starts = ", ".join(f"({1 + 2 * k})" for k in range(chunks))
    conn.execute(
        f"""
        INSERT INTO threads (thread_id, dataset, label, last_sequence, captured_sequence,
                             last_message_at, last_activity_at)
        SELECT md5('t' || i)::uuid, {dataset_sql},
               '\\x00'::bytea || convert_to('thread-' || i, 'UTF8'), 8, 8, now(), now()
        FROM generate_series(%(first)s::bigint, %(last)s::bigint) i
        """,
        params,
    )
    conn.execute(
        f"""
        INSERT INTO episodes (episode_id, thread_id, dataset, status, semantic_status, trigger,
                              start_sequence, end_sequence, message_count, started_at, ended_at,
                              summary, embedding, completed_at, search_vector, search_length)
        SELECT md5('e' || i)::uuid, md5('t' || i)::uuid, {dataset_sql}, 'completed',
               'skipped', 'explicit', 1, 8, 8, t.ended - interval '10 minutes', t.ended,
               '\\x00'::bytea || convert_to('summary of thread ' || i, 'UTF8'), {_vector("i", topic)},
               now(), d.v, (SELECT sum(coalesce(array_length(x.positions, 1), 1))
                            FROM unnest(d.v) x)
        FROM generate_series(%(first)s::bigint, %(last)s::bigint) i
        CROSS JOIN LATERAL (
            SELECT now() - interval '1 second' * floor(random() * 365 * 86400) AS ended
            WHERE i IS NOT NULL) t
        CROSS JOIN LATERAL (SELECT to_tsvector('english', {_words(60, "i")}) AS v) d
        """,
        params,
    )
    conn.execute(
        f"""
        INSERT INTO message_chunks (thread_id, start_sequence, start_offset, end_sequence,
                                    dataset, embedding, search_vector, search_length)
        SELECT md5('t' || i)::uuid, c.s, 0, c.s + 3, {dataset_sql}, {_vector("c.s + i", topic)},
               tv.v, (SELECT sum(coalesce(array_length(x.positions, 1), 1)) FROM unnest(tv.v) x)
        FROM generate_series(%(first)s::bigint, %(last)s::bigint) i
        CROSS JOIN (VALUES {starts}) c(s)
        CROSS JOIN LATERAL (SELECT to_tsvector('english', {_words(20, "c.s + i")}) AS v) tv
        """,
        params,
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


def centroids(seed: int) -> list[list[float]]:
    """The clustered dataset's topics: ``CENTROIDS`` random unit vectors (also the queries')."""
    rng = random.Random(seed)
    out = []
    for _ in range(CENTROIDS):
        v = [rng.gauss(0.0, 1.0) for _ in range(DIM)]
        norm = sum(x * x for x in v) ** 0.5
        out.append([x / norm for x in v])
    return out


def build(
    conn: psycopg.Connection,
    episodes: int,
    datasets: int,
    heavy: int,
    *,
    chunks: int = 3,
    clustered: int = 0,
    seed: int = 11,
    heavy_indexes_only: bool = False,
    text: int = 0,
    text_mode: str = "late",
    text_cache: str | None = None,
) -> dict[str, float]:
    """The store (see the module docstring); returns seconds per phase."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    # Indexes that slow a bulk load down by an order of magnitude are built afterwards.
    indexes = conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN "
        "('episodes', 'message_chunks') AND (indexdef ILIKE '%%USING hnsw%%' "
        "OR indexdef ILIKE '%%USING gin%%')"
    ).fetchall()
    for name, _ in indexes:
        conn.execute(f"DROP INDEX {name}")
    conn.execute(
        "CREATE TABLE scale_centroids (n int PRIMARY KEY, v vector(%s))" % DIM  # noqa: UP031
    )
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO scale_centroids (n, v) VALUES (%s, %s::vector)",
            [(n, str(v)) for n, v in enumerate(centroids(seed))],
        )
    conn.execute(
        "INSERT INTO datasets (dataset) SELECT 'ds-' || lpad(g::text, 5, '0') "
        "FROM generate_series(0, %(n)s - 1) g",
        {"n": datasets},
    )
    conn.execute("INSERT INTO datasets (dataset) VALUES (%s), (%s)", (HEAVY, CLUSTERED))
    if text:
        conn.execute("INSERT INTO datasets (dataset) VALUES (%s)", (TEXT,))
    normal = f"'ds-' || lpad(mod(i, {datasets})::text, 5, '0')"
    step = 100_000
    parts = [("normal", 1, episodes, normal, chunks, False)]
    parts.append(("heavy", episodes + 1, heavy, f"'{HEAVY}'", 3, False))
    parts.append(("clustered", episodes + heavy + 1, clustered, f"'{CLUSTERED}'", 3, True))
    for label, start, total, dataset_sql, per_episode, topics in parts:
        for first in range(start, start + total, step):
            n = min(step, start + total - first)
            load(
                conn,
                first=first,
                count=n,
                dataset_sql=dataset_sql,
                chunks=per_episode,
                clustered=topics,
            )
            log(f"  {label} episodes {first + n - start} ({time.monotonic() - started:.0f}s)")
    if text:
        timings.update(
            load_text(
                conn,
                first=episodes + heavy + clustered + 1,
                count=text,
                seed=seed,
                mode=text_mode,
                cache=text_cache,
            )
        )
    timings["load"] = time.monotonic() - started
    timings.update(
        create_indexes(conn, indexes, heavy_partitions(conn) if heavy_indexes_only else None)
    )
    t = time.monotonic()
    conn.execute("VACUUM ANALYZE")
    timings["vacuum analyze"] = time.monotonic() - t
    timings["total"] = time.monotonic() - started
    return timings


def heavy_partitions(conn: psycopg.Connection) -> dict[str, list[str]]:
    """Per table, the partitions that hold the heavy datasets."""
    return {
        table: sorted(
            {
                str(
                    conn.execute(
                        f"SELECT tableoid::regclass FROM {table} WHERE dataset = %s LIMIT 1", (d,)
                    ).fetchone()[0]
                )  # type: ignore[index]
                for d in (HEAVY, CLUSTERED, TEXT)
                if conn.execute(
                    f"SELECT 1 FROM {table} WHERE dataset = %s LIMIT 1", (d,)
                ).fetchone()
            }
        )
        for table in ("episodes", "message_chunks")
    }


def create_indexes(
    conn: psycopg.Connection,
    indexes: list[tuple[str, str]],
    partitions: dict[str, list[str]] | None = None,
) -> dict[str, float]:
    """Builds the bulk load's dropped indexes (``pg_indexes`` rows of the parents); returns
    seconds per index. ``partitions``: only on these partitions of each table (what the
    heavy datasets' queries read: a statement naming one dataset reads one partition, and
    the normal datasets' exact path reads none of these indexes), not the whole table."""
    # HNSW builds many times faster when the graph fits maintenance_work_mem (per partition:
    # the indexes of a hash-partitioned table are built one partition at a time).
    conn.execute("SET maintenance_work_mem = '6GB'")
    conn.execute("SET max_parallel_maintenance_workers = 2")
    timings: dict[str, float] = {}
    for name, definition in indexes:
        # pg_indexes shows a partitioned table's index as ON ONLY (the parent alone).
        table = (
            "message_chunks" if "message_chunks" in definition.split(" USING ")[0] else "episodes"
        )
        if partitions is None:
            statements = [(name, definition.replace(" ON ONLY ", " ON "))]
        else:
            statements = [
                (
                    f"{name}_{part}",
                    definition.replace(f"INDEX {name} ", f"INDEX {name}_{part} ").replace(
                        f" ON ONLY public.{table} ", f" ON {part} "
                    ),
                )
                for part in partitions[table]
            ]
        for label, statement in statements:
            t = time.monotonic()
            conn.execute(statement)
            timings[label] = time.monotonic() - t
            log(f"  {label} {timings[label]:.0f}s")
    return timings


def recall_at(approximate: list[object], exact: list[object], n: int) -> float:
    """The share of the exact top ``n`` that the approximate top ``n`` holds."""
    want = exact[:n]
    return len(set(approximate[:n]) & set(want)) / len(want) if want else 1.0


#: The README's curve (--curve default): the pool's size, the HNSW search list and how far
#: an iterative scan may walk, and the recent set, one at a time around the defaults.
DEFAULT_CURVE = (
    "candidates=200,ef=200;candidates=400,ef=400;candidates=800,ef=800;"
    "candidates=200,ef=800;candidates=1000,ef=1000"
)


def parse_curve(spec: str, defaults: object) -> list[dict[str, int]]:
    """``--curve``'s variants, each with every key (the settings' defaults for the rest)."""
    from episodic.store.recall_queries import Approximation

    base = {
        "candidates": defaults.recall_approximate_candidates,  # type: ignore[attr-defined]
        "ef": max(40, defaults.recall_approximate_candidates),  # type: ignore[attr-defined]
        "scan": 20_000,  # pgvector's default hnsw.max_scan_tuples
        "recent": defaults.recall_approximate_recent,  # type: ignore[attr-defined]
        "per_lexeme": Approximation().per_lexeme,
        "selective_df": Approximation().selective_df,
    }
    variants = []
    for part in (DEFAULT_CURVE if spec == "default" else spec).split(";"):
        variant = dict(base)
        for item in filter(None, part.split(",")):
            key, value = item.split("=")
            if key not in base:
                raise SystemExit(f"--curve: unknown key {key!r} (one of {', '.join(base)})")
            variant[key] = int(value)
        variants.append(variant)
    return variants


def _session(sql: psycopg.Connection, variant: dict[str, int]) -> None:
    sql.execute(f"SET hnsw.ef_search = {variant['ef']}")
    sql.execute(f"SET hnsw.max_scan_tuples = {variant['scan']}")


def curve(
    sql: psycopg.Connection,
    dataset: str,
    queries: int,
    params: object,
    words: object,
    exact_sql: str,
    variants: list[dict[str, int]],
    before_sql: str | None = None,
) -> None:
    """recall@5/@10 and latency of each approximate variant against the exact statement on
    the same queries (variants in a shuffled order per query); ``before_sql``: an older
    approximate statement, run with the first variant's settings."""
    from bench.harness.recall_sql import psycopg_sql
    from bench.harness.report import percentiles
    from episodic.store.recall_queries import recall_statement

    approx_sql = psycopg_sql(
        recall_statement(with_query=True, with_vector=True, approximate=True, kept_statistics=True)
    )
    names = [",".join(f"{k}={v}" for k, v in variant.items()) for variant in variants]
    statements = [approx_sql] * len(variants)
    if before_sql is not None:
        names.append("before: " + names[0])
        variants = [*variants, variants[0]]
        statements.append(before_sql)
    took: dict[str, list[float]] = {k: [] for k in ["exact", *names]}
    at: dict[str, dict[int, list[float]]] = {k: {5: [], 10: []} for k in names}
    rng = random.Random(len(dataset))
    log(f"curve on {dataset}: {queries} queries, {len(variants)} variants …")
    for i in range(queries):
        p = params(dataset, words(), 10)  # type: ignore[operator]
        t = time.perf_counter()
        exact = _episode_ids(sql.execute(exact_sql, p))
        took["exact"].append(time.perf_counter() - t)
        order = list(zip(names, variants, statements, strict=True))
        rng.shuffle(order)
        for name, variant, statement in order:
            _session(sql, variant)
            q = {
                **p,
                "approx_candidates": variant["candidates"],
                "approx_recent": variant["recent"],
                "approx_per_lexeme": variant["per_lexeme"],
                "approx_selective_df": variant["selective_df"],
            }
            t = time.perf_counter()
            got = _episode_ids(sql.execute(statement, q))
            took[name].append(time.perf_counter() - t)
            for n in (5, 10):
                at[name][n].append(recall_at(got, exact, n))
        if (i + 1) % 10 == 0:
            log(f"  {i + 1}")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    e = percentiles(took["exact"])
    print(f"\n{dataset}: {queries} queries, top 10, load average {load}")
    print(f"exact statement: p50 {1000 * e['p50']:.0f} ms, p99 {1000 * e['p99']:.0f} ms\n")
    print("| variant | recall@5 (min) | recall@10 (min) | p50 ms (x exact) | p99 ms (x exact) |")
    print("|---|---|---|---|---|")
    for name in names:
        a = percentiles(took[name])
        print(
            f"| {name} | {statistics.fmean(at[name][5]):.3f} ({min(at[name][5]):.1f}) | "
            f"{statistics.fmean(at[name][10]):.3f} ({min(at[name][10]):.1f}) | "
            f"{1000 * a['p50']:.0f} ({a['p50'] / e['p50']:.2f}x) | "
            f"{1000 * a['p99']:.0f} ({a['p99'] / e['p99']:.2f}x) |"
        )
    sys.stdout.flush()


def diagnose(
    sql: psycopg.Connection,
    dataset: str,
    queries: int,
    params: object,
    words: object,
    exact_sql: str,
    approx_sql: str,
) -> None:
    """Which exact top-10 episodes the approximate top 10 misses, and why: scored
    differently although among the candidates, or not among them; then the source that
    should have brought each (its rank by summary cosine, by its best chunk's cosine among
    all chunks, by ts_rank among the lexical matches, by recency) against that part's
    size."""
    from bench.harness.recall_sql import psycopg_sql
    from episodic.store.recall_queries import approximate_parts, recall_sql

    approx_text = recall_sql(with_query=True, with_vector=True, approximate=True)
    head = approx_text[: approx_text.index("pool AS MATERIALIZED (")]  # WITH qv, q, qq,
    parts = {
        name: psycopg_sql(f"{head} part AS ({part}) SELECT DISTINCT episode_id FROM part")
        for name, part in approximate_parts(True).items()
    }
    ranks = psycopg_sql(
        f"""{head} me AS (
            SELECT e.episode_id, e.embedding <=> (SELECT v FROM qv) AS sd, e.ended_at,
                   coalesce(ts_rank(e.search_vector, (SELECT tq FROM qq), 1), 0) AS tr,
                   (SELECT min(m.embedding <=> (SELECT v FROM qv)) FROM message_chunks m
                    WHERE m.dataset = :dataset AND m.thread_id = e.thread_id
                      AND m.end_sequence <= e.end_sequence) AS cd
            FROM episodes e WHERE e.dataset = :dataset AND e.episode_id = :episode)
        SELECT
          (SELECT count(*) FROM episodes e WHERE e.dataset = :dataset
             AND e.status = 'completed' AND e.embedding <=> (SELECT v FROM qv) < me.sd),
          (SELECT count(*) FROM message_chunks m WHERE m.dataset = :dataset
             AND m.embedding <=> (SELECT v FROM qv) < me.cd),
          CASE WHEN me.tr > 0 THEN (SELECT count(*) FROM episodes e WHERE e.dataset = :dataset
             AND e.status = 'completed' AND e.search_vector @@ (SELECT tq FROM qq)
             AND ts_rank(e.search_vector, (SELECT tq FROM qq), 1) > me.tr) END,
          (SELECT count(*) FROM episodes e WHERE e.dataset = :dataset
             AND e.status = 'completed' AND e.ended_at > me.ended_at)
        FROM me"""
    )
    size = {
        "nearest summaries": "approx_candidates",
        "nearest chunks": "approx_candidates",
        "lexical": "approx_candidates",
        "recent": "approx_recent",
    }
    log(f"diagnosing {queries} queries on {dataset} …")
    misses = {5: 0, 10: 0}
    scored_differently = not_in_pool = 0
    by_source: dict[str, int] = {}
    for _ in range(queries):
        p = params(dataset, words(), 10)  # type: ignore[operator]
        exact = _named_rows(sql.execute(exact_sql, p))
        approximate = _named_rows(sql.execute(approx_sql, p))
        got = [r["episode_id"] for r in approximate]
        exact_ids = [r["episode_id"] for r in exact]
        approx_scores: dict[object, tuple[int, dict[str, object]]] | None = None
        members = {name: {r[0] for r in sql.execute(q, p)} for name, q in parts.items()}
        pool = set().union(*members.values())
        for position, episode in enumerate(exact_ids):
            if episode in got[:10]:
                continue
            for n in (5, 10):
                misses[n] += position < n
            if episode in pool:
                scored_differently += 1
                where = (
                    "in the pool (" + ", ".join(n for n, m in members.items() if episode in m) + ")"
                )
                if approx_scores is None:  # the whole pool ranked, for the missing one's place
                    approx_scores = {
                        r["episode_id"]: (k + 1, r)
                        for k, r in enumerate(
                            _named_rows(sql.execute(approx_sql, {**p, "limit": 100_000}))
                        )
                    }
                if episode in approx_scores:
                    k, r = approx_scores[episode]
                    where += f"; approximate #{k}: " + _signals_text(r)
            else:
                not_in_pool += 1
                summary, chunk, lexical, recent = sql.execute(
                    ranks, {**p, "episode": episode}
                ).fetchone()  # type: ignore[misc]
                rank_of = {
                    "nearest summaries": summary,
                    "nearest chunks": chunk,
                    "lexical": lexical,
                    "recent": recent,
                }
                best = min((r / p[size[k]], k) for k, r in rank_of.items() if r is not None)  # type: ignore[index]
                by_source[best[1]] = by_source.get(best[1], 0) + 1
                where = "NOT in the pool; ranks: " + ", ".join(
                    f"{k} {r}" for k, r in rank_of.items()
                )
            print(
                f"{dataset} query {p['query']!r}: exact #{position + 1} {str(episode)[:8]} missing, {where}"
            )  # type: ignore[index]
            print(
                f"    exact: {_signals_text(exact[position])}; exact #10 relevance "
                f"{exact[-1]['relevance']:.4f}, approximate #10 {approximate[-1]['relevance']:.4f}"
            )
    print(
        f"\n{dataset}: {queries} queries; exact top-5 episodes missed {misses[5]}, top-10 "
        f"{misses[10]}; of the top-10 misses {scored_differently} were candidates scored "
        f"differently, {not_in_pool} not candidates; the nearest source of those: {by_source}"
    )
    sys.stdout.flush()


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


def _named_rows(cursor: psycopg.Cursor) -> list[dict[str, object]]:
    """The ranked rows of a Recall statement as dicts by column name (the count-only row
    left out)."""
    names = [d.name for d in cursor.description or []]
    return [r for r in (dict(zip(names, row, strict=True)) for row in cursor) if r["episode_id"]]


#: A ranked row's signals that diagnose prints (relevance = ws * similarity + wr * recency).
SIGNALS = (
    "relevance",
    "similarity",
    "lexical",
    "semantic",
    "cosine",
    "coverage",
    "passage_coverage",
    "recency",
)


def _signals_text(row: dict[str, object]) -> str:
    return ", ".join(f"{k} {float(row[k]):.4f}" for k in SIGNALS if row.get(k) is not None)  # type: ignore[arg-type]


#: The --breakdown paths (see breakdown_paths), and the bare SQL as it was timed before
#: 2026-12-01: in psycopg's named form (``normal sql, named``), and that on the backend that
#: read the dataset first (``normal sql, first read's backend``).
BREAKDOWN = {
    "normal grpc stub",
    "normal in-process",
    "health check",
    "normal echo",
    "normal sql, named",
    "normal sql, first read's backend",
}


def breakdown_paths(
    stack: ExitStack, url: str, address: str, samples: list[tuple[str, str]]
) -> dict[str, object]:
    """The --breakdown paths, each a function of (dataset, query): Recall through a bare
    gRPC stub on a plain channel (what the SDK adds is the difference to ``normal grpc``),
    the Recall servicer's domain called in this process on an engine configured as the
    service's (its statements and Python, no gRPC), a health check through the
    service's server (one gRPC round trip and the interceptors, no work), and the bare hop
    (``bench.grpc_echo``: a Python gRPC server answering every Recall with the canned answer
    of median size among the service's answers to ``samples``, through a bare stub)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from episodic import access
    from episodic.config import EmbeddingSettings, PrivacySettings, Settings
    from episodic.providers import make_embedder
    from episodic.services.recall.__main__ import engine_options
    from episodic.services.recall.servicer import RecallServicer
    from episodic.store.db import make_engine
    from episodic.store.vault import make_vault
    from episodic.testing.keys import keyring_file
    from episodic.v1 import recall_service_pb2 as pb
    from episodic.v1 import recall_service_pb2_grpc as pb_grpc

    channel = stack.enter_context(grpc.insecure_channel(address))
    stub = pb_grpc.RecallServiceStub(channel)
    health = health_pb2_grpc.HealthStub(channel)
    settings = Settings()  # as the service runs: the hashing embedder, the test keyring
    engine = make_engine(url, pool_size=2, **engine_options(settings))
    stack.callback(engine.dispose)
    servicer = RecallServicer(
        engine,
        settings.recall,
        make_embedder(EmbeddingSettings(embedding_provider="hashing"), DIM),
        make_vault(PrivacySettings(master_key_file=keyring_file())),
    )
    include = [pb.RECALL_INCLUDE_EPISODES]

    answers = sorted(
        (
            stub.Recall(pb.RecallRequest(dataset=d, query=q, include=include), timeout=120)
            for d, q in samples
        ),
        key=lambda a: a.ByteSize(),
    )
    canned = answers[len(answers) // 2].SerializeToString()
    log(f"echo answers {len(canned)} bytes (the median of {len(answers)} Recall answers)")
    echo_address = stack.enter_context(
        echo_server(
            pb.DESCRIPTOR.services_by_name["RecallService"].full_name,
            "Recall",
            pb.RecallRequest,
            canned,
        )
    )
    echo = pb_grpc.RecallServiceStub(stack.enter_context(grpc.insecure_channel(echo_address)))

    class NoDeadline:
        def time_remaining(self) -> None:
            return None

    def in_process(dataset: str, query: str) -> object:
        with access.running_as(access.ANONYMOUS):
            request = pb.RecallRequest(dataset=dataset, query=query, include=include)
            return servicer.Recall(request, NoDeadline())  # type: ignore[arg-type]

    return {
        "normal grpc stub": lambda d, q: stub.Recall(
            pb.RecallRequest(dataset=d, query=q, include=include), timeout=120
        ),
        "normal in-process": in_process,
        "health check": lambda d, q: health.Check(health_pb2.HealthCheckRequest(), timeout=30),
        "normal echo": lambda d, q: echo.Recall(
            pb.RecallRequest(dataset=d, query=q, include=include), timeout=30
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=1_000_000)
    parser.add_argument("--datasets", type=int, default=10_000)
    parser.add_argument("--heavy", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300, help="timed queries per path")
    parser.add_argument(
        "--exact-queries",
        type=int,
        default=50,
        help="queries ranked exactly on the heavy dataset (seconds each) for recall@N",
    )
    parser.add_argument("--database-url", help="admin URL of a PostgreSQL with pgvector")
    parser.add_argument("--url", help="an already built database (skips the build)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--chunks",
        type=int,
        default=3,
        help="chunks per episode of the normal datasets (the heavy ones always have 3)",
    )
    parser.add_argument(
        "--clustered",
        type=int,
        default=0,
        help=f"episodes of a second heavy dataset, {CLUSTERED}, whose vectors cluster "
        "around topics (as real embeddings do); recall@N is measured on it too",
    )
    parser.add_argument(
        "--text-dataset",
        type=int,
        default=0,
        metavar="N",
        help=f"episodes of another heavy dataset, {TEXT}, of real text and vectors: windows "
        f"of {TEXT_TURNS[0]}-{TEXT_TURNS[1]} consecutive LoCoMo turns, MiniLM summary and "
        "chunk vectors; its queries are LoCoMo's questions (MiniLM query vectors); recall@N "
        "is measured on it too",
    )
    parser.add_argument(
        "--text-vectors",
        choices=("late", "separate"),
        default="late",
        help=f"{TEXT}'s vectors: late (each LoCoMo session read by MiniLM once, each "
        "episode's and chunk's vector pooled from its tokens: a few minutes) or separate "
        "(each text embedded on its own: ~0.15 s a text on 2 loaded cores)",
    )
    parser.add_argument(
        "--text-cache",
        metavar="FILE.npz",
        help=f"{TEXT}'s vectors computed before (reused, extended and saved again)",
    )
    parser.add_argument(
        "--heavy-indexes-only",
        action="store_true",
        help="build the HNSW and GIN indexes only on the partitions holding the heavy "
        "datasets (all their queries read; the normal datasets' exact path reads none), "
        "not on all 8: the whole build did not fit a session at 1M episodes",
    )
    parser.add_argument(
        "--normal-only",
        action="store_true",
        help="time the normal datasets' paths only (e.g. while the heavy ones' indexes build)",
    )
    parser.add_argument(
        "--heavy-only",
        action="store_true",
        help=f"time the heavy dataset's paths only ({HEAVY}: gRPC, its bare SQL, and with "
        "--before-tree the older Recall's gRPC); with --exact-queries 0, no recall@N",
    )
    parser.add_argument(
        "--recall-on",
        help=f"comma-separated heavy datasets to measure recall@N on (default {HEAVY}, and "
        f"{CLUSTERED} and {TEXT} when the store has them)",
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="with the normal paths, also time in the same run: Recall through a bare gRPC "
        "stub (no SDK), the service's domain in this process (no gRPC: the service's "
        "statements and Python), and a health check through the same server (the gRPC hop "
        "and the interceptors with no work): where the gRPC path's time over the SQL goes",
    )
    parser.add_argument(
        "--before-tree",
        metavar="DIR",
        help="a checkout of older code with its own .venv (e.g. a git worktree of main): its "
        "Recall service runs beside this one on the same store and is timed on the same "
        "normal-dataset queries (normal grpc before): the hop's before/after in one run",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="with --database-url: build into a new database, print its URL and stop "
        "(measure it later with --url)",
    )
    parser.add_argument(
        "--before",
        help="an older store/recall_queries.py, from before it was split into modules (it "
        "builds its statement alone): its approximate statement is run on the same "
        "queries for recall@N and latency (before/after in one run)",
    )
    parser.add_argument(
        "--diagnose",
        action="store_true",
        help="for --exact-queries queries per heavy dataset: which exact top-10 episodes the "
        "approximate top 10 misses, whether they were among the candidates, and if not, "
        "from which source (nearest summaries or chunks, lexical, recent) they should have "
        "come and at what rank",
    )
    parser.add_argument(
        "--curve",
        help="approximate variants to run on the same --exact-queries queries per heavy "
        "dataset, ';'-separated, each 'candidates=200,ef=200,scan=20000,recent=100' "
        "(also per_lexeme, selective_df; missing keys: the defaults; scan = "
        "hnsw.max_scan_tuples), or 'default' for the "
        "README's curve: recall@5/@10 and latency against the exact statement",
    )
    args = parser.parse_args(argv)
    older_statements = None
    if args.before:
        import importlib.util

        spec = importlib.util.spec_from_file_location("recall_queries_before", args.before)
        assert spec is not None and spec.loader is not None
        older_statements = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = older_statements  # dataclasses look their module up
        spec.loader.exec_module(older_statements)
        # Since the split (store/ranking_sql.py and others), recall_queries.py builds its
        # statement from the installed package's modules: it would time this code again.
        builder = getattr(older_statements, "recall_sql", None)
        if builder is not None and builder.__module__ != spec.name:
            parser.error(
                "--before takes a recall_queries.py from before the split into modules: "
                f"{args.before} builds its statement with {builder.__module__}"
            )

    sys.path.insert(0, str(REPO))
    from bench.harness.recall_sql import psycopg_sql, query_term_params, sent_as_recall_sends
    from bench.harness.report import percentiles, print_latency_table
    from episodic.config import RecallSettings
    from episodic.providers import HashingEmbedder
    from episodic.sdk.client import EpisodicClient
    from episodic.store.recall_queries import (
        COUNT_STATEMENT,
        CUSTOM_PLANS,
        Approximation,
        recall_statement,
        threshold_params,
        unfiltered_params,
    )
    from episodic.testing.database import scratch_database
    from episodic.testing.processes import start_service

    rng = random.Random(args.seed)
    defaults = RecallSettings()
    with ExitStack() as stack:
        url = args.url
        if url is None:
            if args.keep:
                from episodic.testing.database import TestDatabases

                if not args.database_url:
                    parser.error("--keep needs --database-url")
                url = TestDatabases(args.database_url).create()
            else:
                url = stack.enter_context(scratch_database(args.database_url, "episodic-scale-"))
            with psycopg.connect(url, autocommit=True) as conn:
                log(
                    f"building {args.episodes} episodes over {args.datasets} datasets "
                    f"({args.chunks} chunks each), {args.heavy} in {HEAVY} and "
                    f"{args.clustered} in {CLUSTERED} (3 chunks each), "
                    f"{args.text_dataset} in {TEXT} …"
                )
                built = build(
                    conn,
                    args.episodes,
                    args.datasets,
                    args.heavy,
                    chunks=args.chunks,
                    clustered=args.clustered,
                    seed=args.seed,
                    heavy_indexes_only=args.heavy_indexes_only,
                    text=args.text_dataset,
                    text_mode=args.text_vectors,
                    text_cache=args.text_cache,
                )
                print(f"load average after the build: {os.getloadavg()}")
                print(f"built: {', '.join(f'{k} {v:.0f}s' for k, v in built.items())}")
            if args.keep:
                print(f"kept: {url}")
                return 0
        # A loaded machine's first reads of a 100k dataset (cold pages) can exceed the
        # service's 10 s statement ceiling; the ceiling is not what is measured here.
        service = start_service(
            "recall",
            url,
            {"EPISODIC_LOG_LEVEL": "WARNING", "EPISODIC_RECALL_STATEMENT_TIMEOUT": "120"},
            timeout=120,
        )
        stack.callback(service.terminate)
        client = stack.enter_context(EpisodicClient(recall=service.address, timeout=120))
        older_client = None
        if args.before_tree:
            older = start_service(
                "recall",
                url,
                {"EPISODIC_LOG_LEVEL": "WARNING", "EPISODIC_RECALL_STATEMENT_TIMEOUT": "120"},
                timeout=120,
                python=str(Path(args.before_tree) / ".venv" / "bin" / "python"),
            )
            stack.callback(older.terminate)
            older_client = stack.enter_context(EpisodicClient(recall=older.address, timeout=120))
        # ``sql`` times the bare statements; ``first_reader`` reads each normal dataset's
        # pages first, untimed, on a backend of its own: a backend that has just run the
        # same statement runs it again ~0.3-0.5 ms faster than another one (its CPU caches
        # hold the dataset's rows; docs/benchmarks.md "Recall, sixth pass"), which the bare
        # SQL got and Recall's backend never does when the first read went through ``sql``.
        # ``named_sql`` times the bare statement sent in psycopg's named form, on a backend
        # of its own for the same reason.
        sql, first_reader, named_sql = (
            stack.enter_context(psycopg.connect(url, autocommit=True)) for _ in range(3)
        )
        for conn in (sql, first_reader, named_sql):
            register_vector(conn)
            # The Recall service's session settings (services/recall/__main__.py).
            conn.execute("SET hnsw.iterative_scan = relaxed_order")
            conn.execute(f"SET hnsw.ef_search = {max(40, defaults.recall_approximate_candidates)}")
        hasher = HashingEmbedder(DIM)
        vocab = [f"w{i}" for i in range(1, 5001)]

        def words() -> str:
            return " ".join(vocab[int(5000 * rng.random() ** 3)] for _ in range(3))

        exact_sql = psycopg_sql(recall_statement(with_query=True, with_vector=True))
        before_sql = None
        if older_statements is not None:
            before_sql = psycopg_sql(
                older_statements.recall_statement(
                    with_query=True, with_vector=True, approximate=True
                )
            )
        # A request without filters reads the dataset's kept statistics when it has them
        # (store/kept_statistics.py), and counts them when it has none, as Recall does.
        approx_sql = psycopg_sql(
            recall_statement(
                with_query=True, with_vector=True, approximate=True, kept_statistics=True
            )
        )
        exact_cosine_sql = psycopg_sql(
            recall_statement(
                with_query=True,
                with_vector=True,
                approximate=True,
                exact_cosine=True,
                kept_statistics=True,
            )
        )
        count_sql = psycopg_sql(COUNT_STATEMENT)
        # What the Recall service sends for the heavy dataset, as configured.
        service_sql = exact_cosine_sql if defaults.recall_approximate_exact_cosine else approx_sql

        topics = [r[0] for r in sql.execute("SELECT v FROM scale_centroids ORDER BY n")]

        heavies = args.recall_on.split(",") if args.recall_on else [HEAVY]
        for extra in (CLUSTERED, TEXT):
            if (
                not args.recall_on
                and sql.execute(
                    "SELECT 1 FROM episodes WHERE dataset = %s LIMIT 1", (extra,)
                ).fetchone()
            ):
                heavies.append(extra)
        questions: list[str] = []
        minilm = None
        question_vectors: dict[str, object] = {}
        if TEXT in heavies:
            from episodic.config import EmbeddingSettings
            from episodic.providers import make_embedder

            questions = text_questions()
            minilm = make_embedder(EmbeddingSettings(embedding_threads=2), DIM)

        def query_for(dataset: str) -> str:
            """A query for ``dataset``: a LoCoMo question on the text dataset, else 3 Zipf
            words."""
            return rng.choice(questions) if dataset == TEXT else words()

        def query_vector(dataset: str, query: str) -> object:
            """A query about one of the clustered dataset's topics (its centroid plus the
            stored vectors' noise); on the text dataset MiniLM's, as Recall embeds it; else
            the hashing embedder's (random-looking, as the stored ones are)."""
            if dataset == TEXT:
                if query not in question_vectors:
                    question_vectors[query] = minilm.embed_query(query)  # type: ignore[union-attr]
                return question_vectors[query]
            if dataset != CLUSTERED:
                return hasher.embed_query(query)
            centre = topics[rng.randrange(len(topics))].to_numpy().astype(np.float32)
            noisy = centre + NOISE_SCALE * (
                np.asarray([rng.random() for _ in range(DIM)], dtype=np.float32) - 0.5
            )
            return (noisy / np.linalg.norm(noisy)).astype(np.float32)

        def params(dataset: str, query: str, limit: int) -> dict[str, object]:
            p: dict[str, object] = {
                "dataset": dataset,
                "query": query,
                "qvec": query_vector(dataset, query),
                **unfiltered_params(),
                **threshold_params(0.0, 0.0, None),
                "ws": 0.7,
                "wr": 0.3,
                "limit": limit,
                "approx_candidates": defaults.recall_approximate_candidates,
                "approx_recent": defaults.recall_approximate_recent,
                "approx_per_lexeme": Approximation().per_lexeme,
                "approx_selective_df": Approximation().selective_df,
            }
            return {**p, **query_term_params(sql, dataset, query)}

        def bare(
            statement: str,
            dataset: str,
            query: str,
            limit: int = 3,
            on: object = None,
            named: bool = False,
        ) -> list[object]:
            # What Recall sends: the query's lexemes, then the ranking statement (the
            # approximate one planned for its parameters, as rank() has it planned), in
            # numbered placeholders as Recall sends it (``named``: as psycopg sends a named
            # statement, parsing it on every execute: how the bare SQL was sent before).
            conn: psycopg.Connection = on or sql  # type: ignore[assignment]
            approximate = statement is not exact_sql
            if approximate:
                conn.execute(f"SET plan_cache_mode = {CUSTOM_PLANS}")
            p = params(dataset, query, limit)
            ids = _episode_ids(
                conn.execute(statement, p) if named else sent_as_recall_sends(conn, statement, p)
            )
            if approximate:
                conn.execute("RESET plan_cache_mode")
            return ids

        if args.diagnose or args.curve:
            # The heavy datasets' statements, exact and approximate, are each planned for
            # their parameters (psycopg prepares a statement run five times, and a generic
            # plan of these ran many times longer: docs/benchmarks.md "Recall at scale").
            sql.execute(f"SET plan_cache_mode = {CUSTOM_PLANS}")
        if args.diagnose:
            for dataset in heavies:
                diagnose(
                    sql,
                    dataset,
                    args.exact_queries,
                    params,
                    lambda d=dataset: query_for(d),
                    exact_sql,
                    approx_sql,
                )
            return 0
        if args.curve:
            variants = parse_curve(args.curve, defaults)
            for dataset in heavies:
                curve(
                    sql,
                    dataset,
                    args.exact_queries,
                    params,
                    lambda d=dataset: query_for(d),
                    exact_sql,
                    variants,
                    before_sql,
                )
            return 0

        times: dict[str, list[float]] = {
            k: [] for k in ("normal grpc", "normal sql", "heavy grpc", "heavy sql", *BREAKDOWN)
        }
        timed = {"normal grpc", "normal sql"} if args.normal_only else set(times) - BREAKDOWN
        if args.heavy_only:
            timed = {"heavy grpc", "heavy sql"}
        if older_client is not None:
            before = "heavy grpc before" if args.heavy_only else "normal grpc before"
            timed.add(before)
            times[before] = []
        broken_down: dict[str, object] = {}
        if args.breakdown:
            timed |= BREAKDOWN
            samples = [(f"ds-{rng.randrange(args.datasets):05d}", words()) for _ in range(21)]
            broken_down = breakdown_paths(stack, url, service.address, samples)
        if args.queries == 0:
            timed = set()
        for _ in range(20 if timed else 0):  # warm-up: the service learns the heavy dataset's size
            if not args.normal_only:
                client.recall(HEAVY, words())
            client.recall(f"ds-{rng.randrange(args.datasets):05d}", words())
            if older_client is not None:
                older_client.recall(f"ds-{rng.randrange(args.datasets):05d}", words())
                if args.heavy_only:
                    older_client.recall(HEAVY, words())
        log(f"measuring {args.queries} queries per path …")
        for i in range(args.queries):
            normal = f"ds-{rng.randrange(args.datasets):05d}"
            query = words()
            # Untimed first read of the dataset's pages (into shared buffers), on a backend
            # no timed path uses.
            bare(exact_sql, normal, query, on=first_reader)
            paths: list[tuple[str, object]] = [
                ("normal grpc", lambda d=normal, q=query: client.recall(d, q)),
                ("normal sql", lambda d=normal, q=query: bare(exact_sql, d, q)),
                (
                    "normal sql, first read's backend",
                    lambda d=normal, q=query: bare(exact_sql, d, q, on=first_reader, named=True),
                ),
                (
                    "normal sql, named",
                    lambda d=normal, q=query: bare(exact_sql, d, q, on=named_sql, named=True),
                ),
                ("heavy grpc", lambda q=query: client.recall(HEAVY, q)),
                ("heavy sql", lambda q=query: bare(service_sql, HEAVY, q)),
                (
                    "normal grpc before",
                    lambda d=normal, q=query: older_client.recall(d, q),  # type: ignore[union-attr]
                ),
                (
                    "heavy grpc before",
                    lambda q=query: older_client.recall(HEAVY, q),  # type: ignore[union-attr]
                ),
                *[
                    (name, lambda d=normal, q=query, run=run: run(d, q))
                    for name, run in broken_down.items()
                ],
            ]
            paths = [(k, run) for k, run in paths if k in timed]
            rng.shuffle(paths)
            for key, run in paths:
                t = time.perf_counter()
                run()  # type: ignore[operator]
                times[key].append(time.perf_counter() - t)
            if (i + 1) % 100 == 0:
                log(f"  {i + 1}")
        stats = {k: percentiles(v) for k, v in times.items() if k in timed}
        if not timed:
            log("no timed paths (--queries 0)")
        print(
            f"load average after the timed paths: {', '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        print(
            f"Recall at scale: {args.episodes} episodes over {args.datasets} datasets "
            f"({args.episodes // max(args.datasets, 1)} each) and {args.heavy} in one heavy "
            f"dataset; approximate path above {defaults.recall_approximate_above} episodes "
            f"({defaults.recall_approximate_candidates} candidates per part, "
            f"{defaults.recall_approximate_recent} recent, exact cosine "
            f"{defaults.recall_approximate_exact_cosine}); top 3, {args.queries} sequential "
            "queries per path (ms):\n"
        )
        if stats:
            print_latency_table(stats)
        heavy_size = sql.execute(
            "SELECT count(*) FROM episodes WHERE dataset = %s AND status = 'completed'", (HEAVY,)
        ).fetchone()[0]  # type: ignore[index]
        if "heavy grpc" in stats and heavy_size <= defaults.recall_approximate_above:
            print(
                f"note: {HEAVY} holds {heavy_size} episodes, not above the threshold: Recall "
                "(heavy grpc) ranked it exactly, heavy sql is the approximate statement\n"
            )
        for g, s in (
            ("normal grpc", "normal sql"),
            ("heavy grpc", "heavy sql"),
            ("normal grpc before", "normal sql"),
            ("normal grpc", "normal grpc before"),
            ("heavy grpc before", "heavy sql"),
            ("heavy grpc", "heavy grpc before"),
            ("normal grpc stub", "normal sql"),
            ("normal in-process", "normal sql"),
            ("normal echo", "normal sql"),
            ("normal grpc", "normal sql, named"),
            ("normal grpc", "normal sql, first read's backend"),
            ("normal sql, named", "normal sql"),
            ("normal sql, first read's backend", "normal sql"),
        ):
            if g not in stats or s not in stats:
                continue
            a, b = stats[g], stats[s]
            print(
                f"{g} / {s}: p50 {a['p50'] / b['p50']:.2f}x "
                f"(+{1000 * (a['p50'] - b['p50']):.2f} ms), p99 {a['p99'] / b['p99']:.2f}x "
                f"(+{1000 * (a['p99'] - b['p99']):.2f} ms)"
            )

        # recall@N of the approximate path against the exact ranking, per heavy dataset:
        # the exact statement, the approximate one as configured, the approximate one with
        # the dataset's exact best cosine, and (--before) an older approximate statement.
        variants = {"approximate": approx_sql, "approximate, exact cosine": exact_cosine_sql}
        if before_sql is not None:
            variants["approximate before"] = before_sql
        if not args.normal_only:
            sql.execute(f"SET plan_cache_mode = {CUSTOM_PLANS}")
        for dataset in [] if args.normal_only or args.exact_queries == 0 else heavies:
            log(f"ranking {args.exact_queries} queries exactly on {dataset} …")
            took: dict[str, list[float]] = {k: [] for k in ["exact", *variants, "count"]}
            at: dict[str, dict[int, list[float]]] = {k: {5: [], 10: []} for k in variants}
            asked: list[str] = []
            shared: list[float] = []
            for i in range(args.exact_queries):
                asked.append(query_for(dataset))
                p = params(dataset, asked[-1], 10)
                t = time.perf_counter()
                exact = _episode_ids(sql.execute(exact_sql, p))
                took["exact"].append(time.perf_counter() - t)
                order = list(variants.items())
                rng.shuffle(order)
                for name, statement in order:
                    t = time.perf_counter()
                    got = _episode_ids(sql.execute(statement, p))
                    took[name].append(time.perf_counter() - t)
                    for n in (5, 10):
                        at[name][n].append(recall_at(got, exact, n))
                # What every Recall statement pays for the dataset's episode count.
                t = time.perf_counter()
                sql.execute(count_sql, p).fetchall()
                took["count"].append(time.perf_counter() - t)
                if dataset == TEXT:  # untimed: how alike the exact top 10 are
                    shared.append(_shared_turns(sql, exact))
                if (i + 1) % 10 == 0:
                    log(f"  {i + 1}")
            print(
                f"\n{dataset}: {args.exact_queries} queries, top 10 (ms; load average "
                f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}):\n"
            )
            heavy_stats = {k: percentiles(v) for k, v in took.items()}
            print_latency_table(heavy_stats)
            e = heavy_stats["exact"]
            for name in variants:
                a = heavy_stats[name]
                print(
                    f"{dataset} {name} / exact: p50 {a['p50'] / e['p50']:.3f}x, "
                    f"p99 {a['p99'] / e['p99']:.3f}x; "
                    f"recall@5 {statistics.fmean(at[name][5]):.3f} (min {min(at[name][5]):.2f}), "
                    f"recall@10 {statistics.fmean(at[name][10]):.3f} "
                    f"(min {min(at[name][10]):.2f})"
                )
            worst = min(range(len(asked)), key=lambda j: (at["approximate"][10][j], j))
            print(
                f"{dataset} approximate: worst query (recall@10 "
                f"{at['approximate'][10][worst]:.2f}): {asked[worst]!r}"
            )
            if shared:
                print(
                    f"{dataset} exact top 10s: {statistics.fmean(shared):.2f} of their episode "
                    "pairs share a LoCoMo turn (overlapping windows of one conversation)"
                )
            a, b = heavy_stats["approximate, exact cosine"], heavy_stats["approximate"]
            print(
                f"{dataset} exact cosine / approximate: p50 {a['p50'] / b['p50']:.2f}x, "
                f"p99 {a['p99'] / b['p99']:.2f}x"
            )
            c = heavy_stats["count"]
            print(
                f"{dataset} episode count alone: p50 {1000 * c['p50']:.1f} ms = "
                f"{c['p50'] / b['p50']:.3f}x the approximate statement's p50"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
