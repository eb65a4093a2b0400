"""The checks ``episodic import`` makes before it writes anything.

:func:`episodic.ops.backfill.read_plan` maps lines to threads and messages; this module reads
the file for it and refuses, with the line and the field, everything Ingest would refuse
about the data itself, so that ``--dry-run`` and the real import agree and the real import
refuses a bad file before its first write (no half-import, no empty thread):

- lines: invalid UTF-8, a line over :data:`MAX_LINE_BYTES` (refused before it is read into
  memory), invalid JSON, NaN and infinities, nesting too deep for the JSON parser;
- types: each field the formats read must have its type (a number is no thread id, a list
  no label, ``true`` no sequence);
- times: a time that is not a valid timestamp (out of range, before year 1 or after 9999
  in UTC, NaN) or in the future beyond Ingest's tolerance;
- messages, labels and metadata against Ingest's own limits and rules
  (:class:`episodic.config.IngestSettings`, read from the same ``EPISODIC_MAX_*``
  variables; :data:`episodic.requests.MAX_STRUCT_DEPTH`; the label and key lengths of
  :mod:`episodic.ops.backfill`): content size, NUL characters, lone surrogates (not UTF-8),
  metadata size and depth, label length, an idempotency key reused with other content in
  one thread, and the batch size against the server's limit.

Every bad line is reported, not only the first (up to :data:`MAX_REPORTED`). What needs the
server stays with the server: whether the key may write each dataset, a key stored earlier
with other content, and limits a server was configured with differently from this
environment. A core install (no ``episodic[server]``) does not know Ingest's configurable
size limits; it says so and checks everything else.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import IO, Any

from episodic.errors import InvalidArgument
from episodic.ops.backfill import (
    MAX_KEY_CHARS,
    MAX_LABEL_CHARS,
    ROLES,
    ImportPlan,
    InputError,
    batches,
    read_plan,
)
from episodic.requests import MAX_STRUCT_DEPTH
from episodic.tool_calls import check_arguments, check_call_id, check_tool_name

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_REPORTED",
    "CheckedPlan",
    "Limits",
    "Problem",
    "check_file",
    "ingest_limits",
]

#: Longest line the import reads (a threaded line holds a whole conversation; a message
#: line is at most a message's content and metadata, JSON-escaped). A longer line is
#: refused as it is read, without holding it in memory.
MAX_LINE_BYTES = 64 * 1024 * 1024
#: Most problems reported (the rest are counted).
MAX_REPORTED = 100
#: The largest sequence (int64), and the JSON number range of metadata (a double).
MAX_SEQUENCE = 2**63 - 1
_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """What Ingest refuses. ``None``: unknown to this install (checked by the server only)."""

    max_message_bytes: int | None
    max_metadata_bytes: int | None
    max_batch_messages: int | None
    max_batch_bytes: int | None
    future_tolerance: timedelta | None
    max_label_chars: int = MAX_LABEL_CHARS
    max_key_chars: int = MAX_KEY_CHARS
    max_struct_depth: int = MAX_STRUCT_DEPTH
    note: str = ""


def ingest_limits() -> Limits:
    """Ingest's limits as the services read them (``EPISODIC_MAX_MESSAGE_BYTES``, …, or
    their defaults), from :class:`episodic.config.IngestSettings`; a core install without
    pydantic knows only the fixed ones."""
    try:
        from episodic.config import IngestSettings

        settings = IngestSettings()
    except ModuleNotFoundError:
        reason = "this install has no episodic[server]"
    except ValueError as err:  # pydantic's ValidationError: a bad EPISODIC_MAX_* value
        reason = f"Ingest's settings in this environment are invalid ({err})"
    else:
        return Limits(
            max_message_bytes=settings.max_message_bytes,
            max_metadata_bytes=settings.max_metadata_bytes,
            max_batch_messages=settings.max_batch_messages,
            max_batch_bytes=settings.max_batch_bytes,
            future_tolerance=settings.future_timestamp_tolerance,
        )
    return Limits(
        None,
        None,
        None,
        None,
        None,
        note=f"{reason}: content and metadata sizes and future times are left to the server",
    )


@dataclass(frozen=True)
class Problem:
    """One reason a line cannot be imported."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


@dataclass
class CheckedPlan:
    """The plan (None when a line stopped the reader) and every problem found."""

    plan: ImportPlan | None
    problems: list[Problem] = field(default_factory=list)
    more: int = 0  # problems beyond MAX_REPORTED
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.plan is not None and not self.problems


