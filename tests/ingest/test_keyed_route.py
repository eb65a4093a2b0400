"""Idempotency keys on the routed path: a batch whose keys are all new, on a thread this
process wrote to, is ONE autocommitted statement (the Python SDK sends a key with every
message, so this is the path its calls take); anything else the statement cannot decide —
a key stored before, a key a concurrent call stores first, a key repeated in the batch —
falls back to the locked transaction, whose answers are the same as before the path
existed: a replay returns the stored message, a reused key with other content is refused,
and every key is stored exactly once with gap-free sequences."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import grpc
import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from episodic.config import IngestSettings
from episodic.errors import AlreadyExists, InvalidArgument
from episodic.services.ingest import domain
from episodic.store.raw_statement import observing_statements
from episodic.testing.keys import test_vault
from episodic.testing.processes import wait_until
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as pb
from episodic.v1 import ingest_service_pb2_grpc as g
from tests.ingest.helpers import new_thread

SETTINGS = IngestSettings()


def _keyed(*items: tuple[str, str | None]) -> list[domain.NewMessage]:
    """Messages from (content, idempotency key) pairs."""
    return [
        domain.NewMessage(role="user", content=c, metadata={"c": c}, idempotency_key=k)
        for c, k in items
    ]


@contextmanager
def _statements() -> Iterator[list[str]]:
    """How each statement this thread sent meanwhile went: ``autocommit`` (alone, one round
    trip) or ``in transaction``, with its first words (the hook sees every thread's)."""
    sent: list[str] = []
    mine = threading.get_ident()

    def record(statement, parameters, driver) -> None:  # type: ignore[no-untyped-def]
        if threading.get_ident() == mine:
            how = "autocommit" if driver.autocommit else "in transaction"
            sent.append(f"{how}: {statement[:40]}")

    with observing_statements(record):
        yield sent


def _routed_thread(engine: Engine, vault, routes, dataset: str) -> uuid.UUID:  # type: ignore[no-untyped-def]
    """A thread with one keyless message, written through ``routes`` (which now knows it)."""
    thread_id = new_thread(engine, vault, dataset)
    domain.write_messages(
        engine, vault, thread_id, _keyed(("first", None)), SETTINGS, routes=routes
    )
    assert routes.get(thread_id) is not None
    return thread_id


def _write(engine, vault, routes, thread_id, messages):  # type: ignore[no-untyped-def]
    domain.check_new_messages(messages, SETTINGS)
    return domain.write_messages(engine, vault, thread_id, messages, SETTINGS, routes=routes)


def _rows(engine: Engine, dataset: str, thread_id: uuid.UUID) -> tuple[int, list[tuple]]:  # type: ignore[type-arg]
    """The thread's counter and its stored (sequence, idempotency key, received_at) rows."""
    with engine.connect() as conn:
        last = conn.execute(
            text("SELECT last_sequence FROM threads WHERE dataset = :ds AND thread_id = :id"),
            {"ds": dataset, "id": thread_id},
        ).scalar_one()
        rows = conn.execute(
            text(
                "SELECT sequence, idempotency_key, received_at FROM messages "
                "WHERE dataset = :ds AND thread_id = :id ORDER BY sequence"
            ),
            {"ds": dataset, "id": thread_id},
        ).all()
    return last, [tuple(r) for r in rows]


def test_new_keys_on_a_known_thread_take_one_autocommitted_statement(engine: Engine) -> None:
    vault = test_vault(encrypt=True)
    routes = domain.ThreadRoutes()
    thread_id = _routed_thread(engine, vault, routes, "ds-keyed-new")

    with _statements() as one:
        single = _write(engine, vault, routes, thread_id, _keyed(("a", "auto:1")))
    with _statements() as many:
        batch = _write(
            engine, vault, routes, thread_id, _keyed(("b", "auto:2"), ("c", None), ("d", "auto:3"))
        )

    assert one == ["autocommit: WITH bumped AS (UPDATE threads SET last_"]
    assert many == ["autocommit: WITH bumped AS (UPDATE threads SET last_"]
    receipts = single.receipts + batch.receipts
    assert [(r.sequence, r.idempotency_key, r.stored) for r in receipts] == [
        (2, "auto:1", True),
        (3, "auto:2", True),
        (4, None, True),
        (5, "auto:3", True),
    ]
    last, rows = _rows(engine, "ds-keyed-new", thread_id)
    assert last == 5
    assert [(s, k) for s, k, _ in rows] == [
        (1, None),
        (2, "auto:1"),
        (3, "auto:2"),
        (4, None),
        (5, "auto:3"),
    ]
    assert [r.received_at for r in receipts] == [at for *_, at in rows[1:]]


def test_a_replayed_batch_answers_as_the_first_and_stores_nothing(engine: Engine) -> None:
    vault = test_vault(encrypt=True)
    routes = domain.ThreadRoutes()
    thread_id = _routed_thread(engine, vault, routes, "ds-keyed-replay")
    batch = _keyed(("a", "k1"), ("b", "k2"))
    first = _write(engine, vault, routes, thread_id, batch)

    with _statements() as sent:
        again = _write(engine, vault, routes, thread_id, _keyed(("a", "k1"), ("b", "k2")))

    # The routed statement found a stored key and wrote nothing; the transaction answered.
    assert [s.split(":", 1)[0] for s in sent] == ["autocommit", "in transaction", "in transaction"]
    assert [(r.sequence, r.stored) for r in first.receipts] == [(2, True), (3, True)]
    assert again.receipts == [
        domain.Receipt(r.sequence, r.idempotency_key, False, r.created_at, r.received_at)
        for r in first.receipts
    ]
    assert again.stored_count == 0
    last, rows = _rows(engine, "ds-keyed-replay", thread_id)
    assert last == 3 and [s for s, *_ in rows] == [1, 2, 3]
    # The transaction remembered the route again: the next new key is one statement.
    with _statements() as next_call:
        _write(engine, vault, routes, thread_id, _keyed(("c", "k3")))
    assert [s.split(":", 1)[0] for s in next_call] == ["autocommit"]


def test_a_partial_replay_answers_old_keys_as_stored_and_appends_the_new(engine: Engine) -> None:
    vault = test_vault(encrypt=False)
    routes = domain.ThreadRoutes()
    thread_id = _routed_thread(engine, vault, routes, "ds-keyed-partial")
    first = _write(engine, vault, routes, thread_id, _keyed(("a", "k1"), ("b", "k2")))

    mixed = _write(
        engine,
        vault,
        routes,
        thread_id,
        _keyed(("new", "k3"), ("b", "k2"), ("no key", None), ("a", "k1"), ("also new", "k4")),
    )

    old = {r.idempotency_key: r for r in first.receipts}
    assert [(r.sequence, r.idempotency_key, r.stored) for r in mixed.receipts] == [
        (4, "k3", True),
        (3, "k2", False),
        (5, None, True),
        (2, "k1", False),
        (6, "k4", True),
    ]
    assert mixed.receipts[1].received_at == old["k2"].received_at
    assert mixed.receipts[3].received_at == old["k1"].received_at
    assert mixed.stored_count == 3
    last, rows = _rows(engine, "ds-keyed-partial", thread_id)
    assert last == 6
    assert [(s, k) for s, k, _ in rows] == [
        (1, None),
        (2, "k1"),
        (3, "k2"),
        (4, "k3"),
        (5, None),
        (6, "k4"),
    ]


def test_a_reused_key_with_other_content_is_refused_and_nothing_is_stored(engine: Engine) -> None:
    vault = test_vault(encrypt=True)
    routes = domain.ThreadRoutes()
    thread_id = _routed_thread(engine, vault, routes, "ds-keyed-reused")
    _write(engine, vault, routes, thread_id, _keyed(("hello", "k1")))

    with pytest.raises(AlreadyExists) as refused:
        _write(engine, vault, routes, thread_id, _keyed(("fresh", "k2"), ("hello, edited", "k1")))

    assert refused.value.reason == "IDEMPOTENCY_KEY_REUSED"
    assert "'k1'" in refused.value.message and "messages[1]" in refused.value.message
    last, rows = _rows(engine, "ds-keyed-reused", thread_id)
    assert last == 2 and [(s, k) for s, k, _ in rows] == [(1, None), (2, "k1")]


def test_a_key_repeated_in_a_batch_goes_to_the_transaction(engine: Engine) -> None:
    vault = test_vault(encrypt=False)
    routes = domain.ThreadRoutes()
    thread_id = _routed_thread(engine, vault, routes, "ds-keyed-repeat")

    with _statements() as sent:
        same = _write(engine, vault, routes, thread_id, _keyed(("x", "k9"), ("x", "k9")))
    # Not the routed statement (its insert would trip the unique index on its own rows):
    # the lock, the key lookup and the insert in a transaction.
    assert [s.split(":", 1)[0] for s in sent] == ["in transaction"] * 3
    assert [(r.sequence, r.stored) for r in same.receipts] == [(2, True), (2, False)]
    with pytest.raises(InvalidArgument) as refused:
        _write(engine, vault, routes, thread_id, _keyed(("y", "k8"), ("z", "k8")))
    assert "messages[1] reuses the idempotency key 'k8' of messages[0]" in refused.value.message
    last, rows = _rows(engine, "ds-keyed-repeat", thread_id)
    assert last == 2 and [(s, k) for s, k, _ in rows] == [(1, None), (2, "k9")]


def test_a_key_stored_after_the_statement_began_is_a_replay_not_a_failure(
    engine: Engine,
) -> None:
    """The race the statement's own check cannot see: another writer holds the thread's
    lock with the same key inserted and commits while the routed statement waits for the
    lock. The statement's snapshot predates that key, so its INSERT meets it in the unique
    index and fails whole; the call falls back and answers the stored message."""
    vault = test_vault(encrypt=False)
    routes = domain.ThreadRoutes()
    dataset = "ds-keyed-race"
    thread_id = _routed_thread(engine, vault, routes, dataset)
    holder = engine.connect()
    transaction = holder.begin()
    held = domain.add_messages(holder, vault, thread_id, _keyed(("raced", "k1")), SETTINGS)
    outcome: dict[str, object] = {}

    def routed_call() -> None:
        try:
            with _statements() as sent:
                outcome["result"] = _write(
                    engine, vault, routes, thread_id, _keyed(("raced", "k1"))
                )
            outcome["sent"] = sent
        except BaseException as err:  # handed to the test's thread
            outcome["error"] = err

    caller = threading.Thread(target=routed_call)
    caller.start()
    try:
        # The routed statement is waiting for the thread's row lock (a new connection per
        # look: pg_stat_activity is a snapshot per transaction).
        def waiting() -> int:
            with engine.connect() as watcher:
                return watcher.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND query LIKE 'WITH bumped AS (UPDATE threads%'"
                    )
                ).scalar_one()

        wait_until(waiting, timeout=30, message="the routed statement never waited for the lock")
        transaction.commit()
    finally:
        holder.close()
        caller.join(timeout=60)
    assert "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    assert [s.split(":", 1)[0] for s in outcome["sent"]] == [  # type: ignore[union-attr]
        "autocommit",
        "in transaction",
        "in transaction",
    ]
    (receipt,) = result.receipts  # type: ignore[attr-defined]
    (stored,) = held.receipts
    assert (receipt.sequence, receipt.stored, receipt.received_at) == (
        stored.sequence,
        False,
        stored.received_at,
    )
    last, rows = _rows(engine, dataset, thread_id)
    assert last == 2 and [(s, k) for s, k, _ in rows] == [(1, None), (2, "k1")]


