"""Threads and messages: the write path's rules, free of gRPC.

Every function takes an open SQLAlchemy connection inside a transaction; committing is the
caller's job, so an accepted message is durable exactly when the caller's commit returns.
The one exception is :func:`write_messages`, AddMessages' entry point, which takes the
engine: it chooses between one autocommitted statement (a thread it knows) and a
transaction (everything else). On a Citus store the known thread's write is two statements
in a transaction instead (:class:`TwoSteps`).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import IntegrityError

from episodic.config import IngestSettings
from episodic.crypto import DatasetKey, json_text
from episodic.errors import AlreadyExists, InvalidArgument
from episodic.store import owners
from episodic.store.distribution import across_datasets
from episodic.store.owners import thread_not_found
from episodic.store.raw_statement import fetch_one_autocommitted
from episodic.store.shards import distributed, engine_distributed, in_group
from episodic.store.vault import Vault, open_row
from episodic.tool_calls import (
    MAX_TOOL_CALLS,
    ToolCall,
    check_arguments,
    check_call_id,
    check_tool_name,
    from_payload,
    payload,
)
from episodic.validation import check_text

ROLES = ("system", "user", "assistant", "tool")
MAX_LABEL_CHARS = 200
MAX_IDEMPOTENCY_KEY_CHARS = 128
#: Most bytes of content and metadata in one page of ListMessages.
MAX_PAGE_BYTES = 3 * 1024 * 1024


# NewMessage and Receipt: one of each per message of every batch. Slotted, not frozen: a
# frozen dataclass's __init__ sets each field through object.__setattr__ (2.9 against
# 0.6 µs a message, hot loop; several times that inside a call). Treat them as values all
# the same: only check_new_messages sets a field after construction (metadata_json).


@dataclass(slots=True)
class NewMessage:
    """A message as the client sent it, already decoded from protobuf."""

    role: str
    content: str
    metadata: dict[str, Any]
    created_at: datetime | None = None
    idempotency_key: str | None = None
    # OpenAI's tool parts: an assistant's calls; a tool result's answered call and tool.
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    # The metadata as the JSON text that is sealed, set by check_new_messages: encoding it
    # there (for its size) and again to seal it cost ~4 µs a message, ~8 % of a batch's CPU.
    metadata_json: str | None = field(default=None, compare=False, repr=False)


@dataclass(slots=True)
class Receipt:
    """Where one message of a request was stored."""

    sequence: int
    idempotency_key: str | None
    stored: bool  # False: a replay of an idempotency key stored earlier
    created_at: datetime
    received_at: datetime


@dataclass(frozen=True)
class MessagesPage:
    thread: dict[str, Any]
    messages: list[dict[str, Any]]
    more: bool


@dataclass(frozen=True)
class AddResult:
    receipts: list[Receipt]  # in request order
    stored_count: int
    dataset: str


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


#: The metadata's JSON form, compact and as written (no ASCII escapes), NaN refused. Made
#: once: ``json.dumps`` with options builds an encoder per call, ~1.5 of its 3.5 µs for a
#: message's metadata (bench/ingest_parts.py: every message of a batch pays it).
_METADATA_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def check_metadata(metadata: dict[str, Any], field: str, settings: IngestSettings) -> str:
    """Returns the metadata as JSON text, refusing what PostgreSQL's jsonb cannot hold
    (NUL characters, NaN and infinities)."""
    try:
        encoded = _METADATA_JSON.encode(metadata)
    except ValueError:
        encoded = None
    # JSON escapes every NUL, in keys and values, as \u0000: text without that sequence
    # holds none, and the walk over the values (~1.5 µs a message, docs/benchmarks-history.md
    # "AddMessages, sixth pass") is needed only when it appears (it may be an escaped backslash's).
    if (encoded is None or "\\u0000" in encoded) and _has_nul(metadata):
        raise InvalidArgument(
            f"{field} contains a NUL character, which cannot be stored", field=field
        )
    if encoded is None:
        raise InvalidArgument(
            f"{field} contains NaN or an infinity, which JSON cannot hold", field=field
        )
    size = len(encoded.encode())
    if size > settings.max_metadata_bytes:
        raise InvalidArgument(
            f"{field} is {size} bytes of JSON; the limit is {settings.max_metadata_bytes} "
            "(EPISODIC_MAX_METADATA_BYTES)",
            field=field,
        )
    return encoded


def check_label(label: str) -> str:
    if len(label) > MAX_LABEL_CHARS:
        raise InvalidArgument(
            f"label is {len(label)} characters; the limit is {MAX_LABEL_CHARS}", field="label"
        )
    check_text(label, "label")
    return label


def check_new_messages(
    messages: list[NewMessage], settings: IngestSettings, now: datetime | None = None
) -> None:
    """Validates a whole batch before anything is written (no half-stored batches)."""
    if not messages:
        raise InvalidArgument("messages is empty; send at least one message", field="messages")
    if len(messages) > settings.max_batch_messages:
        raise InvalidArgument(
            f"{len(messages)} messages in one call; the limit is {settings.max_batch_messages} "
            "(EPISODIC_MAX_BATCH_MESSAGES): split the batch",
            field="messages",
        )
    latest_allowed = (now or datetime.now(UTC)) + settings.future_timestamp_tolerance
    batch_bytes = 0
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if msg.role not in ROLES:
            raise InvalidArgument(
                f"{where}.role is not set or unknown; use one of system, user, assistant, tool",
                field=f"{where}.role",
            )
        tool_bytes = _check_tool_parts(msg, where)
        # An assistant's turn may be its calls alone, a tool's result may be empty.
        if not msg.content.strip() and not msg.tool_calls and msg.role != "tool":
            raise InvalidArgument(f"{where}.content is empty", field=f"{where}.content")
        size = len(msg.content.encode()) + tool_bytes
        if size > settings.max_message_bytes:
            raise InvalidArgument(
                f"{where}.content is {size} bytes; the limit is {settings.max_message_bytes} "
                "(EPISODIC_MAX_MESSAGE_BYTES): split long content into several messages",
                field=f"{where}.content",
            )
        check_text(msg.content, f"{where}.content")
        encoded = check_metadata(msg.metadata, f"{where}.metadata", settings)
        # What _store seals: the metadata's checked form.
        msg.metadata_json = encoded
        batch_bytes += size + len(encoded)
        if batch_bytes > settings.max_batch_bytes:
            raise InvalidArgument(
                f"the batch holds more than {settings.max_batch_bytes} bytes of content and "
                f"metadata by {where} (EPISODIC_MAX_BATCH_BYTES): split it into several calls",
                field="messages",
            )
        if msg.created_at is not None and msg.created_at > latest_allowed:
            raise InvalidArgument(
                f"{where}.created_at {msg.created_at.isoformat()} is in the future (more than "
                f"{settings.future_timestamp_tolerance} ahead of the server clock)",
                field=f"{where}.created_at",
            )
        if msg.idempotency_key is not None:
            if len(msg.idempotency_key) > MAX_IDEMPOTENCY_KEY_CHARS:
                raise InvalidArgument(
                    f"{where}.idempotency_key is longer than {MAX_IDEMPOTENCY_KEY_CHARS} characters",
                    field=f"{where}.idempotency_key",
                )
            check_text(msg.idempotency_key, f"{where}.idempotency_key")


def _check_tool_parts(msg: NewMessage, where: str) -> int:
    """Checks a message's tool parts (OpenAI's chat format); returns their size in bytes,
    which counts against the message's limit like content."""
    size = 0
    if msg.tool_calls:
        if msg.role != "assistant":
            raise InvalidArgument(
                f"{where}.tool_calls is set on a {msg.role} message; only an assistant "
                "message calls tools",
                field=f"{where}.tool_calls",
            )
        if len(msg.tool_calls) > MAX_TOOL_CALLS:
            raise InvalidArgument(
                f"{where}.tool_calls holds {len(msg.tool_calls)} calls; the limit is "
                f"{MAX_TOOL_CALLS}",
                field=f"{where}.tool_calls",
            )
        seen: set[str] = set()
        checked = []
        for j, call in enumerate(msg.tool_calls):
            at = f"{where}.tool_calls[{j}]"
            check_call_id(call.id, f"{at}.id")
            if call.id in seen:
                raise InvalidArgument(
                    f"{at}.id {call.id!r} repeats an id of the same message", field=f"{at}.id"
                )
            seen.add(call.id)
            check_tool_name(call.name, f"{at}.name")
            arguments = check_arguments(call.arguments, f"{at}.arguments")
            checked.append(ToolCall(id=call.id, name=call.name, arguments=arguments))
            size += len(call.id) + len(call.name) + len(arguments.encode())
        msg.tool_calls = tuple(checked)
    if msg.role == "tool":
        # Optional: tool output written before tool calls were structured (or by a client
        # that does not track calls) stays valid; an id given must answer a call.
        if msg.tool_call_id:
            check_call_id(msg.tool_call_id, f"{where}.tool_call_id")
        if msg.name:
            check_tool_name(msg.name, f"{where}.name")
    else:
        for part in ("tool_call_id", "name"):
            if getattr(msg, part):
                raise InvalidArgument(
                    f"{where}.{part} is set on a {msg.role} message; only a tool message "
                    "answers a call",
                    field=f"{where}.{part}",
                )
    return size


