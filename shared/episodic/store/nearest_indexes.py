"""A large dataset's own nearest-neighbour indexes (issue 50).

Recall's approximate path walks two HNSW indexes for a large dataset: the summaries'
(``episodes``) and the chunks' (``message_chunks``). Each is shared by every dataset of
its hash partition, and the walk keeps only its dataset's rows as it goes: where the
dataset is a small share of the partition, the walk visits several others' rows for each
of its own (pgvector's iterative scan goes on until it has found as many as asked). At
1M episodes a 100k dataset was 44 % of its partition's summaries and its walks took
59 / 52 ms, against 33 / 30 through indexes of its own, the call 155 against 128 ms
(docs/benchmarks-history.md "nearest indexes of its own").

So a dataset of more completed episodes than ``above``, and no more than
:data:`MOST_OF_ITS_PARTITION` of its partition's, gets, on its partitions, two
partial HNSW indexes of its own (``WHERE dataset = '…'``): the planner plans Recall's
walks for their parameters (they are never prepared) and takes the smaller index that
holds only the dataset's rows. Recall's statements do not change (it only counts which
indexes its walks read: :func:`has_own`); without them (not built yet, being built,
dropped), the walks use the shared indexes as before.

- :func:`plan` says what the maintenance should do: build the missing ones of the datasets
  above the threshold; drop those of datasets that shrank below half of it (or are
  gone), and any left invalid by a build that did not finish (a crash, a cancel:
  ``CREATE INDEX CONCURRENTLY`` leaves an index the planner ignores), to be built again.
- :func:`build` and :func:`drop` do it ``CONCURRENTLY``: writers are not blocked; one
  builder at a time (:func:`exclusive`), since an index being built is invalid too.

Derived data: the Scheduler's maintenance keeps them (services/scheduler/sweeper.py) and
``episodic reindex --nearest`` does the same by hand. The price is on the write side: each
episode and chunk of such a dataset is inserted into two HNSW indexes instead of one
(~30–50 ms more of the Summariser's database time per episode at 100k), and a build takes
minutes (both of a 100k dataset: ~6), so the Scheduler runs it in a thread of its own.

Not on Citus: a dataset's rows there are on one of 64 shards, where they are most of the
shard's index already.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import psycopg
from psycopg import sql as pgsql
from psycopg.rows import dict_row
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from episodic.store.distribution import across_datasets
from episodic.store.shards import distributed

__all__ = [
    "MOST_OF_ITS_PARTITION",
    "NEAREST_INDEX_PREFIX",
    "Change",
    "OwnIndex",
    "Plan",
    "build",
    "drop",
    "exclusive",
    "has_own",
    "index_names",
    "keep",
    "plan",
]

log = logging.getLogger(__name__)

#: What :func:`keep` did to an index.
Change = Literal["built", "dropped", "invalid dropped"]

#: Every own index's name begins so (the rest: which table, and a digest of the dataset).
NEAREST_INDEX_PREFIX = "nearest_own_"

#: The two walks' tables, each with the predicate its shared index has besides the dataset
#: (the summaries' walk reads completed episodes only).
_TABLES = {"episodes": " AND status = 'completed'", "message_chunks": ""}

#: How long a build may run (the chunks of 100k episodes: ~200 s on two cores).
_BUILD_CEILING_MS = 3 * 60 * 60 * 1000


def index_names(dataset: str) -> dict[str, str]:
    """The names of ``dataset``'s own indexes, by table (a digest: a dataset's name may be
    longer than an identifier, or hold anything)."""
    digest = hashlib.sha256(dataset.encode()).hexdigest()[:24]
    return {table: f"{NEAREST_INDEX_PREFIX}{table[0]}_{digest}" for table in _TABLES}


@dataclass(frozen=True)
class OwnIndex:
    """An own index as the catalog has it."""

    name: str
    dataset: str
    valid: bool


@dataclass
class Plan:
    """What :func:`plan` found."""

    #: datasets above the threshold missing an index of their own (or with an invalid one)
    build: list[str] = field(default_factory=list)
    #: own indexes to drop: invalid ones, and those of datasets below half the threshold
    drop: list[OwnIndex] = field(default_factory=list)
    #: datasets above the threshold whose own indexes are both there and valid
    built: list[str] = field(default_factory=list)


# The dataset is the index's comment (its predicate holds it too, as a literal).
_OWN_INDEXES = """
    SELECT i.relname AS name, obj_description(i.oid, 'pg_class') AS dataset,
           x.indisvalid AS valid
    FROM pg_class i JOIN pg_index x ON x.indexrelid = i.oid
    WHERE i.relkind = 'i' AND i.relname LIKE :prefix
    ORDER BY i.relname
