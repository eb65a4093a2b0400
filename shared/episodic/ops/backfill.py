"""Backfill: load existing conversations into episodic through the normal write path.

``episodic import FILE`` (:mod:`episodic.cli.integrations`) reads JSON lines, maps them to
threads and messages, and writes them with the SDK exactly as an agent would:
``CreateThread``, ``AddMessages`` in batches, then ``EndThread``. Nothing is written to the
database directly, so validation, limits, sequences, the Scheduler's triggers and the
audit trail all apply.

Input formats (detected per line, so one file may mix them):

1. **simple** — one message per line, the messages of a thread in order::

       {"dataset": "user_42", "thread": "chat-2024-05-01", "label": "billing",
        "role": "user", "content": "…", "ts": "2024-05-01T09:30:00Z",
        "name": "Alice", "metadata": {"channel": "email"}}

   ``dataset`` (unless ``--dataset`` is given), ``thread``, ``role`` (user, assistant,
   system or tool) and ``content`` are required; ``ts`` (ISO 8601; naive means UTC) is the
   message's original time; ``name`` (the speaker) is stored as ``metadata["name"]``, which
   the summariser uses to name speakers; ``label`` may sit on any line of the thread
   (default: the source thread id).
2. **threaded** — one conversation per line, the format of LoCoMo's ``locomo10.jsonl``::

       {"conversation_id": "conv-26", "threads": [{"thread_id": "conv-26/session_1",
        "started_at": "…", "messages": [{"role", "content", "ts", "name"}, …]}, …]}

   The ``conversation_id`` is the dataset (unless ``--dataset`` overrides it), each
   thread's ``thread_id`` its label; other keys (``questions``) are ignored.
3. **openai** — one conversation per line in OpenAI's chat format, as agent frameworks
   log it (and fine-tuning files hold it)::

       {"id": "run-812", "dataset": "support_agent", "outcome": "success",
        "messages": [{"role": "user", "content": "…"},
                     {"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
                      "type": "function", "function": {"name": "…", "arguments": "{…}"}}]},
                     {"role": "tool", "tool_call_id": "c1", "content": "…"}, …]}

   ``id`` (or ``thread``) is the source thread id (default: a digest of the line);
   ``dataset`` as above; the optional ``outcome`` (success, failure or partial; or an
   object ``{"outcome", "score", "note"}``) is recorded after the thread is written, so
   procedures are learned from it. Tool calls keep their ids, names and arguments in the
   other formats too (a message's ``tool_calls``, ``tool_call_id`` and, on a tool message
   that answers a call, ``name`` as the tool's name).
4. **export** — the records of ``episodic export`` (:mod:`episodic.ops.export`):
   ``{"type": "thread", …}`` with ``thread_id, dataset, label, metadata`` and
   ``{"type": "message", …}`` with ``thread_id, sequence, role, content, metadata,
   created_at, idempotency_key`` (fields at the top level or under a ``"thread"`` /
   ``"message"`` key; other fields are ignored). ``episode`` records are skipped (episodes
   are made again by the pipeline, not copied), and so are the ``dataset`` and ``end``
   lines that frame an export and any type this reader does not know (counted in
   :attr:`ImportPlan.skipped`); an export without its ``end`` line did not complete, which
   :attr:`ImportPlan.warnings` says.

Identity and resumability. Every thread is found or created by its thread key in its
dataset, ``import:<source thread id>`` (:func:`thread_key`, ``CreateThreadRequest.
idempotency_key``): the same source thread is the same thread in every run, its id is the
server's random one, and the key is the dataset's own, so no writer of another dataset can
take it first or learn that it exists. (Thread ids are global: an id derived from the source
ids, as imports before this revision made with ``uuid5(NAMESPACE, "<dataset>\\n<source
thread id>")`` (:func:`thread_uuid`), could be guessed and created first elsewhere. Such a
thread, found in the thread's own dataset, is still used, so an import begun then resumes
into it.) ``--keep-thread-ids`` creates each thread with the file's own id instead.
Every message has a deterministic idempotency key, ``import:<source thread id>:<index>``
(the index of the message in its source thread; the export format keeps the exported key
when it has one). Re-running an import after a crash therefore never duplicates anything:
the thread key finds the thread, a stored prefix of the thread's messages is skipped
(checked by the idempotency key of its last stored message), and any batch that is sent
again is answered from the idempotency keys without storing a second copy. The input must
be the same file (or one that only appends): a key that comes back with other content is
refused by Ingest (ALREADY_EXISTS, ``IDEMPOTENCY_KEY_REUSED``), and so is a thread key
that comes back with another label or metadata.

Episodes. After the last message of each thread, the import calls ``EndThread``: the
explicit trigger queues one episode over the thread at once, instead of waiting for the
inactivity timer (30 minutes after the import) or the backstop. An episode's
``started_at``/``ended_at`` are the ``created_at`` of the first and last message of its
window, i.e. the original timestamps, so recall's ``since``/``until``/``as_of`` and its
recency see the conversation's own history, not the time of the import. (The thread's own
``created_at``/``last_activity_at`` are the import time: ``CreateThread`` takes no
timestamp. Threads are imported in the order of their first message, so ``recent_threads``
lists them in historical order.) Re-running skips ``EndThread`` for a thread whose
messages are all covered by episodes already.

The file is read whole before anything is written (threads may be interleaved and the
export may list its threads after their messages); the progress bar's total comes from
that pass.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import IO, Any, Protocol, TypeVar

from episodic.sdk.client import (
    AddMessagesResult,
    AlreadyExistsError,
    DeadlineExceededError,
    EndThreadResult,
    Message,
    NewMessage,
    NotFoundError,
    Page,
    Thread,
    UnavailableError,
)
from episodic.tool_calls import ToolCall
from episodic.validation import DATASET_PATTERN, MAX_DATASET_CHARS

__all__ = [
    "FORMATS",
    "NAMESPACE",
    "SKIP_REASONS",
    "THREAD_KEY_PREFIX",
    "ImportInterrupted",
    "ImportMessage",
    "ImportPlan",
    "ImportStats",
    "ImportThread",
    "Importer",
    "InputError",
    "ProgressBar",
    "ThreadImportError",
    "batches",
    "idempotency_key",
    "read_plan",
    "thread_key",
    "thread_uuid",
]

#: The uuid5 namespace of imported thread ids (``uuid5(NAMESPACE_URL, "episodic:import")``,
#: written out so it can never change).
NAMESPACE = uuid.UUID("74776a8b-b0b2-5de0-9b18-682e2e370cdb")
#: The input formats :func:`read_plan` recognises.
FORMATS = ("simple", "threaded", "openai", "export")
ROLES = ("user", "assistant", "system", "tool")
MAX_KEY_CHARS = 128  # Ingest's limit on an idempotency key
MAX_LABEL_CHARS = 200  # Ingest's limit on a thread label
DEFAULT_BATCH_SIZE = 100
#: Bytes of content per AddMessages call (Ingest refuses more than 4 MiB of content and
#: metadata; this leaves room for the metadata and the protobuf framing).
DEFAULT_BATCH_BYTES = 1_000_000


class InputError(ValueError):
    """A line of the input cannot be imported; ``line`` is its 1-based number."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


