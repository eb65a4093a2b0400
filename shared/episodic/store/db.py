"""Engine creation and schema checks shared by every service."""

from __future__ import annotations

import contextlib
import select
import time
from collections.abc import Callable, Mapping
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from sqlalchemy import Engine, create_engine, event, exc, text

from episodic.config import DatabaseSettings, to_sqlalchemy_url
from episodic.errors import SchemaMismatch

#: A pooled connection that sat idle longer than this is pinged before it is handed out
#: (a database restart or a network cut while it was idle is found then, not by the
#: caller's statement). A busy pool's connections are back within milliseconds and skip
#: the ping: SQLAlchemy's pool_pre_ping would add a round trip to every checkout, a
#: quarter of a one-message AddMessages.
PING_AFTER_IDLE_SECONDS = 1.0


def make_engine(
    url: str,
    *,
    pool_size: int = 10,
    application_name: str = "episodic",
    session_settings: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> Engine:
    """Creates the process's engine. ``url`` may be a plain libpq URL. Vectors travel as
    pgvector values: bind a numpy array where a statement expects a ``vector`` (or a list
    of them for ``vector[]``), and selected vectors come back as ``pgvector.Vector``.
    ``session_settings`` (PostgreSQL settings, e.g. ``lock_timeout``) are set on every
    new connection: :meth:`~episodic.config.DatabaseSettings.session_settings`."""
    engine = create_engine(
        to_sqlalchemy_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=kwargs.pop("pool_pre_ping", False),
        pool_recycle=1800,
        # Statement errors and logs never carry the parameters: they are people's messages.
        hide_parameters=True,
        connect_args={"application_name": application_name, **kwargs.pop("connect_args", {})},
        **kwargs,
    )
    event.listen(engine, "connect", _register_vector)
    if session_settings:
        event.listen(engine, "connect", _session_setter(dict(session_settings)))
    if not engine.pool._pre_ping:  # type: ignore[attr-defined]
        _ping_when_idle(engine)
    return engine


def _has_pending_input(dbapi_connection: Any) -> bool:
    """Whether the server sent something to an idle connection — without a round trip. A
    healthy idle connection has nothing to read; one the server closed (a restart's
    AdminShutdown, a terminated backend) has its farewell or EOF waiting, and is then
    pinged (and replaced) instead of failing the caller's first statement. A NOTIFY also
    makes it readable: that costs one ping, nothing more."""
    try:
        fd = dbapi_connection.fileno()
    except Exception:  # closed or broken: let the ping decide
        return True
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable)


def _ping_when_idle(engine: Engine) -> None:
    """Pings pooled connections at checkout when idle for more than PING_AFTER_IDLE_SECONDS
    or when the server sent them something meanwhile (``_has_pending_input``); a dead one
    is replaced (DisconnectionError makes the pool connect afresh)."""

    def checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    def checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.pop("idle_since", None)
        recently_used = (
            idle_since is not None and time.monotonic() - idle_since < PING_AFTER_IDLE_SECONDS
        )
        if idle_since is None or (recently_used and not _has_pending_input(dbapi_connection)):
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as err:
            raise exc.DisconnectionError("idle connection is gone") from err

    event.listen(engine, "checkin", checkin)
    event.listen(engine, "checkout", checkout)


#: Settings only newer servers know, by the ``server_version_num`` they need: set where
#: the server has them, skipped elsewhere (an unknown setting would fail the connection).
NEWER_SETTINGS = {"transaction_timeout": 170000}


