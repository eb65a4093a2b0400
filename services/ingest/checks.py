"""The write path's checks: a whole batch, a thread's label, metadata, ids and keys.

Everything a request is refused for before anything is written (no half-stored batches),
free of the database: the limits, the roles, tool parts as OpenAI's chat format has them,
metadata PostgreSQL's jsonb can hold, and the thread ids a dataset-confined key may choose.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from episodic.config import IngestSettings
from episodic.errors import InvalidArgument
from episodic.tool_calls import (
    MAX_TOOL_CALLS,
    ToolCall,
    check_arguments,
    check_call_id,
    check_tool_name,
)
from episodic.validation import check_text

from .model import NewMessage

ROLES = ("system", "user", "assistant", "tool")
MAX_LABEL_CHARS = 200
MAX_IDEMPOTENCY_KEY_CHARS = 128


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
#: message's metadata (bench/speed/ingest_parts.py: every message of a batch pays it).
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
