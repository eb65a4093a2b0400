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

Locks are then taken group by group, each group's in the statement's own order; groups go
in a fixed order (by their smallest dataset name), so two replicas claiming overlapping
work still lock in one global order and cannot deadlock.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

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
    found = [row[0] for row in conn.execute(text(discover), dict(params or {}))]
    yield from shard_groups(conn, found)


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
