"""Re-embedding the store: every stored vector again with the configured model
(``episodic reindex --reembed``) — to move the store to another embedder (e.g. the
multilingual e5), or to rewrite it with the same one after its arithmetic changed.

What is re-embedded, exactly as the Summariser embeds it:

- each episode's vector (completed and archived episodes: what :func:`embedding_text`
  gives for its stored summary and key learnings);
- the thread's chunk vectors, in place: each chunk's text is rebuilt from the thread's
  messages (:func:`~episodic.store.recall_index.chunk_texts`); with late chunking, each
  episode window's chunks are read together again (:func:`chunk_document`), as when they
  were indexed;
- each event's vector (:func:`~episodic.store.events.event_document`).

Summaries, the lexical index and everything else stay as they are. A dataset embedded by
its own model (``datasets.embedding_model``: a multilingual one for a language other than
English) is left alone: the store's model is not its model. :func:`reembed_dataset` moves
one dataset to another model (services/summariser/spaces.py).

How it stays correct beside running services (store/embedding_space.py): it first records
its target model behind the fence (the exclusive :data:`SPACE_LOCK`), after which only a
Summariser of the target model writes vectors; then it walks every thread once (keyset
over ``(dataset, thread_id)``), embeds a page of threads outside any transaction and writes
each thread in a short transaction of its own that first marks the thread done
(``threads.embedding_epoch``: the lock order of a completion, the thread before its
episodes); events likewise. A run that stops (Ctrl-C, a crash) resumes where it was: a
thread already at the run's epoch is skipped. The last step records the target as the
store's model, which a Recall of the old model notices within seconds (it then answers
FAILED_PRECONDITION until restarted with the new settings).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, text

from episodic import genai
from episodic.errors import FailedPrecondition
from episodic.providers.types import Embedder, SpanDocument
from episodic.store import embedding_space
from episodic.store import procedures as procedure_store
from episodic.store.distribution import across_datasets
from episodic.store.embedding_space import SPACE_LOCK, Space
from episodic.store.events import event_document
from episodic.store.recall_index import chunk_document, chunk_texts, indexed_text
from episodic.store.vault import Vault

# the module: episode_vector imports spaces, which imports this one
from . import episode_vector

log = logging.getLogger(__name__)

#: Threads embedded together (one model call), each then written in its own transaction.
THREAD_PAGE = 20
#: Events embedded and written together.
EVENT_PAGE = 128


@dataclass
class ReembedReport:
    """What a run re-embedded (this run only, not the runs it resumed)."""

    model: str
    previous: str
    resumed: bool
    threads: int = 0
    episodes: int = 0
    chunks: int = 0
    events: int = 0


@dataclass
class _ThreadWork:
    dataset: str
    thread_id: uuid.UUID
    episode_ids: list[uuid.UUID] = field(default_factory=list)
    episode_texts: list[str] = field(default_factory=list)
    chunk_starts: list[tuple[int, int]] = field(default_factory=list)  # in stored order
    chunk_text: dict[tuple[int, int], str] = field(default_factory=dict)  # separate
    late: list[tuple[SpanDocument, list[tuple[int, int]]]] = field(default_factory=list)


def begin(engine: Engine, model: str, dimension: int, *, wait: Callable[[], None]) -> Space:
    """Records ``model`` as the store's target behind the fence; returns the space as it
    is now. A run towards the same target as a stopped one resumes it (same epoch);
    another target starts over (the epoch moves on). ``wait`` is called when Summariser
    passes in flight hold the fence (the call blocks until they end)."""
    embedding_space.claim(engine, model, dimension)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": SPACE_LOCK}).scalar():
            wait()
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": SPACE_LOCK})
        try:
            row = conn.execute(
                text(
                    "UPDATE embedding_space SET "
                    "epoch = CASE WHEN reembedding_to IS DISTINCT FROM :m THEN epoch + 1 "
                    "ELSE epoch END, "
                    "reembed_started_at = CASE WHEN reembedding_to IS DISTINCT FROM :m "
                    "THEN now() ELSE reembed_started_at END, "
                    "reembedding_to = :m "
                    "RETURNING model, dimension, recorded_at, epoch, reembedding_to, "
                    "reembed_started_at"
                ),
                {"m": model},
            ).one()
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": SPACE_LOCK})
    return Space(*row)


def finish(engine: Engine, model: str) -> Space:
    """Records ``model`` (the target of the run that re-embedded everything) as the
    store's model; FailedPrecondition when another run changed the target meanwhile."""
    with engine.begin() as conn:
        row = conn.execute(
            text(
                "UPDATE embedding_space SET model = reembedding_to, recorded_at = now(), "
                "reembedding_to = NULL, reembed_started_at = NULL WHERE reembedding_to = :m "
                "RETURNING model, dimension, recorded_at, epoch, reembedding_to, "
                "reembed_started_at"
            ),
            {"m": model},
        ).first()
        if row is None:
            space = embedding_space.read(conn)
            raise FailedPrecondition(
                f"another re-embedding changed the store's target meanwhile "
                f"({space.describe() if space else 'no space recorded'}); run it again"
            )
    return Space(*row)


