"""Hot statements on the pool's psycopg connection, without SQLAlchemy's Core — and the
one hook that sees every statement a process sends, whichever way it went.

SQLAlchemy's ``Connection.execute`` costs ~0.1–0.2 ms of CPU per statement (compiling the
cache key, the execution context, the result's metadata), which is most of what a
one-message AddMessages spends above its round trip (docs/benchmarks.md "AddMessages, sixth pass").
:func:`fetch_one_autocommitted` takes a connection from the same engine's pool (its
``checkout``/``checkin`` events still run: the idle ping of :mod:`episodic.store.db`, the
pool metrics of tracing) and runs one statement with psycopg in autocommit — one round
trip, committed (durable, with the server's ``synchronous_commit``) when it returns.

What watched SQLAlchemy's statements must watch these as well:

- **observers** (:func:`observing_statements`): called before every statement of every
  engine of the process — through SQLAlchemy (a ``before_cursor_execute`` listener on
  ``Engine``, installed while anyone observes) and through this module alike. The
  one-shard check (tests/test_one_shard.py) and the tests that count round trips use it;
- **tracing**: a CLIENT span shaped like OpenTelemetry's SQLAlchemy instrumentation's
  (:func:`episodic.telemetry.database_span`), when the engine is traced;
- **errors**: psycopg's errors are raised as SQLAlchemy's (``IntegrityError``,
  ``OperationalError``, …, parameters hidden), and a connection the error shows dead is
  invalidated in the pool, as SQLAlchemy does — so the call interceptor's mapping
  (a database outage answers UNAVAILABLE) and the callers' ``except`` clauses hold.

Statements are written in psycopg's format (``%(name)s``; :func:`driver_form` turns one
written for ``text()`` into it); the same text can run inside a SQLAlchemy transaction
with ``Connection.exec_driver_sql``.

:func:`fetch_all` is the read side's form: the rows of one statement sent on the psycopg
connection *under* a SQLAlchemy ``Connection`` a caller already holds (in its transaction,
or in autocommit), for a hot read whose other statements stay in SQLAlchemy — Recall's
opening and ranking statements (docs/benchmarks.md "Recall, sixth pass").
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.rows import dict_row
from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.exc import DBAPIError, StatementError

from episodic.telemetry import database_span

#: ``observer(statement, parameters, driver_connection)``: the statement as the driver
#: gets it, its parameters (an executemany's first row) and the psycopg connection it goes
#: out on (``autocommit`` tells how it commits).
StatementObserver = Callable[[str, Any, Any], None]

# Read on every statement without the lock: replaced, never mutated.
_observers: tuple[StatementObserver, ...] = ()
_lock = threading.Lock()


def _from_sqlalchemy(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
    if executemany and parameters:
        parameters = parameters[0]  # one row's values stand for the others
    driver = conn.connection.driver_connection
    for observer in _observers:
        observer(statement, parameters, driver)


@contextmanager
def observing_statements(observer: StatementObserver) -> Iterator[None]:
    """Calls ``observer`` before each statement any engine of this process sends, through
    SQLAlchemy or :func:`fetch_one_autocommitted`, while the block runs (observers are for
    tests and profiles: none is registered in a service, where the SQLAlchemy listener is
    then absent too)."""
    global _observers
    with _lock:
        if not _observers:
            event.listen(Engine, "before_cursor_execute", _from_sqlalchemy)
        _observers = (*_observers, observer)
    try:
        yield
    finally:
        with _lock:
            remaining = list(_observers)
            remaining.remove(observer)
            _observers = tuple(remaining)
            if not _observers:
                event.remove(Engine, "before_cursor_execute", _from_sqlalchemy)


def fetch_one_autocommitted(
    engine: Engine, statement: str, parameters: Mapping[str, Any]
) -> tuple[Any, ...] | None:
    """Runs ``statement`` (psycopg's ``%(name)s`` format; ``%(name)b`` binds a value in
    binary) in autocommit on a connection of ``engine``'s pool and returns its first row
    (None: no row), read in binary (no text to parse: ~10 µs less for a timestamp).
    Committed when it returns; one round trip once psycopg has prepared it on that
    connection (server-side, ``prepare=True``: parsed and planned once per connection)."""
    try:
        pooled = engine.raw_connection()
    except psycopg.Error as err:
        # No connection to be had (the database is down or restarting): SQLAlchemy's
        # Connection wraps this, the pool's raw checkout does not — and the call
        # interceptor answers SQLAlchemy's OperationalError UNAVAILABLE, psycopg's INTERNAL.
        raise _wrapped(engine, statement, parameters, err, gone=False) from err
    driver: psycopg.Connection[Any] = pooled.driver_connection  # type: ignore[assignment]
    try:
        # No transaction is open on a connection the pool hands out: no round trip.
        driver.autocommit = True
        for observer in _observers:
            observer(statement, parameters, driver)
        with database_span(engine, statement, driver) as span:
            try:
                cursor = driver.execute(statement, parameters, prepare=True, binary=True)  # type: ignore[arg-type]
                return cursor.fetchone()
            except psycopg.Error as err:
                span.failed(err)
                raise _as_sqlalchemy_error(engine, pooled, statement, parameters, err) from err
    finally:
        if not driver.closed:
            with suppress(psycopg.Error):  # a broken one is replaced at its next checkout
                driver.autocommit = False  # how the pool's other users expect it
        pooled.close()  # back to the pool (its reset sends nothing: no transaction is open)


def fetch_all(
    conn: Connection,
    statement: str,
    parameters: Mapping[str, Any],
    *,
    prepare: bool | None = None,
) -> list[dict[str, Any]]:
    """The rows of ``statement`` (psycopg's format), as dicts of column name to value,
    sent on the psycopg connection of ``conn`` — in the transaction ``conn`` has open, or
    in autocommit if it runs so — without SQLAlchemy's Core: no execution context, no
    result metadata, no row objects (~0.1–0.2 ms of CPU per statement). The values are
    those SQLAlchemy's psycopg dialect would give for a ``text()`` statement (it converts
    nothing there), read in binary. It goes out in PostgreSQL's own placeholders
    (:func:`numbered`); the observers, the span and the errors, as
    :func:`fetch_one_autocommitted`'s, see it as written. A connection the error shows
    dead is invalidated through ``conn`` (its next use reconnects). ``prepare``: psycopg's (None: prepared
    from its fifth run on the connection)."""
    sent = numbered(statement)
    pooled = conn.connection
    driver: psycopg.Connection[Any] = pooled.driver_connection  # type: ignore[assignment]
    for observer in _observers:
        observer(statement, parameters, driver)
    engine = conn.engine
    with database_span(engine, statement, driver) as span:
        try:
            cursor = psycopg.RawCursor(driver, row_factory=dict_row)
            cursor.execute(
                sent.sql,
                [parameters[name] for name in sent.names],
                prepare=prepare,
                binary=True,
            )
            return cursor.fetchall()
        except psycopg.Error as err:
            span.failed(err)
            gone = engine.dialect.is_disconnect(err, driver, None)  # type: ignore[arg-type]
            if gone:
                conn.invalidate(err)
            raise _wrapped(engine, statement, parameters, err, gone=gone) from err


def driver_form(sql: str) -> str:
    """``sql`` as SQLAlchemy's psycopg dialect compiles ``text(sql)`` (``:name`` becomes
    ``%(name)s``), for :meth:`~sqlalchemy.engine.Connection.exec_driver_sql`: a statement
    sent on every call then skips SQLAlchemy's per-call compilation and parameter
    processing (its events still fire, its errors are still wrapped)."""
    from sqlalchemy.dialects.postgresql import psycopg

    return str(text(sql).compile(dialect=psycopg.dialect()))


@dataclass(frozen=True)
class Numbered:
    """A statement in PostgreSQL's placeholders (``$1``, ``$2``, …) and the parameter name
    each number stands for."""

    sql: str
    names: tuple[str, ...]


_PLACEHOLDER = re.compile(r"%%|%\((\w+)\)s|%")


@lru_cache(maxsize=64)
def numbered(statement: str) -> Numbered:
    """``statement`` (psycopg's ``%(name)s`` format; ``%%`` a literal ``%``) with each name
    numbered in order of first appearance, made once per statement. psycopg parses a named
    statement on every execute unless it is at most 4 KB long (its cache's limit): ~0.25 ms
    of CPU for Recall's 10 KB ranking statement, against ~0.05 ms to send it numbered
    (psycopg's ``RawCursor``; docs/benchmarks.md "Recall, sixth pass"). Other placeholders
    (``%(name)b``, ``%s``) are refused."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        name = match.group(1)
        if name is None:
            raise ValueError(f"only %(name)s placeholders can be numbered: {statement[:80]!r}")
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return Numbered(_PLACEHOLDER.sub(number, statement), tuple(names))


def _wrapped(
    engine: Engine, statement: str, parameters: Any, err: psycopg.Error, *, gone: bool
) -> StatementError:
    """``err`` as SQLAlchemy raises it (``gone``: the connection was invalidated). The
    call interceptor answers SQLAlchemy's errors by kind (OperationalError: UNAVAILABLE);
    psycopg's own would be INTERNAL."""
    return DBAPIError.instance(
        statement,
        parameters,
        err,
        psycopg.Error,
        hide_parameters=True,  # people's messages: never in a log line
        connection_invalidated=gone,
        dialect=engine.dialect,
    )


def _as_sqlalchemy_error(
    engine: Engine, pooled: Any, statement: str, parameters: Any, err: psycopg.Error
) -> StatementError:
    """``err`` as SQLAlchemy would have raised it; a connection it shows dead is taken out
    of the pool first (the next checkout connects afresh)."""
    gone = engine.dialect.is_disconnect(err, pooled.driver_connection, None)  # type: ignore[arg-type]
    if gone:
        pooled.invalidate(err)
    return _wrapped(engine, statement, parameters, err, gone=gone)
