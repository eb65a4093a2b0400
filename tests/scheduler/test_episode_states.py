"""Episode status transitions: failures with backoff, orphan reclaim, admin retry/delete."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import text

from episodic.errors import FailedPrecondition, NotFound
from episodic.services.scheduler import domain
from episodic.store import episodes as states
from episodic.testing.invariants import check_invariants
from episodic.testing.keys import test_vault
from tests.scheduler.helpers import (
    add_messages,
    claim_episode,
    dataset_of,
    db_now,
    episode_dataset,
    episodes,
    new_thread,
)


def opened(engine, messages: int = 2):  # type: ignore[no-untyped-def]
    thread_id = new_thread(engine, messages=messages)
    with engine.begin() as conn:
        return domain.request_episode(conn, thread_id, dataset=dataset_of(conn, thread_id)).episode


def status_of(engine, episode_id):  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return (
            conn.execute(text("SELECT * FROM episodes WHERE episode_id = :id"), {"id": episode_id})
            .mappings()
            .one()
        )


def fail(engine, episode_id, worker="w1", error="boom", now=None, **kw):  # type: ignore[no-untyped-def]
    args = {"max_retries": 3, "backoff": timedelta(seconds=30)}
    args.update(kw)
    with engine.begin() as conn:
        return states.record_failure(
            conn,
            episode_id,
            worker,
            error,
            now=now,
            **args,
            dataset=episode_dataset(conn, episode_id),
        )


def test_failures_back_off_exponentially_then_fail_for_good(engine) -> None:  # type: ignore[no-untyped-def]
    now = db_now(engine)
    episode_id = opened(engine)["episode_id"]
    delays = []
    for attempt in range(4):
        claim_episode(engine, episode_id, "w1")
        new_status = fail(engine, episode_id, now=now, error=f"attempt {attempt}")
        row = status_of(engine, episode_id)
        assert row["retry_count"] == attempt + 1
        assert row["claimed_by"] is None and row["claimed_at"] is None
        if attempt < 3:
            assert new_status == "pending"
            delays.append((row["next_attempt_at"] - now).total_seconds())
    assert delays == [30, 60, 120]
    assert new_status == "failed"
    assert row["status"] == "failed" and row["error"] == "attempt 3"


def test_backoff_is_capped_jitter_optional_and_errors_truncated(engine) -> None:  # type: ignore[no-untyped-def]
    now = db_now(engine)
    episode_id = opened(engine)["episode_id"]
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE episodes SET retry_count = 20 WHERE episode_id = :id"), {"id": episode_id}
        )
    claim_episode(engine, episode_id, "w1")
    assert fail(engine, episode_id, now=now, error="x" * 5000, max_retries=50) == "pending"
    row = status_of(engine, episode_id)
    assert row["next_attempt_at"] - now == timedelta(hours=1)
    assert len(row["error"]) == states.MAX_ERROR_CHARS
    claim_episode(engine, episode_id, "w1")
    fail(engine, episode_id, now=now, max_retries=50, jitter=0.5, max_backoff=timedelta(seconds=10))
    delay = (status_of(engine, episode_id)["next_attempt_at"] - now).total_seconds()
    assert 10 <= delay <= 15


def test_a_failure_only_counts_for_the_worker_holding_the_claim(engine) -> None:  # type: ignore[no-untyped-def]
    episode_id = opened(engine)["episode_id"]
    assert fail(engine, episode_id) is None  # pending: not processing
    claim_episode(engine, episode_id, "w1")
    assert fail(engine, episode_id, worker="w2") is None
    assert status_of(engine, episode_id)["status"] == "processing"


def test_stale_processing_claims_are_reclaimed_at_the_boundary(engine) -> None:  # type: ignore[no-untyped-def]
    now = db_now(engine)
    after = timedelta(minutes=10)
    stale = opened(engine)["episode_id"]
    fresh = opened(engine)["episode_id"]
    exhausted = opened(engine)["episode_id"]
    claim_episode(engine, stale, "lost", now - after - timedelta(seconds=1))
    claim_episode(engine, fresh, "alive", now - after + timedelta(seconds=1))
    claim_episode(engine, exhausted, "lost", now - timedelta(hours=1))
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE episodes SET retry_count = 3 WHERE episode_id = :id"), {"id": exhausted}
        )
        result = states.reclaim_orphaned(conn, older_than=after, max_retries=3, now=now)
    assert (result.requeued, result.failed, result.semantic_requeued) == (1, 1, 0)
    row = status_of(engine, stale)
    assert (row["status"], row["retry_count"], row["claimed_by"]) == ("pending", 1, None)
    assert row["error"] == states.RECLAIM_ERROR
    assert status_of(engine, fresh)["status"] == "processing"
    row = status_of(engine, exhausted)
    assert (row["status"], row["retry_count"]) == ("failed", 4)

    # The lost worker coming back cannot overwrite the reclaimed row.
    assert fail(engine, stale, worker="lost") is None


def test_stale_semantic_claims_are_reclaimed(engine) -> None:  # type: ignore[no-untyped-def]
    now = db_now(engine)
    episode_id = opened(engine)["episode_id"]
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE episodes SET status = 'completed', semantic_status = 'processing', "
                "semantic_claimed_by = 'x', semantic_claimed_at = :t WHERE episode_id = :id"
            ),
            {"id": episode_id, "t": now - timedelta(minutes=11)},
        )
        result = states.reclaim_orphaned(
            conn, older_than=timedelta(minutes=10), max_retries=3, now=now
        )
    assert result.semantic_requeued == 1
    row = status_of(engine, episode_id)
    assert (row["status"], row["semantic_status"], row["semantic_claimed_by"]) == (
        "completed",
        "pending",
        None,
    )


def test_retry_only_from_failed(engine) -> None:  # type: ignore[no-untyped-def]
    episode = opened(engine)
    episode_id = episode["episode_id"]
    with engine.begin() as conn, pytest.raises(FailedPrecondition) as err:
        states.retry_episode(conn, episode_id, dataset=episode_dataset(conn, episode_id))
    assert "is pending; only a failed episode can be retried" in err.value.message
    with engine.begin() as conn, pytest.raises(NotFound):
        states.retry_episode(conn, uuid.uuid4(), dataset="user_42")

    claim_episode(engine, episode_id, "w1")
    fail(engine, episode_id, max_retries=0)
    assert status_of(engine, episode_id)["status"] == "failed"
    with engine.begin() as conn:
        row = states.retry_episode(conn, episode_id, dataset=episode_dataset(conn, episode_id))
    assert (row["status"], row["retry_count"], row["error"]) == ("pending", 0, None)
    assert status_of(engine, episode_id)["next_attempt_at"] <= db_now(engine)
    assert (row["start_sequence"], row["end_sequence"]) == (
        episode["start_sequence"],
        episode["end_sequence"],
    )


def test_delete_archives_from_any_status_and_is_idempotent(engine) -> None:  # type: ignore[no-untyped-def]
    episode = opened(engine)
    claim_episode(engine, episode["episode_id"], "w1")
    with engine.begin() as conn:
        row = test_vault().open_one(
            conn,
            states.delete_episode(conn, episode["episode_id"], dataset=episode["dataset"]),
            "episodes",
        )
    assert row["status"] == "archived"
    assert status_of(engine, episode["episode_id"])["claimed_by"] is None
    assert row["thread_label"] == "label-user_42"
    with engine.begin() as conn:
        again = states.delete_episode(conn, episode["episode_id"], dataset=episode["dataset"])
    assert again["status"] == "archived" and again["updated_at"] == row["updated_at"]
    # The worker that held the claim cannot resurrect it.
    assert fail(engine, episode["episode_id"]) is None
    with engine.begin() as conn, pytest.raises(NotFound):
        states.delete_episode(conn, uuid.uuid4(), dataset="user_42")
    # Its window stays captured: the next episode starts after it.
    add_messages(engine, episode["thread_id"], 1, notify=False)
    with engine.begin() as conn:
        nxt = domain.request_episode(
            conn, episode["thread_id"], dataset=dataset_of(conn, episode["thread_id"])
        ).episode
    assert nxt["start_sequence"] == episode["end_sequence"] + 1
    assert len(episodes(engine, episode["thread_id"])) == 2
    check_invariants(engine, all_covered=True)
