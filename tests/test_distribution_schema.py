"""The distribution rule holds on the live schema, the check catches what breaks it, and
revision 0010 moves a filled database to the partitioned layout and back without losing a
row."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from episodic.store import migrate
from episodic.store.db import make_engine
from episodic.store.distribution import GLOBAL_TABLES, distribution_violations

DIM = 384


def test_the_migrated_schema_follows_the_distribution_rule(engine: Engine) -> None:
    with engine.connect() as conn:
        assert distribution_violations(conn) == []
        partitioned = set(
            conn.execute(
                text(
                    "SELECT relname FROM pg_class WHERE relkind = 'p' "
                    "AND relnamespace = 'public'::regnamespace"
                )
            ).scalars()
        )
    # The tables this issue knows must be among them (0007-0009 may add more).
    assert partitioned >= {
        "datasets",
        "threads",
        "messages",
        "scheduled_episodes",
        "episodes",
        "facts",
        "message_chunks",
    }
    assert not partitioned & set(GLOBAL_TABLES)


@pytest.mark.parametrize(
    ("ddl", "complaint"),
    [
        ("CREATE TABLE notes (note_id uuid PRIMARY KEY, body text)", "no NOT NULL `dataset`"),
        ("CREATE TABLE notes (dataset text NOT NULL, note_id uuid PRIMARY KEY)", "not partitioned"),
        (
            "CREATE TABLE notes (dataset text NOT NULL, thread_id uuid, n int, "
            "UNIQUE (thread_id, n))",
            "unique constraint notes_thread_id_n_key on notes lacks dataset",
        ),
        (
            "CREATE TABLE notes (dataset text NOT NULL, thread_id uuid, n int)",
            "unique index notes_n_idx on notes lacks dataset",
        ),
        (
            "CREATE TABLE notes (dataset text NOT NULL, n int4range, "
            "EXCLUDE USING gist (n WITH &&))",
            "exclusion constraint notes_n_excl on notes lacks dataset",
        ),
        (
            "CREATE TABLE notes (dataset text NOT NULL, note_id uuid, n int4range, "
            "EXCLUDE USING gist (dataset WITH <>, n WITH &&))",
            "must use dataset WITH =",
        ),
        (
            "CREATE TABLE notes (dataset text NOT NULL, thread_id uuid, other text NOT NULL, "
            "FOREIGN KEY (other, thread_id) REFERENCES threads (dataset, thread_id))",
            "does not pair dataset with dataset",
        ),
        (
            "CREATE TABLE notes (dataset text NOT NULL, key_id uuid REFERENCES api_keys (key_id))",
            "joins a dataset table and a global one",
        ),
    ],
)
def test_the_check_names_each_kind_of_violation(engine: Engine, ddl: str, complaint: str) -> None:
    with engine.begin() as conn:
        conn.execute(text(ddl))
        if "notes_n_idx" in complaint:
            conn.execute(text("CREATE UNIQUE INDEX notes_n_idx ON notes (n)"))
        problems = distribution_violations(conn)
    assert any(complaint in p for p in problems), problems


def test_keys_hold_across_partitions(engine: Engine) -> None:
    """The widened keys still mean what they meant (windows of a thread never overlap; a
    thread needs its dataset) and pgvector's HNSW index exists on every partition. (On a
    partition the violation names the partition's copy of the constraint.)"""
    thread = uuid.uuid4()
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO datasets (dataset) VALUES ('ds-x')"))
        conn.execute(
            text("INSERT INTO threads (thread_id, dataset, last_sequence) VALUES (:t, 'ds-x', 9)"),
            {"t": thread},
        )
        conn.execute(text(_EPISODE), {"e": uuid.uuid4(), "t": thread, "a": 1, "b": 5})
    with (
        pytest.raises(IntegrityError, match="violates exclusion constraint"),
        engine.begin() as conn,
    ):
        conn.execute(text(_EPISODE), {"e": uuid.uuid4(), "t": thread, "a": 5, "b": 9})
    with (
        pytest.raises(IntegrityError, match="violates foreign key constraint"),
        engine.begin() as conn,
    ):
        conn.execute(
            text("INSERT INTO threads (thread_id, dataset) VALUES (:t, 'nowhere')"),
            {"t": uuid.uuid4()},
        )
    with engine.connect() as conn:
        hnsw = conn.execute(
            text(
                "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_am am ON am.oid = c.relam JOIN pg_inherits h ON h.inhrelid = i.indrelid "
                "WHERE am.amname = 'hnsw' AND h.inhparent = 'episodes'::regclass"
            )
        ).scalar_one()
        partitions = conn.execute(
            text("SELECT count(*) FROM pg_inherits WHERE inhparent = 'episodes'::regclass")
        ).scalar_one()
    assert hnsw == partitions > 1