def reembed(
    engine: Engine,
    embedder: Embedder,
    vault: Vault,
    *,
    late: bool = False,
    progress: Callable[[str], None] = lambda _: None,
    stop_after_threads: int | None = None,
) -> ReembedReport:
    """Re-embeds every stored vector with ``embedder`` and records it as the store's
    model (see the module docstring). ``late``: chunk vectors by late chunking, as the
    Summariser under ``EPISODIC_CHUNK_VECTORS=late``. ``stop_after_threads``: stop (without
    finishing) once that many threads are done — how tests interrupt a run."""
    with engine.connect() as conn:
        before = embedding_space.read(conn)
    space = begin(
        engine,
        embedder.name,
        embedder.dimension,
        wait=lambda: progress("waiting for the Summariser passes in flight to end"),
    )
    report = ReembedReport(
        model=embedder.name,
        previous=before.model if before else "a model never recorded",
        resumed=before is not None and before.reembedding_to == embedder.name,
    )
    progress(
        f"{'resuming the re-embedding' if report.resumed else 're-embedding'} of the store "
        f"with {embedder.name} (its vectors were made by {report.previous})"
    )
    with engine.connect() as conn:
        total = _threads_left(conn, space.epoch)
    started = time.monotonic()
    after: tuple[str, uuid.UUID] | None = None
    while True:
        with engine.connect() as conn:
            page = _thread_page(conn, space.epoch, after)
            if not page:
                break
            work = [
                _read_thread(conn, vault, dataset, thread_id, late) for dataset, thread_id in page
            ]
        after = page[-1]
        vectors = _embed(work, embedder)
        for item, (episode_vectors, chunk_vectors) in zip(work, vectors, strict=True):
            if _write_thread(engine, item, space.epoch, episode_vectors, chunk_vectors):
                report.threads += 1
                report.episodes += len(episode_vectors)
                report.chunks += len(chunk_vectors)
            if stop_after_threads is not None and report.threads >= stop_after_threads:
                return report
        progress(
            f"{report.threads} of {total} thread(s): {report.episodes} episode and "
            f"{report.chunks} chunk vector(s){_time_left(started, report.threads, total)}"
        )
    report.events = _reembed_events(engine, vault, embedder, space.epoch)
    if report.events:
        progress(f"{report.events} event vector(s)")
    finish(engine, embedder.name)
    return report


def _threads_left(conn: Connection, epoch: int) -> int:
    """How many threads this run has still to re-embed (for its progress lines)."""
    return int(
        conn.execute(
            text(
                across_datasets("a re-embedding counts the threads it has left")
                + "SELECT count(*) FROM threads t JOIN datasets ds ON ds.dataset = t.dataset "
                "AND ds.embedding_model IS NULL WHERE t.embedding_epoch < :e"
            ),
            {"e": epoch},
        ).scalar_one()
    )