def _has_tool_parts(messages: list[NewMessage]) -> bool:
    return any(m.tool_calls or m.tool_call_id for m in messages)


#: The first key of the two-key advisory locks on caller-chosen thread ids (a key space of
#: its own: one-key locks, such as the erasure's and the migrations', never collide with it).
THREAD_ID_LOCK_SPACE = 0x7468


#: The UUID versions a dataset-confined key may choose as a thread id: random ones. A
#: name-based (3, 5), time-and-address (1, 6) or custom (8) id can be computed by anyone
#: who knows what it was made from, and ALREADY_EXISTS for it would tell another dataset's
#: key that the id is taken (thread ids are global).
RANDOM_UUID_VERSIONS = (4, 7)


def check_chosen_thread_id(thread_id: uuid.UUID | None, every_dataset: bool) -> None:
    """CreateThreadRequest.thread_id: a caller whose key is confined to some datasets may
    choose only a random id (:data:`RANDOM_UUID_VERSIONS`). The refusal is the same
    whether or not the id exists anywhere. A key for every dataset (restoring an export
    with its ids; the loopback development mode) may choose any: it sees every dataset."""
    if thread_id is None or every_dataset:
        return
    if thread_id.variant == uuid.RFC_4122 and thread_id.version in RANDOM_UUID_VERSIONS:
        return
    raise InvalidArgument(
        f"thread_id {thread_id} is not a random UUID: a key confined to datasets may choose "
        "only version 4 or 7 ids (uuid4(), uuid7()), because an id made from names or "
        "times can be guessed and thread ids are global. To find a thread again by a name "
        "of your own (a session key), leave thread_id empty and set idempotency_key; to "
        "restore an export with its ids, use a key for every dataset",
        field="thread_id",
    )