_EPISODE = (
    "INSERT INTO episodes (episode_id, thread_id, dataset, trigger, start_sequence, "
    "end_sequence, message_count, started_at, ended_at, status) "
    "VALUES (:e, :t, 'ds-x', 'explicit', :a, :b, :b - :a + 1, now(), now(), 'completed')"
)


@pytest.fixture
def blank_url(databases) -> Iterator[str]:  # type: ignore[no-untyped-def]
    url = databases.create(migrated=False)
    yield url
    databases.drop(url)


def test_partition_count_is_chosen_at_migration_time(blank_url: str) -> None:
    migrate.upgrade(blank_url, DIM, partitions=3)
    engine = make_engine(blank_url, pool_size=1)
    try:
        with engine.connect() as conn:
            counts = dict(
                conn.execute(
                    text(
                        "SELECT p.relname, count(*) FROM pg_inherits h "
                        "JOIN pg_class p ON p.oid = h.inhparent GROUP BY p.relname"
                    )
                ).all()
            )
            assert distribution_violations(conn) == []
    finally:
        engine.dispose()
    assert counts["threads"] == counts["messages"] == counts["episodes"] == 3


# Every table of 0009's schema this test fills; a table's fingerprint is its rows as JSON,
# sorted and hashed.
FILLED = ("datasets", "threads", "messages", "scheduled_episodes", "episodes", "facts",
          "message_chunks", "leases", "api_keys", "audit_events")  # fmt: skip


def _fingerprints_on(conn: Connection) -> dict[str, tuple[int, str]]:
    return {
        table: tuple(  # type: ignore[misc]
            conn.execute(
                text(
                    "SELECT count(*), md5(coalesce(string_agg(j, '|' ORDER BY j), '')) "
                    "FROM (SELECT (to_jsonb(t) - 'dataset')::text AS j "
                    f"FROM {table} t) s"
                    if table == "messages"
                    else "SELECT count(*), md5(coalesce(string_agg(j, '|' ORDER BY j), '')) "
                    f"FROM (SELECT to_jsonb(t)::text AS j FROM {table} t) s"
                )
            ).one()
        )
        for table in FILLED
    }


def _fingerprints(engine: Engine) -> dict[str, tuple[int, str]]:
    """Every filled table's rows, messages without the dataset column 0010 adds (so the
    layouts before and after compare)."""
    with engine.connect() as conn:
        return _fingerprints_on(conn)


def _fill(engine: Engine) -> None:
    """Three datasets with threads, messages, timers, episodes (with embeddings and an
    exclusion-guarded window each), facts and chunks, as the services write them."""
    vector = "[" + ",".join(["0.1"] * DIM) + "]"
    with engine.begin() as conn:
        for statement in (
            "INSERT INTO datasets (dataset) SELECT 'ds-' || d FROM generate_series(1, 3) d",
            (
                "INSERT INTO threads (thread_id, dataset, label, last_sequence, "
                "captured_sequence, last_message_at) SELECT md5('t' || i)::uuid, 'ds-' || (1 + i "
                "% 3), '\\x00'::bytea || convert_to('label ' || i, 'UTF8'), 6, 4, now() FROM "
                "generate_series(1, 30) i"
            ),
            (
                "INSERT INTO messages (thread_id, sequence, role, content, created_at, "
                "idempotency_key) SELECT t.thread_id, s, 'user', '\\x00'::bytea || convert_to('m' "
                "|| s, 'UTF8'), now(), CASE WHEN s = 1 THEN 'k' END FROM threads t, "
                "generate_series(1, 6) s"
            ),
            (
                "INSERT INTO scheduled_episodes (thread_id, dataset, fire_at) SELECT thread_id, "
                "dataset, now() FROM threads"
            ),
            (
                "INSERT INTO episodes (episode_id, thread_id, dataset, trigger, start_sequence, "
                "end_sequence, message_count, started_at, ended_at, status, embedding) SELECT "
                "md5('e' || t.thread_id || w)::uuid, t.thread_id, t.dataset, 'explicit', 1 + 2 * "
                "w, 2 + 2 * w, 2, now(), now(), CASE WHEN w = 1 THEN 'completed' ELSE 'archived' "
                "END, CAST(:v AS vector) FROM threads t, generate_series(0, 1) w"
            ),
            (
                "INSERT INTO facts (episode_id, thread_id, dataset, statement, statement_token, "
                "source_sequence, stated_at) SELECT episode_id, thread_id, dataset, '\\x00'::bytea"
                " || convert_to('f', 'UTF8'), 'f', start_sequence, now() FROM episodes"
            ),
            (
                "INSERT INTO message_chunks (thread_id, start_sequence, end_sequence, dataset, "
                "embedding, search_vector, search_length) SELECT thread_id, 1, 2, dataset, "
                "CAST(:v AS vector), to_tsvector('simple', 'a b'), 2 FROM threads"
            ),
            "INSERT INTO leases (name, holder, expires_at) VALUES ('sweep', 'x', now())",
            (
                "INSERT INTO api_keys (key_id, prefix, secret_hash, role, datasets) VALUES "
                "(gen_random_uuid(), 'ek_x', '\\x00', 'reader', '{ds-1}')"
            ),
            ("INSERT INTO audit_events (key_prefix, action, dataset) VALUES ('ek_x', 'a', 'ds-1')"),
        ):
            conn.execute(text(statement), {"v": vector} if ":v" in statement else {})