def _time_left(started: float, done: int, total: int) -> str:
    """``, about 3 h 20 min left`` at the rate so far (empty before the first thread)."""
    if done <= 0 or total <= done:
        return ""
    seconds = (time.monotonic() - started) / done * (total - done)
    hours, minutes = divmod(int(seconds + 59) // 60, 60)
    return f", about {hours} h {minutes} min left" if hours else f", about {minutes} min left"


def _thread_page(
    conn: Connection, epoch: int, after: tuple[str, uuid.UUID] | None
) -> list[tuple[str, uuid.UUID]]:
    """The next threads (in ``(dataset, thread_id)`` order, after ``after``) not yet at
    ``epoch``, of datasets not being erased."""
    keyset = "AND (t.dataset, t.thread_id) > (:d, :t) " if after else ""
    rows = conn.execute(
        text(
            across_datasets("a re-embedding walks every dataset's threads")
            + "SELECT t.dataset, t.thread_id FROM threads t JOIN datasets ds "
            "ON ds.dataset = t.dataset AND ds.erasing_since IS NULL "
            "AND ds.embedding_model IS NULL "
            f"WHERE t.embedding_epoch < :e {keyset}"
            "ORDER BY t.dataset, t.thread_id LIMIT :n"
        ),
        {
            "e": epoch,
            "n": THREAD_PAGE,
            "d": after[0] if after else None,
            "t": after[1] if after else None,
        },
    ).all()
    return [(r[0], r[1]) for r in rows]


def _read_thread(
    conn: Connection, vault: Vault, dataset: str, thread_id: uuid.UUID, late: bool
) -> _ThreadWork:
    """What re-embedding one thread needs, read and opened: its episodes' embedded texts,
    its chunks' starts and texts (or, with ``late``, the documents of its windows)."""
    work = _ThreadWork(dataset, thread_id)
    episodes = (
        conn.execute(
            text(
                "SELECT episode_id, dataset, end_sequence, summary, key_learnings, entities "
                "FROM episodes WHERE dataset = :d AND thread_id = :t "
                "AND embedding IS NOT NULL ORDER BY end_sequence"
            ),
            {"d": dataset, "t": thread_id},
        )
        .mappings()
        .all()
    )
    for e in vault.open_rows(conn, dataset, list(episodes), "episodes"):
        work.episode_ids.append(e["episode_id"])
        work.episode_texts.append(
            episode_vector.embedding_text(
                e["summary"], list(e["key_learnings"] or []), list(e["entities"] or [])
            )
        )
    ends: dict[tuple[int, int], int] = {
        (r[0], r[1]): int(r[2])
        for r in conn.execute(
            text(
                "SELECT start_sequence, start_offset, end_sequence FROM message_chunks "
                "WHERE dataset = :d AND thread_id = :t ORDER BY start_sequence, start_offset"
            ),
            {"d": dataset, "t": thread_id},
        )
    }
    work.chunk_starts = list(ends)
    if not work.chunk_starts:
        return work
    rows = (
        conn.execute(
            text(
                "SELECT sequence, content, metadata, tools FROM messages WHERE dataset = :d "
                "AND thread_id = :t ORDER BY sequence"
            ),
            {"d": dataset, "t": thread_id},
        )
        .mappings()
        .all()
    )
    messages = [
        (m["sequence"], indexed_text(m["content"], m["metadata"], m["tools"]))
        for m in vault.open_rows(conn, dataset, list(rows), "messages")
    ]
    wanted = set(work.chunk_starts)
    if late:
        # Each episode's window was one late read when its chunks were indexed.
        windows = sorted({int(e["end_sequence"]) for e in episodes})
        previous = 0
        for end in windows:
            window = [m for m in messages if previous < m[0] <= end]
            previous = end
            if not window:
                continue
            chunks, document = chunk_document(window)
            starts = [(c.start_sequence, c.start_offset) for c in chunks]
            if starts and set(starts) <= wanted:
                work.late.append((document, starts))
                wanted -= set(starts)
    # Chunks no window reproduces (or all of them, without late chunking): their own text.
    work.chunk_text = chunk_texts(messages, sorted(wanted), ends)
    return work


def _embed(
    work: Sequence[_ThreadWork], embedder: Embedder
) -> list[tuple[np.ndarray, dict[tuple[int, int], np.ndarray]]]:
    """Each thread's episode vectors (in order) and chunk vectors (by start), from one
    model call over the page (and one late read of its windows)."""
    texts = [t for w in work for t in w.episode_texts]
    texts += [s for w in work for s in w.chunk_text.values()]
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32) if texts else None
    documents = [d for w in work for d, _ in w.late]
    spans = embedder.embed_spans(documents) if documents else []  # type: ignore[attr-defined]
    out = []
    i = sum(len(w.episode_texts) for w in work)
    j = k = 0
    for w in work:
        episode_vectors = (
            vectors[j : j + len(w.episode_texts)]
            if vectors is not None
            else np.zeros((0, embedder.dimension), dtype=np.float32)
        )
        j += len(w.episode_texts)
        chunk_vectors: dict[tuple[int, int], np.ndarray] = {}
        for start in w.chunk_text:
            assert vectors is not None
            chunk_vectors[start] = vectors[i]
            i += 1
        for _, starts in w.late:
            for start, vector in zip(starts, spans[k], strict=True):
                chunk_vectors[start] = np.asarray(vector, dtype=np.float32)
            k += 1
        out.append((episode_vectors, chunk_vectors))
    return out


