"""Several Scheduler replicas as real processes on one real PostgreSQL, firing timers in
real time (intervals shortened through EPISODIC_* settings): no duplicate, overlapping or
missing windows, and a replica killed with SIGKILL loses nothing."""

from __future__ import annotations

import contextlib
import random
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from sqlalchemy import Engine, text

from episodic.services.ingest import domain as ingest
from episodic.services.scheduler.domain import request_episode
from episodic.testing.invariants import check_invariants
from episodic.testing.processes import wait_until
from episodic.v1 import scheduler_service_pb2 as pb
from episodic.v1 import scheduler_service_pb2_grpc as g
from tests.scheduler.helpers import add_messages, claim_episode, dataset_of, new_thread

pytestmark = pytest.mark.citus  # claims and reclaim across replicas, on Citus too

FAST = {
    "EPISODIC_SCHEDULER_POLL_INTERVAL": "0.05",
    "EPISODIC_AUTO_EPISODE_INTERVAL": "0.2",
    "EPISODIC_SIBLING_PULL_FORWARD": "0.1",
    "EPISODIC_ORPHAN_RECLAIM_AFTER": "1",
    "EPISODIC_LEASE_TTL": "1",
    "EPISODIC_CLAIM_BATCH_SIZE": "5",
    "EPISODIC_LOG_LEVEL": "WARNING",
}


def settled(engine: Engine) -> bool:
    """Every message is in a window and no timer is left (none pending, none claimed)."""
    with engine.connect() as conn:
        return bool(
            conn.execute(
                text(
                    "SELECT NOT EXISTS (SELECT 1 FROM threads "
                    "                   WHERE last_sequence > captured_sequence) "
                    "AND NOT EXISTS (SELECT 1 FROM scheduled_episodes)"
                )
            ).scalar_one()
        )


def count(engine: Engine, sql: str, **params: object) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(sql), params).scalar_one())


def test_three_replicas_and_many_writers_cover_every_message_once(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    replicas = [spawn("scheduler", env=FAST) for _ in range(3)]
    channels = [r.channel() for r in replicas]
    stubs = [g.SchedulerServiceStub(c) for c in channels]
    datasets = [f"user_{i}" for i in range(4)]
    threads = [new_thread(engine, datasets[i % 4]) for i in range(16)]
    # A summariser died holding an episode: a replica's reclaim sweep (1 s here) requeues it.
    stuck_thread = new_thread(engine, "user_0", messages=2)
    with engine.begin() as conn:
        stuck = request_episode(conn, stuck_thread, dataset=dataset_of(conn, stuck_thread)).episode[
            "episode_id"
        ]
    claim_episode(engine, stuck, "lost-summariser")
    lock = threading.Lock()

    def notify(call: str, request: object) -> None:
        # Like Ingest: best-effort, to whichever replica; a fifth of the notices get lost
        # and the catch-up must make up for them.
        if random.random() < 0.2:
            return
        with contextlib.suppress(grpc.RpcError):
            getattr(random.choice(stubs), call)(request, timeout=10)

    def writer(seed: int) -> None:
        rnd = random.Random(seed)
        for _ in range(50):
            roll = rnd.random()
            with lock:
                thread_id = rnd.choice(threads)
            if roll < 0.8:
                add_messages(engine, thread_id, rnd.randint(1, 3), notify=False)
                notify("RecordActivity", pb.RecordActivityRequest(thread_id=str(thread_id)))
            elif roll < 0.92:
                with engine.begin() as conn:
                    _, owed = ingest.end_thread(
                        conn, thread_id, dataset=dataset_of(conn, thread_id)
                    )
                if owed:
                    notify("RequestEpisode", pb.RequestEpisodeRequest(thread_id=str(thread_id)))
            else:
                fresh = new_thread(engine, rnd.choice(datasets))
                with lock:
                    threads.append(fresh)
                notify("RecordThreadStarted", pb.RecordThreadStartedRequest(thread_id=str(fresh)))

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(writer, range(6)))

    wait_until(lambda: settled(engine), timeout=60, message="every message covered")
    wait_until(
        lambda: count(
            engine,
            "SELECT count(*) FROM episodes WHERE episode_id = :id AND status = 'pending' "
            "AND retry_count = 1 AND claimed_by IS NULL",
            id=stuck,
        ),
        timeout=30,
        message="the orphaned episode claim is reclaimed",
    )
    check_invariants(engine, all_covered=True)
    assert count(engine, "SELECT count(*) FROM episodes") >= len(threads) // 2
    for channel in channels:
        channel.close()
    for replica in replicas:
        assert replica.terminate() == 0, replica.log()


def test_sigkill_of_a_replica_mid_work_loses_nothing(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    # The victim claims every due timer in one batch, then fires them one by one: killed
    # after a few, it dies holding hundreds of claims. The survivors must reclaim them
    # (claims older than 1 s, lease 1 s) and finish.
    victim = spawn("scheduler", env={**FAST, "EPISODIC_CLAIM_BATCH_SIZE": "10000"})
    # Enough that the kill lands mid-work on a fast machine too: the Scheduler fires
    # thousands of timers a second (1,000 were all fired before the kill once).
    n = 5000
    ids = [uuid.uuid4() for _ in range(n)]
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO datasets (dataset) SELECT 'd' || g FROM generate_series(0, 20) g "
                "ON CONFLICT DO NOTHING"
            )
        )
        conn.execute(
            text(
                "INSERT INTO threads (thread_id, dataset, last_sequence, last_message_at) "
                "SELECT id, 'd' || (random() * 20)::int, 2, now() FROM unnest(:ids) id"
            ),
            {"ids": ids},
        )
        conn.execute(
            text(
                "INSERT INTO messages (dataset, thread_id, sequence, role, content, created_at) "
                "SELECT t.dataset, t.thread_id, s, 'user', '\\x006869'::bytea, now() "
                "FROM threads t, "
                "generate_series(1, 2) s WHERE t.thread_id = ANY(:ids)"
            ),
            {"ids": ids},
        )
        conn.execute(
            text(
                "INSERT INTO scheduled_episodes (thread_id, dataset, fire_at) "
                "SELECT thread_id, dataset, now() FROM threads"
            )
        )

    def held() -> int:
        return count(
            engine,
            "SELECT count(*) FROM scheduled_episodes WHERE claimed_by LIKE :me",
            me=f"%:{victim.proc.pid}:%",
        )

    # Killed while it fires and holds claims. On one PostgreSQL it claims every due timer
    # at once; on Citus one shard group after another (store/shards.py), so between two
    # groups it may hold none: wait for a moment when it holds a good number.
    wait_until(
        lambda: count(engine, "SELECT count(*) FROM episodes") >= 5 and held() >= 20,
        timeout=30,
        interval=0.005,
        message="the victim is firing, holding claims",
    )
    victim.kill()
    orphaned = held()
    assert orphaned > 0, "the victim died holding claims"
    done_before = count(engine, "SELECT count(*) FROM episodes")
    assert done_before < n

    survivors = [
        spawn("scheduler", env={**FAST, "EPISODIC_CLAIM_BATCH_SIZE": "20"}) for _ in range(2)
    ]
    wait_until(lambda: settled(engine), timeout=90, message="survivors finished the job")
    check_invariants(engine, all_covered=True)
    assert count(engine, "SELECT count(*) FROM episodes") == n
    for survivor in survivors:
        assert survivor.terminate() == 0, survivor.log()