def _session_setter(values: dict[str, str]) -> Callable[[Any, Any], None]:
    """Sets ``values`` on a new connection, in one round trip. A ``SET`` at connect rather
    than a startup option (``options=-c …``): PgBouncer refuses unknown startup options,
    and a ``SET`` works behind any pooler (in transaction mode it may not stick to the
    session, which costs only the bound, never the connection)."""
    names = list(values)
    statement = "SELECT " + ", ".join(
        f"CASE WHEN current_setting('server_version_num')::int >= {NEWER_SETTINGS[name]} "
        "THEN set_config(%s, %s, false) END"
        if name in NEWER_SETTINGS
        else "set_config(%s, %s, false)"
        for name in names
    )
    params = [item for name in names for item in (name, values[name])]

    def connect(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute(statement, params)
        if not dbapi_connection.autocommit:
            dbapi_connection.commit()

    return connect


def _register_vector(dbapi_connection: Any, _record: Any) -> None:
    # ProgrammingError: no vector type yet, a connection to a database not migrated so far
    # (migrations, test fixtures). Statements that need vectors are not run on it.
    with contextlib.suppress(psycopg.ProgrammingError):
        register_vector(dbapi_connection)


#: SQLSTATEs of a session PostgreSQL ended itself: it sat idle inside a transaction
#: (25P03, idle_in_transaction_session_timeout) or its transaction ran too long (25P04,
#: transaction_timeout) — a process that was frozen or cut off, now awake. psycopg raises
#: them as InternalError; the connection is gone and the work may be tried again.
SESSION_ENDED = frozenset({"25P03", "25P04"})


def is_database_outage(err: BaseException) -> bool:
    """Whether ``err`` means the database is down, restarting or unreachable, or ended this
    session (retry later; nobody's fault) rather than a statement that failed."""
    from sqlalchemy.exc import DisconnectionError, OperationalError

    return (
        isinstance(err, OperationalError | DisconnectionError | psycopg.OperationalError)
        or sqlstate(err) in SESSION_ENDED
        or citus_lost_a_node(err)
    )


#: What Citus says (SQLSTATE XX000, internal_error, with no code of its own) when a
#: connection of the transaction to a worker broke: a worker down or restarting, which the
#: coordinator reports like a bug. A connection it cannot open is 08006, an outage already.
#: The phrases, from Citus 14's sources:
#:
#: - remote_transaction.c: a connection the transaction needed broke;
#: - placement_connection.c: a shard's commit failed on its worker (a deferred constraint
#:   could say so too; the schema has none). Seen: CI (2026-12-07) had one INTERNAL among
#:   a killed worker's calls, and six writers committing on a worker SIGKILLed got this
#:   error once among ~300 failures (the rest 08006, 57P01 and 40P01: outages or lost
#:   races already);
#: - adaptive_executor.c: every placement of a task lost its connection;
#: - remote_commands.c ``ReportResultError``: a result libpq made itself, with no SQLSTATE,
#:   because the worker's connection went away mid-statement, is relayed as XX000 with
#:   libpq's own words (fe-misc.c, fe-secure.c, fe-exec.c).
CITUS_LOST_NODE = (
    "failure on connection marked as essential",
    "could not commit transaction for shard",
    "execution cannot recover from multiple connection failures",
    "server closed the connection unexpectedly",
    "connection to server was lost",
    "could not receive data from server",
    "could not send data to server",
    "no connection to the server",
    "lost synchronization with server",
    "SSL SYSCALL error",
    "SSL connection has been closed unexpectedly",
)


def citus_lost_a_node(err: BaseException) -> bool:
    """Whether ``err`` is Citus reporting a worker connection lost (:data:`CITUS_LOST_NODE`)
    as an internal error: a worker down or restarting, retryable, not a bug."""
    if sqlstate(err) != "XX000":
        return False
    message = str(getattr(err, "orig", err))
    return any(phrase in message for phrase in CITUS_LOST_NODE)


#: SQLSTATEs of a transaction that lost to another and may run again whole: deadlock
#: detected, serialisation failure.
RETRYABLE_TRANSACTION = frozenset({"40P01", "40001"})
#: …and of a statement that lost to another transaction in any way, a lock it could not
#: get (lock_timeout) included: the call did not take effect (gRPC ABORTED).
CONCURRENT_CHANGE = RETRYABLE_TRANSACTION | {"55P03"}
#: query_canceled: a statement_timeout (or a cancel) stopped the statement.
STATEMENT_CANCELLED = "57014"
#: SQLSTATEs of a statement that lost to another transaction or was cancelled by a
#: timeout: psycopg raises them as OperationalError, like an outage, but the database is
#: up and the work can simply be tried again.
LOCK_CONFLICTS = CONCURRENT_CHANGE | {STATEMENT_CANCELLED}


def sqlstate(err: BaseException) -> str | None:
    """The SQLSTATE of a database error (SQLAlchemy's or psycopg's), None for others."""
    return getattr(getattr(err, "orig", err), "sqlstate", None)


def is_lock_conflict(err: BaseException) -> bool:
    """Whether ``err`` is a statement that lost to another transaction
    (:data:`LOCK_CONFLICTS`), not the database going away."""
    return sqlstate(err) in LOCK_CONFLICTS


def engine_from_settings(
    settings: DatabaseSettings, application_name: str, *, background: bool = False
) -> Engine:
    return make_engine(
        settings.sqlalchemy_url(),
        pool_size=settings.db_pool_size,
        application_name=application_name,
        session_settings=settings.session_settings(background=background),
    )


def schema_embedding_dimension(engine: Engine) -> int | None:
    """The dimension of ``episodes.embedding`` as created by the migrations, or None."""
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT a.atttypmod FROM pg_attribute a "
                "WHERE a.attrelid = to_regclass('episodes') AND a.attname = 'embedding' "
                "AND NOT a.attisdropped"
            )
        ).first()
    return None if row is None else int(row[0])


def check_embedding_dimension(engine: Engine, provider_dimension: int) -> None:
    """Refuses to start when the provider's vectors would not fit the schema's column."""
    schema_dim = schema_embedding_dimension(engine)
    if schema_dim is None:
        raise SchemaMismatch("the database has no episodes table yet; run `episodic migrate` first")
    if schema_dim != provider_dimension:
        raise SchemaMismatch(
            f"the embedding provider produces {provider_dimension}-dimensional vectors but the "
            f"database stores {schema_dim}-dimensional ones. Either configure a provider of "
            f"dimension {schema_dim}, or create a new database with "
            f"EPISODIC_EMBEDDING_DIMENSION={provider_dimension}."
        )
