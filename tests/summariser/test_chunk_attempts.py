"""A window whose chunk index kills the worker every time does not crash-loop it (issue 49):
each take of a left-over chunk index is counted and committed before any embedding, one
worker's take keeps the others off it for the grace, and past the attempts the index is
given up — the episode stays completed, says why in its error, and the thread's next
episode indexes those messages with its own."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, text

from episodic.services.summariser.pipeline import Pipeline
from episodic.store.recall_index import MAX_CHUNK_ATTEMPTS
from tests.summariser.helpers import CAR_CHAT, add, make_pipeline, make_thread, open_episode
from tests.summariser.test_deferred_chunks import _chunks, _stopping_pipeline

GRACE = timedelta(seconds=60)


class WorkerKilled(BaseException):
    """What the kernel's OOM killer does to a worker: nothing after it runs, no handler
    sees it (a BaseException, as the pipeline catches Exception)."""


class DiesWhileIndexing(Pipeline):
    def index_chunks(self, work, **kw):  # type: ignore[no-untyped-def]
        raise WorkerKilled


def _attempts(engine: Engine, episode_id: uuid.UUID) -> tuple[int, bool, str | None, str]:
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT chunk_attempts, chunks_pending, error, status FROM episodes "
                "WHERE episode_id = :id"
            ),
            {"id": episode_id},
        ).one()
    return row[0], row[1], row[2], row[3]


def _dying(engine: Engine) -> DiesWhileIndexing:
    healthy = make_pipeline(engine, chunk_grace=GRACE)
    return DiesWhileIndexing(
        engine,
        healthy.summariser,
        healthy.embedder,
        healthy.extractor,
        vault=healthy.vault,
        max_retries=2,
        retry_backoff=timedelta(0),
        chunk_grace=GRACE,
    )


def test_a_chunk_index_that_kills_its_worker_is_given_up_after_its_attempts(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine, dataset="chunk-attempts")
    add(engine, thread, CAR_CHAT)
    episode = open_episode(engine, thread)["episode_id"]
    assert _stopping_pipeline(engine).run_once(10).completed == 1
    assert _attempts(engine, episode) == (0, True, None, "completed")

    at = datetime.now(UTC) + 2 * GRACE
    for attempt in range(1, MAX_CHUNK_ATTEMPTS + 1):
        with pytest.raises(WorkerKilled):
            _dying(engine).resume_chunks(10, now=at)
        # The take was committed before the work: the dead worker's attempt counts.
        assert _attempts(engine, episode)[:2] == (attempt, True)
        # Another worker, a moment later, leaves the episode to the one that took it.
        assert make_pipeline(engine, chunk_grace=GRACE).resume_chunks(10, now=at) == 0
        at += 2 * GRACE

    # Attempts used up: given up instead of taken again, and said.
    assert make_pipeline(engine, chunk_grace=GRACE).resume_chunks(10, now=at) == 0
    _, pending, error, status = _attempts(engine, episode)
    assert (pending, status) == (False, "completed")
    assert error is not None and f"given up after {MAX_CHUNK_ATTEMPTS} attempts" in error
    assert _chunks(engine, thread) == []
    assert make_pipeline(engine, chunk_grace=GRACE).resume_chunks(10, now=at + GRACE) == 0

    # The thread's next episode indexes the abandoned window's messages with its own.
    add(engine, thread, [("user", "And could you book the Sunday slot after all?")])
    open_episode(engine, thread)
    assert make_pipeline(engine).run_once(10).completed == 1
    chunks = _chunks(engine, thread)
    assert chunks and chunks[0][0] == 1
    assert chunks[-1][2] == len(CAR_CHAT) + 1


def test_a_failed_resume_is_taken_again_after_the_grace_and_then_succeeds(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine, dataset="chunk-attempts-retry")
    add(engine, thread, CAR_CHAT)
    episode = open_episode(engine, thread)["episode_id"]
    assert _stopping_pipeline(engine).run_once(10).completed == 1
    at = datetime.now(UTC) + 2 * GRACE
    with pytest.raises(WorkerKilled):
        _dying(engine).resume_chunks(10, now=at)
    # Within the grace of that take: not yet; after it: indexed, the mark cleared.
    assert make_pipeline(engine, chunk_grace=GRACE).resume_chunks(10, now=at + GRACE / 2) == 0
    assert make_pipeline(engine, chunk_grace=GRACE).resume_chunks(10, now=at + 2 * GRACE) == 1
    assert _attempts(engine, episode) == (2, False, None, "completed")
    assert _chunks(engine, thread)
