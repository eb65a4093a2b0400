"""Reading an import file into a plan: :func:`read_plan` reads JSON lines in any of
:data:`FORMATS` (detected per line; :mod:`episodic.ops.backfill` describes them) into an
:class:`~episodic.ops.backfill.plan.ImportPlan`.

The checks of each field (times, roles, tool calls, outcomes, metadata) and the builder that
collects threads across lines are private to it; a line that cannot be imported raises
:class:`InputError`, naming the line. Nothing here talks to a service.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from episodic.ops.backfill.plan import (
    MAX_KEY_CHARS,
    ImportMessage,
    ImportOutcome,
    ImportPlan,
    ImportThread,
    idempotency_key,
    thread_uuid,
)
from episodic.tool_calls import ToolCall
from episodic.validation import DATASET_PATTERN, MAX_DATASET_CHARS

#: The input formats :func:`read_plan` recognises.
FORMATS = ("simple", "threaded", "openai", "export")
ROLES = ("user", "assistant", "system", "tool")
MAX_LABEL_CHARS = 200  # Ingest's limit on a thread label


class InputError(ValueError):
    """A line of the input cannot be imported; ``line`` is its 1-based number."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


#: Why :func:`read_plan` leaves a record kind out (what the import's summary prints).
SKIP_REASONS = {
    "episode": "episodes are made again by the pipeline from the messages",
    "dataset": "it frames an export",
    "end": "it frames an export",
    "repeated conversation": "a line without an id the same as an earlier one (the same "
    "conversation twice; give each its own 'id' if they are two)",
}


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

    def skip(self, kind: str) -> None:
        """Counts a record left out (:data:`SKIP_REASONS` says why)."""
        self.skipped[kind] = self.skipped.get(kind, 0) + 1

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
        if source is None and (self.target(source_dataset, line), source_id) in self.threads:
            # The same line again: its messages were appended to the first's thread under
            # new keys, and the conversation was stored twice.
            self.skip("repeated conversation")
            return
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
            self.skip(kind)
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


def _date_from_neighbours(thread: ImportThread) -> list[int]:
    """Gives each message of ``thread`` without a time the time of the dated message before
    it (the first ones, the first dated one's); returns their lines. Without a time a
    message is stored at its arrival, so one undated line (an agent log's system prompt)
    made a conversation of 2024 end today, the most recent of all to Recall. A thread
    with no time at all is left to arrive now, as the import's guide says."""
    times = [m.created_at for m in thread.messages]
    dated = [t for t in times if t is not None]
    if not dated or len(dated) == len(times):
        return []
    filled, last = [], dated[0]
    for i, message in enumerate(thread.messages):
        if message.created_at is not None:
            last = message.created_at
            continue
        thread.messages[i] = dataclasses.replace(message, created_at=last)
        filled.append(message.line)
    return filled


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
    undated: list[int] = []
    for thread in builder.threads.values():
        if thread.format == "simple" and not thread.label:  # no line of it named one
            thread.label = thread.source_id[:MAX_LABEL_CHARS]
        undated.extend(_date_from_neighbours(thread))
    far_future = datetime.max.replace(tzinfo=UTC)
    threads = sorted(builder.threads.values(), key=lambda t: t.first_created_at or far_future)
    warnings = []
    if undated:
        numbers = sorted(set(undated))  # OpenAI's format: one line, many messages
        lines = ", ".join(str(n) for n in numbers[:5])
        more = "…" if len(numbers) > 5 else ""
        warnings.append(
            f"{len(undated)} message(s) without a time (lines {lines}{more}) took the time "
            "of the message before them in their thread (the first ones, the next one's)"
        )
    if builder.formats.get("export") and not builder.export_end:
        warnings.append(
            "the export has no 'end' record: it did not complete, so threads or messages may "
            "be missing"
        )
    return ImportPlan(
        threads=threads, formats=builder.formats, skipped=builder.skipped, warnings=warnings
    )
