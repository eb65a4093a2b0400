"""Reading an export for a replay: :class:`ExportReader` reads ``episodic export`` lines
one thread at a time (a :class:`Bundle`: the thread's record, messages and episodes) and
refuses what is not an export it can read (:class:`ReplayError`). :func:`parse_time` and
:func:`as_dict` read an exported value; :mod:`.run` reads the bundles with them too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from episodic.ops.export import FORMAT, FORMAT_VERSION


class ReplayError(ValueError):
    """The input is not an export replay can read (a ValueError: the CLI answers 2)."""


def parse_time(value: Any) -> datetime | None:
    """An exported time (ISO 8601, ``Z`` allowed) as an aware datetime, UTC when it names no
    zone; None when it is missing or empty."""
    if not isinstance(value, str) or not value:
        return None
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def as_dict(value: Any) -> dict[str, Any]:
    """An exported object (``metadata``); ``{}`` when it is missing or not an object."""
    return value if isinstance(value, dict) else {}


@dataclass
class Bundle:
    """One thread of an export: its record, messages and episodes."""

    thread: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)


class ExportReader:
    """Reads ``episodic export`` lines one thread at a time (the export writes a thread's
    messages and episodes right after it). ``header`` is the ``dataset`` line; ``complete``
    says whether the ``end`` line was seen (after :meth:`bundles` is exhausted)."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = enumerate(lines, start=1)
        self.header: dict[str, Any] = {}
        self.complete = False
        for number, record in self._records():
            if record.get("type") != "dataset":
                raise ReplayError(
                    f"line {number}: not an episodic export (the first record must be "
                    '{"type": "dataset", …}, as `episodic export` writes it)'
                )
            if record.get("format", FORMAT) != FORMAT:
                raise ReplayError(f"line {number}: format {record.get('format')!r} is not {FORMAT}")
            version = record.get("version")
            if not isinstance(version, int) or version > FORMAT_VERSION:
                raise ReplayError(
                    f"line {number}: export format version {version!r}; this replay reads "
                    f"up to {FORMAT_VERSION} (upgrade episodic)"
                )
            self.header = record
            break
        else:
            raise ReplayError("the export is empty")

    def _records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for number, raw in self._lines:
            text = raw.strip()
            if not text:
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as err:
                raise ReplayError(f"line {number}: not JSON: {err.msg}") from None
            if not isinstance(record, dict):
                raise ReplayError(f"line {number}: not a JSON object")
            yield number, record

    def bundles(self) -> Iterator[Bundle]:
        current: Bundle | None = None
        done: set[str] = set()
        for number, record in self._records():
            kind = record.get("type")
            if kind == "thread":
                if current is not None:
                    done.add(current.thread["thread_id"])
                    yield current
                thread_id = record.get("thread_id")
                if not isinstance(thread_id, str) or not thread_id or thread_id in done:
                    raise ReplayError(f"line {number}: a thread without an id, or listed twice")
                current = Bundle(record)
            elif kind in ("message", "episode"):
                if current is None or record.get("thread_id") != current.thread["thread_id"]:
                    raise ReplayError(
                        f"line {number}: a {kind} of thread {record.get('thread_id')} outside "
                        "that thread's block (replay reads exports as `episodic export` "
                        "writes them: each thread followed by its messages and episodes)"
                    )
                (current.messages if kind == "message" else current.episodes).append(record)
            elif kind == "end":
                self.complete = True
            # Other types (written by a newer exporter) are ignored.
        if current is not None:
            yield current
