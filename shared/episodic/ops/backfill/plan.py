"""The import's plan: what a file holds, in the shape the import writes it.

:class:`ImportPlan` (threads in import order, and what was left out), :class:`ImportThread`,
:class:`ImportMessage` and :class:`ImportOutcome`; and the identity of what an import
writes, the same in every run: :func:`thread_key` (the key a thread is found or created
by), :func:`idempotency_key` (each message's) and :func:`thread_uuid` (the ids imports made
before thread keys, still looked for). :mod:`.reading` fills a plan, :mod:`.writing` writes
it; :mod:`episodic.ops.backfill` describes the guarantees.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from episodic.sdk.client import NewMessage
from episodic.tool_calls import ToolCall

#: The uuid5 namespace of imported thread ids (``uuid5(NAMESPACE_URL, "episodic:import")``,
#: written out so it can never change).
NAMESPACE = uuid.UUID("74776a8b-b0b2-5de0-9b18-682e2e370cdb")
MAX_KEY_CHARS = 128  # Ingest's limit on an idempotency key


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
