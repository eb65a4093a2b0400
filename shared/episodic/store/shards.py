"""Statements that lock rows of several datasets, on one PostgreSQL and on Citus.

On one PostgreSQL a claim may lock rows of every dataset in one statement (``FOR UPDATE
SKIP LOCKED`` over the whole table). Citus refuses row locks in a statement that reaches
more than one shard ("could not run distributed query with FOR UPDATE/SHARE commands"), and
a data-modifying CTE must stay on one shard too. What Citus does route to one shard, locks
included, is a statement whose datasets all hash to the same shard:
``… WHERE x.dataset = ANY(:group)`` with every value of ``:group`` on that shard.

So every locking statement across datasets is written once, with ``IN_GROUP(alias)``
where its dataset filter goes (``… WHERE IN_GROUP(e) AND e.status = 'pending' …``), and run
through :func:`each_group` and :func:`in_group`:

- on one PostgreSQL, once, with no filter (``IN_GROUP(e)`` becomes ``TRUE``): the statement
  is what it always was;
- on Citus, once per shard that has work: an unlocked discovery statement (which may reach
  every shard: reads need no lock) names the datasets with work, :func:`shard_groups`
  splits them by shard, and the locking statement runs once per group, each routed to one
  shard.

A worker that is down fails a statement that reaches every shard, so the discovery
(:func:`read_every_shard`) is then asked of each worker that answers, over its own shards:
the datasets on the other workers keep their episodes while one is down (a standby takes
its place in production; until then its datasets wait, and nobody else's do).

Locks are then taken group by group, each group's in the statement's own order; groups go
in a fixed order (by their smallest dataset name), so two replicas claiming overlapping
work still lock in one global order and cannot deadlock.
"""

from __future__ import annotations

import json
import logging
import re
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import psycopg
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from episodic.store.db import citus_lost_a_node, sqlstate

log = logging.getLogger(__name__)

#: ``IN_GROUP(alias)`` in a statement: where its dataset filter goes.
IN_GROUP = re.compile(r"\bIN_GROUP\((\w+)\)")

_DISTRIBUTED: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()


def distributed(conn: Connection) -> bool:
    """Whether the store's dataset tables are distributed by Citus (``distribute.sql`` has
    run). Asked once per engine — distribution happens before the services start — on the
    driver's cursor: a catalog probe, not a statement of the caller's work (statement
    observers, such as the round-trip counts of the tests, do not see it)."""
    engine = conn.engine
    known = _DISTRIBUTED.get(engine)
    if known is None:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        cursor = raw.cursor()
        try:
            cursor.execute("SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL")
            row = cursor.fetchone()
            known = bool(row and row[0])
            if known:
                cursor.execute(
                    "SELECT EXISTS (SELECT 1 FROM pg_dist_partition "
                    "WHERE logicalrelid = to_regclass('public.threads'))"
                )
                row = cursor.fetchone()
                known = bool(row and row[0])
        finally:
            cursor.close()
        _DISTRIBUTED[engine] = known
    return known


def engine_distributed(engine: Engine) -> bool:
    """:func:`distributed` for a caller that holds no connection (a hot path that sends its
    statement on a pooled driver connection): the engine's cached answer, else one
    connection to ask."""
    known = _DISTRIBUTED.get(engine)
    if known is None:
        with engine.connect() as conn:
            known = distributed(conn)
    return known


def shard_groups(conn: Connection, datasets: Iterable[str]) -> list[list[str]]:
    """``datasets`` split into groups that each lie on one shard, in a fixed order (each
    group sorted, groups by their first name). On one PostgreSQL: one group."""
    names = sorted(set(datasets))
    if not names:
        return []
    if not distributed(conn):
        return [names]
    groups: dict[int, list[str]] = {}
    for name, shard in conn.execute(
        text(
            "SELECT d, get_shard_id_for_distribution_column('datasets', d) "
            "FROM unnest(CAST(:names AS text[])) d"
        ),
        {"names": names},
    ):
        groups.setdefault(int(shard), []).append(name)
    return sorted(groups.values(), key=lambda group: group[0])


def each_group(
    conn: Connection, discover: str, params: Mapping[str, Any] | None = None
) -> Iterator[list[str] | None]:
    """The groups a locking statement runs for: ``[None]`` on one PostgreSQL (run it once,
    across datasets); on Citus, the shard groups of the datasets ``discover`` (an unlocked
    statement returning one dataset name per row) finds. Pass each to :func:`in_group`."""
    if not distributed(conn):
        yield None
        return
    yield from shard_groups(conn, read_every_shard(conn, discover, params))


def read_every_shard(
    conn: Connection, statement: str, params: Mapping[str, Any] | None = None
) -> list[Any]:
    """The first column of an unlocked ``statement`` that reads every shard (a discovery:
    one dataset name per row). On one PostgreSQL, and on Citus while every worker answers,
    the statement itself. When a worker does not answer, the same statement is run on
    every worker that does, over its own shards (:func:`read_live_shards`): what the
    unreachable worker's shards hold is left out, and the caller goes on with the rest.

    The statement runs inside a savepoint on Citus, so that its failure leaves the caller's
    transaction usable (Citus rolls its remote transactions back to the savepoint)."""
    values = dict(params or {})
    if not distributed(conn):
        return [row[0] for row in conn.execute(text(statement), values)]
    try:
        with conn.begin_nested():
            return [row[0] for row in conn.execute(text(statement), values)]
    except DBAPIError as err:
        if not _worker_unreachable(err):
            raise
        _warn("a Citus worker did not answer; reading the others' shards: %s", err.orig)
    return read_live_shards(conn, statement, values)


