"""The SDK's flows for threads and messages (Ingest): creating a thread, appending
messages (and the AddMessages request with its idempotency keys), recording an event,
ending a stretch of conversation, and reading threads and messages back page by page.
Re-exported by :mod:`episodic.sdk.operations`."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from episodic.sdk.calling import call
from episodic.sdk.flow import ClientCore, Flow
from episodic.sdk.types import (
    AddMessagesResult,
    EndThreadResult,
    Episode,
    Message,
    MessageLike,
    MessagePage,
    MessageReceipt,
    NewMessage,
    Page,
    RecordEventResult,
    Thread,
    ThreadCompaction,
    role_value,
    timestamp_of,
    to_new_message,
)
from episodic.v1 import ingest_service_pb2

# -- threads and messages (Ingest)


def create_thread(
    core: ClientCore,
    dataset: str,
    *,
    label: str = "",
    metadata: Mapping[str, Any] | None = None,
    thread_id: str | None = None,
    idempotency_key: str | None = None,
    timeout: float | None = None,
) -> Flow[Thread]:
    """Creates a thread in ``dataset``; starting a thread also tells the Scheduler the
    dataset's other threads are probably over (their idle timers are pulled forward).

    ``idempotency_key``: your own name for the thread (a session key), unique within the
    dataset: called again with it, the thread it created is returned instead of a new one
    (so the call is retried safely on UNAVAILABLE). Prefer it to a ``thread_id`` derived
    from your own data: thread ids are unique across datasets, a key only within its own.
    A ``thread_id`` of your choosing must be a random UUID (``uuid.uuid4()``) unless the
    key covers every dataset (:class:`InvalidArgumentError` otherwise)."""
    request = ingest_service_pb2.CreateThreadRequest(
        dataset=dataset,
        label=label,
        thread_id=thread_id or "",
        idempotency_key=idempotency_key or "",
    )
    if metadata:
        request.metadata.update(dict(metadata))
    answer = yield from call(
        core, "ingest", "CreateThread", request, timeout, retry=bool(idempotency_key)
    )
    return Thread.from_proto(answer.thread)


def start_thread(
    core: ClientCore,
    dataset: str,
    label: str = "",
    *,
    metadata: Mapping[str, Any] | None = None,
    thread_id: str | None = None,
    idempotency_key: str | None = None,
    timeout: float | None = None,
) -> Flow[Thread]:
    """Starts a new conversation thread (same as :meth:`create_thread`)."""
    return (
        yield from create_thread(
            core,
            dataset,
            label=label,
            metadata=metadata,
            thread_id=thread_id,
            idempotency_key=idempotency_key,
            timeout=timeout,
        )
    )


def add_messages_request(
    thread_id: str, messages: Iterable[MessageLike], *, auto_idempotency_keys: bool
) -> tuple[ingest_service_pb2.AddMessagesRequest, bool]:
    """The AddMessages request for ``messages``, and whether it is safe to repeat (every
    message has an idempotency key: given, or generated when ``auto_idempotency_keys``)."""
    request = ingest_service_pb2.AddMessagesRequest(thread_id=thread_id)
    for msg in (to_new_message(m) for m in messages):
        key = msg.idempotency_key
        if not key and auto_idempotency_keys:
            key = f"auto:{uuid.uuid4()}"
        item = request.messages.add(
            role=role_value(msg.role),
            content=msg.content,
            idempotency_key=key or "",
            tool_call_id=msg.tool_call_id or "",
            name=msg.name or "",
        )
        for c in msg.tool_calls:
            item.tool_calls.add(id=c.id, name=c.name, arguments=c.arguments)
        if msg.metadata:
            item.metadata.update(dict(msg.metadata))
        if msg.created_at is not None:
            item.created_at.CopyFrom(timestamp_of(msg.created_at))
    return request, all(m.idempotency_key for m in request.messages)


def add_messages(
    core: ClientCore,
    thread_id: str,
    messages: Iterable[MessageLike],
    *,
    timeout: float | None = None,
) -> Flow[AddMessagesResult]:
    """Appends messages to a thread in one durable batch, in order.

    Each message is a :class:`NewMessage`, a mapping with ``role``/``content`` (and
    optionally ``metadata``, ``created_at``, ``idempotency_key``) or a ``(role, content)``
    tuple. A mapping in OpenAI's chat format keeps its tool calls: an assistant message's
    ``tool_calls`` and a tool message's ``tool_call_id``/``name`` (so a chat completion's
    ``messages`` can be written as they are). With ``auto_idempotency_keys`` (the default) every message without a key gets
    one, so the call is retried safely on UNAVAILABLE and a replay stores nothing twice.
    """
    request, safe = add_messages_request(
        thread_id, messages, auto_idempotency_keys=core.auto_idempotency_keys
    )
    answer = yield from call(core, "ingest", "AddMessages", request, timeout, retry=safe)
    return AddMessagesResult(
        thread_id=answer.thread_id,
        receipts=[MessageReceipt.from_proto(r) for r in answer.receipts],
        stored_count=answer.stored_count,
    )


def add_message(
    core: ClientCore,
    thread_id: str,
    role: str,
    content: str,
    *,
    metadata: Mapping[str, Any] | None = None,
    created_at: datetime | None = None,
    idempotency_key: str | None = None,
    timeout: float | None = None,
) -> Flow[MessageReceipt]:
    """Appends one message and returns its receipt (with its sequence)."""
    result = yield from add_messages(
        core,
        thread_id,
        [NewMessage(role, content, metadata or {}, created_at, idempotency_key)],
        timeout=timeout,
    )
    return result.receipts[0]


def record_event(
    core: ClientCore,
    dataset: str,
    summary: str,
    *,
    event_type: str,
    actor: str = "agent",
    entities: Sequence[str] = (),
    occurred_at: datetime | None = None,
    thread_id: str | None = None,
    idempotency_key: str | None = None,
    timeout: float | None = None,
) -> Flow[RecordEventResult]:
    """Records something the agent knows happened as an event episode, recalled beside the
    summaries: ``event_type`` is decision, tool_call, feedback, milestone or a custom
    lowercase name; ``occurred_at`` defaults to now; ``thread_id`` (optional) must be a
    thread of ``dataset``. With ``auto_idempotency_keys`` (the default) an event without
    a key gets one, so the call is retried safely on UNAVAILABLE."""
    key = idempotency_key or (f"auto:{uuid.uuid4()}" if core.auto_idempotency_keys else "")
    request = ingest_service_pb2.RecordEventRequest(
        dataset=dataset,
        actor=actor,
        event_type=event_type,
        summary=summary,
        entities=list(entities),
        thread_id=thread_id or "",
        idempotency_key=key,
    )
    if occurred_at is not None:
        request.occurred_at.CopyFrom(timestamp_of(occurred_at))
    answer = yield from call(core, "ingest", "RecordEvent", request, timeout, retry=bool(key))
    return RecordEventResult(event=Episode.from_proto(answer.event), stored=answer.stored)


def end_thread(
    core: ClientCore, thread_id: str, *, timeout: float | None = None
) -> Flow[EndThreadResult]:
    """Marks the end of a stretch of conversation: an episode is queued over the
    messages no episode covers yet. The thread stays writable (a checkpoint)."""
    answer = yield from call(
        core,
        "ingest",
        "EndThread",
        ingest_service_pb2.EndThreadRequest(thread_id=thread_id),
        timeout,
        retry=False,
    )
    return EndThreadResult(answer.thread_id, answer.episode_queued, answer.episode_id)


def get_thread(core: ClientCore, thread_id: str, *, timeout: float | None = None) -> Flow[Thread]:
    """Returns one thread (NotFoundError when it does not exist)."""
    answer = yield from call(
        core,
        "ingest",
        "GetThread",
        ingest_service_pb2.GetThreadRequest(thread_id=thread_id),
        timeout,
    )
    return Thread.from_proto(answer.thread)


def list_messages(
    core: ClientCore,
    thread_id: str,
    *,
    page_size: int = 0,
    page_token: str = "",
    start_sequence: int = 0,
    end_sequence: int = 0,
    timeout: float | None = None,
) -> Flow[MessagePage]:
    """One page of a thread's messages in sequence order (0 means the server default
    page size, 100). A compacted thread's page says so (``compaction``)."""
    answer = yield from call(
        core,
        "ingest",
        "ListMessages",
        ingest_service_pb2.ListMessagesRequest(
            thread_id=thread_id,
            page_size=page_size,
            page_token=page_token,
            start_sequence=start_sequence,
            end_sequence=end_sequence,
        ),
        timeout,
    )
    return MessagePage(
        [Message.from_proto(m) for m in answer.messages],
        answer.next_page_token,
        ThreadCompaction.from_proto(answer, "compaction"),
    )