def test_concurrent_calls_with_the_same_keys_store_each_once(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    """Several client threads send the same keyed batch at once, round after round, to a
    real Ingest (on a thread it has routed): each key is stored once, every caller gets the
    same sequences, exactly one of them sees ``stored``, and the thread's sequences stay
    gap-free and in order."""
    service = spawn("ingest")
    channel = service.channel()
    stub = g.IngestServiceStub(channel)
    writers, rounds = 6, 15
    try:
        thread = stub.CreateThread(
            pb.CreateThreadRequest(dataset="ds-keyed-concurrent"), timeout=10
        )
        thread_id = thread.thread.thread_id
        stub.AddMessages(
            pb.AddMessagesRequest(
                thread_id=thread_id, messages=[pb.NewMessage(role=e.ROLE_USER, content="first")]
            ),
            timeout=10,
        )
        for round_ in range(rounds):
            request = pb.AddMessagesRequest(
                thread_id=thread_id,
                messages=[
                    pb.NewMessage(
                        role=e.ROLE_USER,
                        content=f"r{round_} m{i}",
                        idempotency_key=f"r{round_}:{i}",
                    )
                    for i in range(2)
                ],
            )
            start = threading.Barrier(writers)

            def send(_: int, request=request, start=start) -> pb.AddMessagesResponse:  # type: ignore[no-untyped-def]
                start.wait(timeout=30)
                return stub.AddMessages(request, timeout=30)

            with ThreadPoolExecutor(writers) as pool:
                answers = list(pool.map(send, range(writers)))
            expected = [2 + 2 * round_, 3 + 2 * round_]
            for answer in answers:
                assert [r.sequence for r in answer.receipts] == expected, round_
                assert [r.idempotency_key for r in answer.receipts] == [
                    f"r{round_}:0",
                    f"r{round_}:1",
                ]
            stored = [[r.stored for r in a.receipts] for a in answers]
            assert sorted(stored) == [[False, False]] * (writers - 1) + [[True, True]], round_
            assert sorted(a.stored_count for a in answers) == [0] * (writers - 1) + [2]
            received = {r.received_at.ToDatetime() for a in answers for r in a.receipts}
            assert len(received) == 1  # all answered from the one stored batch
    finally:
        channel.close()
    last, rows = _rows(engine, "ds-keyed-concurrent", uuid.UUID(thread_id))
    assert last == 1 + 2 * rounds
    assert [s for s, *_ in rows] == list(range(1, 2 + 2 * rounds))
    keys = [k for _, k, _ in rows[1:]]
    assert keys == [f"r{r}:{i}" for r in range(rounds) for i in range(2)]


def test_a_refused_reuse_through_the_service_is_already_exists(spawn) -> None:  # type: ignore[no-untyped-def]
    """The routed path's fallback keeps the answer gRPC callers get: ALREADY_EXISTS with
    the reason, not INTERNAL."""
    service = spawn("ingest")
    channel = service.channel()
    stub = g.IngestServiceStub(channel)
    try:
        thread_id = stub.CreateThread(
            pb.CreateThreadRequest(dataset="ds-keyed-grpc"), timeout=10
        ).thread.thread_id

        def add(content: str, key: str) -> pb.AddMessagesResponse:
            return stub.AddMessages(
                pb.AddMessagesRequest(
                    thread_id=thread_id,
                    messages=[
                        pb.NewMessage(role=e.ROLE_USER, content=content, idempotency_key=key)
                    ],
                ),
                timeout=10,
            )

        add("one", "k1")
        add("two", "k2")  # routed now
        with pytest.raises(grpc.RpcError) as err:
            add("two, edited", "k2")
        assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
        assert "'k2'" in err.value.details()
        replay = add("two", "k2")
        assert [(r.sequence, r.stored) for r in replay.receipts] == [(2, False)]
    finally:
        channel.close()
