"""A Summariser process frozen (SIGSTOP) at each kind of moment loses its claim, stalls
nothing, and writes nothing stale when it wakes (issue 45).

The freeze is placed deterministically: a session of the test holds the thread's row, so
the summariser's completion waits for it *inside its transaction*; or the LLM call the
summariser makes is held by the fake provider, so it waits *outside* any transaction.

* ``in_transaction``: frozen while waiting, then the holder lets go — the summariser's
  backend takes the thread's row and sits idle inside the transaction, holding it, for a
  client that no longer reads. PostgreSQL ends it (EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT).
* ``mid_statement``: frozen while its statement waits, and the holder keeps the row — the
  statement ends at EPISODIC_DB_LOCK_TIMEOUT, then the aborted transaction sits idle and is
  ended the same way.
* ``idle``: frozen outside any transaction, holding only its claim.

In each: the claim is reclaimed while the process is still frozen, the Scheduler fires
another dataset's timer meanwhile, and after SIGCONT the episode is completed once, by the
claim that came after the reclaim (retry counted), with every invariant holding.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from sqlalchemy import Engine, text

from episodic.services.scheduler import domain
from episodic.testing.invariants import check_invariants
from episodic.testing.processes import wait_until
from tests.providers.fake_openai import FakeOpenAI, FakeResponse
from tests.scheduler.helpers import add_messages, dataset_of, episodes, new_thread, settings

ENV = {
    "EPISODIC_SCHEDULER_POLL_INTERVAL": "0.05",
    "EPISODIC_SUMMARISER_POLL_INTERVAL": "0.1",
    "EPISODIC_ORPHAN_RECLAIM_AFTER": "2",
    "EPISODIC_LEASE_TTL": "2",
    "EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT": "0.5",
    "EPISODIC_DB_LOCK_TIMEOUT": "1",
    "EPISODIC_RETRY_BACKOFF": "0",
    "EPISODIC_EMBEDDING_PROVIDER": "hashing",
    "EPISODIC_LOG_LEVEL": "WARNING",
}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dimension=384) as server:
        yield server


def _libpq(db_url: str) -> str:
    return db_url.replace("postgresql+psycopg://", "postgresql://")


def _summariser_waiting_on(engine: Engine, holder: int) -> int | None:
    """The pid of the summariser's backend waiting for a lock ``holder`` holds."""
    with engine.connect() as conn:
        return conn.execute(
            text(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'episodic-summariser' "
                "AND :h = ANY(pg_blocking_pids(pid)) LIMIT 1"
            ),
            {"h": holder},
        ).scalar()


def _backend_gone(engine: Engine, pid: int) -> bool:
    with engine.connect() as conn:
        return not conn.execute(
            text("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = :p)"), {"p": pid}
        ).scalar_one()


def _episode(engine: Engine, episode_id: uuid.UUID) -> dict[str, object]:
    with engine.connect() as conn:
        return dict(
            conn.execute(
                text(
                    "SELECT status, claimed_by, retry_count, error FROM episodes "
                    "WHERE episode_id = :id"
                ),
                {"id": episode_id},
            )
            .mappings()
            .one()
        )


