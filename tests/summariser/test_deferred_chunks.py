"""The deferred chunk index: an episode is completed (recallable by its summary) before its
thread's new chunks are embedded; ``episodes.chunks_pending`` marks the gap, and a pass that
stops in between leaves a gap the next pass fills."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, text

from episodic.providers.embedding import HashingEmbedder
from episodic.providers.extractive import ExtractiveSummariser
from episodic.services.recall import domain
from episodic.services.summariser.pipeline import Pipeline
from episodic.store.recall_index import indexed_text, make_chunks, take_chunk_work
from episodic.store.recall_queries import RecallFilters
from episodic.testing.keys import test_vault
from tests.summariser.helpers import (
    CAR_CHAT,
    DEFAULT_EXTRACTOR,
    add,
    make_pipeline,
    make_thread,
    open_episode,
)


class StopsBeforeChunks(Pipeline):
    """A pass that stops (a crash) after completing its episodes, before their chunks."""

    def index_chunks(self, work, **kw):  # type: ignore[no-untyped-def]
        return True


def _chunks(engine: Engine, thread_id: uuid.UUID) -> list[tuple[int, int, int]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT start_sequence, start_offset, end_sequence FROM message_chunks "
                "WHERE thread_id = :t ORDER BY start_sequence, start_offset"
            ),
            {"t": thread_id},
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]


def _state(engine: Engine, episode_id: uuid.UUID) -> tuple[str, bool, bool]:
    with engine.connect() as conn:
        status, pending, document = conn.execute(
            text(
                "SELECT status, chunks_pending, search_vector IS NOT NULL FROM episodes "
                "WHERE episode_id = :id"
            ),
            {"id": episode_id},
        ).one()
    return status, pending, document


def _expected_chunks(turns: list[tuple[str, str]]) -> list[tuple[int, int, int]]:
    cut = make_chunks([(i, indexed_text(c)) for i, (_, c) in enumerate(turns, start=1)])
    return [(c.start_sequence, c.start_offset, c.end_sequence) for c in cut]


def _stopping_pipeline(engine: Engine) -> StopsBeforeChunks:
    embedder = HashingEmbedder(dimension=384)
    return StopsBeforeChunks(
        engine,
        ExtractiveSummariser(embedder),
        embedder,
        DEFAULT_EXTRACTOR,
        vault=test_vault(),
        max_retries=2,
        retry_backoff=timedelta(0),
    )


def test_a_pass_completes_the_episode_and_then_indexes_its_chunks(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine, dataset="deferred-a")
    add(engine, thread, CAR_CHAT)
    episode = open_episode(engine, thread)
    result = make_pipeline(engine).run_once(10)
    assert result.completed == 1
    assert _state(engine, episode["episode_id"]) == ("completed", False, True)
    assert _chunks(engine, thread) == _expected_chunks(CAR_CHAT)


def test_a_pass_stopped_before_the_chunks_leaves_a_gap_the_next_pass_fills(engine) -> None:  # type: ignore[no-untyped-def]
    dataset = "deferred-b"
    thread = make_thread(engine, dataset=dataset)
    add(engine, thread, CAR_CHAT)
    episode = open_episode(engine, thread)

    assert _stopping_pipeline(engine).run_once(10).completed == 1
    # Completed and recallable, the gap detectable: marked, no chunks.
    assert _state(engine, episode["episode_id"]) == ("completed", True, True)
    assert _chunks(engine, thread) == []
    with engine.connect() as conn:
        query = "test drive Corolla"
        answer = domain.recall(
            conn,
            test_vault(),
            domain.RecallQuery(
                dataset=dataset,
                query=query,
                include_episodes=True,
                limit=3,
                similarity_weight=0.7,
                recency_weight=0.3,
                filters=RecallFilters(),
            ),
            make_pipeline(engine).embedder.embed_query(query),
        )
    assert [r["episode_id"] for r in answer.rows] == [episode["episode_id"]]

    # A live worker's own fresh episodes are not taken (the grace), a stale mark is.
    assert make_pipeline(engine).run_once(10).chunks_resumed == 0
    assert _state(engine, episode["episode_id"])[1] is True
    result = make_pipeline(engine, chunk_grace=timedelta(0)).run_once(10)
    assert result.chunks_resumed == 1
    assert _state(engine, episode["episode_id"]) == ("completed", False, True)
    assert _chunks(engine, thread) == _expected_chunks(CAR_CHAT)
    # Done once: nothing left to resume.
    assert make_pipeline(engine, chunk_grace=timedelta(0)).run_once(10).chunks_resumed == 0


def test_two_windows_left_pending_are_cut_as_if_indexed_one_after_the_other(engine) -> None:  # type: ignore[no-untyped-def]
    first, second = CAR_CHAT[:3], [*CAR_CHAT[3:], ("user", "Can we move it to Sunday instead?")]
    threads = {}
    for name, stopping in (("sequential", False), ("resumed", True)):
        thread = make_thread(engine, dataset=f"deferred-{name}")
        add(engine, thread, first)
        open_episode(engine, thread)
        pipeline = _stopping_pipeline(engine) if stopping else make_pipeline(engine)
        assert pipeline.run_once(10).completed == 1
        add(engine, thread, second)
        open_episode(engine, thread)
        assert pipeline.run_once(10).completed == 1
        threads[name] = thread
    assert _chunks(engine, threads["resumed"]) == []
    result = make_pipeline(engine, chunk_grace=timedelta(0)).run_once(10)
    assert result.chunks_resumed == 2
    assert _chunks(engine, threads["resumed"]) == _chunks(engine, threads["sequential"])
    assert len(_chunks(engine, threads["sequential"])) > len(_expected_chunks(first))


def test_an_erased_thread_gets_no_chunks_from_a_resumed_pass(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine, dataset="deferred-erased")
    add(engine, thread, CAR_CHAT)
    episode = open_episode(engine, thread)
    pipeline = make_pipeline(engine, chunk_grace=timedelta(0))
    assert _stopping_pipeline(engine).run_once(10).completed == 1
    now = datetime.now(UTC)
    with engine.begin() as conn:
        work = take_chunk_work(
            conn, test_vault(), completed_before=now, retake_before=now, limit=10
        ).work
    assert [w.episode_id for w in work] == [episode["episode_id"]]
    # The episode goes (as erasure deletes it) between reading the work and storing it.
    with engine.begin() as conn:
        conn.execute(
            text("DELETE FROM episodes WHERE episode_id = :id"), {"id": work[0].episode_id}
        )
    assert pipeline.index_chunks(work) is True
    assert _chunks(engine, thread) == []