class _Collector:
    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.more = 0
        self.bad_lines: set[int] = set()

    def add(self, line: int, message: str) -> None:
        self.bad_lines.add(line)
        if len(self.problems) < MAX_REPORTED:
            self.problems.append(Problem(line, message))
        else:
            self.more += 1


class _Bad(Exception):
    """A field of a record is wrong (raised inside the record checks)."""


# --------------------------------------------------------------------------- reading lines


def _lines(handle: IO[bytes], max_line_bytes: int) -> Iterator[tuple[int, str | None, str]]:
    """(line number, text or None, problem): each line decoded, or None with the reason.
    A line longer than ``max_line_bytes`` is skipped in chunks, never held whole."""
    number = 0
    while True:
        raw = handle.readline(max_line_bytes + 1)
        if not raw:
            return
        number += 1
        if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
            size = len(raw)
            while True:  # the rest of the line, a chunk at a time
                chunk = handle.readline(_CHUNK)
                size += len(chunk)
                if not chunk or chunk.endswith(b"\n"):
                    break
            yield (
                number,
                None,
                f"the line is {size:,} bytes; the import reads lines of at most "
                f"{max_line_bytes:,} bytes",
            )
            continue
        try:
            yield number, raw.decode("utf-8"), ""
        except UnicodeDecodeError as err:
            yield number, None, f"not valid UTF-8 (byte {err.start + 1} of the line)"


def _no_constant(name: str) -> Any:
    raise _Bad(f"{name} is not a JSON number (JSON has no NaN or infinities)")


