"""The Scheduler's periodic queries can use their partial indexes (research: a claim
without its partial index is ~10x slower). Each domain call's statements are captured and
EXPLAINed with sequential scans priced out, so a query whose WHERE stops matching an
index predicate fails here rather than in production."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, event

from episodic.services.scheduler import domain
from episodic.store import episodes as states
from tests.scheduler.helpers import settings

CFG = settings()


@contextmanager
def captured(conn: Connection) -> Iterator[list[tuple[str, Any]]]:
    statements: list[tuple[str, Any]] = []

    def capture(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        statements.append((statement, parameters))

    event.listen(conn, "before_cursor_execute", capture)
    try:
        yield statements
    finally:
        event.remove(conn, "before_cursor_execute", capture)


def plans(engine, call: Callable[[Connection], object]) -> str:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        with captured(conn) as statements:
            call(conn)
        conn.rollback()
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        cursor.execute("SET enable_seqscan = off")
        out = []
        for statement, parameters in statements:
            cursor.execute("EXPLAIN " + statement, parameters)
            out.extend(row[0] for row in cursor.fetchall())
        # The tables are hash-partitioned by dataset: a plan names each partition's copy of
        # an index (scheduled_episodes_p3_fire_at_idx); name the index it was created as.
        cursor.execute(
            "SELECT c.relname, p.relname FROM pg_inherits h "
            "JOIN pg_class c ON c.oid = h.inhrelid AND c.relkind = 'i' "
            "JOIN pg_class p ON p.oid = h.inhparent"
        )
        parents = dict(cursor.fetchall())
        conn.rollback()
    return "\n".join(" ".join(parents.get(word, word) for word in line.split(" ")) for line in out)


@pytest.mark.parametrize(
    ("name", "call", "indexes"),
    [
        (
            "claim",
            lambda c: domain.claim_due_timers(c, "w", 10),
            ["scheduled_episodes_due_idx"],
        ),
        ("catch-up", lambda c: domain.catch_up(c, CFG), ["threads_uncaptured_idx"]),
        (
            "backstop",
            lambda c: domain.backstop_candidates(c, CFG),
            ["threads_uncaptured_idx"],
        ),
        (
            "timer reclaim",
            lambda c: domain.reclaim_timers(c, timedelta(minutes=10)),
            ["scheduled_episodes_claimed_idx"],
        ),
        (
            "episode reclaim",
            lambda c: states.reclaim_orphaned(c, older_than=timedelta(minutes=10), max_retries=3),
            ["episodes_processing_idx", "episodes_semantic_processing_idx"],
        ),
        ("next deadline", domain.next_due_in, ["scheduled_episodes_due_idx"]),
    ],
)
def test_periodic_queries_use_their_partial_indexes(engine, name, call, indexes) -> None:  # type: ignore[no-untyped-def]
    plan = plans(engine, call)
    for index in indexes:
        assert index in plan, f"{name} does not use {index}:\n{plan}"
