"""AddMessages' write path: gap-free sequences, idempotency keys, and the one-statement
route for a thread this process wrote to before.

:func:`write_messages` is the entry point (it takes the engine); :func:`add_messages` is the
locked transaction every write can fall back on, which answers replays and checks tool
results against the thread's calls; :class:`ThreadRoutes` remembers which dataset and key a
thread belongs to. The statements themselves are in :mod:`.statements`.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import IntegrityError

from episodic.config import IngestSettings
from episodic.crypto import DatasetKey
from episodic.errors import AlreadyExists, InvalidArgument
from episodic.store import owners
from episodic.store.distribution import across_datasets
from episodic.store.owners import thread_not_found
from episodic.store.raw_statement import fetch_one_autocommitted
from episodic.store.shards import distributed, engine_distributed, in_group
from episodic.store.vault import Vault, open_row
from episodic.tool_calls import from_payload

from .model import AddResult, NewMessage, Receipt, has_tool_parts
from .statements import STORED_KEYS, TWO_STEPS_OF, append_statement, run_two_steps


class ThreadRoutes:
    """Which dataset (and data key) each recently written thread belongs to, so the next
    AddMessages on it needs one statement instead of two (bounded, least recently used
    first out; thread-safe).

    A thread never changes dataset, and a dataset's key changes only when it is erased and
    created again; the statement that uses a route checks both (the thread row in that
    dataset, the dataset's current key id), so a stale route matches nothing and the call
    falls back to the lookup — it can cost a round trip, never a wrong write.
    """

    def __init__(self, capacity: int = 65_536) -> None:
        self.capacity = capacity
        self._routes: OrderedDict[uuid.UUID, tuple[str, DatasetKey]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, thread_id: uuid.UUID) -> tuple[str, DatasetKey] | None:
        with self._lock:
            route = self._routes.get(thread_id)
            if route is not None:
                self._routes.move_to_end(thread_id)
            return route

    def remember(self, thread_id: uuid.UUID, dataset: str, key: DatasetKey) -> None:
        with self._lock:
            self._routes[thread_id] = (dataset, key)
            self._routes.move_to_end(thread_id)
            while len(self._routes) > self.capacity:
                self._routes.popitem(last=False)

    def forget(self, thread_id: uuid.UUID) -> None:
        with self._lock:
            self._routes.pop(thread_id, None)


def write_messages(
    engine: Engine,
    vault: Vault,
    thread_id: uuid.UUID,
    messages: list[NewMessage],
    settings: IngestSettings,
    *,
    routes: ThreadRoutes,
    authorize: Callable[[str], object] | None = None,
) -> AddResult:
    """Stores a validated batch and returns once it is committed (durable: the services run
    with ``synchronous_commit`` on).

    A thread ``routes`` knows takes ONE round trip: its statement (:func:`_store` with the
    route check) runs in autocommit. One statement is atomic on its own — the counter bump
    and the inserts commit or fail together — so the explicit transaction only added
    ``BEGIN`` and ``COMMIT`` as round trips of their own (on Citus it is that transaction,
    with the write's two statements each routed to the shard: :class:`TwoSteps`). A stale
    route matches nothing and writes nothing; then, as for an unknown thread,
    :func:`add_messages` runs in a transaction (the lookup and lock, the replay check, the
    insert) and remembers the route.

    Idempotency keys (the Python SDK sends one with every message) take the same statement
    when every key is new, which it checks itself (:func:`_store_statement`, ``keyed``): a
    key already stored for the thread makes it write nothing, and a key stored by a
    concurrent call after the statement's snapshot violates the thread's unique index on
    its keys, which fails the whole statement (nothing written, the counter not bumped).
    Either way — and for a batch that repeats a key — the transaction decides, exactly as it
    did before this path existed: it answers a replay with the stored message, refuses a
    reused key with other content, and stores each key once under the thread's lock.
    """
    route = routes.get(thread_id)
    # Tool results are checked against the thread's calls under its lock: the transaction.
    if route is not None and not _repeats_a_key(messages) and not has_tool_parts(messages):
        dataset, data_key = route
        receipts: list[Receipt] = []
        if _allowed(authorize, dataset):
            statement, params = append_statement(
                data_key, dataset, thread_id, messages, check_route=True
            )
            try:
                if engine_distributed(engine):  # statements Citus routes to one shard each
                    with engine.begin() as conn:
                        bumped = run_two_steps(conn, TWO_STEPS_OF[statement], params)
                else:
                    # Without SQLAlchemy's Core (~0.15 ms of CPU a call), still observed and
                    # traced like every statement (episodic.store.raw_statement).
                    bumped = fetch_one_autocommitted(engine, statement, params)
            except IntegrityError as err:
                if not _is_key_conflict(err):
                    raise
                bumped = None  # a concurrent call stored one of the keys: a replay
            receipts = _receipts(bumped, messages)
        if receipts:
            return AddResult(receipts=receipts, stored_count=len(receipts), dataset=dataset)
        # Gone, or its dataset was erased and created again (the id may now name a thread
        # of another dataset), or a key was stored before: nothing was written; the lookup
        # decides (and remembers the route again when it holds).
        routes.forget(thread_id)
    with engine.begin() as conn:
        return add_messages(
            conn, vault, thread_id, messages, settings, authorize=authorize, routes=routes
        )


def add_messages(
    conn: Connection,
    vault: Vault,
    thread_id: uuid.UUID,
    messages: list[NewMessage],
    settings: IngestSettings,
    *,
    authorize: Callable[[str], object] | None = None,
    routes: ThreadRoutes | None = None,
) -> AddResult:
    """Appends messages with gap-free sequences, sealed with the dataset's key.

    The thread row is locked first (``FOR UPDATE``), which serialises writers of one thread:
    the counter bump and the inserts commit or roll back together, so sequences have no gaps
    or duplicates, and an idempotency key seen under the lock is seen exactly once. The
    same statement reads the dataset's current key, so a message is never sealed with the
    key of a dataset that was erased and created again, and the thread's dataset, handed to
    ``authorize`` (the servicer's access check, which raises to refuse) before anything is
    written: one round trip instead of a separate ownership query.

    Three round trips besides BEGIN/COMMIT at most, two without idempotency keys: the lock,
    (the replay lookup,) and one statement that bumps the counter and inserts the rows.
    ``routes`` then remembers the thread's dataset and key, so that the next
    :func:`write_messages` on it is one statement (see :class:`ThreadRoutes`).
    """
    # The routing lookup of AddMessages and its thread lock, in one statement. Citus locks
    # rows only in a statement routed to one shard: there the thread's dataset is looked
    # up first (unlocked; a thread never changes dataset; a thread this process created or
    # wrote to before is looked up on its own shard), and the lock names it.
    group: list[str] | None = None
    if distributed(conn):
        found = owners.find_thread(
            conn, thread_id, may_see=lambda dataset: _allowed(authorize, dataset)
        )
        if found is None:
            raise thread_not_found(thread_id)
        group = [found]
    statement, in_params = in_group(
        (
            ""
            if group
            else across_datasets("AddMessages' routing lookup by thread id, which locks the thread")
        )
        + "SELECT t.thread_id, t.dataset, d.key_id, d.master_key_id, d.wrapped_key "
        "FROM threads t JOIN datasets d ON d.dataset = t.dataset "
        "WHERE t.thread_id = :id AND IN_GROUP(t) AND IN_GROUP(d) FOR UPDATE OF t",
        group,
    )
    thread = conn.execute(text(statement), {"id": thread_id, **in_params}).mappings().first()
    if thread is None:
        raise thread_not_found(thread_id)
    if authorize is not None:
        authorize(thread["dataset"])
    data_key = vault.key_of(
        thread["dataset"], thread["key_id"], thread["master_key_id"], thread["wrapped_key"]
    )

    keys = [m.idempotency_key for m in messages if m.idempotency_key]
    existing: dict[str, dict[str, Any]] = {}
    if keys:
        for row in conn.execute(
            text(STORED_KEYS), {"dataset": thread["dataset"], "id": thread_id, "keys": keys}
        ).mappings():
            existing[row["idempotency_key"]] = open_row(data_key, row, "messages")

    # Which messages are new: a key already stored (or earlier in this batch) is a replay,
    # and a replay must be the same message, or the caller would silently lose its content.
    to_store: list[NewMessage] = []
    first_in_batch: dict[str, tuple[int, NewMessage]] = {}
    for i, msg in enumerate(messages):
        key = msg.idempotency_key
        if not key:
            to_store.append(msg)
        elif key in existing:
            _check_replay(msg, existing[key], i)
        elif key in first_in_batch:
            j, first = first_in_batch[key]
            if not _same_message(msg, first):
                raise InvalidArgument(
                    f"messages[{i}] reuses the idempotency key {key!r} of messages[{j}] with "
                    "different content; give each message its own key",
                    field=f"messages[{i}].idempotency_key",
                )
        else:
            first_in_batch[key] = (i, msg)
            to_store.append(msg)

    if has_tool_parts(to_store):
        _check_answers(conn, thread["dataset"], thread_id, messages, to_store)
    new: list[Receipt] = []
    if to_store:
        new = _store(conn, data_key, thread["dataset"], thread_id, to_store)
    if routes is not None:
        routes.remember(thread_id, thread["dataset"], data_key)
    owners.remember_thread(thread_id, thread["dataset"])

    # Receipts in request order: new messages in the order they were stored, replays with
    # the message stored first.
    stored = iter(new)
    by_key: dict[str, Receipt] = {k: _receipt(row, stored=False) for k, row in existing.items()}
    receipts: list[Receipt] = []
    for msg in messages:
        key = msg.idempotency_key
        if key and key in by_key:
            receipts.append(by_key[key])
            continue
        receipt = next(stored)
        if key:  # a later duplicate in this batch answers with this one, as a replay
            by_key[key] = replace(receipt, stored=False)
        receipts.append(receipt)
    return AddResult(receipts=receipts, stored_count=len(new), dataset=thread["dataset"])


def _check_answers(
    conn: Connection,
    dataset: str,
    thread_id: uuid.UUID,
    batch: list[NewMessage],
    to_store: list[NewMessage],
) -> None:
    """Each tool message must answer a call made before it: by a stored message of the
    thread (one probe of ``message_tool_calls``' key per id) or earlier in the batch. A tool
    message without a name takes the answered call's. Runs under the thread's lock."""
    asked = sorted({m.tool_call_id for m in to_store if m.tool_call_id})
    stored: dict[str, str] = {}
    if asked:
        stored = dict(
            (row[0], row[1])
            for row in conn.execute(
                text(
                    "SELECT DISTINCT ON (c.call_id) c.call_id, c.tool "
                    "FROM unnest(CAST(:ids AS text[])) AS k(id) CROSS JOIN LATERAL "
                    "(SELECT call_id, tool, sequence FROM message_tool_calls "
                    " WHERE dataset = :d AND thread_id = :t AND call_id = k.id "
                    " ORDER BY sequence DESC LIMIT 1) AS c ORDER BY c.call_id"
                ),
                {"ids": asked, "d": dataset, "t": thread_id},
            )
        )
    made: dict[str, str] = {}
    index = {id(m): i for i, m in enumerate(batch)}
    for msg in to_store:
        if msg.tool_call_id:
            tool = made.get(msg.tool_call_id) or stored.get(msg.tool_call_id)
            if tool is None:
                where = f"messages[{index[id(msg)]}].tool_call_id"
                raise InvalidArgument(
                    f"{where} {msg.tool_call_id!r} answers no call of this thread: send the "
                    "assistant message whose tool_calls holds that id first (or earlier in "
                    "the same batch)",
                    field=where,
                )
            if not msg.name:
                msg.name = tool
        for call in msg.tool_calls:
            made[call.id] = call.name


def _repeats_a_key(messages: list[NewMessage]) -> bool:
    """Whether two messages of the batch share an idempotency key (the transaction answers
    those: the second is a replay of the first, or refused when it differs)."""
    keys = [m.idempotency_key for m in messages if m.idempotency_key]
    return len(keys) != len(set(keys))


def _is_key_conflict(err: IntegrityError) -> bool:
    """Whether the routed statement failed on the thread's unique index of idempotency
    keys (``messages_idempotency_idx``; each partition's copy carries the column's name):
    a concurrent call stored one of the batch's keys first."""
    orig = err.orig
    diag = getattr(orig, "diag", None)
    # Citus passes a worker's error on without the constraint's name (remote_commands.c,
    # ReportResultError): its message names the index then ("… violates unique constraint
    # "messages_idempotency_idx_102008"").
    named = (getattr(diag, "constraint_name", None) or "") + (
        getattr(diag, "message_primary", None) or ""
    )
    return getattr(orig, "sqlstate", None) == "23505" and "idempotency" in named


def _allowed(authorize: Callable[[str], object] | None, dataset: str) -> bool:
    """Whether the caller may write to a remembered route's dataset. A refusal is not
    answered from the route: it may be stale, and the lookup path asks again about the
    thread's actual dataset (raising there is the answer)."""
    if authorize is None:
        return True
    try:
        authorize(dataset)
    except Exception:  # the check's own refusal, whatever its type
        return False
    return True


def _store(
    conn: Connection,
    data_key: DatasetKey,
    dataset: str,
    thread_id: uuid.UUID,
    messages: list[NewMessage],
) -> list[Receipt]:
    """Appends ``messages`` inside ``conn``'s transaction; their receipts, in request order
    (= sequence order)."""
    statement, params = append_statement(data_key, dataset, thread_id, messages, check_route=False)
    if distributed(conn):  # Citus: statements it routes to one shard each
        return _receipts(run_two_steps(conn, TWO_STEPS_OF[statement], params), messages)
    return _receipts(conn.exec_driver_sql(statement, params).first(), messages)


def _receipts(bumped: Any, messages: list[NewMessage]) -> list[Receipt]:
    """The receipts of the appended ``messages`` from the statement's one row (the new
    last sequence, its now()); empty when it returned none (nothing written)."""
    if bumped is None:
        return []
    last_sequence, received_at = bumped
    first = last_sequence - len(messages) + 1
    return [
        Receipt(
            sequence=first + i,
            idempotency_key=m.idempotency_key,
            stored=True,
            created_at=m.created_at or received_at,
            received_at=received_at,
        )
        for i, m in enumerate(messages)
    ]


def _receipt(row: Mapping[Any, Any], *, stored: bool) -> Receipt:
    return Receipt(
        sequence=row["sequence"],
        idempotency_key=row["idempotency_key"],
        stored=stored,
        created_at=row["created_at"],
        received_at=row["received_at"],
    )


def _same_message(new: NewMessage, old: NewMessage) -> bool:
    return (
        new.role,
        new.content,
        new.metadata,
        new.created_at,
        new.tool_calls,
        new.tool_call_id,
        new.name,
    ) == (
        old.role,
        old.content,
        old.metadata,
        old.created_at,
        old.tool_calls,
        old.tool_call_id,
        old.name,
    )


def _same_tool_parts(msg: NewMessage, stored: Mapping[str, Any]) -> bool:
    calls, name = from_payload(stored.get("tools"))
    # A tool result sent without its name took the answered call's when stored.
    return (
        msg.tool_calls == calls
        and (msg.tool_call_id or None) == stored.get("tool_call_id")
        and (not msg.name or msg.name == name)
    )


def _check_replay(msg: NewMessage, stored: Mapping[str, Any], index: int) -> None:
    """A retry must send the same message again: ALREADY_EXISTS (Stripe-style) when the key
    comes back with another role, content, metadata or client timestamp. Without a client
    timestamp the stored receive time stands."""
    same = (
        msg.role == stored["role"]
        and msg.content == stored["content"]
        and msg.metadata == (stored["metadata"] or {})
        and (msg.created_at is None or msg.created_at == stored["created_at"])
        and _same_tool_parts(msg, stored)
    )
    if not same:
        raise AlreadyExists(
            f"idempotency key {msg.idempotency_key!r} (messages[{index}]) was already used for "
            f"message {stored['sequence']} of this thread with different content; a retry "
            "must resend the same message, a new message needs a new key",
            field=f"messages[{index}].idempotency_key",
            reason="IDEMPOTENCY_KEY_REUSED",
            idempotency_key=str(msg.idempotency_key),
            sequence=str(stored["sequence"]),
        )