def _write_thread(
    engine: Engine,
    work: _ThreadWork,
    epoch: int,
    episode_vectors: np.ndarray,
    chunk_vectors: dict[tuple[int, int], np.ndarray],
) -> bool:
    """Writes one thread's vectors and marks it done, in one transaction; False when the
    thread is gone (erased meanwhile)."""
    with (
        genai.memory_span(
            genai.UPDATE_MEMORY, store=work.dataset, count=len(work.episode_ids), record=None
        ),
        engine.begin() as conn,
    ):
        marked = conn.execute(
            text(
                "UPDATE threads SET embedding_epoch = :e WHERE dataset = :d AND thread_id = :t "
                "RETURNING thread_id"
            ),
            {"e": epoch, "d": work.dataset, "t": work.thread_id},
        ).first()
        if marked is None:
            return False
        _write_vectors(conn, work, episode_vectors, chunk_vectors)
    return True


def _write_vectors(
    conn: Connection,
    work: _ThreadWork,
    episode_vectors: np.ndarray,
    chunk_vectors: dict[tuple[int, int], np.ndarray],
) -> None:
    """Stores one thread's new episode and chunk vectors (in the caller's transaction)."""
    if work.episode_ids:
        conn.execute(
            text(
                "UPDATE episodes e SET embedding = u.v FROM unnest(CAST(:ids AS uuid[]), "
                "CAST(:vs AS vector[])) AS u(id, v) WHERE e.dataset = :d "
                "AND e.episode_id = u.id AND e.embedding IS NOT NULL"
            ),
            {"ids": work.episode_ids, "vs": list(episode_vectors), "d": work.dataset},
        )
    if chunk_vectors:
        starts = list(chunk_vectors)
        conn.execute(
            text(
                "UPDATE message_chunks c SET embedding = u.v "
                "FROM unnest(CAST(:s AS bigint[]), CAST(:o AS integer[]), "
                "CAST(:vs AS vector[])) AS u(s, o, v) WHERE c.dataset = :d "
                "AND c.thread_id = :t AND c.start_sequence = u.s AND c.start_offset = u.o"
            ),
            {
                "s": [s for s, _ in starts],
                "o": [o for _, o in starts],
                "vs": [chunk_vectors[s] for s in starts],
                "d": work.dataset,
                "t": work.thread_id,
            },
        )


def _reembed_events(engine: Engine, vault: Vault, embedder: Embedder, epoch: int) -> int:
    """Every embedded event's vector again, a page at a time; returns how many. An event
    not embedded yet is left to the Summariser (of the target model, behind the fence)."""
    done = 0
    after: tuple[str, uuid.UUID] | None = None
    while True:
        keyset = "AND (dataset, event_id) > (:d, :id) " if after else ""
        with engine.connect() as conn:
            rows = (
                conn.execute(
                    text(
                        across_datasets("a re-embedding walks every dataset's events")
                        + "SELECT dataset, event_id, summary, actor, entities, event_type "
                        "FROM events ev WHERE embedding_epoch < :e AND embedding IS NOT NULL "
                        "AND EXISTS (SELECT 1 FROM datasets ds WHERE ds.dataset = ev.dataset "
                        "AND ds.embedding_model IS NULL) "
                        f"{keyset}ORDER BY dataset, event_id LIMIT :n"
                    ),
                    {
                        "e": epoch,
                        "n": EVENT_PAGE,
                        "d": after[0] if after else None,
                        "id": after[1] if after else None,
                    },
                )
                .mappings()
                .all()
            )
            if not rows:
                return done
            after = (rows[-1]["dataset"], rows[-1]["event_id"])
            opened: list[dict[str, Any]] = []
            for dataset, group in groupby(rows, key=lambda r: str(r["dataset"])):
                opened += vault.open_rows(conn, dataset, list(group), "events")
        vectors = np.asarray(embedder.embed([event_document(r) for r in opened]), np.float32)
        by_dataset: dict[str, list[tuple[uuid.UUID, np.ndarray]]] = {}
        for row, vector in zip(opened, vectors, strict=True):
            by_dataset.setdefault(row["dataset"], []).append((row["event_id"], vector))
        with engine.begin() as conn:
            for dataset, pairs in by_dataset.items():
                done += conn.execute(
                    text(
                        "UPDATE events ev SET embedding = u.v, embedding_epoch = :e "
                        "FROM unnest(CAST(:ids AS uuid[]), CAST(:vs AS vector[])) AS u(id, v) "
                        "WHERE ev.dataset = :d AND ev.event_id = u.id"
                    ),
                    {
                        "e": epoch,
                        "ids": [i for i, _ in pairs],
                        "vs": [v for _, v in pairs],
                        "d": dataset,
                    },
                ).rowcount