def load_session(
    core: ClientCore,
    thread_id: str,
    *,
    start_sequence: int = 0,
    end_sequence: int = 0,
    timeout: float | None = None,
) -> Flow[list[Message]]:
    """Every message of a thread in order (seed 003's ``load_session``), across pages;
    ``timeout`` applies to each page."""
    out: list[Message] = []
    token = ""
    while True:
        page = yield from list_messages(
            core,
            thread_id,
            page_size=1000,
            page_token=token,
            start_sequence=start_sequence,
            end_sequence=end_sequence,
            timeout=timeout,
        )
        out.extend(page.items)
        token = page.next_page_token
        if not token:
            return out


def list_threads(
    core: ClientCore,
    dataset: str,
    *,
    page_size: int = 0,
    page_token: str = "",
    timeout: float | None = None,
) -> Flow[Page[Thread]]:
    """One page of a dataset's threads, most recently active first."""
    answer = yield from call(
        core,
        "ingest",
        "ListThreads",
        ingest_service_pb2.ListThreadsRequest(
            dataset=dataset, page_size=page_size, page_token=page_token
        ),
        timeout,
    )
    return Page([Thread.from_proto(t) for t in answer.threads], answer.next_page_token)


def recent_threads(
    core: ClientCore, dataset: str, n: int = 5, *, timeout: float | None = None
) -> Flow[list[Thread]]:
    """The ``n`` most recently active threads of a dataset (seed 003's
    ``recent_sessions``); none for ``n`` 0, ValueError for a negative ``n``."""
    if n < 0:
        raise ValueError(f"n must not be negative (got {n})")
    if n == 0:
        return []
    out: list[Thread] = []
    token = ""
    while len(out) < n:
        page = yield from list_threads(
            core, dataset, page_size=min(n - len(out), 1000), page_token=token, timeout=timeout
        )
        out.extend(page.items)
        token = page.next_page_token
        if not token:
            break
    return out[:n]
