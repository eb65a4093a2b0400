"""The path docs/guides/citus.md ("The path to Citus") gives a team, run on a cluster of its own: a
database that already holds data (migrated and written before Citus distributes it) is
distributed with ``distribute.sql`` (which also empties the coordinator's local copies),
then grows by a worker and rebalances — every row still there, rows still written and read
one shard at a time."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text

from episodic.store import migrate
from episodic.store.db import make_engine
from episodic.testing.citus import DISTRIBUTE_SQL, citus_cluster
from episodic.testing.database import EMBEDDING_DIMENSION
from tests.recall.factory import make_episode

pytestmark = pytest.mark.citus

DATASETS = [f"grow{i:02d}" for i in range(10)]
#: What the rows of a store add up to, table by table (checked before and after each step).
TABLES = ("datasets", "threads", "messages", "episodes", "message_chunks")


def _counts(url: str) -> dict[str, int]:
    engine = make_engine(url, pool_size=1)
    try:
        with engine.connect() as conn:
            return {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in TABLES}
    finally:
        engine.dispose()


def _nodes_holding(url: str) -> int:
    engine = make_engine(url, pool_size=1)
    try:
        with engine.connect() as conn:
            return conn.execute(
                text(
                    "SELECT count(DISTINCT nodeport) FROM citus_shards "
                    "WHERE table_name = 'messages'::regclass"
                )
            ).scalar_one()
    finally:
        engine.dispose()


def test_a_filled_database_is_distributed_then_grows_by_a_worker() -> None:
    if not os.environ.get("EPISODIC_TEST_CITUS"):
        pytest.skip("a cluster's growth needs the Citus tier (make test-citus)")
    with citus_cluster(workers=2) as cluster:
        name = f"t_{uuid.uuid4().hex[:16]}"
        url = cluster.create_database(name)
        # The single-node store: migrated with one partition (docs/citus.md), and written.
        migrate.upgrade(url, EMBEDDING_DIMENSION, partitions=1)
        engine = make_engine(url, pool_size=2)
        with engine.begin() as conn:
            for dataset in DATASETS:
                make_episode(conn, dataset, [f"{dataset} wants the train", "Booked for Friday."])
        engine.dispose()
        before = _counts(url)
        assert before["messages"] == 2 * len(DATASETS)

        # Distributed as documented: the rows are on the shards, none left on the coordinator.
        cluster.psql_file(DISTRIBUTE_SQL, url)
        assert _counts(url) == before
        with psycopg.connect(url, autocommit=True) as db:  # the shell table's own pages
            local = db.execute("SELECT pg_relation_size('messages')").fetchone()
        assert local == (0,)
        assert _nodes_holding(url) == 2

        # One more worker; the rebalancer moves shards onto it, and nothing is lost.
        cluster.add_worker([name])
        # Each its own transaction: the job citus_rebalance_start queues is seen by the
        # background workers only once committed.
        with psycopg.connect(url, autocommit=True) as db:
            db.execute("SELECT citus_rebalance_start(shard_transfer_mode := 'block_writes')")
            db.execute("SELECT citus_rebalance_wait()")
        engine = make_engine(url, pool_size=2)
        assert _nodes_holding(url) == 3
        assert _counts(url) == before

        # Still written and read a dataset at a time, on whichever node it landed.
        with engine.begin() as conn:
            made = make_episode(conn, DATASETS[0], ["Moved, and still here?", "Yes."])
        with engine.connect() as conn:
            plan = "\n".join(
                r[0]
                for r in conn.execute(
                    text(
                        "EXPLAIN SELECT count(*) FROM messages WHERE dataset = :d AND thread_id = :t"
                    ),
                    {"d": DATASETS[0], "t": made.thread_id},
                )
            )
            assert "Task Count: 1" in plan
            assert (
                conn.execute(
                    text("SELECT count(*) FROM messages WHERE dataset = :d AND thread_id = :t"),
                    {"d": DATASETS[0], "t": made.thread_id},
                ).scalar_one()
                == 2
            )
        engine.dispose()


def test_a_store_partitioned_by_the_default_is_distributed_as_it_is() -> None:
    """A single-node store made with the default partitions (EPISODIC_DATABASE_PARTITIONS
    8): distribute.sql distributes each partition, every row is on the shards, and a
    dataset's statements still reach one shard (of one partition)."""
    if not os.environ.get("EPISODIC_TEST_CITUS"):
        pytest.skip("distributing needs the Citus tier (make test-citus)")
    with citus_cluster(workers=2) as cluster:
        url = cluster.create_database(f"t_{uuid.uuid4().hex[:16]}")
        migrate.upgrade(url, EMBEDDING_DIMENSION)  # the default partitions
        engine = make_engine(url, pool_size=2)
        with engine.begin() as conn:
            for dataset in DATASETS:
                make_episode(conn, dataset, [f"{dataset} wants the train", "Booked for Friday."])
            partitions = conn.execute(
                text("SELECT count(*) FROM pg_inherits WHERE inhparent = 'messages'::regclass")
            ).scalar_one()
        engine.dispose()
        assert partitions > 1
        before = _counts(url)

        cluster.psql_file(DISTRIBUTE_SQL, url)
        assert _counts(url) == before
        with psycopg.connect(url, autocommit=True) as db:  # the partitions' local pages
            local = db.execute(
                "SELECT sum(pg_relation_size(inhrelid)) FROM pg_inherits "
                "WHERE inhparent = 'messages'::regclass"
            ).fetchone()
        assert local is not None and int(local[0]) == 0
        engine = make_engine(url, pool_size=2)
        try:
            with engine.begin() as conn:
                made = make_episode(conn, DATASETS[1], ["Still written?", "Yes."])
            with engine.connect() as conn:
                query = "SELECT count(*) FROM messages WHERE dataset = :d AND thread_id = :t"
                params = {"d": DATASETS[1], "t": made.thread_id}
                plan = "\n".join(r[0] for r in conn.execute(text("EXPLAIN " + query), params))
                assert "Task Count: 1" in plan
                assert conn.execute(text(query), params).scalar_one() == 2
        finally:
            engine.dispose()