class ThreadImportError(Exception):
    """Writing one thread failed; ``__cause__`` is the service's error. Threads imported
    before it are stored; re-running the import resumes. ``stats`` (set by
    :meth:`Importer.run`): what was acknowledged before it stopped."""

    def __init__(self, thread: ImportThread, cause: Exception) -> None:
        super().__init__(
            f"thread {thread.source_id!r} of dataset {thread.dataset!r} (line "
            f"{thread.first_line}, id {thread.thread_id}): {cause}"
        )
        self.thread = thread
        self.stats: ImportStats | None = None


class ImportInterrupted(Exception):
    """:meth:`Importer.stop` was called: the import stopped between batches (the batches
    in flight finished), so ``stats`` says exactly what is stored."""

    def __init__(self, stats: ImportStats) -> None:
        super().__init__("interrupted")
        self.stats = stats


#: Why :func:`read_plan` leaves a record kind out (what the import's summary prints).
SKIP_REASONS = {
    "episode": "episodes are made again by the pipeline from the messages",
    "dataset": "it frames an export",
    "end": "it frames an export",
}


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class ImportMessage:
    """One message to write, with its deterministic idempotency key."""

    role: str
    content: str
    created_at: datetime | None
    metadata: dict[str, Any]
    idempotency_key: str
    line: int
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None

    def to_new_message(self) -> NewMessage:
        """The SDK's message to add."""
        return NewMessage(
            role=self.role,
            content=self.content,
            metadata=self.metadata,
            created_at=self.created_at,
            idempotency_key=self.idempotency_key,
            tool_calls=self.tool_calls,
            tool_call_id=self.tool_call_id,
            name=self.tool_name,
        )


@dataclass(frozen=True)
class ImportOutcome:
    """How an imported conversation turned out (recorded after it is written)."""

    outcome: str
    score: float | None = None
    note: str = ""


@dataclass
class ImportThread:
    """One thread to write: where it goes (``dataset``; ``thread_id``, the file's own with
    ``--keep-thread-ids``, else the id a thread imported before this revision got, still
    looked for so that such an import resumes) and its messages in order."""

    source_id: str
    dataset: str
    thread_id: str
    label: str
    metadata: dict[str, Any]
    format: str
    first_line: int
    messages: list[ImportMessage] = field(default_factory=list)
    source_dataset: str = ""
    #: ``thread_id`` is the file's own (``--keep-thread-ids``): the thread is created
    #: with it. Otherwise the thread is found or created by :func:`thread_key`.
    keeps_id: bool = False
    #: The conversation's outcome, recorded once it is written (format openai).
    outcome: ImportOutcome | None = None

    @property
    def first_created_at(self) -> datetime | None:
        """The earliest message time (threads are imported in this order)."""
        times = [m.created_at for m in self.messages if m.created_at is not None]
        return min(times) if times else None


