"""The types every provider shares: what a summariser reads and returns, and the protocols
of summarisers and embedders. Pure data, no I/O: every other provider module imports this one
and nothing here imports them.

A summariser reads a :class:`SummaryRequest` — the thread's un-compacted messages up to the
end of the episode's window, where the window starts, and the previous episode's summary —
and returns a :class:`SummaryResult`. The summary is rolling (it may cover the whole thread,
weighted towards the window); key learnings come from the window only, so successive
episodes never re-learn the same lines.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NamedTuple, Protocol, cast, runtime_checkable

import numpy as np

__all__ = [
    "ACTORS",
    "EVENT_TYPES",
    "Actor",
    "ChatMessage",
    "Embedder",
    "EventType",
    "SpanDocument",
    "Summariser",
    "SummaryRequest",
    "SummaryResult",
    "actor_of_role",
    "speaker_from_metadata",
    "speaker_label",
]

#: Event types of seed 002, plus "conversation" for everything else.
EVENT_TYPES: tuple[str, ...] = ("decision", "tool_call", "feedback", "milestone", "conversation")
#: Actors of seed 002.
ACTORS: tuple[str, ...] = ("user", "agent", "system")

EventType = Literal["decision", "tool_call", "feedback", "milestone", "conversation"]
Actor = Literal["user", "agent", "system"]

_ROLE_ACTOR = {"user": "user", "assistant": "agent", "agent": "agent", "tool": "agent"}
_ROLE_LABEL = {"user": "User", "assistant": "Agent", "system": "System", "tool": "Tool"}


class ChatMessage(NamedTuple):
    """One message of the thread. ``name`` is an optional display name of the speaker
    (e.g. "Caroline"); without it the role is shown ("User", "Agent")."""

    sequence: int
    role: str
    content: str
    created_at: datetime
    name: str | None = None


def actor_of_role(role: str) -> str:
    """Maps a message role to an episode actor: user → user, assistant/tool → agent,
    anything else → system (tool output is the agent acting)."""
    return _ROLE_ACTOR.get(role, "system")


def speaker_from_metadata(metadata: Any) -> str | None:
    """The speaker's display name a message carries in its metadata (``"name"``, else
    ``"speaker"``; JSON text or a dict), whitespace collapsed; None without one."""
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            return None
    if isinstance(metadata, dict):
        for key in ("name", "speaker"):
            value = metadata.get(key)
            if isinstance(value, str) and value.strip():
                return " ".join(value.split())
    return None


def speaker_label(message: ChatMessage) -> str:
    """How a message's speaker is named in summaries: its name, else its role."""
    if message.name and message.name.strip():
        return " ".join(message.name.split())
    return _ROLE_LABEL.get(message.role, message.role.capitalize() or "Unknown")


@dataclass(frozen=True)
class SummaryRequest:
    """What a summariser reads.

    ``messages``: the thread's un-compacted messages up to the window's end, in any order
    (sorted here by sequence); plain ``(sequence, role, content, created_at)`` tuples are
    accepted. ``window_start_sequence``: the first sequence of the new episode's window.
    ``previous_summary``: the summary of the thread's previous episode, if any.
    """

    messages: Sequence[ChatMessage | tuple[Any, ...]]
    window_start_sequence: int
    previous_summary: str | None = None
    thread_label: str = ""

    def __post_init__(self) -> None:
        converted = [m if isinstance(m, ChatMessage) else ChatMessage(*m) for m in self.messages]
        converted.sort(key=lambda m: m.sequence)
        # Frozen dataclass: normalise once here so every consumer sees ChatMessage rows.
        object.__setattr__(self, "messages", converted)
        if not any(m.sequence >= self.window_start_sequence for m in converted):
            raise ValueError(
                f"no message at or after window_start_sequence={self.window_start_sequence}: "
                "an episode's window cannot be empty"
            )

    @property
    def rows(self) -> list[ChatMessage]:
        """All messages as :class:`ChatMessage`, sorted by sequence."""
        return cast(list[ChatMessage], self.messages)

    @property
    def window(self) -> list[ChatMessage]:
        """The new episode's messages."""
        return [m for m in self.rows if m.sequence >= self.window_start_sequence]

    @property
    def context(self) -> list[ChatMessage]:
        """Older messages of the thread (already covered by earlier episodes)."""
        return [m for m in self.rows if m.sequence < self.window_start_sequence]


@dataclass(frozen=True)
class SummaryResult:
    """An episode's content. ``entities`` are normalised (see
    :func:`~episodic.providers.entities.normalise_entity`), sorted and unique."""

    summary: str
    key_learnings: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    event_type: str = "conversation"
    actor: str = "user"
    # The episode's embedding when the summariser already holds it (the extractive one
    # with POOL_SUMMARY_VECTOR: the mean of the vectors of the sentences it quotes); None:
    # the pipeline embeds the summary and key learnings.
    vector: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.event_type not in EVENT_TYPES:
            raise ValueError(f"event_type must be one of {EVENT_TYPES}, got {self.event_type!r}")
        if self.actor not in ACTORS:
            raise ValueError(f"actor must be one of {ACTORS}, got {self.actor!r}")


@runtime_checkable
class Summariser(Protocol):
    """Turns a :class:`SummaryRequest` into a :class:`SummaryResult`."""

    @property
    def name(self) -> str:
        """Identifies the summariser (for logs and episode metadata)."""
        ...

    def summarise(self, request: SummaryRequest) -> SummaryResult:
        """Summarises; raises ProviderError when the provider fails or answers nonsense."""
        ...

    def check(self) -> None:
        """Raises ProviderError if the summariser cannot work. Services call it at startup."""
        ...


@dataclass(frozen=True)
class SpanDocument:
    """A text read by the model as a whole, and the character ranges (``[start, end)``) of
    it whose vectors are wanted: late chunking
    (:meth:`~episodic.providers.embedding.MiniLMEmbedder.embed_spans`)."""

    text: str
    spans: tuple[tuple[int, int], ...]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of a fixed dimension."""

    @property
    def dimension(self) -> int:
        """Length of every vector this embedder returns."""
        ...

    @property
    def name(self) -> str:
        """Identifies the model (for logs and for recording what produced a vector)."""
        ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embeds documents: a ``(len(texts), dimension)`` float32 array of unit rows."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Embeds one search query: a ``(dimension,)`` float32 unit vector."""
        ...

    def check(self) -> None:
        """Raises ProviderError if the embedder cannot work (missing model, unreachable
        endpoint, wrong dimension). Services call it at startup."""
        ...