"""

# The kept count of completed episodes (store/episode_counts.py): the maintenance keeps it
# for every dataset above the approximate path's threshold, which is below this one.
_SIZES = (
    across_datasets("the maintenance finds the datasets large enough for indexes of their own")
    + "SELECT dataset, completed FROM episode_counts WHERE completed > :floor"
)


def plan(conn: Connection, *, above: int) -> Plan:
    """What to build and drop for datasets of more than ``above`` completed episodes (0:
    none get their own; every own index is dropped). Nothing on Citus."""
    if distributed(conn):
        return Plan()
    own = [
        OwnIndex(r.name, r.dataset or "", bool(r.valid))
        for r in conn.execute(text(_OWN_INDEXES), {"prefix": NEAREST_INDEX_PREFIX + "%"})
    ]
    sizes = {
        r.dataset: int(r.completed)
        for r in conn.execute(text(_SIZES), {"floor": above // 2 if above else None})
    }
    keep = {d for d, n in sizes.items() if above and n > above // 2}
    result = Plan(drop=[i for i in own if not i.valid or i.dataset not in keep])
    complete = _complete(i for i in own if i not in result.drop)
    for dataset in sorted(d for d, n in sizes.items() if above and n > above):
        if dataset in complete:
            result.built.append(dataset)
        elif _share_of_partition(conn, dataset, sizes[dataset]) <= MOST_OF_ITS_PARTITION:
            result.build.append(dataset)
    return result


def _complete(own: Iterable[OwnIndex]) -> set[str]:
    """The datasets that have both their own indexes, valid, among ``own``."""
    valid: dict[str, set[str]] = {}
    for index in own:
        if index.valid and index.dataset:
            valid.setdefault(index.dataset, set()).add(index.name)
    return {d for d, names in valid.items() if names >= set(index_names(d).values())}


def keep(
    engine: Engine,
    *,
    above: int,
    memory: str,
    changed: Callable[[Change, str, str], None],
    stopping: Callable[[], bool] = lambda: False,
) -> Plan:
    """Does what :func:`plan` says, as the one builder (the caller holds
    :func:`exclusive`): drops, then builds, one dataset at a time until ``stopping``;
    ``changed(change, index name, dataset)`` after each ("built", "dropped", "invalid
    dropped"). The plan it followed."""
    with engine.connect() as conn:
        todo = plan(conn, above=above)
    for index in todo.drop:
        drop(engine, index)
        changed("dropped" if index.valid else "invalid dropped", index.name, index.dataset)
    for dataset in todo.build:
        if stopping():
            break
        for name in build(engine, dataset, memory=memory):
            changed("built", name, dataset)
    return todo


#: A dataset of more than this share of its partition's episodes gets no index of its own:
#: its walks pass over few other rows in the shared one (a 100k dataset that was 98 % of
#: its partition walked 15 / 19 ms there, as through its own), and its writes would pay a
#: second HNSW insert for nothing. Its partition's statistics tell (never analysed: built).
MOST_OF_ITS_PARTITION = 0.8


def _share_of_partition(conn: Connection, dataset: str, completed: int) -> float:
    """``dataset``'s share of the episodes of the partition that holds them, as the
    planner's statistics count them (0 when they have never been counted)."""
    rows = conn.execute(
        text(
            "SELECT c.reltuples FROM (SELECT tableoid FROM episodes WHERE dataset = :d "
            "LIMIT 1) t JOIN pg_class c ON c.oid = t.tableoid"
        ),
        {"d": dataset},
    ).scalar()
    return completed / float(rows) if rows and rows > 0 else 0.0


#: The session-level advisory lock that one builder holds while it drops and builds: an
#: index being built is invalid until it is done, and must not be taken for one a crash
#: left (plan's drop) by a second builder (another Scheduler replica, ``reindex
#: --nearest``).
_BUILDER = "hashtextextended('episodic:nearest_indexes', 0)"


@contextmanager
def exclusive(engine: Engine, *, wait: bool = False) -> Iterator[bool]:
    """Whether this caller is the one builder (``wait``: until it is): held on a
    connection of its own, idle, for as long as the block runs (a session's advisory lock
    holds no transaction open, so the builds do not wait for it); released when the block
    ends or the process dies."""
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        if wait:
            conn.execute(text(f"SELECT pg_advisory_lock({_BUILDER})"))
            mine = True
        else:
            mine = bool(conn.execute(text(f"SELECT pg_try_advisory_lock({_BUILDER})")).scalar())
        try:
            yield mine
        finally:
            if mine:
                conn.execute(text(f"SELECT pg_advisory_unlock({_BUILDER})"))


def build(engine: Engine, dataset: str, *, memory: str = "1GB") -> list[str]:
    """Builds ``dataset``'s missing own indexes, one at a time, on the partitions that
    hold its rows, without blocking its writers (``CREATE INDEX CONCURRENTLY``, which runs
    outside a transaction); ``memory``: the build's ``maintenance_work_mem`` (an HNSW
    index built in less than it needs is written page by page, many times slower). The
    names built."""
    built = []
    names = index_names(dataset)
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        # For this session only: reset before the connection goes back to the pool.
        conn.execute(text("SELECT set_config('maintenance_work_mem', :m, false)"), {"m": memory})
        conn.execute(
            text("SELECT set_config('statement_timeout', :t, false)"),
            {"t": str(_BUILD_CEILING_MS)},
        )
        try:
            for table, predicate in _TABLES.items():
                name = names[table]
                if conn.execute(
                    text("SELECT to_regclass(:n) IS NOT NULL"), {"n": name}
                ).scalar_one():
                    continue  # there (an invalid one is dropped by plan's drop first)
                partition = _partition_of(conn, table, dataset)
                if partition is None:
                    continue  # no row yet
                statement = pgsql.SQL(
                    "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {partition} "
                    "USING hnsw (embedding vector_cosine_ops) WHERE dataset = {dataset}" + predicate
                ).format(
                    name=pgsql.Identifier(name),
                    partition=pgsql.Identifier(*partition),
                    dataset=pgsql.Literal(dataset),
                )
                _run(conn, statement)
                _run(
                    conn,
                    pgsql.SQL("COMMENT ON INDEX {name} IS {dataset}").format(
                        name=pgsql.Identifier(name), dataset=pgsql.Literal(dataset)
                    ),
                )
                built.append(name)
                log.info("built %s, the nearest index of a large dataset on %s", name, partition)
        finally:
            conn.exec_driver_sql("RESET maintenance_work_mem")
            conn.exec_driver_sql("RESET statement_timeout")
    return built


def drop(engine: Engine, index: OwnIndex) -> None:
    """Drops an own index without blocking its table's writers."""
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        _run(
            conn,
            pgsql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {name}").format(
                name=pgsql.Identifier(index.name)
            ),
        )