def test_a_migration_after_distribution_runs_on_the_cluster(tmp_path: Path) -> None:
    """``episodic migrate`` on a store distributed one revision ago (the documented step
    after an upgrade of the suite): the head revision's DDL and data changes run through the
    coordinator, and a dataset is still written and read on one shard. A revision Citus
    refuses fails here, and so does one that adds a dataset table without distributing it
    itself on a distributed store (as 0022 does)."""
    if not os.environ.get("EPISODIC_TEST_CITUS"):
        pytest.skip("a migration on a cluster needs the Citus tier (make test-citus)")
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(
        migrate.alembic_config("postgresql://unused", EMBEDDING_DIMENSION)
    )
    head = script.get_revision(script.get_current_head())
    assert head is not None and isinstance(head.down_revision, str)
    with citus_cluster(workers=2) as cluster:
        url = cluster.create_database(f"t_{uuid.uuid4().hex[:16]}")
        migrate.upgrade(url, EMBEDDING_DIMENSION, head.down_revision, partitions=1)
        cluster.psql_file(_distribute_sql_of_its_tables(url, tmp_path), url)
        engine = make_engine(url, pool_size=2)
        try:
            with engine.begin() as conn:
                # As the previous revision's writers: no count kept (it may have no
                # episode_counts).
                make_episode(conn, DATASETS[2], ["Before the upgrade.", "Noted."], keep_count=False)
            migrate.upgrade(url, EMBEDDING_DIMENSION, partitions=1)
            with engine.connect() as conn:
                version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
                assert version == head.revision
            with engine.begin() as conn:
                made = make_episode(conn, DATASETS[2], ["After the upgrade.", "Still here."])
            with engine.connect() as conn:
                query = "SELECT count(*) FROM messages WHERE dataset = :d"
                params = {"d": DATASETS[2]}
                plan = "\n".join(r[0] for r in conn.execute(text("EXPLAIN " + query), params))
                assert "Task Count: 1" in plan
                assert conn.execute(text(query), params).scalar_one() == 4, made.thread_id
                # The revision distributed what it added (distribute.sql's own check).
                left = conn.execute(text(_NOT_DISTRIBUTED)).scalars().all()
                assert not left, f"dataset tables the revision left undistributed: {left}"
        finally:
            engine.dispose()


#: distribute.sql's last statement: the dataset tables Citus does not distribute.
_NOT_DISTRIBUTED = DISTRIBUTE_SQL.read_text().rsplit(";", 2)[-2].strip()


def _distribute_sql_of_its_tables(url: str, tmp_path: Path) -> Path:
    """distribute.sql as it was at the store's revision: without the lines of tables a
    later revision adds (that revision distributes them itself on a distributed store)."""
    with psycopg.connect(url) as db:
        tables = {r[0] for r in db.execute("SELECT relname FROM pg_class")}
    kept = [
        line
        for line in DISTRIBUTE_SQL.read_text().splitlines(keepends=True)
        if not (m := re.match(r"SELECT create_distributed_table\('(\w+)'", line))
        or m.group(1) in tables
    ]
    path = tmp_path / "distribute.sql"
    path.write_text("".join(kept))
    return path
