"""What the write path hands around: a message as sent, its receipt, a page, a result.

Their own module because every other part of the domain (the checks, the statements, the
writes, the reads) takes or returns them, and the servicer builds them from protobuf.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from episodic.tool_calls import ToolCall

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


def has_tool_parts(messages: list[NewMessage]) -> bool:
    return any(m.tool_calls or m.tool_call_id for m in messages)
