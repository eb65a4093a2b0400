"""Recall's statements sent on the psycopg connection under a SQLAlchemy connection
(raw_statement.fetch_all, numbered placeholders): the same rows SQLAlchemy gives, in the
connection's transaction or in autocommit, seen by the statement observers as written, and
failing as SQLAlchemy's statements fail."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError, ProgrammingError

from episodic.store.raw_statement import driver_form, fetch_all, numbered, observing_statements

# Every kind of value a recall reads, a name used twice and a literal % in one statement.
STATEMENT = """
    SELECT CAST(:id AS uuid) AS id, CAST(:at AS timestamptz) AS at,
           CAST(:blob AS bytea) AS blob, CAST(:words AS text[]) AS words,
           ARRAY[ARRAY[:word, 'true'], ARRAY['b', 'false']] AS pairs,
           CAST('{"a": [1, 2.5]}' AS jsonb) AS doc, CAST(:n AS bigint) + :n AS twice,
           CAST(:x AS float8) AS x, NULL::text AS nothing, 'a 100% sure' AS literal,
           format('%s%%', :word) AS formatted, :flag AS flag
"""
PARAMETERS: dict[str, Any] = {
    "id": "5f0c6f5e-8f6d-4a59-9b8e-0d2f7f1f4b11",
    "at": "2026-12-01T06:00:00.123456+00:00",
    "blob": b"\x00\x01sealed",
    "words": ["zebra", "invoice"],
    "word": "a",
    "n": 21,
    "x": 0.1,
    "flag": True,
}


def test_the_rows_are_sqlalchemys_rows(engine: Engine) -> None:
    with engine.connect() as conn:
        want = [dict(r) for r in conn.execute(text(STATEMENT), PARAMETERS).mappings()]
        got = fetch_all(conn, driver_form(STATEMENT), PARAMETERS)
    assert got == want
    assert got[0]["twice"] == 42 and got[0]["literal"] == "a 100% sure"
    assert got[0]["formatted"] == "a%"


def test_a_name_is_numbered_once_and_literal_percents_kept() -> None:
    sent = numbered("SELECT %(a)s, %(b)s, %(a)s, '5%%'")
    assert sent.sql == "SELECT $1, $2, $1, '5%'"
    assert sent.names == ("a", "b")
    for other in ("SELECT %(a)b", "SELECT %s", "SELECT 5 % 2"):
        with pytest.raises(ValueError, match="only %\\(name\\)s"):
            numbered(other)


def test_it_runs_in_the_connections_transaction(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE raw_reads (id int PRIMARY KEY)"))
    with engine.connect() as conn, conn.begin() as transaction:
        conn.execute(text("INSERT INTO raw_reads VALUES (1)"))
        assert fetch_all(conn, "SELECT count(*) AS n FROM raw_reads", {}) == [{"n": 1}]
        transaction.rollback()
    with engine.connect() as conn:  # rolled back with it: it was in that transaction
        assert fetch_all(conn, "SELECT count(*) AS n FROM raw_reads", {}) == [{"n": 0}]


def test_observers_see_the_statement_as_written(engine: Engine) -> None:
    seen: list[tuple[str, Any]] = []
    with observing_statements(lambda s, p, _: seen.append((s, p))), engine.connect() as conn:
        fetch_all(conn, "SELECT %(a)s::int AS a", {"a": 1})
    assert seen == [("SELECT %(a)s::int AS a", {"a": 1})]


def test_a_failed_statement_raises_sqlalchemys_error_without_its_parameters(
    engine: Engine,
) -> None:
    with engine.connect() as conn:
        with pytest.raises(ProgrammingError) as failed:
            fetch_all(conn, "SELECT no_such_column, %(secret)s::text", {"secret": "a person's"})
        assert "person" not in str(failed.value)
        assert not failed.value.connection_invalidated


def test_a_connection_that_dies_is_an_outage_and_is_replaced(engine: Engine) -> None:
    with engine.connect() as conn:
        (before,) = fetch_all(conn, "SELECT pg_backend_pid() AS pid", {})
        with pytest.raises(OperationalError) as failed:
            fetch_all(conn, "SELECT pg_terminate_backend(pg_backend_pid())", {})
        assert failed.value.connection_invalidated  # what Recall answers UNAVAILABLE
    with engine.connect() as conn:
        (after,) = fetch_all(conn, "SELECT pg_backend_pid() AS pid", {})
    assert after["pid"] != before["pid"]