def check_thread_key(value: str) -> str | None:
    """CreateThreadRequest.idempotency_key: None when empty, else at most
    :data:`MAX_IDEMPOTENCY_KEY_CHARS` characters PostgreSQL can store."""
    if not value:
        return None
    if len(value) > MAX_IDEMPOTENCY_KEY_CHARS:
        raise InvalidArgument(
            f"idempotency_key is longer than {MAX_IDEMPOTENCY_KEY_CHARS} characters",
            field="idempotency_key",
        )
    check_text(value, "idempotency_key")
    return value


def create_thread(
    conn: Connection,
    vault: Vault,
    *,
    dataset: str,
    thread_id: uuid.UUID | None,
    label: str,
    metadata_json: str,
) -> dict[str, Any]:
    """Creates a thread (registering its dataset on first use); returns it as clients see
    it. The label and metadata are sealed with the dataset's key."""
    row, _ = find_or_create_thread(
        conn, vault, dataset=dataset, thread_id=thread_id, label=label, metadata_json=metadata_json
    )
    return row


def find_or_create_thread(
    conn: Connection,
    vault: Vault,
    *,
    dataset: str,
    thread_id: uuid.UUID | None,
    label: str,
    metadata_json: str,
    idempotency_key: str | None = None,
) -> tuple[dict[str, Any], bool]:
    """CreateThread: creates a thread (registering its dataset on first use); returns it
    as clients see it and whether this call created it. The label and metadata are sealed
    with the dataset's key.

    ``idempotency_key``: the dataset's own name for the thread. A key the dataset holds
    returns its thread (not created) when the call asks for the same thread — label,
    metadata, and the id if one is given — and is ALREADY_EXISTS otherwise, as a message
    key sent again with other content is. Two calls with one key at once: the second's
    insert waits on the unique index for the first to commit, then finds its thread."""
    key = vault.for_write(conn, dataset)
    if idempotency_key is not None:
        found = _thread_by_key(conn, key, dataset, idempotency_key)
        if found is not None:
            return _same_thread(found, thread_id, label, metadata_json, idempotency_key), False
    # A thread id is unique across datasets (id-only RPCs find the dataset by it), but the
    # primary key is (dataset, thread_id), which no index can extend across partitions: a
    # caller's own id is checked in every dataset. The transaction lock on the id makes
    # check-then-insert atomic: a second creation of the same id, in any dataset, waits
    # here until the first commits, then sees its row.
    if thread_id is not None:
        conn.execute(
            text("SELECT pg_advisory_xact_lock(:space, hashtext(:id))"),
            {"space": THREAD_ID_LOCK_SPACE, "id": str(thread_id)},
        )
        taken = conn.execute(
            text(
                across_datasets("a caller's own thread id must be new in every dataset")
                + "SELECT 1 FROM threads WHERE thread_id = :id"
            ),
            {"id": thread_id},
        ).first()
        if taken:
            raise AlreadyExists(f"thread {thread_id} already exists", thread_id=str(thread_id))
    row = (
        conn.execute(
            text(
                "INSERT INTO threads (thread_id, dataset, label, metadata, idempotency_key) "
                "VALUES (:id, :dataset, :label, :metadata, :ikey) "
                "ON CONFLICT DO NOTHING RETURNING *"
            ),
            {
                "id": thread_id or uuid.uuid4(),
                "dataset": dataset,
                "label": key.seal(label, "threads.label"),
                "metadata": key.seal(metadata_json, "threads.metadata"),
                "ikey": idempotency_key,
            },
        )
        .mappings()
        .first()
    )
    if row is not None:
        return open_row(key, row, "threads"), True
    if idempotency_key is not None:  # a concurrent call with the key committed first
        found = _thread_by_key(conn, key, dataset, idempotency_key)
        if found is not None:
            return _same_thread(found, thread_id, label, metadata_json, idempotency_key), False
    raise AlreadyExists(f"thread {thread_id} already exists", thread_id=str(thread_id))