def test_a_filled_database_moves_to_partitions_and_back_row_for_row(blank_url: str) -> None:
    migrate.upgrade(blank_url, DIM, "0009")
    engine = make_engine(blank_url, pool_size=1)
    try:
        _fill(engine)
        before = _fingerprints(engine)
        assert before["messages"][0] == 180

        # 0010 itself: a later revision may add columns, which changes the rows' fingerprints.
        migrate.upgrade(blank_url, DIM, "0010", partitions=4)
        engine.dispose()
        with engine.connect() as conn:
            assert distribution_violations(conn) == []
            # Every message got its thread's dataset.
            assert (
                conn.execute(
                    text(
                        "SELECT count(*) FROM messages m JOIN threads t "
                        "ON t.dataset = m.dataset AND t.thread_id = m.thread_id"
                    )
                ).scalar_one()
                == 180
            )
        assert _fingerprints(engine) == before

        migrate.downgrade(blank_url, DIM, "0009")
        engine.dispose()
        assert _fingerprints(engine) == before
        with engine.connect() as conn:
            assert (
                conn.execute(text("SELECT count(*) FROM pg_class WHERE relkind = 'p'")).scalar()
                == 0
            )

        migrate.upgrade(blank_url, DIM, "0010", partitions=4)
        engine.dispose()
        assert _fingerprints(engine) == before
        # The identity of facts continues after the copied rows.
        with engine.begin() as conn:
            top = conn.execute(text("SELECT max(fact_id) FROM facts")).scalar_one()
            conn.execute(
                text(
                    "INSERT INTO facts (episode_id, thread_id, dataset, statement, "
                    "statement_token, source_sequence, stated_at) SELECT episode_id, thread_id, "
                    "dataset, statement, 'new', 99, now() FROM facts LIMIT 1"
                )
            )
            assert conn.execute(text("SELECT max(fact_id) FROM facts")).scalar_one() == top + 1
    finally:
        engine.dispose()


def test_a_threads_statements_touch_one_partition(engine: Engine) -> None:
    """AddMessages finds the thread's dataset once (the id lookup probes every partition
    through the routing index), then every statement names it, so the planner prunes to
    the one partition that holds the dataset (one shard on Citus)."""
    from episodic.config import IngestSettings, PrivacySettings
    from episodic.services.ingest import domain
    from episodic.store.vault import make_vault
    from tests.scheduler.test_query_plans import captured

    vault = make_vault(PrivacySettings())
    with engine.begin() as conn:
        thread = domain.create_thread(
            conn, vault, dataset="ds-route", thread_id=None, label="", metadata_json="{}"
        )
    with engine.connect() as conn:
        with captured(conn) as statements:
            domain.add_messages(
                conn,
                vault,
                thread["thread_id"],
                [domain.NewMessage("user", "hello", {}, idempotency_key="k1")],
                IngestSettings(),
            )
        conn.rollback()
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        routed = 0
        for statement, parameters in statements:
            cursor.execute("EXPLAIN " + statement, parameters)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            partitions = set(re.findall(r"\b(?:threads|messages)_p\d+\b", plan))
            if statement.lstrip().startswith("INSERT"):
                assert "dataset" in statement  # a row goes to its dataset's partition
                routed += 1
            elif re.search(r"\bdataset = %\(", statement):
                routed += 1
                tables = {p.rsplit("_p", 1)[0] for p in partitions}
                assert len(partitions) == len(tables), f"more than one partition:\n{plan}"
            else:  # the one lookup by id: every partition, each through an index
                assert "Index Cond: (thread_id = " in plan, plan
        conn.rollback()
    assert routed >= 2  # the idempotency check; the counter bump and insert (one statement)
