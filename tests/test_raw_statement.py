"""A statement sent on the pool's psycopg connection without SQLAlchemy
(episodic.store.raw_statement) behaves as one sent through it: committed when it returns,
seen by the process's statement observers, its errors raised as SQLAlchemy's (a dead
connection taken out of the pool), and the connection handed back as the pool expects it."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, event, text
from sqlalchemy.exc import IntegrityError, OperationalError

from episodic.store import raw_statement
from episodic.store.db import make_engine
from episodic.store.raw_statement import fetch_one_autocommitted, observing_statements


@pytest.fixture
def table(engine: Engine) -> str:
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE raw_probe (id int PRIMARY KEY, note text)"))
    return "raw_probe"


def test_the_statement_is_committed_when_it_returns_and_the_connection_goes_back(
    engine: Engine, table: str
) -> None:
    row = fetch_one_autocommitted(
        engine,
        "INSERT INTO raw_probe VALUES (%(id)s, %(note)s) RETURNING id, note",
        {"id": 1, "note": "kept"},
    )
    assert row == (1, "kept")
    # Another connection sees it: committed, not left in an open transaction.
    with engine.connect() as conn:
        assert conn.execute(text("SELECT note FROM raw_probe WHERE id = 1")).scalar_one() == "kept"
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    # The pooled connection is back in transaction mode, as SQLAlchemy's users expect it.
    with engine.connect() as conn:
        assert conn.connection.driver_connection.autocommit is False  # type: ignore[union-attr]
    assert fetch_one_autocommitted(engine, "SELECT 1 WHERE false", {}) is None


def test_observers_see_both_paths_and_are_gone_after_the_block(engine: Engine, table: str) -> None:
    seen: list[tuple[str, object, bool]] = []

    def observe(statement: str, parameters: object, driver) -> None:  # type: ignore[no-untyped-def]
        seen.append((statement, parameters, driver.autocommit))

    with observing_statements(observe):
        fetch_one_autocommitted(
            engine, "INSERT INTO raw_probe VALUES (%(id)s, 'raw') RETURNING id", {"id": 2}
        )
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO raw_probe VALUES (:id, 'core')"), {"id": 3})
    assert seen == [
        ("INSERT INTO raw_probe VALUES (%(id)s, 'raw') RETURNING id", {"id": 2}, True),
        ("INSERT INTO raw_probe VALUES (%(id)s, 'core')", {"id": 3}, False),
    ]
    # Nobody observes: no listener is left on the engines (services pay nothing for it).
    assert not event.contains(Engine, "before_cursor_execute", raw_statement._from_sqlalchemy)
    fetch_one_autocommitted(engine, "SELECT 1", {})
    assert len(seen) == 2


def test_a_failed_statement_raises_sqlalchemys_error_without_its_parameters(
    engine: Engine, table: str
) -> None:
    statement = "INSERT INTO raw_probe VALUES (%(id)s, %(note)s) RETURNING id"
    fetch_one_autocommitted(engine, statement, {"id": 4, "note": "first"})
    with pytest.raises(IntegrityError) as failed:
        fetch_one_autocommitted(engine, statement, {"id": 4, "note": "a person's secret"})
    assert "secret" not in str(failed.value)  # parameters hidden, as the engine's
    assert not failed.value.connection_invalidated
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    # The connection is usable afterwards (autocommit: nothing was left open).
    assert fetch_one_autocommitted(engine, "SELECT count(*) FROM raw_probe", {}) == (1,)


def test_a_connection_that_dies_mid_statement_is_an_outage_and_is_replaced(
    engine: Engine,
) -> None:
    (before,) = fetch_one_autocommitted(engine, "SELECT pg_backend_pid()", {})  # type: ignore[misc]
    with pytest.raises(OperationalError) as failed:
        fetch_one_autocommitted(engine, "SELECT pg_terminate_backend(pg_backend_pid())", {})
    # OperationalError is what the call interceptor answers UNAVAILABLE (retryable).
    assert failed.value.connection_invalidated
    (after,) = fetch_one_autocommitted(engine, "SELECT pg_backend_pid()", {})  # type: ignore[misc]
    assert after != before


def test_a_database_that_cannot_be_reached_is_sqlalchemys_operational_error() -> None:
    """The pool's checkout connects afresh when it holds no connection; a refused connect
    is raised as SQLAlchemy's OperationalError (which the services answer UNAVAILABLE), not
    as psycopg's (which they would answer INTERNAL)."""
    unreachable = make_engine("postgresql://postgres@127.0.0.1:1/none?connect_timeout=2")
    try:
        with pytest.raises(OperationalError) as raised:
            fetch_one_autocommitted(unreachable, "SELECT %(secret)s", {"secret": "s3cret-words"})
    finally:
        unreachable.dispose()
    assert "s3cret-words" not in str(raised.value)