#: When :func:`_warn` last logged: a worker down is met by every loop's every pass, and
#: one line a minute says it.
_WARNED_AT: dict[str, float] = {}
WARN_EVERY = 60.0


def _warn(message: str, *args: Any) -> None:
    now = time.monotonic()
    if now - _WARNED_AT.get(message, -WARN_EVERY) >= WARN_EVERY:
        _WARNED_AT[message] = now
        log.warning(message, *args)


def _worker_unreachable(err: BaseException) -> bool:
    """Whether ``err`` is Citus failing to reach a worker (08006 naming a remote node, or
    a transaction's connection to one broken), not the coordinator or the statement."""
    state = sqlstate(err)
    said = str(getattr(err, "orig", err))
    return bool(state and state.startswith("08") and "remote node" in said) or (
        citus_lost_a_node(err)
    )


#: ``FROM table`` / ``JOIN table`` in a statement: where a shard's name goes.
_TABLE_READ = re.compile(r"\b(FROM|JOIN)\s+([a-z_]+)\b")


def read_live_shards(conn: Connection, statement: str, params: Mapping[str, Any]) -> list[Any]:
    """``statement`` run by each worker over the shards it holds (through Citus's
    ``master_run_on_worker``, which reports a worker it cannot reach instead of failing):
    per worker, one statement, the union of ``statement`` on each of its shard groups,
    every table read replaced by that group's shard of it (the tables are colocated, so a
    group's shards of two tables hold the same datasets). The parameters are inlined as
    literals (a worker's command takes none). A limit in ``statement`` applies per shard."""
    dialect_sql = text(statement).compile(dialect=conn.dialect)
    raw = conn.connection.dbapi_connection
    assert isinstance(raw, psycopg.Connection)
    rendered = psycopg.ClientCursor(raw).mogrify(
        str(dialect_sql), {k: params.get(k) for k in dialect_sql.params}
    )
    tables = sorted({m.group(2) for m in _TABLE_READ.finditer(rendered)})
    placements = conn.execute(
        text(
            "SELECT p.nodename, p.nodeport, s.shardminvalue, "
            "s.logicalrelid::regclass::text AS table_name, "
            "shard_name(s.logicalrelid, s.shardid) AS shard "
            "FROM pg_dist_shard s JOIN pg_dist_shard_placement p USING (shardid) "
            "WHERE s.logicalrelid = ANY(CAST(:tables AS regclass[])) AND p.shardstate = 1 "
            "ORDER BY p.nodename, p.nodeport, s.shardminvalue"
        ),
        {"tables": tables},
    ).all()
    # node -> shard group (its hash range) -> table -> shard name
    nodes: dict[tuple[str, int], dict[str, dict[str, str]]] = {}
    for node, port, low, table, shard in placements:
        nodes.setdefault((node, port), {}).setdefault(low, {})[table] = shard
    commands = []
    for groups in nodes.values():
        parts = [
            f"SELECT * FROM ({_on_shards(rendered, shards)}) s{i}"
            for i, shards in enumerate(groups.values())
        ]
        commands.append(
            "SELECT coalesce(json_agg(v), '[]')::text FROM (" + " UNION ALL ".join(parts) + ") u(v)"
        )
    if not commands:
        return []
    found: list[Any] = []
    for node, port, success, result in conn.execute(
        text(
            "SELECT * FROM master_run_on_worker(CAST(:nodes AS text[]), "
            "CAST(:ports AS integer[]), CAST(:commands AS text[]), true)"
        ),
        {
            "nodes": [n for n, _ in nodes],
            "ports": [p for _, p in nodes],
            "commands": commands,
        },
    ):
        if success:
            found.extend(json.loads(result))
        else:
            _warn("Citus worker skipped: %s", f"{node}:{port}: {result}")
    return found


def _on_shards(statement: str, shards: Mapping[str, str]) -> str:
    """``statement`` reading ``shards`` (table -> its shard) instead of the tables."""
    return _TABLE_READ.sub(
        lambda m: f"{m.group(1)} {shards.get(m.group(2), m.group(2))}", statement
    )


def in_group(statement: str, group: list[str] | None) -> tuple[str, dict[str, Any]]:
    """``statement`` with each ``IN_GROUP(alias)`` made real for ``group`` (``TRUE`` for
    None: one PostgreSQL), and the parameters that go with it."""
    if group is None:
        return IN_GROUP.sub("TRUE", statement), {}
    return (
        IN_GROUP.sub(lambda m: f"{m.group(1)}.dataset = ANY(CAST(:group AS text[]))", statement),
        {"group": group},
    )


def run_in_groups(
    conn: Connection,
    statement: str,
    params: Mapping[str, Any],
    *,
    discover: str,
    limit: int | None = None,
) -> list[Any]:
    """Runs a locking ``statement`` (with ``IN_GROUP(alias)`` filters) for each group of
    :func:`each_group` and returns the rows of all runs (as mappings). With ``limit``, the
    statement's ``:limit`` is what is still wanted, and no group runs once it is reached.
    ``discover`` may use any of ``params``."""
    rows: list[Any] = []
    for group in each_group(conn, discover, _used(discover, params)):
        sql, extra = in_group(statement, group)
        wanted = dict(params, **extra)
        if limit is not None:
            wanted["limit"] = limit - len(rows)
        rows.extend(conn.execute(text(sql), wanted).mappings().all())
        if limit is not None and len(rows) >= limit:
            break
    return rows


def _used(statement: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if re.search(rf":{k}\b", statement)}