def _thread_by_key(
    conn: Connection, key: DatasetKey, dataset: str, idempotency_key: str
) -> dict[str, Any] | None:
    row = (
        conn.execute(
            text("SELECT * FROM threads WHERE dataset = :dataset AND idempotency_key = :ikey"),
            {"dataset": dataset, "ikey": idempotency_key},
        )
        .mappings()
        .first()
    )
    return None if row is None else open_row(key, row, "threads")


def _same_thread(
    found: dict[str, Any],
    thread_id: uuid.UUID | None,
    label: str,
    metadata_json: str,
    idempotency_key: str,
) -> dict[str, Any]:
    """``found`` (the thread ``idempotency_key`` names) if the call asks for that thread,
    else ALREADY_EXISTS naming the key."""
    stored = found["metadata"]
    same = (
        (thread_id is None or thread_id == found["thread_id"])
        and label == (found["label"] or "")
        and json.loads(metadata_json or "{}")
        == (json.loads(stored) if isinstance(stored, str) else (stored or {}))
    )
    if not same:
        raise AlreadyExists(
            f"idempotency_key {idempotency_key!r} names thread {found['thread_id']}, created "
            "with another label, metadata or id; a retry must send the same thread, a new "
            "thread needs a new key",
            field="idempotency_key",
            reason="IDEMPOTENCY_KEY_REUSED",
            thread_id=str(found["thread_id"]),
        )
    return found


def get_thread(
    conn: Connection, vault: Vault, thread_id: uuid.UUID, *, dataset: str
) -> dict[str, Any]:
    """The thread as clients see it (``dataset`` is the one its routing lookup found)."""
    row = (
        conn.execute(
            text("SELECT * FROM threads WHERE dataset = :dataset AND thread_id = :id"),
            {"dataset": dataset, "id": thread_id},
        )
        .mappings()
        .first()
    )
    if row is None:
        raise thread_not_found(thread_id)
    return _with_compaction(conn, vault, row["dataset"], [vault.open_one(conn, row, "threads")])[0]