def _run(conn: Connection, statement: pgsql.Composed) -> None:
    """``statement`` on ``conn``'s psycopg connection (autocommit: CONCURRENTLY runs
    outside a transaction), composed by psycopg: the dataset as a literal, whatever it
    holds (SQLAlchemy's ``text`` would read a colon in it as a parameter)."""
    driver: psycopg.Connection[Any] = conn.connection.driver_connection  # type: ignore[assignment]
    driver.execute(statement)


def _partition_of(conn: Connection, table: str, dataset: str) -> tuple[str, str] | None:
    """The (schema, name) of the leaf table of ``table`` that holds ``dataset``'s rows (the
    table itself when it is not partitioned); None when it has none yet."""
    row = conn.execute(
        text(
            f"SELECT n.nspname AS schema, c.relname AS name FROM (SELECT tableoid FROM {table} "
            "WHERE dataset = :d LIMIT 1) t JOIN pg_class c ON c.oid = t.tableoid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace"
        ),
        {"d": dataset},
    ).first()
    return None if row is None else (row.schema, row.name)


#: How long Recall trusts what it read of the catalog (:func:`has_own`).
_KNOWN_FOR = 60.0

_known: tuple[float, frozenset[str]] | None = None
_known_lock = threading.Lock()


def has_own(conn: Connection, dataset: str) -> bool:
    """Whether ``dataset``'s walks have both their own indexes, valid (Recall's metric of
    which index its walks read): the catalog read at most once a minute per process."""
    global _known
    if distributed(conn):  # none there (plan)
        return False
    now = time.monotonic()
    with _known_lock:
        known = _known
    if known is None or now - known[0] > _KNOWN_FOR:
        # On the driver's cursor: a catalog probe, not a statement of the call's work
        # (statement observers, such as the tests' counts of a call's statements, do not
        # see it).
        driver: psycopg.Connection[Any] = conn.connection.driver_connection  # type: ignore[assignment]
        with driver.cursor(row_factory=dict_row) as cursor:
            rows = cursor.execute(
                _OWN_INDEXES.replace(":prefix", "%(prefix)s"),
                {"prefix": NEAREST_INDEX_PREFIX + "%"},
            ).fetchall()
        own = (OwnIndex(r["name"], r["dataset"] or "", bool(r["valid"])) for r in rows)
        known = (now, frozenset(_complete(own)))
        with _known_lock:
            _known = known
    return dataset in known[1]
