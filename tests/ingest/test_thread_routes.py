"""AddMessages on a thread this process wrote to before is one statement (the remembered
route: dataset and data key), sent in autocommit (one round trip: no BEGIN, no COMMIT); a
route that went stale writes nothing and the call falls back to the lookup in a
transaction, so the messages land sealed with the right key, in the right dataset, with
gap-free sequences; a statement that fails in autocommit leaves nothing behind."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from episodic.config import IngestSettings
from episodic.crypto import ClearKey
from episodic.errors import NotFound
from episodic.services.ingest import domain
from episodic.store.raw_statement import observing_statements
from episodic.testing.keys import test_vault
from tests.ingest.helpers import new_thread

SETTINGS = IngestSettings()


def _messages(*contents: str) -> list[domain.NewMessage]:
    return [
        domain.NewMessage(role="user", content=c, metadata={"n": i}) for i, c in enumerate(contents)
    ]


@contextmanager
def _statements(engine: Engine) -> Iterator[list[str]]:
    """The statements sent meanwhile, each prefixed with how: ``autocommit:`` (the driver
    commits it on its own, one round trip) or ``in transaction:``."""
    sent: list[str] = []

    def record(statement, parameters, driver) -> None:  # type: ignore[no-untyped-def]
        sent.append(("autocommit: " if driver.autocommit else "in transaction: ") + statement)

    # The process-wide hook: statements through SQLAlchemy and the routed one sent on the
    # pool's psycopg connection without it (episodic.store.raw_statement) alike.
    with observing_statements(record):
        yield sent


def _add(engine: Engine, vault, thread_id, routes, *contents: str, authorize=None):  # type: ignore[no-untyped-def]
    return domain.write_messages(
        engine,
        vault,
        thread_id,
        _messages(*contents),
        SETTINGS,
        routes=routes,
        authorize=authorize,
    )


def _stored(engine: Engine, vault, thread_id: uuid.UUID, dataset: str) -> list[tuple[int, str]]:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        page = domain.list_messages(
            conn, vault, thread_id, dataset=dataset, after_sequence=0, end_sequence=None, limit=100
        )
    return [(m["sequence"], m["content"]) for m in page.messages]


def test_a_remembered_thread_takes_one_statement_and_keeps_sequences_gap_free(
    engine: Engine,
) -> None:
    vault = test_vault(encrypt=True)
    routes = domain.ThreadRoutes()
    thread_id = new_thread(engine, vault, "ds-routes")

    with _statements(engine) as first:
        _add(engine, vault, thread_id, routes, "one", "two")
    with _statements(engine) as second:
        result = _add(engine, vault, thread_id, routes, "three", "four", "five")

    # The lookup (and lock), then the insert, in one transaction.
    assert [s.split(":", 1)[0] for s in first] == ["in transaction", "in transaction"]
    # The remembered route: the insert alone, committed by itself (one round trip).
    assert len(second) == 1 and second[0].startswith("autocommit: WITH bumped AS (UPDATE")
    assert [r.sequence for r in result.receipts] == [3, 4, 5]
    assert all(r.stored for r in result.receipts)
    assert _stored(engine, vault, thread_id, "ds-routes") == [
        (1, "one"),
        (2, "two"),
        (3, "three"),
        (4, "four"),
        (5, "five"),
    ]
    with engine.connect() as conn:
        last = conn.execute(
            text(
                "SELECT last_sequence FROM threads WHERE dataset = 'ds-routes' AND thread_id = :id"
            ),
            {"id": thread_id},
        ).scalar_one()
    assert last == 5


def test_a_route_with_another_key_writes_nothing_under_it_and_falls_back(engine: Engine) -> None:
    vault = test_vault(encrypt=True)
    routes = domain.ThreadRoutes()
    thread_id = new_thread(engine, vault, "ds-rekeyed")
    # As if the dataset had been erased and created again since: the remembered key is not
    # the dataset's current one (here: the clear form, which the check tells apart).
    routes.remember(thread_id, "ds-rekeyed", ClearKey("ds-rekeyed"))

    result = _add(engine, vault, thread_id, routes, "sealed properly")

    assert [r.sequence for r in result.receipts] == [1]
    assert _stored(engine, vault, thread_id, "ds-rekeyed") == [(1, "sealed properly")]
    with engine.connect() as conn:
        raw = conn.execute(
            text("SELECT content FROM messages WHERE dataset = 'ds-rekeyed' AND thread_id = :id"),
            {"id": thread_id},
        ).scalar_one()
    assert b"sealed properly" not in bytes(raw)  # sealed with the dataset's key, not clear
    route = routes.get(thread_id)
    assert route is not None and route[1].key_id is not None  # the lookup's key replaced it


def test_a_route_to_another_dataset_is_not_the_answer(engine: Engine) -> None:
    vault = test_vault(encrypt=False)
    routes = domain.ThreadRoutes()
    thread_id = new_thread(engine, vault, "ds-actual")
    routes.remember(thread_id, "ds-stale", ClearKey("ds-stale"))
    refused: list[str] = []

    def only_actual(dataset: str) -> None:
        if dataset != "ds-actual":
            refused.append(dataset)
            raise NotFound(f"thread {thread_id} not found")

    result = _add(engine, vault, thread_id, routes, "hello", authorize=only_actual)

    # The stale dataset's refusal was not the answer: the lookup found the thread's own.
    assert refused == ["ds-stale"]
    assert result.dataset == "ds-actual"
    assert _stored(engine, vault, thread_id, "ds-actual") == [(1, "hello")]
    with engine.connect() as conn:
        elsewhere = conn.execute(
            text("SELECT count(*) FROM messages WHERE dataset = 'ds-stale'")
        ).scalar_one()
    assert elsewhere == 0


def test_a_route_of_a_deleted_thread_is_not_found_and_forgotten(engine: Engine) -> None:
    vault = test_vault(encrypt=False)
    routes = domain.ThreadRoutes()
    thread_id = new_thread(engine, vault, "ds-gone")
    _add(engine, vault, thread_id, routes, "hello")
    with engine.begin() as conn:
        conn.execute(
            text("DELETE FROM threads WHERE dataset = 'ds-gone' AND thread_id = :id"),
            {"id": thread_id},
        )

    try:
        _add(engine, vault, thread_id, routes, "again")
    except NotFound:
        pass
    else:
        raise AssertionError("a deleted thread took a message")
    assert routes.get(thread_id) is None


def test_routes_are_bounded_least_recently_used_first_out() -> None:
    routes = domain.ThreadRoutes(capacity=2)
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    routes.remember(a, "ds", ClearKey("ds"))
    routes.remember(b, "ds", ClearKey("ds"))
    assert routes.get(a) is not None  # a is now the most recently used
    routes.remember(c, "ds", ClearKey("ds"))
    assert routes.get(b) is None
    assert routes.get(a) is not None and routes.get(c) is not None


def test_a_stale_route_in_autocommit_falls_back_to_a_transaction(engine: Engine) -> None:
    vault = test_vault(encrypt=True)
    routes = domain.ThreadRoutes()
    thread_id = new_thread(engine, vault, "ds-stale-ac")
    _add(engine, vault, thread_id, routes, "one")
    # As if the dataset had been erased and created again: the remembered key is stale.
    routes.remember(thread_id, "ds-stale-ac", ClearKey("ds-stale-ac"))

    with _statements(engine) as sent:
        result = _add(engine, vault, thread_id, routes, "two")

    # The routed statement matched nothing (alone, in autocommit); then the lookup and the
    # insert in a transaction.
    assert [s.split(":", 1)[0] for s in sent] == ["autocommit", "in transaction", "in transaction"]
    assert [r.sequence for r in result.receipts] == [2]
    assert _stored(engine, vault, thread_id, "ds-stale-ac") == [(1, "one"), (2, "two")]
    with engine.connect() as conn:
        last, raw = conn.execute(
            text(
                "SELECT t.last_sequence, m.content FROM threads t JOIN messages m "
                "ON m.dataset = t.dataset AND m.thread_id = t.thread_id AND m.sequence = 2 "
                "WHERE t.dataset = 'ds-stale-ac' AND t.thread_id = :id"
            ),
            {"id": thread_id},
        ).one()
    assert last == 2  # bumped once: the stale attempt bumped nothing
    assert b"two" not in bytes(raw)  # sealed with the dataset's key, not in the clear


def test_a_failed_statement_in_autocommit_leaves_nothing_behind(engine: Engine) -> None:
    vault = test_vault(encrypt=False)
    routes = domain.ThreadRoutes()
    thread_id = new_thread(engine, vault, "ds-failed-ac")
    _add(engine, vault, thread_id, routes, "one")
    # A row in the way of the next sequence (written around the counter): the routed
    # statement's INSERT fails after its UPDATE bumped the counter.
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO messages (dataset, thread_id, sequence, role, content, metadata, "
                "created_at) "
                "VALUES ('ds-failed-ac', :id, 2, 'user', '\\x00'::bytea, '\\x00'::bytea, now())"
            ),
            {"id": thread_id},
        )

    drivers = []

    def remember_driver(statement, parameters, driver) -> None:  # type: ignore[no-untyped-def]
        drivers.append(driver)

    with observing_statements(remember_driver), _statements(engine) as sent:
        try:
            _add(engine, vault, thread_id, routes, "two")
        except IntegrityError:  # psycopg's error, raised as SQLAlchemy's
            pass
        else:
            raise AssertionError("a duplicate sequence was accepted")

    assert len(sent) == 1 and sent[0].startswith("autocommit:")
    with engine.connect() as conn:
        last = conn.execute(
            text(
                "SELECT last_sequence FROM threads "
                "WHERE dataset = 'ds-failed-ac' AND thread_id = :id"
            ),
            {"id": thread_id},
        ).scalar_one()
        rows = conn.execute(
            text(
                "SELECT count(*) FROM messages WHERE dataset = 'ds-failed-ac' AND thread_id = :id"
            ),
            {"id": thread_id},
        ).scalar_one()
    assert (last, rows) == (1, 2)  # the counter's bump went with the failed insert
    # The connection that failed went back to the pool in transaction mode, usable.
    (used,) = drivers
    assert used.autocommit is False
    assert used.execute("SELECT 1").fetchone() == (1,)
    used.rollback()


def test_receipts_are_what_was_stored_on_either_path(engine: Engine) -> None:
    """The statement returns one row (the new last sequence and its now()), not each
    message: every receipt must still be exactly the stored row."""
    vault = test_vault(encrypt=True)
    routes = domain.ThreadRoutes()
    thread_id = new_thread(engine, vault, "ds-receipts")
    given = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)

    def batch(*contents: str) -> list[domain.NewMessage]:
        return [
            domain.NewMessage(
                role="user", content=c, metadata={}, created_at=given if i % 2 else None
            )
            for i, c in enumerate(contents)
        ]

    lookup = domain.write_messages(
        engine, vault, thread_id, batch("a", "b", "c"), SETTINGS, routes=routes
    )
    routed = domain.write_messages(
        engine, vault, thread_id, batch("d", "e"), SETTINGS, routes=routes
    )

    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT sequence, created_at, received_at FROM messages "
                "WHERE dataset = 'ds-receipts' AND thread_id = :id ORDER BY sequence"
            ),
            {"id": thread_id},
        ).all()
    receipts = lookup.receipts + routed.receipts
    assert [(r.sequence, r.created_at, r.received_at) for r in receipts] == [
        tuple(row) for row in rows
    ]
    assert [r.sequence for r in receipts] == [1, 2, 3, 4, 5]
    assert receipts[1].created_at == given and receipts[0].created_at != given
    assert all(r.stored and r.idempotency_key is None for r in receipts)