def _parse(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        raise _Bad(f"not JSON: {err.msg}") from None
    except RecursionError:
        raise _Bad(
            f"not JSON this import can read: nested too deeply (metadata may nest at most "
            f"{MAX_STRUCT_DEPTH} levels)"
        ) from None


# --------------------------------------------------------------------------- values


def _type_name(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _optional_str(obj: Mapping[str, Any], key: str, where: str = "") -> str | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    raise _Bad(f"{where}{key!r} must be a string, not {_type_name(value)}")


def _required_str(obj: Mapping[str, Any], key: str, where: str = "") -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        got = "missing" if value is None else _type_name(value)
        raise _Bad(f"{where}{key!r} must be a non-empty string, not {got}")
    return value


def _unicode_problem(value: str, what: str) -> str | None:
    """Text Ingest cannot store: a NUL, or a lone surrogate (not encodable as UTF-8)."""
    if "\x00" in value:
        return f"{what} contains a NUL character, which cannot be stored"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        return (
            f"{what} contains a lone surrogate (\\u{ord(value[err.start]):04x} at character "
            f"{err.start + 1}), which is not valid Unicode"
        )
    return None


def _time(value: Any, what: str, limits: Limits, now: datetime) -> datetime | None:
    """The checks of :mod:`episodic.ops.backfill.reading` ``_time`` and those it lacks: a
    number that is no Unix time, a time outside the Timestamp range (year 1 to 9999 in UTC),
    or one later than Ingest accepts."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _Bad(f"{what} must be an ISO 8601 string or a Unix time, not {_type_name(value)}")
    if isinstance(value, int | float):
        try:
            if not math.isfinite(value):
                raise ValueError
            parsed = datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            raise _Bad(
                f"{what} {value!r} is out of range: a Unix time in seconds between "
                f"{datetime.min.replace(tzinfo=UTC).timestamp():.0f} and "
                f"{datetime.max.replace(tzinfo=UTC).timestamp():.0f}"
            ) from None
    else:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise _Bad(
                f"{what} {value[:80]!r} is not ISO 8601 (e.g. 2024-05-01T09:30:00Z)"
            ) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        try:
            parsed.astimezone(UTC)
        except OverflowError:
            raise _Bad(
                f"{what} {value[:80]!r} is out of range: in UTC it falls before year 1 or "
                "after 9999"
            ) from None
    if limits.future_tolerance is not None and parsed > now + limits.future_tolerance:
        raise _Bad(
            f"{what} {parsed.isoformat()} is in the future (Ingest accepts times at most "
            f"{limits.future_tolerance} ahead of its clock)"
        )
    return parsed


def _metadata_problem(value: dict[str, Any], what: str, limits: Limits) -> str | None:
    """What Ingest's ``check_metadata`` and the request's Struct bounds refuse."""
    depth = 0
    stack: list[tuple[dict[str, Any] | list[Any], int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        depth = max(depth, level)
        children: Iterable[tuple[Any, Any]] = (
            node.items() if isinstance(node, dict) else enumerate(node)
        )
        for key, child in children:
            if isinstance(key, str) and (bad := _unicode_problem(key, f"{what} key")):
                return bad
            if isinstance(child, dict | list):
                stack.append((child, level + 1))
            elif isinstance(child, str):
                if bad := _unicode_problem(child, what):
                    return bad
            elif isinstance(child, int | float) and not isinstance(child, bool):
                try:
                    if not math.isfinite(float(child)):
                        raise OverflowError
                except OverflowError:
                    return f"{what} holds the number {str(child)[:40]}…, too large for JSON"
    if depth > limits.max_struct_depth:
        return (
            f"{what} nests objects and lists {depth} levels deep; the limit is "
            f"{limits.max_struct_depth}"
        )
    if limits.max_metadata_bytes is not None:
        size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
        if size > limits.max_metadata_bytes:
            return (
                f"{what} is {size:,} bytes of JSON; the limit is {limits.max_metadata_bytes:,} "
                "(EPISODIC_MAX_METADATA_BYTES)"
            )
    return None


# --------------------------------------------------------------------------- records


class _Checker:
    """Checks one parsed line of any format (the dispatch of ``read_plan``)."""

    def __init__(self, limits: Limits, now: datetime, report: Callable[[int, str], None]):
        self.limits = limits
        self.now = now
        self.report = report

    def record(self, obj: Any, line: int) -> None:
        if not isinstance(obj, dict):
            raise _Bad("not a JSON object")
        if "type" in obj:
            self.export(obj, line)
        elif "threads" in obj:
            self.threaded(obj, line)
        elif "messages" in obj:
            self.openai(obj, line)
        elif "thread" in obj and ("content" in obj or "tool_calls" in obj):
            self.simple(obj, line)
        # other records: read_plan names them

    def openai(self, obj: dict[str, Any], line: int) -> None:
        _optional_str(obj, "dataset")
        self.label(_optional_str(obj, "label"), line)
        messages = obj.get("messages")
        if not isinstance(messages, list):
            raise _Bad(f"'messages' must be a list, not {_type_name(messages)}")
        for j, m in enumerate(messages):
            where = f"messages[{j}]."
            if not isinstance(m, dict):
                self.report(line, f"{where[:-1]} must be an object, not {_type_name(m)}")
                continue
            self.message(m, line, ts_key="ts", where=where)

    def simple(self, obj: dict[str, Any], line: int) -> None:
        source = obj.get("thread")
        if not isinstance(source, str) or not source:
            raise _Bad(
                f"'thread' (the source thread id) must be a non-empty string, not "
                f"{_type_name(source)}"
            )
        _optional_str(obj, "dataset")
        self.label(_optional_str(obj, "label"), line)
        name = _optional_str(obj, "name")
        self.message(obj, line, ts_key="ts", name=name)

    def threaded(self, obj: dict[str, Any], line: int) -> None:
        _required_str(obj, "conversation_id")
        threads = obj.get("threads")
        if not isinstance(threads, list):
            raise _Bad(f"'threads' must be a list, not {_type_name(threads)}")
        for i, t in enumerate(threads):
            if not isinstance(t, dict):
                raise _Bad(f"threads[{i}] must be an object, not {_type_name(t)}")
            where = f"threads[{i}]."
            source = _required_str(t, "thread_id", where)
            try:
                _time(t.get("started_at"), f"{where}started_at", self.limits, self.now)
            except _Bad as err:
                self.report(line, str(err))
            messages = t.get("messages")
            if messages is None:
                continue
            if not isinstance(messages, list):
                raise _Bad(
                    f"{where}messages (of {source[:80]!r}) must be a list, not "
                    f"{_type_name(messages)}"
                )
            for j, m in enumerate(messages):
                mwhere = f"{where}messages[{j}]."
                if not isinstance(m, dict):
                    self.report(line, f"{mwhere[:-1]} must be an object, not {_type_name(m)}")
                    continue
                try:
                    name = _optional_str(m, "name", mwhere)
                except _Bad as err:
                    self.report(line, str(err))
                    continue
                self.message(m, line, ts_key="ts", name=name, where=mwhere)

    def export(self, obj: dict[str, Any], line: int) -> None:
        kind = obj["type"]
        if not isinstance(kind, str):
            raise _Bad(f"'type' must be a string, not {_type_name(kind)}")
        if kind not in ("thread", "message"):
            return
        nested = obj.get(kind)
        record: dict[str, Any] = nested if isinstance(nested, dict) else obj
        _required_str(record, "thread_id")
        if kind == "thread":
            _optional_str(record, "dataset")
            self.label(_optional_str(record, "label"), line)
            metadata = record.get("metadata")
            if metadata is not None and not isinstance(metadata, dict):
                raise _Bad(f"'metadata' must be an object, not {_type_name(metadata)}")
            if metadata and (bad := _metadata_problem(metadata, "thread metadata", self.limits)):
                self.report(line, bad)
            return
        sequence = record.get("sequence")
        if isinstance(sequence, bool) or not isinstance(sequence, int):
            raise _Bad(f"'sequence' must be a whole number, not {_type_name(sequence)}")
        if not 1 <= sequence <= MAX_SEQUENCE:
            raise _Bad(f"'sequence' {sequence} is out of range (1 to {MAX_SEQUENCE})")
        key = _optional_str(record, "idempotency_key")
        if key and (bad := _unicode_problem(key, "idempotency_key")):
            self.report(line, bad)
        self.message(record, line, ts_key="created_at")

    def label(self, label: str | None, line: int) -> None:
        if not label:
            return
        if len(label) > self.limits.max_label_chars:
            self.report(
                line,
                f"label is {len(label):,} characters; the limit is {self.limits.max_label_chars}",
            )
        elif bad := _unicode_problem(label, "label"):
            self.report(line, bad)

    def message(
        self,
        m: dict[str, Any],
        line: int,
        *,
        ts_key: str,
        name: str | None = None,
        where: str = "",
    ) -> None:
        role = m.get("role")
        normal = role.lower().removeprefix("role_") if isinstance(role, str) else role
        if normal not in (*ROLES, "agent"):
            self.report(line, f"{where}role {role!r} is not one of {', '.join(ROLES)}")
        content = m.get("content")
        calls = self.tool_parts(m, line, where)
        if content is None and (calls or normal == "tool"):
            pass  # an assistant's turn may be its calls alone, a tool's result empty
        elif not isinstance(content, str) or (
            not content.strip() and not calls and normal != "tool"
        ):
            got = (
                "missing"
                if content is None
                else ("blank" if isinstance(content, str) else _type_name(content))
            )
            self.report(line, f"{where}'content' must be a non-empty string, not {got}")
        else:
            size = len(content.encode("utf-8", "surrogatepass"))
            limit = self.limits.max_message_bytes
            if limit is not None and size > limit:
                self.report(
                    line,
                    f"{where}content is {size:,} bytes; the limit is {limit:,} "
                    "(EPISODIC_MAX_MESSAGE_BYTES): split it into several messages",
                )
            elif bad := _unicode_problem(content, f"{where}content"):
                self.report(line, bad)
        self.check(line, lambda: _time(m.get(ts_key), f"{where}{ts_key}", self.limits, self.now))
        metadata = m.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            self.report(line, f"{where}'metadata' must be an object, not {_type_name(metadata)}")
            return
        metadata = dict(metadata or {})
        if name and "name" not in metadata:
            metadata["name"] = name  # as backfill stores it
        if metadata and (bad := _metadata_problem(metadata, f"{where}metadata", self.limits)):
            self.report(line, bad)

    def tool_parts(self, m: dict[str, Any], line: int, where: str) -> int:
        """Checks a message's tool calls as Ingest does (ids, names, arguments a JSON
        object); returns how many it has. Whether a tool result answers a call is Ingest's
        to say (the call may be stored already)."""
        calls = m.get("tool_calls")
        if calls is None:
            return 0
        if not isinstance(calls, list):
            self.report(line, f"{where}'tool_calls' must be a list, not {_type_name(calls)}")
            return 0
        for i, c in enumerate(calls):
            at = f"{where}tool_calls[{i}]"
            function = c.get("function", c) if isinstance(c, dict) else None
            if not isinstance(function, dict):
                self.report(line, f"{at} must be an object with an 'id' and a 'function'")
                continue
            arguments = function.get("arguments", "{}")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            for check, value, part in (
                (check_call_id, str(c.get("id") or ""), "id"),
                (check_tool_name, str(function.get("name") or ""), "name"),
                (check_arguments, arguments, "arguments"),
            ):
                try:
                    check(value, f"{at}.{part}")
                except InvalidArgument as err:
                    self.report(line, str(err))
        return len(calls)

    def check(self, line: int, fn: Callable[[], object]) -> None:
        try:
            fn()
        except _Bad as err:
            self.report(line, str(err))


# --------------------------------------------------------------------------- the plan


def _plan_problems(plan: ImportPlan, limits: Limits, batch_size: int, out: _Collector) -> None:
    """What only the assembled threads show: the thread's own label and metadata (the
    source id is copied into it), idempotency keys reused with other content, batches."""
    if limits.max_batch_messages is not None and batch_size > limits.max_batch_messages:
        out.add(
            0,
            f"--batch-size {batch_size} is over Ingest's {limits.max_batch_messages} messages "
            "a call (EPISODIC_MAX_BATCH_MESSAGES)",
        )
    for t in plan.threads:
        name = f"thread {t.source_id[:80]!r}"
        if t.label and (bad := _unicode_problem(t.label, f"the label of {name}")):
            out.add(t.first_line, bad)
        if t.metadata and (bad := _metadata_problem(t.metadata, f"the metadata of {name}", limits)):
            out.add(t.first_line, bad)
        seen: dict[str, Any] = {}
        for m in t.messages:
            if line_bad := _unicode_problem(m.idempotency_key, "the idempotency key"):
                out.add(m.line, f"{line_bad} (it is made from the source thread id)")
                continue
            if len(m.idempotency_key) > limits.max_key_chars:
                out.add(m.line, f"the idempotency key is over {limits.max_key_chars} characters")
            first = seen.setdefault(m.idempotency_key, m)
            # What Ingest compares of a replay (writes._same_message): its time too.
            if first is not m and first.to_new_message() != m.to_new_message():
                out.add(
                    m.line,
                    f"the idempotency key {m.idempotency_key[:80]!r} of line {first.line} "
                    "comes back with other content (Ingest refuses it: give each message "
                    "its own key)",
                )
        if limits.max_batch_bytes is not None:
            for batch in batches(t.messages, batch_size):
                size = sum(
                    len(m.content.encode("utf-8", "surrogatepass"))
                    + len(json.dumps(m.metadata, separators=(",", ":"), ensure_ascii=False))
                    for m in batch
                )
                if size > limits.max_batch_bytes:
                    out.add(
                        batch[0].line,
                        f"{name}: a call of its messages would hold {size:,} bytes; Ingest's "
                        f"limit is {limits.max_batch_bytes:,} (EPISODIC_MAX_BATCH_BYTES)",
                    )
                    break


def check_file(
    handle: IO[bytes],
    *,
    dataset: str | None = None,
    keep_thread_ids: bool = False,
    batch_size: int = 100,
    limits: Limits | None = None,
    now: datetime | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> CheckedPlan:
    """Reads ``handle`` (bytes) into a plan with :func:`episodic.ops.backfill.read_plan` and
    checks every line and thread; never raises for bad input (it is in ``problems``)."""
    limits = limits or ingest_limits()
    now = now or datetime.now(UTC)
    out = _Collector()
    checker = _Checker(limits, now, out.add)

    def checked() -> Iterator[str]:
        for number, text, problem in _lines(handle, max_line_bytes):
            if text is None:
                out.add(number, problem)
                yield ""  # read_plan counts the line, and skips it
                continue
            before = len(out.bad_lines)
            if text.strip():
                try:
                    checker.record(_parse(text.strip()), number)
                except _Bad as err:
                    out.add(number, str(err))
            yield "" if len(out.bad_lines) > before else text

    lines = checked()
    plan: ImportPlan | None = None
    try:
        plan = read_plan(lines, dataset=dataset, keep_thread_ids=keep_thread_ids)
    except InputError as err:
        if err.line not in out.bad_lines:
            out.add(err.line, str(err).removeprefix(f"line {err.line}: "))
        for _ in lines:  # every line is still checked
            pass
    except (ValueError, OverflowError, RecursionError, OSError) as err:  # not foreseen above
        out.add(0, f"the file cannot be read: {type(err).__name__}: {err}")
        for _ in lines:
            pass
    if plan is not None and not out.problems:
        _plan_problems(plan, limits, batch_size, out)
    out.problems.sort(key=lambda p: p.line)
    return CheckedPlan(plan, out.problems, out.more, limits.note)
