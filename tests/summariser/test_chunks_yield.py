"""Time to memory: the chunk index a worker owes (most of its model work) yields to an
episode that becomes due while it is being embedded; the episode is completed first, then
the index is finished — and a worker that keeps finding due episodes it cannot claim still
finishes it. A backlog that has grown large yields only to another dataset's episode, and
past its memory bound to none; a thread's later windows are embedded in slices that yield
too (issue 49), and the owner holds its backlog so that other workers do not take it for a
stopped worker's while it waits."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import numpy as np
from sqlalchemy import Engine, text

from episodic.providers.embedding import CachedEmbedder, HashingEmbedder
from episodic.providers.extractive import ExtractiveSummariser
from episodic.services.summariser.pipeline import Pipeline
from episodic.services.summariser.worker import Worker
from episodic.store.recall_index import hold_chunk_work, indexed_text, make_chunks
from episodic.testing.keys import test_vault
from episodic.testing.processes import wait_until
from tests.summariser.helpers import (
    CAR_CHAT,
    DEFAULT_EXTRACTOR,
    add,
    make_pipeline,
    make_thread,
    open_episode,
)

OTHER_CHAT = [
    ("user", "My sister's wedding is in June, in Porto."),
    ("assistant", "Lovely! Do you need help planning the trip?"),
    ("user", "Yes, I'd like to book flights from Berlin for the 12th."),
]


def _chunk_texts(turns: list[tuple[str, str]]) -> set[str]:
    return {
        c.text for c in make_chunks([(i, indexed_text(t)) for i, (_, t) in enumerate(turns, 1)])
    }


class OpensAnEpisodeMidIndex(HashingEmbedder):
    """An embedder that, when first asked for one of ``watched`` (a chunk of the index being
    embedded), opens a pending episode on ``thread``: an episode becomes due while the
    worker is embedding a chunk index."""

    def __init__(self, engine: Engine, watched: set[str], thread: uuid.UUID) -> None:
        super().__init__(dimension=384)
        self.engine, self.watched, self.thread = engine, watched, thread
        self.opened: Any = None
        self.chunk_calls = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.watched & set(texts):
            self.chunk_calls += 1
            if self.opened is None:
                self.opened = open_episode(self.engine, self.thread)
        return super().embed(texts)


class RecordsIndexOrder(Pipeline):
    """Notes, when a chunk index is stored, the status of the episode opened mid-index."""

    watch: Any = None

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.stored: list[tuple[set[uuid.UUID], str | None]] = []

    def index_chunks(self, work, **kw):  # type: ignore[no-untyped-def]
        opened = self.embedder.inner.opened  # type: ignore[attr-defined]
        status = _status(self.engine, opened["episode_id"]) if opened is not None else None
        self.stored.append(({w.episode_id for w in work}, status))
        return super().index_chunks(work, **kw)


def _status(engine: Engine, episode_id: uuid.UUID) -> str:
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT status FROM episodes WHERE episode_id = :id"), {"id": episode_id}
        ).scalar_one()


def _chunks_pending(engine: Engine, episode_id: uuid.UUID) -> bool:
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT chunks_pending FROM episodes WHERE episode_id = :id"), {"id": episode_id}
        ).scalar_one()


def _stored_chunk_texts(engine: Engine, thread: uuid.UUID) -> int:
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT count(*) FROM message_chunks WHERE thread_id = :t"), {"t": thread}
        ).scalar_one()


def _scenario(
    engine: Engine, dataset: str, *, second_dataset: str | None = None, **kw: Any
) -> tuple[RecordsIndexOrder, Any, uuid.UUID]:
    """A thread whose episode is due (A), and a second thread with messages (of
    ``second_dataset``, A's by default) whose episode is opened while A's chunks are being
    embedded. Every chunk is a slice of its own."""
    first = make_thread(engine, dataset=dataset)
    add(engine, first, CAR_CHAT)
    second = make_thread(engine, dataset=second_dataset or dataset, label="wedding")
    add(engine, second, OTHER_CHAT)
    episode = open_episode(engine, first)
    embedder = CachedEmbedder(OpensAnEpisodeMidIndex(engine, _chunk_texts(CAR_CHAT), second))
    pipeline = RecordsIndexOrder(
        engine,
        ExtractiveSummariser(embedder),
        embedder,
        DEFAULT_EXTRACTOR,
        vault=test_vault(),
        max_retries=2,
        retry_backoff=timedelta(0),
        chunk_slice_tokens=1,
        yield_check_seconds=0,  # asks before every slice
        **kw,
    )
    return pipeline, episode, second


def test_an_episode_due_mid_index_completes_before_the_index_is_stored(engine) -> None:  # type: ignore[no-untyped-def]
    assert len(_chunk_texts(CAR_CHAT)) >= 2  # several slices: room to yield between them
    pipeline, first, second = _scenario(engine, "yield-a")

    result = pipeline.run_once(10)
    opened = pipeline.embedder.inner.opened  # type: ignore[attr-defined]
    assert opened is not None, "the index was embedded without the hook seeing it"
    # The pass completed A, began its index, and stopped at the next slice for B.
    assert result.completed >= 1 and result.chunks_deferred >= 1
    assert _status(engine, first["episode_id"]) == "completed"
    assert _chunks_pending(engine, first["episode_id"]) is True
    assert _stored_chunk_texts(engine, first["thread_id"]) == 0
    assert _status(engine, opened["episode_id"]) == "pending"

    # The next pass: B first, then the whole index (A's and B's), once.
    result = pipeline.run_once(10)
    assert result.chunks_deferred == 0
    assert _status(engine, opened["episode_id"]) == "completed"
    stored_a = [status for ids, status in pipeline.stored if first["episode_id"] in ids]
    assert stored_a == ["completed"], "A's chunks were stored before B was completed"
    for episode_id in (first["episode_id"], opened["episode_id"]):
        assert _chunks_pending(engine, episode_id) is False
    assert _stored_chunk_texts(engine, first["thread_id"]) == len(_chunk_texts(CAR_CHAT))
    assert _stored_chunk_texts(engine, second) == len(_chunk_texts(OTHER_CHAT))
    # Each of A's chunks went to the model once: the slices embedded before the pass
    # yielded were remembered, not embedded again.
    assert pipeline.embedder.inner.chunk_calls == len(_chunk_texts(CAR_CHAT))  # type: ignore[attr-defined]


def test_a_due_episode_it_cannot_claim_does_not_stall_the_index(engine) -> None:  # type: ignore[no-untyped-def]
    """B is due but locked (another worker claiming it): every pass still embeds a slice."""
    pipeline, first, _second = _scenario(engine, "yield-b")
    pipeline.run_once(10)
    opened = pipeline.embedder.inner.opened  # type: ignore[attr-defined]
    assert opened is not None and _chunks_pending(engine, first["episode_id"]) is True
    with engine.connect() as holder:
        holder.execute(
            text("SELECT 1 FROM episodes WHERE dataset = :d AND episode_id = :id FOR UPDATE"),
            {"d": "yield-b", "id": opened["episode_id"]},
        )
        passes = 0
        while _chunks_pending(engine, first["episode_id"]):
            passes += 1
            assert passes <= len(_chunk_texts(CAR_CHAT)) + 1, "the index made no progress"
            assert pipeline.run_once(10).completed == 0
        holder.rollback()
    assert _stored_chunk_texts(engine, first["thread_id"]) == len(_chunk_texts(CAR_CHAT))
    assert _status(engine, opened["episode_id"]) == "pending"
    assert pipeline.run_once(10).completed >= 1
    assert _status(engine, opened["episode_id"]) == "completed"


def test_a_large_backlog_yields_to_another_datasets_episode_only(engine) -> None:  # type: ignore[no-untyped-def]
    """Past BACKLOG_YIELD_TO_ANY_CHARS (here: any backlog) a dataset's own next episode
    waits for its index; another dataset's is served first."""
    own, first, _second = _scenario(engine, "big-own", backlog_yield_to_any_chars=0)
    result = own.run_once(10)
    assert own.embedder.inner.opened is not None  # type: ignore[attr-defined]
    assert result.chunks_deferred == 0, "it yielded to its own dataset's episode"
    assert _chunks_pending(engine, first["episode_id"]) is False
    assert _status(engine, own.embedder.inner.opened["episode_id"]) == "pending"  # type: ignore[attr-defined]

    other, first, _second = _scenario(
        engine, "big-a", second_dataset="big-b", backlog_yield_to_any_chars=0
    )
    result = other.run_once(10)
    assert result.chunks_deferred >= 1, "another dataset's episode waited for the index"
    assert _chunks_pending(engine, first["episode_id"]) is True
    result = other.run_once(10)
    assert result.completed == 1 and result.chunks_deferred == 0
    assert _chunks_pending(engine, first["episode_id"]) is False


def test_a_backlog_past_its_memory_bound_yields_to_no_one(engine) -> None:  # type: ignore[no-untyped-def]
    pipeline, first, _second = _scenario(
        engine,
        "bound-a",
        second_dataset="bound-b",
        backlog_yield_to_any_chars=0,
        backlog_yield_to_none_chars=0,
    )
    result = pipeline.run_once(10)
    assert pipeline.embedder.inner.opened is not None  # type: ignore[attr-defined]
    assert result.chunks_deferred == 0
    assert _chunks_pending(engine, first["episode_id"]) is False
    assert _stored_chunk_texts(engine, first["thread_id"]) == len(_chunk_texts(CAR_CHAT))


class OpensAnEpisodeOnWindow(HashingEmbedder):
    """Opens a pending episode on ``thread`` when, once ``armed``, it is first asked for a
    text that holds ``marker``: an episode becomes due while a later window's chunks are
    being embedded."""

    def __init__(self, engine: Engine, marker: str, thread: uuid.UUID) -> None:
        super().__init__(dimension=384)
        self.engine, self.marker, self.thread = engine, marker, thread
        self.armed = False
        self.opened: Any = None

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.armed and self.opened is None and any(self.marker in t for t in texts):
            self.opened = open_episode(self.engine, self.thread)
        return super().embed(texts)


class ArmsOnIndex(Pipeline):
    def index_backlog(self, **kw):  # type: ignore[no-untyped-def]
        self.embedder.inner.armed = True  # type: ignore[attr-defined]
        return super().index_backlog(**kw)


def test_a_threads_later_windows_yield_between_slices(engine, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A giant thread is several windows (the cap); their chunks are cut one window after
    the other. The later windows' chunks used to be embedded inside the store step of the
    first, yielding to no one: an episode of another dataset due meanwhile waited for
    them all."""
    from episodic.store import episode_windows
    from episodic.store import episodes as states

    monkeypatch.setattr(episode_windows, "MAX_WINDOW_MESSAGES", 4)
    giant = make_thread(engine, dataset="giant-a")
    words = ["harbour", "violin", "glacier"]
    add(
        engine,
        giant,
        [
            ("user", f"window{w} note {i}: " + " ".join([words[w - 1]] * 40) + f" item {i}.")
            for w in (1, 2, 3)
            for i in range(4)
        ],
    )
    windows = []
    with engine.begin() as conn:
        states.open_episode(conn, giant, "explicit", dataset="giant-a")
        windows = [
            r[0]
            for r in conn.execute(
                text("SELECT episode_id FROM episodes WHERE thread_id = :t ORDER BY end_sequence"),
                {"t": giant},
            )
        ]
    assert len(windows) == 3
    victim = make_thread(engine, dataset="giant-b")
    add(engine, victim, OTHER_CHAT)
    inner = OpensAnEpisodeOnWindow(engine, "window2", victim)
    embedder = CachedEmbedder(inner)
    pipeline = ArmsOnIndex(
        engine,
        ExtractiveSummariser(embedder),
        embedder,
        DEFAULT_EXTRACTOR,
        vault=test_vault(),
        max_retries=2,
        retry_backoff=timedelta(0),
        chunk_slice_tokens=1,
        yield_check_seconds=0,
    )
    result = pipeline.run_once(10)
    assert result.completed == 3
    assert inner.opened is not None, "window 2's chunks were never embedded"
    assert result.chunks_deferred >= 1, "the later windows' chunks did not yield"
    assert _chunks_pending(engine, windows[0]) is False  # the first window's group was stored
    assert _chunks_pending(engine, windows[2]) is True
    assert _status(engine, inner.opened["episode_id"]) == "pending"

    while pipeline.run_once(10).chunks_deferred:
        pass
    assert _status(engine, inner.opened["episode_id"]) == "completed"
    assert not any(_chunks_pending(engine, w) for w in windows)


def test_the_owner_holds_its_backlog_against_other_workers(engine) -> None:  # type: ignore[no-untyped-def]
    """A backlog that waits behind other datasets' episodes, past the grace, is not taken
    (and counted towards its abandonment) by another worker while its owner's heartbeat
    holds it; once the owner stops holding it, the grace later, it is."""
    from datetime import UTC, datetime

    pipeline, first, _second = _scenario(engine, "hold-a", second_dataset="hold-b")
    assert pipeline.run_once(10).chunks_deferred >= 1  # yielded: A is owed
    other = make_pipeline(engine, chunk_grace=timedelta(seconds=60))
    later = datetime.now(UTC) + timedelta(minutes=10)
    with engine.begin() as conn:
        assert hold_chunk_work(conn, pipeline._backlog, now=later) == 1
    assert other.resume_chunks(10, now=later + timedelta(seconds=30)) == 0
    assert _chunks_pending(engine, first["episode_id"]) is True
    assert other.resume_chunks(10, now=later + timedelta(seconds=61)) == 1
    assert _chunks_pending(engine, first["episode_id"]) is False


def test_the_heartbeat_holds_the_backlog(engine) -> None:  # type: ignore[no-untyped-def]
    from episodic.services.summariser.pipeline import _heartbeat

    pipeline, first, _second = _scenario(
        engine, "beat-a", second_dataset="beat-b", chunk_grace=timedelta(seconds=2)
    )
    assert pipeline.run_once(10).chunks_deferred >= 1
    # The pass's own heartbeat may already have held it (every 0.5 s here: a pass that
    # outlasts that on a loaded machine does, which made this test flaky): start unheld.
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE episodes SET chunk_attempted_at = NULL WHERE episode_id = :id"),
            {"id": first["episode_id"]},
        )
    with _heartbeat(pipeline, pipeline._heartbeat_interval()):
        wait_until(lambda: _attempted_at(engine, first["episode_id"]) is not None, timeout=30)
    with engine.connect() as conn:
        attempts = conn.execute(
            text("SELECT chunk_attempts FROM episodes WHERE episode_id = :id"),
            {"id": first["episode_id"]},
        ).scalar_one()
    assert attempts == 0  # holding is not an attempt


def _attempted_at(engine: Engine, episode_id: uuid.UUID) -> Any:
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT chunk_attempted_at FROM episodes WHERE episode_id = :id"),
            {"id": episode_id},
        ).scalar_one()


def test_the_worker_loop_completes_the_due_episode_then_finishes_the_index(
    engine, db_url: str
) -> None:  # type: ignore[no-untyped-def]
    """Through the worker's loop (LISTEN, drain, a poll interval of an hour): the same
    order, and the loop finishes the index after the pass that yielded."""
    pipeline, first, _second = _scenario(engine, "yield-d")
    worker = Worker(pipeline, db_url, poll_interval=3600, batch_size=10)
    worker.start()
    try:
        wait_until(
            lambda: (
                pipeline.embedder.inner.opened is not None  # type: ignore[attr-defined]
                and _status(engine, pipeline.embedder.inner.opened["episode_id"]) == "completed"  # type: ignore[attr-defined]
                and not _chunks_pending(engine, first["episode_id"])
            ),
            timeout=120,
        )
    finally:
        worker.stop(30)
    stored_a = [status for ids, status in pipeline.stored if first["episode_id"] in ids]
    assert stored_a == ["completed"]
    assert _stored_chunk_texts(engine, first["thread_id"]) == len(_chunk_texts(CAR_CHAT))


def test_an_explicit_pass_finishes_its_index_whatever_became_due(engine) -> None:  # type: ignore[no-untyped-def]
    """ProcessPending's pass (``yield_chunks=False``): the caller asked for the work done."""
    pipeline, first, _second = _scenario(engine, "yield-e")
    result = pipeline.run_once(10, yield_chunks=False)
    opened = pipeline.embedder.inner.opened  # type: ignore[attr-defined]
    assert opened is not None and _status(engine, opened["episode_id"]) == "pending"
    assert result.chunks_deferred == 0
    assert _chunks_pending(engine, first["episode_id"]) is False
    assert _stored_chunk_texts(engine, first["thread_id"]) == len(_chunk_texts(CAR_CHAT))


class SpansOpenAnEpisode(HashingEmbedder):
    """An embedder with token access (late chunking) that opens a pending episode on
    ``thread`` the first time it reads a document: an episode becomes due mid-index."""

    def __init__(self, engine: Engine, thread: uuid.UUID) -> None:
        super().__init__(dimension=384)
        self.engine, self.thread = engine, thread
        self.opened: Any = None
        self.read: list[str] = []

    def embed_spans(self, documents: list[Any]) -> list[np.ndarray]:
        self.read += [d.text for d in documents]
        if self.opened is None:
            self.opened = open_episode(self.engine, self.thread)
        return [self.embed([d.text[a:b] for a, b in d.spans]) for d in documents]


def test_late_chunks_yield_between_documents_and_read_each_once(engine) -> None:  # type: ignore[no-untyped-def]
    """Late chunking (one document per episode, each read whole): the pass yields between
    documents to an episode that became due, and no document is read twice."""
    dataset = "yield-late"
    first, third = make_thread(engine, dataset=dataset), make_thread(engine, dataset=dataset)
    second = make_thread(engine, dataset=dataset, label="wedding")
    add(engine, first, CAR_CHAT)
    add(engine, third, CAR_CHAT[:4])
    add(engine, second, OTHER_CHAT)
    episodes = [open_episode(engine, first), open_episode(engine, third)]
    inner = SpansOpenAnEpisode(engine, second)
    embedder = CachedEmbedder(inner)
    pipeline = Pipeline(
        engine,
        ExtractiveSummariser(embedder),
        embedder,
        DEFAULT_EXTRACTOR,
        vault=test_vault(),
        max_retries=2,
        retry_backoff=timedelta(0),
        chunk_slice_tokens=1,  # every document a slice of its own
        chunk_vectors="late",
        yield_check_seconds=0,
    )
    assert pipeline.late_chunks

    result = pipeline.run_once(10)
    assert result.completed == 2 and result.chunks_deferred == 2
    assert len(inner.read) == 1  # one document read, then it yielded to the due episode
    assert _status(engine, inner.opened["episode_id"]) == "pending"
    assert all(_chunks_pending(engine, e["episode_id"]) for e in episodes)

    result = pipeline.run_once(10)
    assert result.completed == 1 and result.chunks_deferred == 0
    assert _status(engine, inner.opened["episode_id"]) == "completed"
    for episode in [*episodes, inner.opened]:
        assert _chunks_pending(engine, episode["episode_id"]) is False
    assert _stored_chunk_texts(engine, first) == len(_chunk_texts(CAR_CHAT))
    assert _stored_chunk_texts(engine, third) == len(_chunk_texts(CAR_CHAT[:4]))
    assert _stored_chunk_texts(engine, second) == len(_chunk_texts(OTHER_CHAT))
    assert len(inner.read) == len(set(inner.read)) == 3  # each document read once


def test_a_pass_that_yields_its_index_still_extracts_from_one_episode(engine) -> None:  # type: ignore[no-untyped-def]
    """Under steady load an episode is always due, so a pass always yields its chunk index;
    facts must not wait for the load to end: each such pass extracts from one episode."""
    pipeline, first, _ = _scenario(engine, "yield-facts")

    result = pipeline.run_once(10)

    assert result.chunks_deferred >= 1  # it yielded to the episode opened mid-index
    assert result.semantic_processed == 1
    with engine.connect() as conn:
        status = conn.execute(
            text("SELECT semantic_status FROM episodes WHERE episode_id = :id"),
            {"id": first["episode_id"]},
        ).scalar_one()
    assert status == "completed"
