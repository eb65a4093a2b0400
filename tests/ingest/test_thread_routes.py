"""AddMessages on a thread this process wrote to before is one statement (the remembered
route: dataset and data key); a route that went stale writes nothing and the call falls
back to the lookup, so the messages land sealed with the right key, in the right dataset,
with gap-free sequences."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import event, text
from sqlalchemy.engine import Engine

from episodic.config import IngestSettings
from episodic.crypto import ClearKey
from episodic.errors import NotFound
from episodic.services.ingest import domain
from episodic.testing.keys import test_vault

SETTINGS = IngestSettings()


def _messages(*contents: str) -> list[domain.NewMessage]:
    return [
        domain.NewMessage(role="user", content=c, metadata={"n": i}) for i, c in enumerate(contents)
    ]


@contextmanager
def _statements(engine: Engine) -> Iterator[list[str]]:
    sent: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _new_thread(engine: Engine, vault, dataset: str) -> uuid.UUID:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        row = domain.create_thread(
            conn, vault, dataset=dataset, thread_id=None, label="", metadata_json="{}"
        )
    return row["thread_id"]


def _add(engine: Engine, vault, thread_id, routes, *contents: str, authorize=None):  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        return domain.add_messages(
            conn,
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
    thread_id = _new_thread(engine, vault, "ds-routes")

    with _statements(engine) as first:
        _add(engine, vault, thread_id, routes, "one", "two")
    with _statements(engine) as second:
        result = _add(engine, vault, thread_id, routes, "three", "four", "five")

    assert len(first) == 2  # the lookup (and lock), then the insert
    assert len(second) == 1  # the remembered route: the insert alone
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
    thread_id = _new_thread(engine, vault, "ds-rekeyed")
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
    thread_id = _new_thread(engine, vault, "ds-actual")
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
    thread_id = _new_thread(engine, vault, "ds-gone")
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