def _with_compaction(
    conn: Connection, vault: Vault, dataset: str, threads: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Compacted threads get ``compaction_episode``: their current episode's id and summary,
    which stand in for the dropped messages."""
    compacted = [t["thread_id"] for t in threads if t.get("compacted_at") is not None]
    if not compacted:
        return threads
    rows = (
        conn.execute(
            text(
                "SELECT thread_id, episode_id, dataset, summary FROM episodes "
                "WHERE dataset = :dataset AND thread_id = ANY(:ids) AND status = 'completed'"
            ),
            {"dataset": dataset, "ids": compacted},
        )
        .mappings()
        .all()
    )
    current = {r["thread_id"]: r for r in vault.open_rows(conn, dataset, list(rows), "episodes")}
    for t in threads:
        if t["thread_id"] in current:
            t["compaction_episode"] = current[t["thread_id"]]
    return threads


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
    if route is not None and not _repeats_a_key(messages) and not _has_tool_parts(messages):
        dataset, data_key = route
        receipts: list[Receipt] = []
        if _allowed(authorize, dataset):
            statement, params = _append(data_key, dataset, thread_id, messages, check_route=True)
            try:
                if engine_distributed(engine):  # statements Citus routes to one shard each
                    with engine.begin() as conn:
                        bumped = _run_two_steps(conn, _TWO_STEPS_OF[statement], params)
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

    if _has_tool_parts(to_store):
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


#: The stored messages of a thread that hold one of ``:keys`` — one lookup of the thread's
#: unique index per key. Written as ``idempotency_key = ANY(:keys)`` the plan depended on
#: the statistics: when they say threads are short (or there are none yet) PostgreSQL
#: reads the whole thread through the primary key and filters it, which on a long thread
#: costs its length (6,000 rows read for 100 keys: 1.9 ms against 0.4 ms for the lookups;
#: 34-45 ms on a 10,000-message thread never analysed). ``LIMIT 1`` keeps each lookup a
#: lookup: without it the planner may turn the lateral subquery into a join and choose
#: the scan again.
STORED_KEYS = (
    "SELECT m.sequence, m.role, m.content, m.metadata, m.created_at, m.received_at, "
    "m.idempotency_key, m.tools, m.tool_call_id FROM unnest(CAST(:keys AS text[])) AS k(key) CROSS JOIN LATERAL "
    "(SELECT * FROM messages WHERE dataset = :dataset AND thread_id = :id "
    "AND idempotency_key = k.key LIMIT 1) AS m"
)


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


def _store_statement(
    check_route: bool, single: bool, keyed: bool = False, tools: bool = False
) -> str:
    # The counter bump and the insert in one statement: the new sequences are
    # last_sequence - n + 1 .. last_sequence, in request order. The UPDATE takes the
    # thread's row lock, which serialises its writers. With ``check_route``, the dataset
    # must still hold the remembered key (a dataset erased and created again has another
    # key id): otherwise no row is bumped, nothing is inserted and nothing is returned.
    # It returns one row whatever the batch size — the new last_sequence and the
    # statement's now(), stored as every row's received_at (and created_at when the
    # client gave none) — from which the receipts follow, instead of RETURNING each row.
    # ``single``: one message, bound as scalars. Most calls carry one message, and five
    # one-element arrays cost the driver ~50 µs of dumping and the server an unnest: the
    # scalar form measured ~30 % less client CPU and ~150 µs less per call
    # (bench/ingest_layers.py, docs/benchmarks.md "AddMessages, fifth pass").
    # In psycopg's format: the routed call sends it without SQLAlchemy
    # (episodic.store.raw_statement), a transaction with exec_driver_sql. The sealed values
    # and the arrays go in binary (``%(…)b``): as text, psycopg hex-escapes every bytea and
    # quotes every array element in Python — 1.2 ms of CPU for 100 messages against
    # 0.4 ms in binary (docs/benchmarks.md "AddMessages, sixth pass").
    # ``keyed`` (the batch carries idempotency keys, none repeated; routed calls only): no
    # row is bumped when one of the keys is stored for the thread already — checked on the
    # statement's snapshot through the unique index on (dataset, thread_id,
    # idempotency_key). A key a concurrent call commits after that snapshot is not seen
    # here, but that call held the thread's row lock this UPDATE waits for, so the INSERT
    # then finds its key in the unique index and the statement fails whole (the caller
    # falls back to the locked transaction, which answers the replay).
    # ``tools`` (a batch with tool calls or results; transactions only, array form): the
    # rows carry their sealed tool parts and answered call ids, and the calls they make go
    # to ``message_tool_calls`` in the same statement.
    bump = _bump_sql(check_route, single, keyed)
    rows = _rows_sql(single, tools, last="b.last_sequence", received="now()", bumped=True)
    if tools:
        return (
            f"WITH bumped AS ({bump}RETURNING last_sequence), "
            f"inserted AS ({_MESSAGES_INSERT_TOOLS}{rows}), "
            f"calls AS ({_calls_sql('b.last_sequence', bumped=True)}) "
            "SELECT last_sequence, now() AS received_at FROM bumped"
        )
    return (
        f"WITH bumped AS ({bump}RETURNING last_sequence), "
        f"inserted AS ({_MESSAGES_INSERT}{rows}) "
        "SELECT last_sequence, now() AS received_at FROM bumped"
    )


_MESSAGES_INSERT = (
    "INSERT INTO messages (dataset, thread_id, sequence, role, content, metadata, created_at, "
    "received_at, idempotency_key) "
)
_MESSAGES_INSERT_TOOLS = (
    "INSERT INTO messages (dataset, thread_id, sequence, role, content, metadata, created_at, "
    "received_at, idempotency_key, tools, tool_call_id) "
)


def _bump_sql(check_route: bool, single: bool, keyed: bool) -> str:
    """The UPDATE that bumps the thread's counter by the batch (its row lock serialises the
    thread's writers), without its RETURNING; see :func:`_store_statement` for the checks."""
    route_check = (
        "AND EXISTS (SELECT 1 FROM datasets d WHERE d.dataset = %(dataset)s "
        "AND d.key_id IS NOT DISTINCT FROM CAST(%(key_id)s AS uuid)) "
    )
    # One lookup of the unique index per key, whatever the statistics say (see STORED_KEYS).
    new_keys = (
        "AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.dataset = %(dataset)s "
        "AND m.thread_id = %(id)s AND m.idempotency_key = CAST(%(ikey)s AS text)) "
        if single
        else "AND NOT EXISTS (SELECT 1 FROM unnest(CAST(%(keys)b AS text[])) AS k(key) "
        "CROSS JOIN LATERAL (SELECT 1 FROM messages m WHERE m.dataset = %(dataset)s "
        "AND m.thread_id = %(id)s AND m.idempotency_key = k.key LIMIT 1) AS hit) "
    )
    return (
        "UPDATE threads SET last_sequence = last_sequence + %(n)s, "
        "last_message_at = now(), last_activity_at = now() "
        "WHERE dataset = %(dataset)s AND thread_id = %(id)s "
        + (route_check if check_route else "")
        + (new_keys if keyed else "")
    )


def _rows_sql(single: bool, tools: bool, *, last: str, received: str, bumped: bool) -> str:
    """The rows the messages' INSERT takes: ``last`` is the thread's new last sequence (an
    expression), ``received`` the call's clock; ``bumped``: read beside the CTE ``bumped b``
    (one statement) — else ``last`` and ``received`` are bound (:func:`_two_steps`), and a
    single message is a VALUES row."""
    created = f"coalesce(CAST(%(created_at)s AS timestamptz), {received})"
    if single and not tools:
        values = (
            f"%(dataset)s, %(id)s, {last}, CAST(%(role)s AS text), "
            f"CAST(%(content)b AS bytea), CAST(%(meta)b AS bytea), {created}, {received}, "
            "CAST(%(ikey)s AS text)"
        )
        return f"SELECT {values} FROM bumped b" if bumped else f"VALUES ({values})"
    source = "bumped b, " if bumped else ""
    arrays = (
        "unnest(CAST(%(roles)b AS text[]), CAST(%(contents)b AS bytea[]), "
        "CAST(%(metas)b AS bytea[]), CAST(%(created)b AS timestamptz[]), CAST(%(keys)b AS text[])"
    )
    if tools:
        return (
            f"SELECT %(dataset)s, %(id)s, {last} - %(n)s + u.i, u.role, u.content, u.meta, "
            f"coalesce(u.created_at, {received}), {received}, u.ikey, u.tools, u.call_id "
            f"FROM {source}{arrays}, CAST(%(tools)b AS bytea[]), "
            "CAST(%(call_ids)b AS text[])) WITH ORDINALITY AS u(role, content, meta, "
            "created_at, ikey, tools, call_id, i)"
        )
    return (
        f"SELECT %(dataset)s, %(id)s, {last} - %(n)s + u.i, u.role, u.content, u.meta, "
        f"coalesce(u.created_at, {received}), {received}, u.ikey "
        f"FROM {source}{arrays}) WITH ORDINALITY AS u(role, content, meta, created_at, ikey, i)"
    )


def _calls_sql(last: str, *, bumped: bool) -> str:
    """The INSERT of the tool calls a batch makes, at their messages' sequences."""
    return (
        "INSERT INTO message_tool_calls (dataset, thread_id, call_id, sequence, tool) "
        f"SELECT %(dataset)s, %(id)s, c.call_id, {last} - %(n)s + c.i, c.tool "
        f"FROM {'bumped b, ' if bumped else ''}unnest(CAST(%(made_ids)b AS text[]), "
        "CAST(%(made_tools)b AS text[]), CAST(%(made_at)b AS bigint[])) AS c(call_id, tool, i)"
    )


@dataclass(frozen=True)
class TwoSteps:
    """The same write as one of :data:`_STATEMENTS` as statements Citus routes to one shard
    each, for a distributed store (``store.shards.distributed``): there the one statement (a
    data-modifying CTE feeding ``INSERT … SELECT``) is planned as subplans whose
    intermediate result goes to every worker, so one worker down failed every dataset's
    writes (tests/test_citus_worker_kill.py). ``bump`` returns the new last sequence and the
    call's clock (the ``last_message_at`` it set: ``now()`` in a RETURNING is refused
    there); ``insert`` (the messages) and ``calls`` (the tool calls the batch makes, when
    it makes any) take them as ``%(last)s`` and ``%(received)s``. Run in one transaction
    (:func:`_run_two_steps`): on Citus a routed AddMessages is BEGIN, these and COMMIT."""

    bump: str
    insert: str
    calls: str | None = None


def _two_steps(
    check_route: bool, single: bool, keyed: bool = False, tools: bool = False
) -> TwoSteps:
    last, received = "CAST(%(last)s AS bigint)", "CAST(%(received)s AS timestamptz)"
    rows = _rows_sql(single, tools, last=last, received=received, bumped=False)
    bump = _bump_sql(check_route, single, keyed) + "RETURNING last_sequence, last_message_at"
    if tools:
        return TwoSteps(bump, _MESSAGES_INSERT_TOOLS + rows, _calls_sql(last, bumped=False))
    return TwoSteps(bump, _MESSAGES_INSERT + rows)


def _run_two_steps(conn: Connection, steps: TwoSteps, params: dict[str, Any]) -> Any:
    """``steps`` in ``conn``'s transaction: the bump's (last sequence, clock), None when it
    bumped nothing (so nothing was inserted)."""
    bumped = conn.exec_driver_sql(steps.bump, params).first()
    if bumped is None:
        return None
    inserted = {**params, "last": bumped[0], "received": bumped[1]}
    conn.exec_driver_sql(steps.insert, inserted)
    if steps.calls is not None and params["made_ids"]:
        conn.exec_driver_sql(steps.calls, inserted)
    return bumped


# (check_route, single, keyed) of every statement; the transaction checked the keys under
# its lock already, so only routed statements check them.
_SHAPES = [
    (route, single, keyed)
    for route in (False, True)
    for single in (False, True)
    for keyed in ((False, True) if route else (False,))
]
_STATEMENTS = {shape: _store_statement(*shape) for shape in _SHAPES}
_TOOL_STATEMENT = _store_statement(check_route=False, single=False, tools=True)
#: The same in two steps, for a distributed store (:class:`TwoSteps`).
_TWO_STEPS = {shape: _two_steps(*shape) for shape in _SHAPES}
_TOOL_TWO_STEPS = _two_steps(check_route=False, single=False, tools=True)
_TWO_STEPS_OF = {_STATEMENTS[k]: _TWO_STEPS[k] for k in _STATEMENTS} | {
    _TOOL_STATEMENT: _TOOL_TWO_STEPS
}


def _append(
    data_key: DatasetKey,
    dataset: str,
    thread_id: uuid.UUID,
    messages: list[NewMessage],
    *,
    check_route: bool,
) -> tuple[str, dict[str, Any]]:
    """The statement that bumps the thread's counter and inserts ``messages`` (sealed),
    with its parameters. ``check_route``: it also requires the dataset's current key to be
    ``data_key`` — when it is not (or the thread is not in ``dataset``) it writes nothing
    and returns no row."""
    n = len(messages)
    params: dict[str, Any] = {"dataset": dataset, "id": thread_id, "n": n}
    if not check_route and _has_tool_parts(messages):
        return _TOOL_STATEMENT, _tool_params(data_key, messages, params)
    if n == 1:
        (m,) = messages
        params.update(
            role=m.role,
            content=data_key.seal(m.content, "messages.content"),
            meta=_sealed_metadata(data_key, m),
            created_at=m.created_at,
            ikey=m.idempotency_key,
        )
    else:
        params.update(
            roles=[m.role for m in messages],
            contents=data_key.seal_many([m.content for m in messages], "messages.content"),
            metas=data_key.seal_many([_metadata_json(m) for m in messages], "messages.metadata"),
            created=[m.created_at for m in messages],
            keys=[m.idempotency_key for m in messages],
        )
    keyed = False
    if check_route:
        params["key_id"] = data_key.key_id
        keyed = any(m.idempotency_key for m in messages)
    return _STATEMENTS[(check_route, n == 1, keyed)], params


def _tool_params(
    data_key: DatasetKey, messages: list[NewMessage], params: dict[str, Any]
) -> dict[str, Any]:
    """The parameters of :data:`_TOOL_STATEMENT`: every column as an array, the tool parts
    sealed, and the calls made as (id, tool, 1-based position in the batch)."""
    payloads = [payload(m.tool_calls, m.name) for m in messages]
    sealed = data_key.seal_many([json_text(p) for p in payloads if p is not None], "messages.tools")
    it = iter(sealed)
    made = [(c.id, c.name, i) for i, m in enumerate(messages, 1) for c in m.tool_calls]
    return {
        **params,
        "roles": [m.role for m in messages],
        "contents": data_key.seal_many([m.content for m in messages], "messages.content"),
        "metas": data_key.seal_many([_metadata_json(m) for m in messages], "messages.metadata"),
        "created": [m.created_at for m in messages],
        "keys": [m.idempotency_key for m in messages],
        "tools": [next(it) if p is not None else None for p in payloads],
        "call_ids": [m.tool_call_id for m in messages],
        "made_ids": [c[0] for c in made],
        "made_tools": [c[1] for c in made],
        "made_at": [c[2] for c in made],
    }


def _store(
    conn: Connection,
    data_key: DatasetKey,
    dataset: str,
    thread_id: uuid.UUID,
    messages: list[NewMessage],
) -> list[Receipt]:
    """Appends ``messages`` inside ``conn``'s transaction; their receipts, in request order
    (= sequence order)."""
    statement, params = _append(data_key, dataset, thread_id, messages, check_route=False)
    if distributed(conn):  # Citus: statements it routes to one shard each
        return _receipts(_run_two_steps(conn, _TWO_STEPS_OF[statement], params), messages)
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


def _sealed_metadata(data_key: DatasetKey, message: NewMessage) -> bytes:
    """The message's metadata sealed (see :func:`_metadata_json`)."""
    return data_key.seal(_metadata_json(message), "messages.metadata")


def _metadata_json(message: NewMessage) -> str:
    """The message's metadata as the JSON text that is sealed: what check_new_messages
    encoded when it did, else the text seal_json makes."""
    if message.metadata_json is None:
        return json_text(message.metadata)
    return message.metadata_json


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


def end_thread(conn: Connection, thread_id: uuid.UUID, *, dataset: str) -> tuple[str, bool]:
    """Records the explicit end durably and says whether an episode is owed.

    ``end_requested_sequence`` keeps the request even when the Scheduler cannot be reached:
    its catch-up sweep opens the episode for any thread whose end request is uncaptured.
    """
    row = (
        conn.execute(
            text(
                "UPDATE threads SET ended_at = now(), end_requested_sequence = last_sequence, "
                "last_activity_at = now() WHERE dataset = :dataset AND thread_id = :id "
                "RETURNING dataset, last_sequence > captured_sequence AS owed"
            ),
            {"dataset": dataset, "id": thread_id},
        )
        .mappings()
        .first()
    )
    if row is None:
        raise thread_not_found(thread_id)
    return row["dataset"], bool(row["owed"])


def list_messages(
    conn: Connection,
    vault: Vault,
    thread_id: uuid.UUID,
    *,
    dataset: str,
    after_sequence: int,
    end_sequence: int | None,
    limit: int,
) -> MessagesPage:
    """Messages with sequence > after_sequence (and <= end_sequence), in order, and whether
    more follow. A page also stops before :data:`MAX_PAGE_BYTES` of content and metadata
    (always holding at least one message), so it fits every client's default 4 MiB
    receive limit; AIP-158 lets a page hold fewer than ``page_size`` items. The thread
    comes along: a compacted thread's summary stands in for the messages it dropped."""
    thread = get_thread(conn, vault, thread_id, dataset=dataset)
    rows = (
        conn.execute(
            text(
                "WITH page AS ("
                "  SELECT * FROM messages WHERE dataset = :dataset AND thread_id = :id "
                "  AND sequence > :after "
                "  AND (CAST(:end AS bigint) IS NULL OR sequence <= :end) "
                "  ORDER BY sequence LIMIT :limit), "
                "sized AS ("
                "  SELECT page.*, count(*) OVER () AS page_rows, "
                "    sum(octet_length(content) + octet_length(metadata)) "
                "      OVER (ORDER BY sequence) AS running_bytes "
                "  FROM page) "
                "SELECT * FROM sized "
                "WHERE running_bytes <= :budget OR sequence = (SELECT min(sequence) FROM page) "
                "ORDER BY sequence"
            ),
            {
                "dataset": thread["dataset"],
                "id": thread_id,
                "after": after_sequence,
                "end": end_sequence,
                "limit": limit + 1,
                "budget": MAX_PAGE_BYTES,
            },
        )
        .mappings()
        .all()
    )
    more = bool(rows) and (rows[0]["page_rows"] > min(len(rows), limit))
    messages = vault.open_rows(conn, thread["dataset"], list(rows[:limit]), "messages")
    return MessagesPage(thread=thread, messages=messages, more=more)


def list_threads(
    conn: Connection,
    vault: Vault,
    dataset: str,
    *,
    before: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> tuple[list[dict[str, Any]], bool]:
    """A dataset's threads, most recently active first (keyset paging on the index)."""
    rows = (
        conn.execute(
            text(
                "SELECT * FROM threads WHERE dataset = :dataset "
                "AND (CAST(:at AS timestamptz) IS NULL "
                "     OR (last_activity_at, thread_id) < (CAST(:at AS timestamptz), CAST(:tid AS uuid))) "
                "ORDER BY last_activity_at DESC, thread_id DESC LIMIT :limit"
            ),
            {
                "dataset": dataset,
                "at": before[0] if before else None,
                "tid": before[1] if before else None,
                "limit": limit + 1,
            },
        )
        .mappings()
        .all()
    )
    threads = vault.open_rows(conn, dataset, list(rows[:limit]), "threads")
    return _with_compaction(conn, vault, dataset, threads), len(rows) > limit
