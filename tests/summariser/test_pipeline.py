"""The summariser pipeline against a real PostgreSQL (no gRPC)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from episodic.providers.types import SummaryRequest, SummaryResult
from episodic.store import episodes as states
from episodic.store.episodes import claim_pending, complete
from episodic.testing.keys import test_vault
from tests.summariser.helpers import (
    CAR_CHAT,
    add,
    episode_row,
    make_pipeline,
    make_thread,
    open_episode,
)


def test_pending_episode_becomes_completed_with_every_field(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    ep = open_episode(engine, thread)
    result = make_pipeline(engine).run_once(10)
    assert result.completed == 1 and result.failed == 0
    row = episode_row(engine, ep["episode_id"])
    assert row["status"] == "completed"
    assert row["summary"] and len(row["summary"]) < 2000
    assert "Corolla" in row["summary"] or any("Corolla" in k for k in row["key_learnings"])
    assert row["key_learnings"], "key learnings extracted"
    assert row["embedding"] is not None
    assert row["message_count"] == 6 and (row["start_sequence"], row["end_sequence"]) == (1, 6)
    assert row["started_at"] <= row["ended_at"] and row["completed_at"] is not None
    assert row["claimed_by"] is None and row["error"] is None
    assert all(e == e.lower().strip() for e in row["entities"]), "entities are normalised"
    # Semantic extraction ran after completion and stored facts with provenance.
    assert row["semantic_status"] == "completed"
    with engine.connect() as conn:
        facts = conn.execute(
            text("SELECT dataset, statement, source_sequence, episode_id FROM facts")
        ).all()
    assert facts and all(
        f.episode_id == ep["episode_id"] and 1 <= f.source_sequence <= 6 for f in facts
    )


def test_new_episode_archives_the_previous_one(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT[:3])
    first = open_episode(engine, thread)
    pipeline = make_pipeline(engine)
    pipeline.run_once(10)
    add(engine, thread, CAR_CHAT[3:])
    second = open_episode(engine, thread)
    assert (second["start_sequence"], second["end_sequence"]) == (4, 6)
    pipeline.run_once(10)
    assert episode_row(engine, first["episode_id"])["status"] == "archived"
    assert episode_row(engine, second["episode_id"])["status"] == "completed"


class RecordingSummariser:
    """Wraps a summariser and records what it was asked to read."""

    name = "recording"

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.requests: list[SummaryRequest] = []

    def summarise(self, request: SummaryRequest) -> SummaryResult:
        self.requests.append(request)
        return self.inner.summarise(request)

    def check(self) -> None:
        pass


def test_summary_reads_whole_thread_but_extraction_reads_only_the_window(engine) -> None:  # type: ignore[no-untyped-def]
    from episodic.providers.embedding import HashingEmbedder
    from episodic.providers.extractive import ExtractiveSummariser

    seen_windows: list[list[int]] = []

    class SpyExtractor:
        name = "spy"

        def extract(self, conn, episode, window, key):  # type: ignore[no-untyped-def]
            seen_windows.append([m.sequence for m in window])
            return len(window)

    recorder = RecordingSummariser(ExtractiveSummariser(HashingEmbedder()))
    pipeline = make_pipeline(engine, summariser=recorder, extractor=SpyExtractor())
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT[:4])
    open_episode(engine, thread)
    pipeline.run_once(10)
    add(engine, thread, CAR_CHAT[4:])
    open_episode(engine, thread)
    pipeline.run_once(10)
    assert seen_windows == [[1, 2, 3, 4], [5, 6]]
    # The rolling summary reads the whole un-compacted thread up to the window's end.
    assert [m.sequence for m in recorder.requests[1].messages] == [1, 2, 3, 4, 5, 6]
    assert recorder.requests[1].window_start_sequence == 5
    assert recorder.requests[1].previous_summary  # the first episode's summary


def test_out_of_order_completion_keeps_the_latest_window_current(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT[:3])
    older = open_episode(engine, thread)
    add(engine, thread, CAR_CHAT[3:])
    newer = open_episode(engine, thread)
    with engine.begin() as conn:
        claimed = {r["episode_id"]: r for r in claim_pending(conn, "w1", 10)}
    assert set(claimed) == {older["episode_id"], newer["episode_id"]}
    fields = dict(
        summary="s",
        key_learnings=[],
        entities=[],
        event_type="conversation",
        actor="user",
        embedding=[0.1] * 384,
    )
    with engine.begin() as conn:  # the newer window finishes first …
        key = test_vault().for_read(conn, "user_42")
        assert complete(conn, claimed[newer["episode_id"]], "w1", key=key, **fields) == "completed"
    with engine.begin() as conn:  # … then the older one: it must not become current
        assert complete(conn, claimed[older["episode_id"]], "w1", key=key, **fields) == "archived"
    assert episode_row(engine, newer["episode_id"])["status"] == "completed"
    assert episode_row(engine, older["episode_id"])["status"] == "archived"
    with engine.connect() as conn:
        completed = conn.execute(
            text("SELECT count(*) FROM episodes WHERE thread_id = :t AND status = 'completed'"),
            {"t": thread},
        ).scalar_one()
    assert completed == 1


class FailingSummariser:
    name = "failing"

    def __init__(self, failures: int) -> None:
        self.failures = failures

    def summarise(self, request):  # type: ignore[no-untyped-def]
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("LLM outage")
        return SummaryResult(summary="recovered", key_learnings=["x"], entities=[])

    def check(self) -> None:
        pass


def test_failures_are_retried_then_succeed(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    ep = open_episode(engine, thread)
    pipeline = make_pipeline(engine, summariser=FailingSummariser(1), max_retries=2)
    assert pipeline.run_once(10).failed == 1
    row = episode_row(engine, ep["episode_id"])
    assert row["status"] == "pending" and row["retry_count"] == 1
    assert "LLM outage" in row["error"]
    assert pipeline.run_once(10).completed == 1  # backoff 0 in this test
    row = episode_row(engine, ep["episode_id"])
    assert row["status"] == "completed" and row["summary"] == "recovered" and row["error"] is None


def test_failures_beyond_max_retries_fail_for_good_and_lose_nothing(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    ep = open_episode(engine, thread)
    pipeline = make_pipeline(engine, summariser=FailingSummariser(99), max_retries=2)
    for _ in range(3):
        pipeline.run_once(10)
    row = episode_row(engine, ep["episode_id"])
    assert row["status"] == "failed" and row["retry_count"] == 3
    assert "LLM outage" in row["error"]
    assert pipeline.run_once(10).failed == 0  # not claimed again
    # The work is not lost: an admin retry makes it pending and it completes.
    with engine.begin() as conn:
        states.retry_episode(conn, ep["episode_id"], dataset=ep["dataset"])
    assert make_pipeline(engine).run_once(10).completed == 1


def test_backoff_delays_the_next_attempt(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    open_episode(engine, thread)
    pipeline = make_pipeline(
        engine, summariser=FailingSummariser(1), retry_backoff=timedelta(hours=1)
    )
    assert pipeline.run_once(10).failed == 1
    assert pipeline.run_once(10).completed == 0  # not due yet


def test_a_lost_claim_writes_nothing(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    ep = open_episode(engine, thread)
    with engine.begin() as conn:
        claimed = claim_pending(conn, "w1", 10)[0]
        # Another actor (e.g. the orphan reclaim) took the episode back meanwhile.
        conn.execute(
            text(
                "UPDATE episodes SET status = 'pending', claimed_by = NULL WHERE episode_id = :id"
            ),
            {"id": ep["episode_id"]},
        )
    with engine.begin() as conn:
        status = complete(
            conn,
            claimed,
            "w1",
            key=test_vault().for_read(conn, "user_42"),
            summary="stale",
            key_learnings=[],
            entities=[],
            event_type="conversation",
            actor="user",
            embedding=[0.0] * 384,
        )
    assert status is None
    assert episode_row(engine, ep["episode_id"])["summary"] == ""


def test_semantic_skipped_when_disabled_or_nothing_to_extract(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, [("assistant", "Hello there."), ("user", "ok")])
    ep = open_episode(engine, thread)
    make_pipeline(engine).run_once(10)
    assert episode_row(engine, ep["episode_id"])["semantic_status"] == "skipped"

    other = make_thread(engine)
    add(engine, other, CAR_CHAT)
    ep2 = open_episode(engine, other)
    make_pipeline(engine, extractor=None).run_once(10)
    row = episode_row(engine, ep2["episode_id"])
    assert row["status"] == "completed" and row["semantic_status"] == "skipped"


def test_semantic_status_waits_for_completion(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    ep = open_episode(engine, thread)
    pipeline = make_pipeline(engine, summariser=FailingSummariser(1))
    pipeline.run_once(10)
    row = episode_row(engine, ep["episode_id"])
    assert row["status"] == "pending" and row["semantic_status"] == "pending"


def test_release_hands_claims_back_without_counting_a_retry(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    ep = open_episode(engine, thread)
    pipeline = make_pipeline(engine)
    with engine.begin() as conn:
        claim_pending(conn, pipeline.worker, 10)
    assert pipeline.release() == 1
    row = episode_row(engine, ep["episode_id"])
    assert row["status"] == "pending" and row["retry_count"] == 0 and row["claimed_by"] is None


def test_a_lost_claim_does_not_archive_the_current_episode(engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT[:3])
    first = open_episode(engine, thread)
    make_pipeline(engine).run_once(10)
    add(engine, thread, CAR_CHAT[3:])
    second = open_episode(engine, thread)
    with engine.begin() as conn:
        claimed = claim_pending(conn, "w1", 10)[0]
    with engine.begin() as conn:  # an admin deletes the in-flight episode
        states.delete_episode(conn, second["episode_id"], dataset=second["dataset"])
    with engine.begin() as conn:
        status = complete(
            conn,
            claimed,
            "w1",
            key=test_vault().for_read(conn, "user_42"),
            summary="late",
            key_learnings=[],
            entities=[],
            event_type="conversation",
            actor="user",
            embedding=[0.0] * 384,
        )
    assert status is None
    assert episode_row(engine, first["episode_id"])["status"] == "completed"


class _GatedSummariser:
    """Blocks in summarise() until released: a slow LLM."""

    name = "gated"

    def __init__(self) -> None:
        import threading

        self.started = threading.Event()
        self.release = threading.Event()

    def summarise(self, request):  # type: ignore[no-untyped-def]
        self.started.set()
        assert self.release.wait(60)
        return SummaryResult(summary="slow but sure", key_learnings=[], entities=[])

    def check(self) -> None:
        pass


def _claim_of(engine, episode_id):  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT status, claimed_at, retry_count FROM episodes WHERE episode_id = :id"),
            {"id": episode_id},
        ).one()


def test_a_working_worker_renews_its_claims(engine) -> None:  # type: ignore[no-untyped-def]
    """A batch that outlasts the reclaim timeout is not taken from a live worker: its
    heartbeat keeps the claim fresh while the slow call runs."""
    import threading
    from datetime import timedelta

    from episodic.testing.processes import wait_until

    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    ep = open_episode(engine, thread)
    slow = _GatedSummariser()
    pipeline = make_pipeline(engine, summariser=slow, heartbeat=timedelta(seconds=0.05))
    worker = threading.Thread(target=pipeline.run_once, args=(1,))
    worker.start()
    assert slow.started.wait(30)
    first = _claim_of(engine, ep["episode_id"]).claimed_at
    wait_until(
        lambda: _claim_of(engine, ep["episode_id"]).claimed_at > first,
        timeout=30,
        message="the claim was renewed while the call ran",
    )
    slow.release.set()
    worker.join(60)
    status, _, retries = _claim_of(engine, ep["episode_id"])
    assert (status, retries) == ("completed", 0)


class _DatabaseGone:
    """The first summarise() finds the database gone (a restart mid-batch)."""

    name = "gone"

    def __init__(self) -> None:
        self.calls = 0

    def summarise(self, request):  # type: ignore[no-untyped-def]
        from sqlalchemy.exc import OperationalError

        self.calls += 1
        if self.calls == 1:
            raise OperationalError("SELECT 1", {}, Exception("server closed the connection"))
        return SummaryResult(summary="after the restart", key_learnings=[], entities=[])

    def check(self) -> None:
        pass


def test_an_outage_mid_batch_costs_no_retry_and_strands_nothing(engine) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy.exc import OperationalError

    first, second = make_thread(engine), make_thread(engine)
    for thread in (first, second):
        add(engine, thread, CAR_CHAT)
    eps = [open_episode(engine, t)["episode_id"] for t in (first, second)]
    pipeline = make_pipeline(engine, summariser=_DatabaseGone())
    with pytest.raises(OperationalError):
        pipeline.run_once(10)
    # Neither episode is blamed: no retry counted, nothing failed.
    assert all(_claim_of(engine, e).retry_count == 0 for e in eps)
    # The next pass (the database is back) hands the held claims back and finishes both.
    while pipeline.run_once(10).completed:
        pass
    assert [tuple(_claim_of(engine, e))[::2] for e in eps] == [("completed", 0)] * 2


def test_a_pooled_summary_vector_is_stored_without_embedding_the_summary(
    engine, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """With POOL_SUMMARY_VECTOR the episode's vector is the summariser's (the mean of the
    quoted sentences' vectors): the pipeline stores it and runs no model on the summary."""
    import numpy as np

    from episodic.providers import extractive
    from episodic.providers.embedding import HashingEmbedder
    from episodic.providers.extractive import ExtractiveSummariser
    from episodic.services.summariser.pipeline import embedding_text, load_summary_request

    class Recording(HashingEmbedder):
        def __init__(self) -> None:
            super().__init__(384)
            self.texts: list[str] = []

        def embed(self, texts: list[str]) -> np.ndarray:
            self.texts += texts
            return super().embed(texts)

    monkeypatch.setattr(extractive, "POOL_SUMMARY_VECTOR", True)
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    ep = open_episode(engine, thread)
    embedder = Recording()
    pipeline = make_pipeline(
        engine, summariser=ExtractiveSummariser(embedder, sentence_vectors="model")
    )
    pipeline.embedder.inner = embedder  # the pipeline's cache over the same recording model
    assert pipeline.run_once(10).completed == 1
    row = episode_row(engine, ep["episode_id"])
    assert embedding_text(row["summary"], row["key_learnings"], []) not in embedder.texts
    with engine.connect() as conn:
        request = load_summary_request(conn, test_vault(), {**ep, "dataset": row["dataset"]})
    expected = (
        ExtractiveSummariser(HashingEmbedder(384), sentence_vectors="model")
        .summarise(request)
        .vector
    )
    assert expected is not None
    np.testing.assert_allclose(row["embedding"].to_numpy(), expected, atol=1e-6)