@dataclass
class ImportPlan:
    """What a file holds: threads in import order, and what was left out."""

    threads: list[ImportThread]
    formats: dict[str, int]  # lines per format
    skipped: dict[str, int]  # records left out, by kind (e.g. "episode")
    warnings: list[str] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        return sum(len(t.messages) for t in self.threads)

    @property
    def datasets(self) -> list[str]:
        return sorted({t.dataset for t in self.threads})


def thread_uuid(dataset: str, source_id: str) -> str:
    """The id an imported thread got before thread keys: ``uuid5(NAMESPACE,
    "<dataset>\\n<source id>")``. Still looked for, in the thread's dataset only, so that an
    import begun then resumes into the same threads; a new import does not create it (a
    writer of another dataset who can guess the source ids could create it first)."""
    return str(uuid.uuid5(NAMESPACE, f"{dataset}\n{source_id}"))


#: The thread key (``CreateThreadRequest.idempotency_key``) of an imported thread:
#: ``import:<source thread id>``, or of its SHA-256 when the id is too long for a key.
THREAD_KEY_PREFIX = "import:"


def thread_key(source_id: str) -> str:
    """The key an imported thread is found or created by, in its dataset: the same source
    thread is the same thread in every run, and its id stays the server's random one."""
    key = THREAD_KEY_PREFIX + source_id
    if len(key) <= MAX_KEY_CHARS:
        return key
    return THREAD_KEY_PREFIX + "sha256:" + hashlib.sha256(source_id.encode()).hexdigest()


def idempotency_key(source_id: str, index: int) -> str:
    """``import:<source thread id>:<index>``; a source id too long for Ingest's 128
    characters is replaced by a SHA-256 prefix of it."""
    key = f"import:{source_id}:{index}"
    if len(key) <= MAX_KEY_CHARS:
        return key
    digest = hashlib.sha256(source_id.encode()).hexdigest()[:32]
    return f"import:sha256-{digest}:{index}"