def reembed_dataset(
    conn: Connection, vault: Vault, embedder: Embedder, dataset: str, *, late: bool = False
) -> ReembedReport:
    """Re-embeds every vector of ``dataset`` with ``embedder`` in the caller's transaction
    (its episodes, chunks, events and procedures' goals), as :func:`reembed` does the
    store's: for a dataset moving to another model (services/summariser/spaces.py), which
    holds the dataset's language lock exclusively meanwhile. For small datasets: all of it
    is one transaction."""
    report = ReembedReport(model=embedder.name, previous="", resumed=False)
    threads = list(
        conn.execute(
            text("SELECT thread_id FROM threads WHERE dataset = :d ORDER BY thread_id"),
            {"d": dataset},
        ).scalars()
    )
    for start in range(0, len(threads), THREAD_PAGE):
        work = [
            _read_thread(conn, vault, dataset, t, late)
            for t in threads[start : start + THREAD_PAGE]
        ]
        for item, (episode_vectors, chunk_vectors) in zip(
            work, _embed(work, embedder), strict=True
        ):
            _write_vectors(conn, item, episode_vectors, chunk_vectors)
            report.threads += 1
            report.episodes += len(episode_vectors)
            report.chunks += len(chunk_vectors)
    rows = (
        conn.execute(
            text(
                "SELECT dataset, event_id, summary, actor, entities, event_type FROM events "
                "WHERE dataset = :d AND embedding IS NOT NULL ORDER BY event_id"
            ),
            {"d": dataset},
        )
        .mappings()
        .all()
    )
    opened = vault.open_rows(conn, dataset, list(rows), "events")
    if opened:
        vectors = np.asarray(embedder.embed([event_document(r) for r in opened]), np.float32)
        conn.execute(
            text(
                "UPDATE events ev SET embedding = u.v FROM unnest(CAST(:ids AS uuid[]), "
                "CAST(:vs AS vector[])) AS u(id, v) WHERE ev.dataset = :d AND ev.event_id = u.id"
            ),
            {"ids": [r["event_id"] for r in opened], "vs": list(vectors), "d": dataset},
        )
        report.events = len(opened)
    candidates = conn.execute(
        text(
            "SELECT episode_id, goal FROM procedure_candidates WHERE dataset = :d "
            "AND goal_embedding IS NOT NULL ORDER BY episode_id"
        ),
        {"d": dataset},
    ).all()
    if candidates:
        key = vault.for_write(conn, dataset)
        goals = [key.open(bytes(goal), "procedure_candidates.goal") for _, goal in candidates]
        conn.execute(
            text(
                "UPDATE procedure_candidates c SET goal_embedding = u.v FROM "
                "unnest(CAST(:ids AS uuid[]), CAST(:vs AS vector[])) AS u(id, v) "
                "WHERE c.dataset = :d AND c.episode_id = u.id"
            ),
            {
                "ids": [episode_id for episode_id, _ in candidates],
                # as the Summariser embeds a goal: a query's side (extraction.py)
                "vs": [np.asarray(embedder.embed_query(g), np.float32) for g in goals],
                "d": dataset,
            },
        )
        procedure_store.rebuild(conn, key, dataset)
    return report