@pytest.mark.parametrize("moment", ["in_transaction", "mid_statement", "idle"])
def test_a_frozen_summariser_loses_its_claim_and_writes_nothing_stale(
    moment: str, spawn, engine: Engine, db_url: str, fake: FakeOpenAI
) -> None:  # type: ignore[no-untyped-def]
    thread_id = new_thread(engine, f"frozen-{moment}")
    add_messages(engine, thread_id, 3, notify=False)
    with engine.begin() as conn:
        opened = domain.request_episode(conn, thread_id, dataset=f"frozen-{moment}").episode
    assert opened is not None
    episode_id = opened["episode_id"]
    spawn("scheduler", env=ENV)
    env = dict(ENV)
    if moment == "idle":
        # The summariser's LLM call hangs until the fake stops: it waits outside any
        # transaction, holding its claim. Its own timeout ends the call after the wake.
        fake.enqueue("chat", FakeResponse(hold=True))
        env |= {
            "EPISODIC_LLM_PROVIDER": "openai",
            "EPISODIC_LLM_BASE_URL": fake.base_url,
            "EPISODIC_LLM_MODEL": "m",
            "EPISODIC_LLM_MAX_RETRIES": "0",
            "EPISODIC_LLM_TIMEOUT": "2",
        }
    with psycopg.connect(_libpq(db_url)) as holder:
        holder.execute("SELECT 1 FROM threads WHERE thread_id = %s FOR UPDATE", (thread_id,))
        holder_pid = holder.info.backend_pid
        summariser = spawn("summariser", env=env)
        frozen_backend = None
        if moment == "idle":
            holder.rollback()  # nothing of the thread is held: the LLM call is the wait
            wait_until(lambda: fake.requests_to("chat"), timeout=60, message="the LLM is called")
        else:
            frozen_backend = wait_until(
                lambda: _summariser_waiting_on(engine, holder_pid),
                timeout=60,
                message="the summariser's completion waits for the thread's row",
            )
        assert _episode(engine, episode_id)["status"] == "processing"
        os.kill(summariser.proc.pid, signal.SIGSTOP)
        try:
            if moment == "in_transaction":
                holder.rollback()  # its backend now holds the row, for a frozen client
            assert frozen_backend is None or not _backend_gone(engine, frozen_backend)
            # The Scheduler goes on with another dataset's thread meanwhile.
            other = new_thread(engine, f"frozen-{moment}-other")
            add_messages(engine, other, 2, notify=False)
            with engine.begin() as conn:
                domain.record_activity(
                    conn,
                    other,
                    settings(auto_episode_interval=timedelta(seconds=0.2)),
                    dataset=dataset_of(conn, other),
                )
            wait_until(lambda: episodes(engine, other), timeout=60, message="other thread fires")
            if frozen_backend is not None:
                wait_until(
                    lambda: _backend_gone(engine, frozen_backend),
                    timeout=60,
                    message="PostgreSQL ends the frozen summariser's session",
                )
            # Reclaimed while the process is still frozen.
            wait_until(
                lambda: (
                    _episode(engine, episode_id)["claimed_by"] is None
                    or _episode(engine, episode_id)["retry_count"] == 1
                ),
                timeout=60,
                message="the frozen summariser's claim is reclaimed",
            )
            assert _episode(engine, episode_id)["retry_count"] == 1
        finally:
            if moment == "mid_statement":
                holder.rollback()
            os.kill(summariser.proc.pid, signal.SIGCONT)
    # idle: the woken worker's held call ends at its own timeout; the next one is answered.
    wait_until(
        lambda: _episode(engine, episode_id)["status"] == "completed",
        timeout=90,
        message="the episode completes after the wake",
    )
    done = _episode(engine, episode_id)
    # Completed by the claim that came after the reclaim, once: a stale write of the frozen
    # claim would have had to pass `claimed_by = me` on a reclaimed row.
    assert done["retry_count"] == 1 and done["error"] is None
    windows = [(e["start_sequence"], e["end_sequence"]) for e in episodes(engine, thread_id)]
    assert windows == [(1, 3)]
    check_invariants(engine)


def test_an_extraction_whose_claim_was_taken_back_writes_no_facts(engine: Engine) -> None:
    """The woken worker goes on through the batch it had claimed: an extraction whose claim
    the orphan sweep took back meanwhile stores no facts (they would be a stale write), and
    the claim's next holder extracts them once."""
    from episodic.store import episodes as states
    from tests.summariser.helpers import CAR_CHAT, add, make_pipeline, make_thread
    from tests.summariser.helpers import open_episode as open_on

    thread = make_thread(engine, "frozen-facts")
    add(engine, thread, CAR_CHAT)
    episode_id = open_on(engine, thread)["episode_id"]
    sleeper, other = make_pipeline(engine), make_pipeline(engine)
    # Summarised, without extraction: the extraction is claimed by the sleeper alone.
    sleeper.run_once(10, yield_chunks=False)
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE episodes SET semantic_status = 'pending', semantic_claimed_by = NULL, "
                "semantic_claimed_at = NULL WHERE episode_id = :id"
            ),
            {"id": episode_id},
        )
        conn.execute(text("DELETE FROM facts WHERE episode_id = :id"), {"id": episode_id})
        (claimed,) = states.claim_semantic(conn, sleeper.worker, 1)
    # The sleeper is away; the sweep takes its claim back, and another worker claims it.
    with engine.begin() as conn:
        states.reclaim_orphaned(conn, older_than=timedelta(0), max_retries=3)
        assert [r["episode_id"] for r in states.claim_semantic(conn, other.worker, 1)] == [
            episode_id
        ]

    def facts() -> int:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    text("SELECT count(*) FROM facts WHERE episode_id = :id"), {"id": episode_id}
                ).scalar_one()
            )

    assert sleeper.process_semantic(claimed) is None  # woken: nothing written
    assert facts() == 0
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT semantic_status, semantic_claimed_by FROM episodes WHERE episode_id = :id"
            ),
            {"id": episode_id},
        ).one()
    assert tuple(row) == ("processing", other.worker)
    assert other.process_semantic(claimed) == "completed"
    assert facts() > 0
