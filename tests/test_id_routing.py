"""A request that names only a thread's or an episode's id finds its dataset on as few
shards as it can (``episodic.store.owners``): a key scoped to named datasets searches only
those, an id this process remembers is searched in its dataset, and only an unknown id of
an all-datasets key is searched everywhere. Each statement is EXPLAINed with the
parameters it was sent with: ``Task Count: 1`` on Citus (the tier ``make test-citus``),
one partition on one PostgreSQL. Another dataset's id must still answer NOT_FOUND, the
answer for an id that does not exist, by the path such an id takes."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine

from episodic import access
from episodic.errors import NotFound
from episodic.services.ingest import domain
from episodic.store import owners
from episodic.store.distribution import ACROSS_DATASETS
from episodic.store.events import NewEvent, record_event
from episodic.store.raw_statement import observing_statements
from episodic.testing.keys import test_vault

pytestmark = pytest.mark.citus

DATASETS = ["route-a", "route-b", "route-c"]
TABLES = ("threads", "episodes", "events")


def _key(*scopes: str) -> access.Principal:
    return access.Principal(prefix="ek_test", role=access.Role.ADMIN, datasets=scopes)


@contextmanager
def _sent() -> Iterator[list[tuple[str, Any]]]:
    """The statements on threads, episodes or events this process sends in the block."""
    seen: list[tuple[str, Any]] = []

    def observe(statement: str, parameters: Any, driver: Any) -> None:
        if re.search(r"\b(threads|episodes|events)\b", statement):
            seen.append((statement, parameters))

    with observing_statements(observe):
        yield seen


def _reach(db_url: str, statement: str, parameters: Any) -> int:
    """How many shards (Citus) or partitions of one table (one PostgreSQL) the statement's
    plan reaches."""
    with psycopg.connect(db_url, autocommit=True) as db:
        plan = "\n".join(r[0] for r in db.execute("EXPLAIN " + statement, parameters))
    counts = re.findall(r"Task Count: (\d+)", plan)
    if counts:
        return sum(int(n) for n in counts)
    return max(len(set(re.findall(rf"\b{t}_p\d+\b", plan))) for t in TABLES)


def _lookup(
    db_url: str, engine: Engine, principal: access.Principal, find: Any
) -> tuple[Any, list[int], list[bool]]:
    """Runs ``find(conn)`` as ``principal``: its answer (or the NotFound raised), and for
    each statement it sent, its reach and whether it is marked as crossing datasets."""
    with _sent() as seen, access.running_as(principal), engine.connect() as conn:
        try:
            answer: Any = find(conn)
        except NotFound as err:
            answer = err
    return (
        answer,
        [_reach(db_url, s, p) for s, p in seen],
        [ACROSS_DATASETS in s for s, _ in seen],
    )


@pytest.fixture
def made(engine: Engine) -> dict[str, tuple[uuid.UUID, uuid.UUID]]:
    """A thread and an event in each dataset, written straight through the domain."""
    vault = test_vault()
    out = {}
    with engine.begin() as conn:
        for dataset in DATASETS:
            row, _ = domain.find_or_create_thread(
                conn,
                vault,
                dataset=dataset,
                thread_id=None,
                label="",
                metadata_json="{}",
                idempotency_key=None,
            )
            event, _ = record_event(
                conn,
                vault,
                NewEvent(
                    dataset=dataset,
                    actor="agent",
                    event_type="note",
                    summary="a routed event",
                    entities=(),
                    occurred_at=None,
                ),
            )
            out[dataset] = (row["thread_id"], event["episode_id"])
    return out


# One database per test costs seconds on Citus (distribute.sql): the cases share two.


def test_a_key_of_named_datasets_looks_up_on_their_shards_only(db_url, engine, made) -> None:  # type: ignore[no-untyped-def]
    thread, event = made["route-a"]
    key = _key("route-a")
    owners.THREAD_ROUTES.forget(thread)
    answer, reach, marked = _lookup(db_url, engine, key, lambda c: owners.require_thread(c, thread))
    assert answer == "route-a"
    assert reach == [1] and marked == [False]

    answer, reach, _ = _lookup(db_url, engine, key, lambda c: owners.require_record(c, event))
    assert answer == ("route-a", "event")
    assert reach == [1]

    # Another dataset's id: NOT_FOUND, from a statement that read only the caller's shard.
    other, other_event = made["route-b"]
    answer, reach, _ = _lookup(db_url, engine, key, lambda c: owners.require_thread(c, other))
    assert isinstance(answer, NotFound) and str(other) in str(answer)
    assert reach == [1]
    answer, reach, _ = _lookup(db_url, engine, key, lambda c: owners.require_record(c, other_event))
    assert isinstance(answer, NotFound)
    assert reach == [1]

    # A key of two datasets searches those two, and says that it may reach both.
    thread, _ = made["route-c"]
    key = _key("route-a", "route-c")
    answer, reach, marked = _lookup(db_url, engine, key, lambda c: owners.require_thread(c, thread))
    assert answer == "route-c"
    assert marked == [True]
    assert 1 <= reach[0] <= 2


def test_an_all_datasets_key_searches_once_then_goes_to_the_shard(db_url, engine, made) -> None:  # type: ignore[no-untyped-def]
    thread, event = made["route-b"]
    owners.THREAD_ROUTES.forget(thread)
    owners.RECORD_ROUTES.forget(event)
    everyone = _key(access.ALL_DATASETS)

    # Unknown to this process: one search of every dataset, marked as such.
    answer, reach, marked = _lookup(
        db_url, engine, everyone, lambda c: owners.require_thread(c, thread)
    )
    assert answer == "route-b"
    assert marked == [True] and reach[0] > 1  # the test can tell a fan-out apart
    # Remembered: one statement on its dataset's shard.
    answer, reach, marked = _lookup(
        db_url, engine, everyone, lambda c: owners.require_thread(c, thread)
    )
    assert answer == "route-b"
    assert reach == [1] and marked == [False]

    _lookup(db_url, engine, everyone, lambda c: owners.require_record(c, event))
    answer, reach, _ = _lookup(db_url, engine, everyone, lambda c: owners.require_record(c, event))
    assert answer == ("route-b", "event")
    assert reach == [1]

    # A stale route (as after an erasure and the id's reuse elsewhere) costs a statement and
    # falls back to the search, which corrects it.
    thread, _ = made["route-c"]
    owners.THREAD_ROUTES.remember(thread, "route-a")
    answer, reach, marked = _lookup(
        db_url, engine, everyone, lambda c: owners.require_thread(c, thread)
    )
    assert answer == "route-c"
    assert marked == [False, True] and reach[0] == 1
    assert owners.THREAD_ROUTES.get(thread) == "route-c"

    # A prefix key cannot be searched by name, and a remembered route outside it is not
    # tried: another dataset's id takes the very path of an id that does not exist.
    thread, _ = made["route-a"]
    owners.remember_thread(thread, "route-a")
    missing = uuid.uuid4()
    tenant = _key("tenant/*")
    hidden = _lookup(db_url, engine, tenant, lambda c: owners.require_thread(c, thread))
    absent = _lookup(db_url, engine, tenant, lambda c: owners.require_thread(c, missing))
    assert isinstance(hidden[0], NotFound) and isinstance(absent[0], NotFound)
    assert str(hidden[0]).replace(str(thread), "ID") == str(absent[0]).replace(str(missing), "ID")
    assert hidden[1:] == absent[1:]  # the same statements, reaching as far