def _time(value: Any, line: int, name: str) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    if not isinstance(value, str):
        raise InputError(line, f"{name} must be an ISO 8601 string, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            line, f"{name} {value!r} is not ISO 8601 (e.g. 2024-05-01T09:30:00Z)"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _text(obj: Mapping[str, Any], key: str, line: int, *, required: bool = True) -> str:
    value = obj.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise InputError(line, f"{key!r} must be a non-empty string")
    return value


def _role(value: Any, line: int) -> str:
    role = value.lower().removeprefix("role_") if isinstance(value, str) else value
    if role == "agent":
        role = "assistant"
    if role not in ROLES:
        raise InputError(line, f"role {value!r} is not one of {', '.join(ROLES)}")
    return str(role)


def _tool_calls(value: Any, line: int) -> tuple[ToolCall, ...]:
    """A message's ``tool_calls`` as OpenAI writes them or flat (:meth:`ToolCall.from_openai`)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InputError(line, "'tool_calls' must be a list")
    calls = []
    for i, c in enumerate(value):
        try:
            calls.append(ToolCall.from_openai(c if isinstance(c, dict) else {}))
        except ValueError as err:
            raise InputError(line, f"tool_calls[{i}] {err}") from None
    return tuple(calls)


def _message(
    m: Mapping[str, Any],
    line: int,
    *,
    key: str,
    created_at: datetime | None,
    metadata: Any = None,
) -> ImportMessage:
    """One message of any format: role, content, and its tool parts. ``name`` is the
    speaker (stored as ``metadata["name"]``), except on a tool message that answers a call,
    where OpenAI's format makes it the tool's name."""
    role = _role(m.get("role"), line)
    calls = _tool_calls(m.get("tool_calls"), line)
    call_id = m.get("tool_call_id") if isinstance(m.get("tool_call_id"), str) else None
    name = m.get("name") if isinstance(m.get("name"), str) else None
    tool_name = name if role == "tool" and call_id else None
    return ImportMessage(
        role=role,
        # An assistant's turn may be its calls alone, a tool's result may be empty.
        content=_text(m, "content", line, required=not calls and role != "tool"),
        created_at=created_at,
        metadata=_metadata(
            m.get("metadata") if metadata is None else metadata,
            line,
            None if tool_name else name,
        ),
        idempotency_key=key,
        line=line,
        tool_calls=calls,
        tool_call_id=call_id,
        tool_name=tool_name,
    )


_OUTCOMES = ("success", "failure", "partial")


def _outcome(value: Any, line: int) -> ImportOutcome | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = {"outcome": value}
    if not isinstance(value, dict) or value.get("outcome") not in _OUTCOMES:
        raise InputError(
            line, "'outcome' must be success, failure or partial (or {'outcome', 'score', 'note'})"
        )
    score = value.get("score")
    if score is not None and (not isinstance(score, int | float) or not 0 <= score <= 1):
        raise InputError(line, "'outcome.score' must be a number in [0, 1]")
    note = value.get("note") or ""
    if not isinstance(note, str):
        raise InputError(line, "'outcome.note' must be a string")
    return ImportOutcome(str(value["outcome"]), None if score is None else float(score), note)


def _metadata(value: Any, line: int, name: str | None = None) -> dict[str, Any]:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise InputError(line, "metadata must be a JSON object")
    if name and "name" not in value:
        value = {**value, "name": name}
    return value


class _Builder:
    """Collects threads across lines (in first-seen order) while reading."""

    def __init__(self, dataset: str | None, keep_thread_ids: bool) -> None:
        self.dataset = dataset
        self.keep_thread_ids = keep_thread_ids
        self.threads: dict[tuple[str, str], ImportThread] = {}
        # export: source thread id -> its thread record (dataset, label, metadata)
        self.export_threads: dict[str, tuple[int, dict[str, Any]]] = {}
        self.export_messages: dict[str, list[tuple[int, int, dict[str, Any]]]] = {}
        self.formats: dict[str, int] = {}
        self.skipped: dict[str, int] = {}
        self.export_end = False

    def target(self, source_dataset: str | None, line: int) -> str:
        dataset = self.dataset or source_dataset
        if not dataset:
            raise InputError(line, "no dataset: the record names none and --dataset is not set")
        if len(dataset) > MAX_DATASET_CHARS or not DATASET_PATTERN.fullmatch(dataset):
            raise InputError(
                line,
                f"dataset {dataset[:80]!r} is not valid: use letters, digits and _ . : @ -, "
                "with / between segments (e.g. acme/user_42)",
            )
        return dataset

    def thread(
        self,
        *,
        source_id: str,
        source_dataset: str,
        line: int,
        fmt: str,
        label: str = "",
        metadata: dict[str, Any] | None = None,
        thread_id: str | None = None,
    ) -> ImportThread:
        dataset = self.target(source_dataset, line)
        key = (dataset, source_id)
        thread = self.threads.get(key)
        if thread is None:
            thread = ImportThread(
                source_id=source_id,
                dataset=dataset,
                thread_id=thread_id or thread_uuid(dataset, source_id),
                label=(label or "")[:MAX_LABEL_CHARS],
                metadata=metadata or {},
                format=fmt,
                first_line=line,
                source_dataset=source_dataset,
                keeps_id=thread_id is not None,
            )
            self.threads[key] = thread
        elif thread.source_dataset != source_dataset:
            raise InputError(
                line,
                f"thread {source_id!r} of dataset {source_dataset!r} would merge with the "
                f"thread of the same id from dataset {thread.source_dataset!r} (line "
                f"{thread.first_line}) into {dataset!r}; import them separately",
            )
        elif label and not thread.label:
            thread.label = label[:MAX_LABEL_CHARS]
        return thread

    def simple(self, obj: dict[str, Any], line: int) -> None:
        source_id = str(obj.get("thread") or "")
        if not source_id:
            raise InputError(line, "'thread' (the source thread id) must be set")
        source_dataset = obj.get("dataset")
        if source_dataset is not None and not isinstance(source_dataset, str):
            raise InputError(line, "'dataset' must be a string")
        thread = self.thread(
            source_id=source_id,
            source_dataset=source_dataset or "",
            line=line,
            fmt="simple",
            label=str(obj.get("label") or ""),
            metadata={"source_thread": source_id},
        )
        thread.messages.append(
            _message(
                obj,
                line,
                key=idempotency_key(source_id, len(thread.messages)),
                created_at=_time(obj.get("ts"), line, "ts"),
            )
        )

    def threaded(self, obj: dict[str, Any], line: int) -> None:
        conversation = obj.get("conversation_id")
        if not isinstance(conversation, str) or not conversation:
            raise InputError(line, "'conversation_id' must be a non-empty string")
        threads = obj.get("threads")
        if not isinstance(threads, list):
            raise InputError(line, "'threads' must be a list")
        for t in threads:
            if not isinstance(t, dict):
                raise InputError(line, "every item of 'threads' must be an object")
            source_id = _text(t, "thread_id", line)
            started = _time(t.get("started_at"), line, "started_at")
            thread = self.thread(
                source_id=source_id,
                source_dataset=conversation,
                line=line,
                fmt="threaded",
                label=source_id,
                metadata={"source_thread": source_id},
            )
            for m in t.get("messages") or []:
                if not isinstance(m, dict):
                    raise InputError(line, f"a message of {source_id!r} is not an object")
                thread.messages.append(
                    _message(
                        m,
                        line,
                        key=idempotency_key(source_id, len(thread.messages)),
                        created_at=_time(m.get("ts"), line, "ts") or started,
                    )
                )

    def openai(self, obj: dict[str, Any], line: int, raw: str) -> None:
        messages = obj.get("messages")
        if not isinstance(messages, list):
            raise InputError(line, "'messages' must be a list")
        source = obj.get("id", obj.get("thread"))
        if source is not None and not isinstance(source, str | int):
            raise InputError(line, "'id' must be a string")
        # Without an id, the line's own digest: the same line is the same thread.
        source_id = (
            str(source) if source is not None else hashlib.sha256(raw.encode()).hexdigest()[:24]
        )
        source_dataset = obj.get("dataset")
        if source_dataset is not None and not isinstance(source_dataset, str):
            raise InputError(line, "'dataset' must be a string")
        thread = self.thread(
            source_id=source_id,
            source_dataset=source_dataset or "",
            line=line,
            fmt="openai",
            label=str(obj.get("label") or source_id),
            metadata={"source_thread": source_id},
        )
        thread.outcome = _outcome(obj.get("outcome"), line)
        for m in messages:
            if not isinstance(m, dict):
                raise InputError(line, f"a message of {source_id!r} is not an object")
            thread.messages.append(
                _message(
                    m,
                    line,
                    key=idempotency_key(source_id, len(thread.messages)),
                    created_at=_time(m.get("ts", m.get("created_at")), line, "ts"),
                )
            )

    def export(self, obj: dict[str, Any], line: int) -> None:
        kind = obj["type"]
        if not isinstance(kind, str):
            raise InputError(line, f"'type' must be a string, got {kind!r}")
        if kind == "end":
            self.export_end = True
        if kind not in ("thread", "message"):
            # episodes are made again by the pipeline; "dataset" and "end" frame the
            # export; a type this reader does not know is left out, and counted.
            self.skipped[kind] = self.skipped.get(kind, 0) + 1
            return
        nested = obj.get(kind)
        record: dict[str, Any] = nested if isinstance(nested, dict) else obj
        source_id = _text(record, "thread_id", line)
        if kind == "thread":
            if source_id in self.export_threads:
                raise InputError(line, f"thread {source_id} is listed twice")
            self.export_threads[source_id] = (line, record)
        else:
            sequence = record.get("sequence")
            if not isinstance(sequence, int) or sequence < 1:
                raise InputError(line, "'sequence' must be a positive integer")
            self.export_messages.setdefault(source_id, []).append((sequence, line, record))

    def finish_export(self) -> None:
        """Export messages join their thread records once the whole file is read."""
        for source_id in dict.fromkeys([*self.export_threads, *self.export_messages]):
            line, record = self.export_threads.get(source_id, (0, {}))
            messages = sorted(self.export_messages.get(source_id, []), key=lambda m: m[0])
            first_line = line or (messages[0][1] if messages else 0)
            source_dataset = record.get("dataset") if isinstance(record.get("dataset"), str) else ""
            thread_id = None
            if self.keep_thread_ids:
                try:
                    thread_id = str(uuid.UUID(source_id))
                except ValueError:
                    raise InputError(
                        first_line, f"--keep-thread-ids: {source_id!r} is not a UUID"
                    ) from None
            thread = self.thread(
                source_id=source_id,
                source_dataset=source_dataset or "",
                line=first_line,
                fmt="export",
                label=str(record.get("label") or ""),
                metadata=_metadata(record.get("metadata"), first_line),
                thread_id=thread_id,
            )
            seen: set[int] = set()
            for sequence, mline, m in messages:
                if sequence in seen:
                    raise InputError(mline, f"message {sequence} of thread {source_id} is repeated")
                seen.add(sequence)
                key = m.get("idempotency_key")
                thread.messages.append(
                    _message(
                        # The speaker is in the exported metadata already; "name" is the
                        # tool's on a tool result.
                        {**m, "name": m.get("name") if m.get("tool_call_id") else None},
                        mline,
                        key=key
                        if isinstance(key, str) and key and len(key) <= MAX_KEY_CHARS
                        else idempotency_key(source_id, sequence),
                        created_at=_time(m.get("created_at"), mline, "created_at"),
                        metadata=m.get("metadata") or {},
                    )
                )


def read_plan(
    lines: Iterable[str], *, dataset: str | None = None, keep_thread_ids: bool = False
) -> ImportPlan:
    """Reads JSON lines in any of :data:`FORMATS` (detected per line) into an import plan.

    ``dataset`` overrides every record's dataset. ``keep_thread_ids`` (export format only)
    keeps the exported thread ids instead of deriving new ones — for restoring a backup
    into an empty suite. Threads come out ordered by their first message's time (those
    without timestamps last, in file order). Raises :class:`InputError` naming the line.
    """
    builder = _Builder(dataset, keep_thread_ids)
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text:
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(number, f"not JSON: {err.msg}") from None
        if not isinstance(obj, dict):
            raise InputError(number, "not a JSON object")
        if "type" in obj:
            fmt = "export"
            builder.export(obj, number)
        elif "threads" in obj:
            fmt = "threaded"
            builder.threaded(obj, number)
        elif "messages" in obj:
            fmt = "openai"
            builder.openai(obj, number, text)
        elif "thread" in obj and ("content" in obj or "tool_calls" in obj):
            fmt = "simple"
            builder.simple(obj, number)
        else:
            raise InputError(
                number,
                "not a record of a known format: expected a message ({'thread', 'role', "
                "'content', …}), a conversation ({'conversation_id', 'threads'} or OpenAI's "
                "{'messages': [...]}) or an export record ({'type': 'thread'|'message'|"
                "'episode', …})",
            )
        builder.formats[fmt] = builder.formats.get(fmt, 0) + 1
    builder.finish_export()
    for thread in builder.threads.values():
        if thread.format == "simple" and not thread.label:  # no line of it named one
            thread.label = thread.source_id[:MAX_LABEL_CHARS]
    far_future = datetime.max.replace(tzinfo=UTC)
    threads = sorted(builder.threads.values(), key=lambda t: t.first_created_at or far_future)
    warnings = []
    if builder.formats.get("export") and not builder.export_end:
        warnings.append(
            "the export has no 'end' record: it did not complete, so threads or messages may "
            "be missing"
        )
    return ImportPlan(
        threads=threads, formats=builder.formats, skipped=builder.skipped, warnings=warnings
    )


def batches(
    messages: Sequence[ImportMessage],
    size: int = DEFAULT_BATCH_SIZE,
    max_bytes: int = DEFAULT_BATCH_BYTES,
) -> list[list[ImportMessage]]:
    """Splits a thread's messages into AddMessages calls of at most ``size`` messages and
    about ``max_bytes`` of content and metadata (a single larger message goes alone)."""
    if size < 1:
        raise ValueError("batch size must be at least 1")
    out: list[list[ImportMessage]] = []
    current: list[ImportMessage] = []
    current_bytes = 0
    for message in messages:
        weight = len(message.content.encode()) + len(json.dumps(message.metadata))
        if current and (len(current) >= size or current_bytes + weight > max_bytes):
            out.append(current)
            current, current_bytes = [], 0
        current.append(message)
        current_bytes += weight
    if current:
        out.append(current)
    return out


# --------------------------------------------------------------------------- writing


class Writer(Protocol):
    """What the import needs of :class:`episodic.sdk.client.EpisodicClient`."""

    def create_thread(
        self,
        dataset: str,
        *,
        label: str = "",
        metadata: Mapping[str, Any] | None = None,
        thread_id: str | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
    ) -> Thread: ...

    def get_thread(self, thread_id: str, *, timeout: float | None = None) -> Thread: ...

    def list_messages(
        self,
        thread_id: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        start_sequence: int = 0,
        end_sequence: int = 0,
        timeout: float | None = None,
    ) -> Page[Message]: ...

    def add_messages(
        self, thread_id: str, messages: Iterable[Any], *, timeout: float | None = None
    ) -> AddMessagesResult: ...

    def end_thread(self, thread_id: str, *, timeout: float | None = None) -> EndThreadResult: ...

    def record_outcome(
        self,
        thread_id: str,
        outcome: str,
        *,
        score: float | None = None,
        note: str = "",
        episode_id: str | None = None,
        timeout: float | None = None,
    ) -> Any: ...


@dataclass
class ImportStats:
    """What an import did. ``messages`` were acknowledged by Ingest: ``stored`` by this
    run, ``already_stored`` before it (skipped, or answered from their idempotency key)."""

    threads: int = 0
    threads_created: int = 0
    threads_existing: int = 0
    messages: int = 0
    stored: int = 0
    already_stored: int = 0
    threads_ended: int = 0
    episodes_queued: int = 0
    outcomes: int = 0  # outcomes recorded (format openai)
    #: Threads whose messages are all stored (and ended, and their outcome recorded).
    threads_complete: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        """Messages acknowledged per second."""
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        """The final line: counts, time and rate."""
        return (
            f"imported {self.messages:,} messages in {self.threads:,} threads "
            f"({self.stored:,} new, {self.already_stored:,} already stored; "
            f"{self.threads_created:,} threads created) in {self.seconds:.1f} s: "
            f"{self.rate:,.0f} msg/s; {self.episodes_queued:,} episodes queued"
            + (f"; {self.outcomes:,} outcomes recorded" if self.outcomes else "")
        )

    def stop_report(self, plan: ImportPlan) -> str:
        """Where an import that did not finish stopped: what Ingest acknowledged, of what."""
        return (
            f"{self.messages:,} of {plan.message_count:,} messages acknowledged "
            f"({self.stored:,} new, {self.already_stored:,} already stored); "
            f"{self.threads_complete:,} of {len(plan.threads):,} threads complete"
        )

    def as_json(self) -> dict[str, Any]:
        """The counts as ``episodic import --json`` prints them."""
        return {
            "threads": self.threads,
            "threads_created": self.threads_created,
            "threads_complete": self.threads_complete,
            "messages": self.messages,
            "stored": self.stored,
            "already_stored": self.already_stored,
            "threads_ended": self.threads_ended,
            "episodes_queued": self.episodes_queued,
            "outcomes": self.outcomes,
            "seconds": round(self.seconds, 3),
            "messages_per_second": round(self.rate, 1),
        }


R = TypeVar("R")


def _retrying(fn: Callable[[], R], attempts: int = 5, delay: float = 0.2) -> R:
    """Repeats a call that failed with UNAVAILABLE or DEADLINE_EXCEEDED (safe here: thread
    ids and idempotency keys make every write of the import repeatable)."""
    for attempt in range(attempts):
        try:
            return fn()
        except (UnavailableError, DeadlineExceededError):
            if attempt == attempts - 1:
                raise
            time.sleep(delay * 2**attempt)
    raise AssertionError("unreachable")


class Importer:
    """Writes an :class:`ImportPlan` through the SDK (see the module's documentation for
    the guarantees). ``workers`` > 1 imports that many threads at once (each thread's
    messages stay in order); ``progress`` is called with the number of messages each
    acknowledged batch (or skipped prefix) holds."""

    def __init__(
        self,
        client: Writer,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
        end_threads: bool = True,
        workers: int = 1,
        progress: Callable[[int], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.client = client
        self.batch_size = batch_size
        self.batch_bytes = batch_bytes
        self.end_threads = end_threads
        self.workers = workers
        self.progress = progress or (lambda n: None)
        self.clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        #: What the running (or last) import acknowledged so far.
        self.stats = ImportStats()

    def stop(self) -> None:
        """Asks :meth:`run` to stop between batches (safe from a signal handler): the
        batches in flight finish, then it raises :class:`ImportInterrupted`."""
        self._stop.set()

    def run(self, plan: ImportPlan) -> ImportStats:
        """Imports every thread; raises :class:`ThreadImportError` on the first failure, or
        :class:`ImportInterrupted` after :meth:`stop` (the threads before it are stored, and
        the error's ``stats`` say what was; a re-run resumes)."""
        stats = self.stats = ImportStats()
        self._stop.clear()
        started = self.clock()
        try:
            if self.workers == 1:
                for thread in plan.threads:
                    self._one(thread, stats)
            else:
                with ThreadPoolExecutor(self.workers, thread_name_prefix="import") as pool:
                    futures = [pool.submit(self._one, t, stats) for t in plan.threads]
                    done, _ = wait(futures, return_when=FIRST_EXCEPTION)
                    failed = [f for f in done if f.exception() is not None]
                    if failed:
                        self._stop.set()  # the other workers stop at their next batch
                        for f in futures:
                            f.cancel()
                        errors = [e for f in failed if (e := f.exception()) is not None]
                        # A thread that failed is the news; the others were only stopped.
                        raise next(
                            (e for e in errors if not isinstance(e, ImportInterrupted)),
                            errors[0],
                        )
        except (ThreadImportError, ImportInterrupted) as err:
            stats.seconds = self.clock() - started
            err.stats = stats
            raise
        finally:
            stats.seconds = self.clock() - started
        return stats

    def _one(self, thread: ImportThread, stats: ImportStats) -> None:
        if self._stop.is_set():
            raise ImportInterrupted(stats)
        try:
            self.import_thread(thread, stats)
        except (ThreadImportError, ImportInterrupted):
            raise
        except Exception as err:
            raise ThreadImportError(thread, err) from err
        self._count(stats, threads_complete=1)

    def _count(self, stats: ImportStats, **deltas: int) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(stats, name, getattr(stats, name) + delta)

    def import_thread(self, thread: ImportThread, stats: ImportStats) -> None:
        """Creates (or finds) the thread, adds the messages it lacks, and ends it."""
        client = self.client
        existing, thread_id = (
            self._thread_by_id(thread) if thread.keeps_id else self._thread_by_key(thread)
        )
        self._count(
            stats,
            threads=1,
            threads_created=existing is None,
            threads_existing=existing is not None,
        )
        messages = thread.messages
        skipped = self._stored_prefix(thread, thread_id, existing)
        if skipped:
            self._count(stats, messages=skipped, already_stored=skipped)
            self.progress(skipped)
        stored_now = 0
        for batch in batches(messages[skipped:], self.batch_size, self.batch_bytes):
            if self._stop.is_set():
                raise ImportInterrupted(stats)
            items = [m.to_new_message() for m in batch]
            result = _retrying(partial(client.add_messages, thread_id, items))
            stored_now += result.stored_count
            self._count(
                stats,
                messages=len(batch),
                stored=result.stored_count,
                already_stored=len(batch) - result.stored_count,
            )
            self.progress(len(batch))
        owed = existing is not None and existing.captured_sequence < existing.message_count
        if self.end_threads and messages and (stored_now or existing is None or owed):
            ended = _retrying(lambda: client.end_thread(thread_id))
            self._count(stats, threads_ended=1, episodes_queued=int(ended.episode_queued))
        outcome = thread.outcome
        if outcome is not None:  # idempotent: the last one stands
            _retrying(
                lambda: client.record_outcome(
                    thread_id, outcome.outcome, score=outcome.score, note=outcome.note
                )
            )
            self._count(stats, outcomes=1)

    def _thread_by_id(self, thread: ImportThread) -> tuple[Thread | None, str]:
        """``--keep-thread-ids``: the thread created with the file's id, or found by it in
        its dataset (None: created now); another dataset's thread of that id stops it."""
        client = self.client
        try:
            _retrying(
                lambda: client.create_thread(
                    thread.dataset,
                    label=thread.label,
                    metadata=thread.metadata or None,
                    thread_id=thread.thread_id,
                )
            )
        except AlreadyExistsError:
            existing = _retrying(lambda: client.get_thread(thread.thread_id))
            if existing.dataset != thread.dataset:
                raise ValueError(
                    f"thread {thread.thread_id} exists in dataset {existing.dataset!r}, "
                    f"not {thread.dataset!r}"
                ) from None
            return existing, thread.thread_id
        return None, thread.thread_id

    def _thread_by_key(self, thread: ImportThread) -> tuple[Thread | None, str]:
        """The thread found or created by :func:`thread_key` in its dataset, or the one an
        import before thread keys created under :func:`thread_uuid` there (so that such an
        import resumes into it). A thread of that old id in *another* dataset is not ours:
        it is ignored, not an error. (None, id) when created now — or found without a
        message, as a run stopped right after creating it leaves it."""
        client = self.client
        try:
            legacy = _retrying(lambda: client.get_thread(thread.thread_id))
        except NotFoundError:
            legacy = None
        if legacy is not None and legacy.dataset == thread.dataset:
            return legacy, legacy.thread_id
        made = _retrying(
            lambda: client.create_thread(
                thread.dataset,
                label=thread.label,
                metadata=thread.metadata or None,
                idempotency_key=thread_key(thread.source_id),
            )
        )
        return (made if made.message_count else None), made.thread_id

    def _stored_prefix(self, thread: ImportThread, thread_id: str, existing: Thread | None) -> int:
        """How many of the thread's first messages are stored already: the thread's
        message count k, when its message k carries the key of our message k (batches are
        written in order and each is atomic, so what an earlier run stored is a prefix)."""
        if existing is None or existing.message_count == 0 or not thread.messages:
            return 0
        k = min(existing.message_count, len(thread.messages))
        page = _retrying(
            lambda: self.client.list_messages(
                thread_id, start_sequence=k, end_sequence=k, page_size=1
            )
        )
        if page.items and page.items[0].idempotency_key == thread.messages[k - 1].idempotency_key:
            return k
        return 0  # not ours in that order: send everything, the keys deduplicate


# --------------------------------------------------------------------------- progress


def _clock_text(seconds: float) -> str:
    seconds = max(0, int(seconds + 0.5))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressBar:
    """A plain-text progress bar on a terminal (``stream``, default stderr): done/total,
    percent, rate in messages/s and ETA, redrawn at most every ``interval`` seconds. When
    the stream is not a terminal it draws nothing (the caller prints a final line).
    Thread-safe."""

    def __init__(
        self,
        total: int,
        *,
        stream: IO[str] | None = None,
        enabled: bool | None = None,
        width: int = 30,
        interval: float = 0.1,
        unit: str = "msgs",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.width = width
        self.interval = interval
        self.unit = unit
        self.clock = clock
        self.done = 0
        self.started = clock()
        self._drawn_at: float | None = None
        self._longest = 0
        self._lock = threading.Lock()

    def render(self) -> str:
        """The bar as one line (without the carriage return)."""
        elapsed = self.clock() - self.started
        fraction = min(1.0, self.done / self.total) if self.total else 1.0
        filled = int(fraction * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.done >= self.total:
            eta = "done"
        elif rate > 0:
            eta = f"ETA {_clock_text((self.total - self.done) / rate)}"
        else:
            eta = "ETA -:--"
        return (
            f"[{bar}] {self.done:,}/{self.total:,} {self.unit} {fraction:4.0%} "
            f"{rate:,.0f} msg/s {eta}"
        )

    def update(self, n: int) -> None:
        """Counts ``n`` more done and redraws when due."""
        with self._lock:
            self.done += n
            if not self.enabled:
                return
            now = self.clock()
            if (
                self._drawn_at is not None
                and now - self._drawn_at < self.interval
                and self.done < self.total
            ):
                return
            self._drawn_at = now
            self._draw()

    def close(self) -> None:
        """Draws the last state and ends the line (terminal only)."""
        with self._lock:
            if self.enabled:
                self._draw("\n")

    def _draw(self, end: str = "") -> None:
        # Padded to the longest line drawn so far: a shorter line must not leave the tail
        # of a longer one on the terminal.
        line = self.render()
        self._longest = max(self._longest, len(line))
        self.stream.write("\r" + line.ljust(self._longest) + end)
        self.stream.flush()
