"""Work of many datasets at once, through the real processes: every claim that spans
datasets (the Scheduler's timers, catch-up and release, the Summariser's claims) must
bring every dataset's episodes home. On one PostgreSQL a claim is one statement across
datasets; on Citus (the tier ``make test-citus`` runs, where these datasets land on both
workers) it runs once per shard, each statement routed to one shard — checked here with
EXPLAIN — or Citus refuses its row locks."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from episodic.store.shards import distributed, in_group, read_live_shards, shard_groups
from episodic.testing.invariants import check_invariants
from episodic.testing.processes import wait_until
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig

pytestmark = pytest.mark.citus

DATASETS = [f"tenant{i:02d}" for i in range(12)]


def test_every_datasets_episodes_complete_under_two_summarisers(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    scheduler = spawn(
        "scheduler",
        env={"EPISODIC_SCHEDULER_POLL_INTERVAL": "0.2", "EPISODIC_AUTO_EPISODE_INTERVAL": "1"},
    )
    ingest = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    for _ in range(2):  # two replicas claim from the same datasets
        spawn("summariser", env={"EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"})
    writes = ig.IngestServiceStub(ingest.channel())

    threads = []
    for i, dataset in enumerate(DATASETS):
        thread = writes.CreateThread(ipb.CreateThreadRequest(dataset=dataset)).thread
        writes.AddMessages(
            ipb.AddMessagesRequest(
                thread_id=thread.thread_id,
                messages=[
                    ipb.NewMessage(role=e.ROLE_USER, content=f"My favourite number is {i}."),
                    ipb.NewMessage(role=e.ROLE_ASSISTANT, content=f"Noted: {i}."),
                ],
            ),
            timeout=10,
        )
        threads.append(thread.thread_id)
        if i % 2 == 0:  # half end explicitly, half go quiet (the idle timer)
            writes.EndThread(ipb.EndThreadRequest(thread_id=thread.thread_id), timeout=10)

    def all_completed() -> bool:
        with engine.connect() as conn:
            done = conn.execute(
                text("SELECT count(DISTINCT thread_id) FROM episodes WHERE status = 'completed'")
            ).scalar_one()
        return done == len(DATASETS)

    wait_until(all_completed, timeout=120, message="an episode completed in every dataset")
    check_invariants(engine, all_covered=True)

    with engine.connect() as conn:
        groups = shard_groups(conn, DATASETS)
        if not distributed(conn):
            assert groups == [sorted(DATASETS)]
            return
        # The datasets sit on both workers, so the claims above did span shards.
        nodes = conn.execute(
            text(
                "SELECT count(DISTINCT nodeport) FROM citus_shards s "
                "JOIN unnest(CAST(:groups AS text[])) d "
                "ON s.shardid = get_shard_id_for_distribution_column('episodes', d) "
                "WHERE s.table_name = 'episodes'::regclass"
            ),
            {"groups": DATASETS},
        ).scalar_one()
        assert nodes == 2
        assert len(groups) > 1
        # Each group's claim reaches one shard: what makes its row locks legal.
        statement, params = in_group(
            "EXPLAIN SELECT episode_id FROM episodes WHERE IN_GROUP(episodes) "
            "AND status = 'pending' FOR NO KEY UPDATE SKIP LOCKED",
            groups[0],
        )
        plan = "\n".join(row[0] for row in conn.execute(text(statement), params))
        assert "Task Count: 1" in plan


def test_the_discovery_worker_by_worker_finds_what_the_one_statement_finds(engine) -> None:  # type: ignore[no-untyped-def]
    """What the claims' discovery reads while a worker is down (each live worker over its
    own shards, store/shards.py ``read_live_shards``) is, with every worker up, what the
    one statement across shards reads: a join of two colocated tables, parameters inlined,
    a limit per shard."""
    with engine.connect() as conn:
        if not distributed(conn):
            pytest.skip("reading worker by worker is Citus's (make test-citus)")
        with conn.begin():
            for i, dataset in enumerate(DATASETS):
                conn.execute(text("INSERT INTO datasets (dataset) VALUES (:d)"), {"d": dataset})
                conn.execute(
                    text(
                        "INSERT INTO threads (thread_id, dataset, last_sequence, "
                        "captured_sequence, last_message_at) "
                        "VALUES (gen_random_uuid(), :d, :last, 0, now())"
                    ),
                    {"d": dataset, "last": i},
                )
                if i % 3 == 0:  # a timer: not what the statement looks for
                    conn.execute(
                        text(
                            "INSERT INTO scheduled_episodes (thread_id, dataset, fire_at) "
                            "SELECT thread_id, dataset, now() FROM threads WHERE dataset = :d"
                        ),
                        {"d": dataset},
                    )
        statement = (
            "SELECT t.dataset FROM threads t WHERE t.last_sequence > :above "
            "AND NOT EXISTS (SELECT 1 FROM scheduled_episodes s "
            "WHERE s.dataset = t.dataset AND s.thread_id = t.thread_id) "
            "ORDER BY t.dataset LIMIT :limit"
        )
        params = {"above": 1, "limit": 100}
        expected = sorted(conn.execute(text(statement), params).scalars())
        assert len(shard_groups(conn, expected)) > 1  # several shards, so several reads
        assert sorted(read_live_shards(conn, statement, params)) == expected
        # A minimum per shard, as the Scheduler's next deadline reads it.
        least = "SELECT min(last_sequence) FROM threads WHERE last_sequence > :above"
        assert min(x for x in read_live_shards(conn, least, params) if x is not None) == 2
