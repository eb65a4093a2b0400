"""The SDK's core, shared by the blocking client (:mod:`episodic.client`) and the asyncio
client (:mod:`episodic.aio`): everything about a call except how it waits.

Both clients are thin *drivers* over the same code here:

- the vocabulary: typed results built from the wire messages, errors mapped from gRPC
  status codes and the server's ``google.rpc`` details (:func:`translate_error`);
- the channel policy: addresses, TLS and API key from the environment, one channel per
  service, gRPC's own retries (service config) for the methods safe to repeat;
- every public call, written once as a *flow*: a generator that builds the request
  (idempotency keys included), yields :class:`Rpc` and :class:`Sleep` steps, and turns the
  answer into a result. The rate-limit backoff (:func:`call`), paging, ``wait_for_episode``
  and ``wait_ready`` are flows too.

A driver runs a flow: it performs each step — a blocking gRPC call and ``time.sleep``, or
an awaited ``grpc.aio`` call and ``asyncio.sleep`` — and sends the answer back (or throws
the translated error into the flow). Nothing here does I/O, so the two clients cannot
drift apart: they share every line that decides *what* to send and what it means.
"""

from __future__ import annotations

import inspect
import json
import os
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeAlias, TypeVar, cast

import grpc
from google.protobuf import json_format, struct_pb2, timestamp_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from episodic import semconv
from episodic.endpoints import address_from_env
from episodic.tls import channel_credentials
from episodic.tool_calls import ToolCall
from episodic.v1 import admin_service_pb2 as admin_pb2
from episodic.v1 import admin_service_pb2_grpc as admin_grpc
from episodic.v1 import entity_pb2, episode_pb2, ingest_service_pb2, recall_service_pb2
from episodic.v1 import ingest_service_pb2_grpc as ingest_grpc
from episodic.v1 import recall_service_pb2_grpc as recall_grpc
from episodic.v1 import scheduler_service_pb2 as scheduler_pb2
from episodic.v1 import scheduler_service_pb2_grpc as scheduler_grpc
from episodic.v1 import summariser_service_pb2 as summariser_pb2
from episodic.v1 import summariser_service_pb2_grpc as summariser_grpc

DEFAULT_TIMEOUT = 10.0
_SERVICES = ("ingest", "recall", "scheduler", "summariser")


# --------------------------------------------------------------------------- errors


class EpisodicRpcError(Exception):
    """A call failed. ``code`` is the gRPC status code, ``reason`` the server's
    ``google.rpc.ErrorInfo`` reason (e.g. ``INVALID_ARGUMENT``, ``PROVIDER_ERROR``; the
    code's name when the server sent none), ``metadata`` its details (``field`` names the
    offending request field)."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        reason: str = "",
        metadata: Mapping[str, str] | None = None,
        method: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code.name}: {message}" + (f" ({method})" if method else ""))
        self.code = code
        self.message = message
        self.reason = reason or code.name
        self.metadata = dict(metadata or {})
        self.method = method
        #: Seconds the server asked the caller to wait (a google.rpc.RetryInfo), if any.
        self.retry_after = retry_after

    @property
    def field(self) -> str | None:
        """The request field the server blamed, when it named one."""
        return self.metadata.get("field")


class InvalidArgumentError(EpisodicRpcError):
    """INVALID_ARGUMENT: the request is wrong; repeating it will not help."""


class NotFoundError(EpisodicRpcError):
    """NOT_FOUND: the thread or episode does not exist."""


class UnauthenticatedError(EpisodicRpcError):
    """UNAUTHENTICATED: no API key, or one that is unknown, revoked or expired."""


class PermissionDeniedError(EpisodicRpcError):
    """PERMISSION_DENIED: the key's role or datasets do not allow the call."""


class ResourceExhaustedError(EpisodicRpcError):
    """RESOURCE_EXHAUSTED: a limit was reached; ``retry_after`` says when to try again
    (rate limits; the client waits and retries by itself first). Without ``retry_after``
    (a request too large) repeating it will not help."""


class AlreadyExistsError(EpisodicRpcError):
    """ALREADY_EXISTS: e.g. a thread with the chosen id exists."""


class FailedPreconditionError(EpisodicRpcError):
    """FAILED_PRECONDITION: e.g. retrying an episode that is not failed."""


class AbortedError(EpisodicRpcError):
    """ABORTED: the call ran into another one in progress (e.g. a second erasure of a
    dataset already being erased, reason ``ERASURE_IN_PROGRESS``) and did not take effect;
    try again once that one has finished."""


class UnavailableError(EpisodicRpcError):
    """UNAVAILABLE: the service (or its database or provider) is down; try again later."""


class DeadlineExceededError(EpisodicRpcError):
    """DEADLINE_EXCEEDED: the call did not finish within its timeout."""


_ERROR_TYPES: dict[grpc.StatusCode, type[EpisodicRpcError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.ABORTED: AbortedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
}


#: ``reason`` of an :class:`UnavailableError` made from a reset HTTP/2 stream.
STREAM_RESET = "STREAM_RESET"


def _stream_reset(code: grpc.StatusCode, message: str) -> bool:
    """Whether a status came from a reset HTTP/2 stream (an RST_STREAM frame) rather than
    from a server. grpcio reports one as INTERNAL (UNKNOWN in some versions) "Stream
    removed (... Received RST_STREAM with error code N)", which reads like a server's bug.
    Only the transport says that: every error our servers answer carries a
    ``google.rpc.Status`` (the caller checks there is none)."""
    return code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN) and (
        "RST_STREAM" in message or "Stream removed" in message
    )


def translate_error(err: grpc.RpcError, method: str) -> EpisodicRpcError:
    """The :class:`EpisodicRpcError` subclass for a failed call (``grpc.RpcError`` or
    ``grpc.aio.AioRpcError``), with the reason, metadata and RetryInfo the server sent.

    A reset stream is an :class:`UnavailableError` with reason ``STREAM_RESET``: like a
    dropped connection (which gRPC itself reports as UNAVAILABLE) the call may or may not
    have taken effect, and the client repeats it only when it is safe to (:func:`call`).
    """
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    message = (err.details() if hasattr(err, "details") else None) or str(err)
    reason, metadata, retry_after = "", {}, None
    try:
        status = rpc_status.from_call(err)  # type: ignore[arg-type]
    except Exception:  # a status without rich details, or not a call at all
        status = None
    if status is None and _stream_reset(code, message):
        return UnavailableError(
            grpc.StatusCode.UNAVAILABLE,
            f"the connection reset the call before it answered ({message}); it may or may "
            "not have taken effect",
            STREAM_RESET,
            {"grpc_code": code.name},
            method,
        )
    if status is not None:
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            retry = error_details_pb2.RetryInfo()
            if detail.Is(info.DESCRIPTOR) and detail.Unpack(info):
                reason, metadata = info.reason, dict(info.metadata)
            elif detail.Is(retry.DESCRIPTOR) and detail.Unpack(retry):
                retry_after = retry.retry_delay.ToTimedelta().total_seconds()
    return _ERROR_TYPES.get(code, EpisodicRpcError)(
        code, message, reason, metadata, method, retry_after
    )


# --------------------------------------------------------------------------- results


def _time(message: Any, name: str) -> datetime | None:
    return getattr(message, name).ToDatetime(tzinfo=UTC) if message.HasField(name) else None


def _duration(message: Any, name: str) -> timedelta | None:
    return getattr(message, name).ToTimedelta() if message.HasField(name) else None


def _health(message: Any, name: str) -> ProviderHealth | None:
    if not message.HasField(name):
        return None
    value = getattr(message, name)
    return ProviderHealth(value.name, value.ok, value.error)


def _struct(message: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(message)


def _enum_name(value: int, enum: Any, prefix: str) -> str:
    try:
        return enum.Name(value).removeprefix(prefix).lower()
    except ValueError:
        return str(value)


@dataclass(frozen=True)
class Thread:
    """A conversation thread of a dataset."""

    thread_id: str
    dataset: str
    label: str
    metadata: dict[str, Any]
    message_count: int
    captured_sequence: int
    created_at: datetime | None
    last_message_at: datetime | None
    ended_at: datetime | None
    compaction: ThreadCompaction | None = None

    @classmethod
    def from_proto(cls, m: episode_pb2.Thread) -> Thread:
        """Builds it from the wire message."""
        return cls(
            thread_id=m.thread_id,
            dataset=m.dataset,
            label=m.label,
            metadata=_struct(m.metadata),
            message_count=m.message_count,
            captured_sequence=m.captured_sequence,
            created_at=_time(m, "created_at"),
            last_message_at=_time(m, "last_message_at"),
            ended_at=_time(m, "ended_at"),
            compaction=ThreadCompaction.from_proto(m, "compaction"),
        )


@dataclass(frozen=True)
class ThreadCompaction:
    """A compacted thread's messages 1 .. ``through_sequence`` are gone; ``summary`` (of
    episode ``episode_id``) stands in for them; ``content_digest`` is the SHA-256 of what
    was dropped."""

    compacted_at: datetime | None
    through_sequence: int
    content_digest: str
    episode_id: str
    summary: str

    @classmethod
    def from_proto(cls, parent: Any, field: str) -> ThreadCompaction | None:
        """The ``field`` of ``parent`` (None when unset: never compacted)."""
        if not parent.HasField(field):
            return None
        m = getattr(parent, field)
        return cls(
            _time(m, "compacted_at"),
            m.through_sequence,
            m.content_digest,
            m.episode_id,
            m.summary,
        )


@dataclass(frozen=True)
class Message:
    """A stored message (turn) of a thread."""

    thread_id: str
    sequence: int
    role: str  # "system", "user", "assistant" or "tool"
    content: str
    metadata: dict[str, Any]
    created_at: datetime | None
    received_at: datetime | None
    idempotency_key: str
    #: An assistant message's tool calls (OpenAI's chat format), in order.
    tool_calls: tuple[ToolCall, ...] = ()
    #: A tool message: the call it answers, and the tool's name.
    tool_call_id: str = ""
    name: str = ""

    @classmethod
    def from_proto(cls, m: episode_pb2.Message) -> Message:
        """Builds it from the wire message."""
        return cls(
            thread_id=m.thread_id,
            sequence=m.sequence,
            role=_enum_name(m.role, episode_pb2.Role, "ROLE_"),
            content=m.content,
            metadata=_struct(m.metadata),
            created_at=_time(m, "created_at"),
            received_at=_time(m, "received_at"),
            idempotency_key=m.idempotency_key,
            tool_calls=tuple(ToolCall(c.id, c.name, c.arguments) for c in m.tool_calls),
            tool_call_id=m.tool_call_id,
            name=m.name,
        )

    def to_openai(self) -> dict[str, Any]:
        """The message in OpenAI's chat format (``role``, ``content``, and ``tool_calls``
        or ``tool_call_id``/``name``), as a chat completion's ``messages`` takes it."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["content"] = self.content or None
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        if self.name:
            out["name"] = self.name
        return out


@dataclass(frozen=True)
class Episode:
    """A summarised stretch of a thread."""

    episode_id: str
    thread_id: str
    dataset: str
    status: str  # one of EPISODE_STATUSES: pending, processing, completed, failed, archived
    semantic_status: str
    summary: str
    key_learnings: list[str]
    entities: list[str]
    event_type: str
    actor: str
    message_count: int
    start_sequence: int
    end_sequence: int
    started_at: datetime | None
    ended_at: datetime | None
    trigger: str
    retry_count: int
    error: str
    created_at: datetime | None
    updated_at: datetime | None
    thread_label: str
    #: "summary" (a summarised stretch of a thread) or "event" (one moment: recorded with
    #: record_event, or by the turn classifier; started_at == ended_at == when it occurred).
    kind: str = "summary"
    #: For an event: "agent" (record_event) or "classifier"; "" for a summary.
    event_source: str = ""
    #: The thread's chunks are still to be embedded: the episode is found by its summary
    #: already, and Recall reaches full quality on it once this is False (seconds).
    chunks_pending: bool = False

    @property
    def is_event(self) -> bool:
        return self.kind == "event"

    @classmethod
    def from_proto(cls, m: episode_pb2.Episode) -> Episode:
        """Builds it from the wire message."""
        return cls(
            episode_id=m.episode_id,
            thread_id=m.thread_id,
            dataset=m.dataset,
            status=_enum_name(m.status, episode_pb2.EpisodeStatus, "EPISODE_STATUS_"),
            semantic_status=_enum_name(
                m.semantic_status, episode_pb2.SemanticStatus, "SEMANTIC_STATUS_"
            ),
            summary=m.summary,
            key_learnings=list(m.key_learnings),
            entities=list(m.entities),
            event_type=m.event_type,
            actor=m.actor,
            message_count=m.message_count,
            start_sequence=m.start_sequence,
            end_sequence=m.end_sequence,
            started_at=_time(m, "started_at"),
            ended_at=_time(m, "ended_at"),
            trigger=_enum_name(m.trigger, episode_pb2.EpisodeTrigger, "EPISODE_TRIGGER_"),
            retry_count=m.retry_count,
            error=m.error,
            created_at=_time(m, "created_at"),
            updated_at=_time(m, "updated_at"),
            thread_label=m.thread_label,
            kind="event" if m.kind == episode_pb2.EPISODE_KIND_EVENT else "summary",
            event_source=_enum_name(m.event_source, episode_pb2.EventSource, "EVENT_SOURCE_")
            if m.event_source
            else "",
            chunks_pending=m.chunks_pending,
        )


@dataclass(frozen=True)
class RecordEventResult:
    """What record_event stored."""

    event: Episode  # kind "event"; event.episode_id is the event's id
    stored: bool  # False: its idempotency key was stored before (a replay)


@dataclass(frozen=True)
class ScoredEpisode:
    """An episode with its ranking: ``relevance_score = similarity × similarity_weight +
    recency × recency_weight``."""

    episode: Episode
    relevance_score: float
    similarity: float
    recency: float
    lexical: float = 0.0  # the parts of similarity, relative to the best candidate
    semantic: float = 0.0
    #: Calibrated relevance in [0, 1], comparable across queries and datasets (threshold
    #: on it with ``recall(..., min_relevance=…)``); 0 without a query.
    relevance: float = 0.0

    @classmethod
    def from_proto(cls, m: episode_pb2.ScoredEpisode) -> ScoredEpisode:
        """Builds it from the wire message."""
        return cls(
            Episode.from_proto(m.episode),
            m.relevance_score,
            m.similarity,
            m.recency,
            m.lexical,
            m.semantic,
            m.relevance,
        )

    # The episode's fields, for convenience (``scored.summary``).
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "episode":
            raise AttributeError(name)
        return getattr(self.episode, name)


@dataclass(frozen=True)
class TimeExpression:
    """A time named in a recall query: its words, kind and window (``end`` exclusive;
    both None for an ordinal)."""

    text: str
    kind: str
    start: datetime | None
    end: datetime | None


@dataclass(frozen=True)
class SessionOrdinal:
    """Which session(s) or matching episode(s) a query named by order in time."""

    text: str
    position: int
    from_end: bool
    count: int
    scope: str  # "sessions" or "matches"
    event_type: str
    thread_ids: list[str]


@dataclass(frozen=True)
class QueryUnderstanding:
    """What Recall read from a query about time (see RecallResponse.understanding):
    ``ranked_query`` is the query without its time words."""

    ranked_query: str
    expressions: list[TimeExpression]
    window_start: datetime | None
    window_end: datetime | None
    ordinal: SessionOrdinal | None
    time_only: bool
    applied: bool = True  # the time narrowed the search (see the proto's comment)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_proto(cls, parent: Any) -> QueryUnderstanding | None:
        """The response's understanding (None when unset)."""
        if not parent.HasField("understanding"):
            return None
        m = parent.understanding
        ordinal = None
        if m.HasField("ordinal"):
            o = m.ordinal
            ordinal = SessionOrdinal(
                o.text, o.position, o.from_end, o.count, o.scope, o.event_type, list(o.thread_ids)
            )
        return cls(
            ranked_query=m.ranked_query,
            expressions=[
                TimeExpression(e.text, e.kind, _time(e, "start"), _time(e, "end"))
                for e in m.expressions
            ],
            window_start=_time(m, "window_start"),
            window_end=_time(m, "window_end"),
            ordinal=ordinal,
            time_only=m.time_only,
            applied=m.applied,
            notes=list(m.notes),
        )


@dataclass(frozen=True)
class ProcedureStep:
    """One step of a procedure: the ``tool`` called, what it was for, whether it
    ``writes`` (changes something), and where its arguments' values came from
    (``arguments``: name → "user", "tool:<name>" or "agent")."""

    tool: str
    purpose: str
    writes: bool
    arguments: dict[str, str]


@dataclass(frozen=True)
class Procedure:
    """How the agent did something that worked: learned from successful stretches of
    conversation with the same actions (the write tools, in order). ``goal`` says when to
    use it, in the words of a request it served; ``sources`` are the (thread id, episode
    id, outcome) it was learned from, newest first."""

    procedure_id: str
    dataset: str
    goal: str
    example_goals: list[str]
    steps: list[ProcedureStep]
    success_count: int
    failure_count: int
    partial_count: int
    sources: list[tuple[str, str, str]]
    created_at: datetime | None
    updated_at: datetime | None
    extractor: str

    @property
    def write_actions(self) -> list[str]:
        """The tools of the steps that change something, in order."""
        return [s.tool for s in self.steps if s.writes]

    @classmethod
    def from_proto(cls, m: episode_pb2.Procedure) -> Procedure:
        """Builds it from the wire message."""
        return cls(
            procedure_id=m.procedure_id,
            dataset=m.dataset,
            goal=m.goal,
            example_goals=list(m.example_goals),
            steps=[
                ProcedureStep(s.tool, s.purpose, s.writes, {a.name: a.source for a in s.arguments})
                for s in m.steps
            ],
            success_count=m.success_count,
            failure_count=m.failure_count,
            partial_count=m.partial_count,
            sources=[
                (
                    src.thread_id,
                    src.episode_id,
                    _enum_name(src.outcome, episode_pb2.Outcome, "OUTCOME_"),
                )
                for src in m.sources
            ],
            created_at=_time(m, "created_at"),
            updated_at=_time(m, "updated_at"),
            extractor=m.extractor,
        )


@dataclass(frozen=True)
class ScoredProcedure:
    """A procedure and how well its goal fits a recall's query (0..1)."""

    procedure: Procedure
    relevance: float

    def __getattr__(self, name: str) -> Any:
        return getattr(self.procedure, name)


@dataclass(frozen=True)
class OutcomeResult:
    """What :meth:`EpisodicClient.record_outcome` recorded: ``changed`` is False when the
    same outcome (score and note included) was already recorded."""

    thread_id: str
    episode_id: str
    outcome: str
    changed: bool
    recorded_at: datetime | None


@dataclass(frozen=True)
class RecallResult:
    """What :meth:`EpisodicClient.recall` returns: the top episodes, best first, how many
    current episodes the dataset holds, and how the query's words about time were read
    (None when they name no time, or the query was read literally).

    ``match``: how likely the dataset holds an answer to the query at all (0..1,
    calibrated like each episode's ``relevance``; what ``min_match`` compares); None
    without a query or without episodes or events to rank. ``abstained``: the answer is
    empty because the thresholds (``min_relevance``, ``min_match``, ``abstain``) left out
    every episode and event there was — nothing fits, as opposed to nothing there.
    ``abstain_applied``: ``abstain`` held; False when nothing was ranked by meaning (no
    query, a query naming only a time, similarity weight 0: ``match`` is None too) and
    where Recall has no curves to abstain by (a dataset of another language than English
    embedded by MiniLM, an OpenAI embedder), where every episode was kept as without it.

    ``chunks_pending``: a current episode of the dataset (returned or not) still waits for
    its chunk index (the passages Recall ranks beside the summaries), so the same question
    may rank differently in a few seconds; ``episodes_pending``: episodes of the dataset
    are queued or being summarised, and their messages are in no answer yet. Both False:
    Recall is at full quality for everything the dataset's episodes hold."""

    episodes: list[ScoredEpisode]
    episode_count: int
    understanding: QueryUnderstanding | None = None
    match: float | None = None
    abstained: bool = False
    abstain_applied: bool = False
    #: With ``include_procedures``: the procedures that fit the query, best first.
    procedures: list[ScoredProcedure] = field(default_factory=list)
    chunks_pending: bool = False
    episodes_pending: bool = False

    @property
    def settled(self) -> bool:
        """Nothing of the dataset is still being summarised or indexed: asking again later
        would rank the same episodes the same way (until new messages come)."""
        return not (self.chunks_pending or self.episodes_pending)

    def __iter__(self) -> Iterator[ScoredEpisode]:
        return iter(self.episodes)

    def __len__(self) -> int:
        return len(self.episodes)


@dataclass(frozen=True)
class MessageReceipt:
    """Where one added message was stored: its ``sequence`` in the thread (a message is
    identified by thread and sequence), and whether this call ``stored`` it (False: its
    idempotency key was stored earlier, and this describes that message)."""

    sequence: int
    idempotency_key: str
    stored: bool
    created_at: datetime | None
    received_at: datetime | None

    @classmethod
    def from_proto(cls, m: ingest_service_pb2.MessageReceipt) -> MessageReceipt:
        """Builds it from the wire message."""
        return cls(
            m.sequence,
            m.idempotency_key,
            m.stored,
            _time(m, "created_at"),
            _time(m, "received_at"),
        )


@dataclass(frozen=True)
class AddMessagesResult:
    """One receipt per added message, in request order, and how many this call stored
    (the rest were replays of an idempotency key)."""

    thread_id: str
    receipts: list[MessageReceipt]
    stored_count: int

    @property
    def sequences(self) -> list[int]:
        """The messages' sequences, in request order."""
        return [r.sequence for r in self.receipts]


@dataclass(frozen=True)
class EndThreadResult:
    """Whether an episode was queued, and its id when the Scheduler answered in time."""

    thread_id: str
    episode_queued: bool
    episode_id: str


@dataclass(frozen=True)
class SweepResult:
    """What one Scheduler sweep did."""

    episodes_created: int
    timers_dropped: int
    timers_caught_up: int
    claims_reclaimed: int
    backstop_episodes: int
    threads_purged: int = 0
    threads_compacted: int = 0


@dataclass(frozen=True)
class ProviderHealth:
    """Whether a provider of the Summariser answered a probe."""

    name: str
    ok: bool
    error: str


@dataclass(frozen=True)
class DatasetSummary:
    """A dataset, as its threads describe it."""

    dataset: str
    thread_count: int
    message_count: int
    last_activity_at: datetime | None


@dataclass(frozen=True)
class EpisodeFailure:
    """An episode whose last attempt failed: ``status`` is "pending" (it will be retried),
    "failed" (for good) or "semantic" (its extraction failed)."""

    episode_id: str
    thread_id: str
    dataset: str
    status: str
    retry_count: int
    error: str
    updated_at: datetime | None

    @classmethod
    def from_proto(cls, m: summariser_pb2.EpisodeError) -> EpisodeFailure:
        """Builds it from the wire message."""
        return cls(
            m.episode_id,
            m.thread_id,
            m.dataset,
            m.status,
            m.retry_count,
            m.error,
            _time(m, "updated_at"),
        )


@dataclass(frozen=True)
class PipelineStatus:
    """Whether the episode pipeline moves (see :meth:`EpisodicClient.pipeline_status`).
    Ages are ``None`` when nothing is waiting; providers are ``None`` when not probed."""

    observed_at: datetime | None
    status_counts: dict[str, int]
    semantic_status_counts: dict[str, int]
    oldest_pending_age: timedelta | None
    oldest_processing_age: timedelta | None
    timers_due: int
    oldest_due_timer_age: timedelta | None
    timers_waiting: int
    threads_uncaptured: int
    recent_errors: list[EpisodeFailure]
    llm: ProviderHealth | None
    embedder: ProviderHealth | None
    pending_waiting: int
    latest_retry_at: datetime | None
    failed_episodes: list[EpisodeFailure]
    threads_without_timer: int
    oldest_untimed_thread_age: timedelta | None
    lifecycle: LifecycleStatus | None = None


@dataclass(frozen=True)
class LifecycleStatus:
    """What the lifecycle sweep did last (retention, compaction, stalled erasures)."""

    last_run_at: datetime | None
    threads_purged: int
    threads_compacted: int
    messages_compacted: int
    erasures_resumed: int
    datasets_erasing: int
    threads_compacted_total: int


T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list; pass ``next_page_token`` to get the next (empty on the last)."""

    items: list[T]
    next_page_token: str

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True)
class MessagePage(Page["Message"]):
    """A page of messages; ``compaction`` is set when the thread was compacted (its early
    messages are gone and the summary stands in for them)."""

    compaction: ThreadCompaction | None = None


@dataclass(frozen=True)
class ErasureReceipt:
    """What an erasure removed (see ``ErasureReceipt`` in admin_service.proto): rows per
    table, when, whether the data key was destroyed, and a digest to keep."""

    receipt_id: str
    scope: str
    dataset: str
    dataset_digest: str
    thread_id: str
    rows_deleted: dict[str, int]
    started_at: datetime | None
    finished_at: datetime | None
    data_key_destroyed: bool
    audit_events_pseudonymised: int
    api_keys_scrubbed: int
    digest: str

    @classmethod
    def from_proto(cls, m: admin_pb2.ErasureReceipt) -> ErasureReceipt:
        """Builds it from the wire message."""
        return cls(
            receipt_id=m.receipt_id,
            scope=m.scope,
            dataset=m.dataset,
            dataset_digest=m.dataset_digest,
            thread_id=m.thread_id,
            rows_deleted=dict(m.rows_deleted),
            started_at=_time(m, "started_at"),
            finished_at=_time(m, "finished_at"),
            data_key_destroyed=m.data_key_destroyed,
            audit_events_pseudonymised=m.audit_events_pseudonymised,
            api_keys_scrubbed=m.api_keys_scrubbed,
            digest=m.digest,
        )


@dataclass(frozen=True)
class Entity:
    """A canonical entity of a dataset: its name, every spelling it was met under
    (``aliases``: (alias, episodes mentioning it), the most mentioned first) and how many
    current episodes mention it."""

    entity_id: str
    name: str
    aliases: list[tuple[str, int]]
    episode_count: int
    created_at: datetime | None

    @classmethod
    def from_proto(cls, m: entity_pb2.Entity) -> Entity:
        """Builds it from the wire message."""
        return cls(
            entity_id=m.entity_id,
            name=m.name,
            aliases=[(a.alias, a.episode_count) for a in m.aliases],
            episode_count=m.episode_count,
            created_at=_time(m, "created_at"),
        )


@dataclass(frozen=True)
class EntitySplit:
    """What SplitEntity left: the new entity and what remains of the old one."""

    split_off: Entity
    remaining: Entity


@dataclass(frozen=True)
class EntityTimelinePage(Page["Episode"]):
    """A page of the episodes mentioning ``entity``, oldest first."""

    entity: Entity | None = None


@dataclass(frozen=True)
class DatasetPolicy:
    """A dataset's lifecycle policy: its own values (None: the global default) and those
    in force (None: never)."""

    dataset: str
    retention_days: int | None
    compact_after_days: int | None
    effective_retention_days: int | None
    effective_compact_after_days: int | None
    encrypted: bool
    #: The text-search configuration of the dataset's lexical index ("english", "french",
    #: "simple", …).
    language: str = "english"
    #: Whose choice ``language`` is: "default" (English until the Summariser detects the
    #: language from the dataset's text), "detected" or "set" ("" from an older server).
    language_origin: str = ""

    @classmethod
    def from_proto(cls, m: admin_pb2.DatasetPolicy) -> DatasetPolicy:
        """Builds it from the wire message."""
        return cls(
            dataset=m.dataset,
            retention_days=m.retention_days if m.HasField("retention_days") else None,
            compact_after_days=m.compact_after_days if m.HasField("compact_after_days") else None,
            effective_retention_days=m.effective_retention_days or None,
            effective_compact_after_days=m.effective_compact_after_days or None,
            encrypted=m.encrypted,
            language=m.language or "english",
            language_origin=_LANGUAGE_ORIGINS.get(m.language_origin, ""),
        )


_LANGUAGE_ORIGINS = {
    admin_pb2.LANGUAGE_ORIGIN_DEFAULT: "default",
    admin_pb2.LANGUAGE_ORIGIN_DETECTED: "detected",
    admin_pb2.LANGUAGE_ORIGIN_SET: "set",
}


@dataclass(frozen=True)
class NewMessage:
    """A message to add. ``created_at`` backfills history (defaults to the receive time);
    ``idempotency_key`` makes a repeated add a no-op (generated when not given and the
    client's ``auto_idempotency_keys`` is on)."""

    role: str
    content: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    idempotency_key: str | None = None
    #: An assistant message's tool calls (content may then be empty).
    tool_calls: Sequence[ToolCall] = ()
    #: A tool message: the id of the call it answers, and the tool's name.
    tool_call_id: str | None = None
    name: str | None = None


MessageLike = NewMessage | Mapping[str, Any] | tuple[str, str]


def _tool_call(value: ToolCall | Mapping[str, Any]) -> ToolCall:
    """A tool call given as a ToolCall, or as OpenAI writes one (``{"id", "type":
    "function", "function": {"name", "arguments"}}``, arguments as JSON text or a dict), or
    flat (``{"id", "name", "arguments"}``)."""
    if isinstance(value, ToolCall):
        return value
    function = value.get("function") or value
    arguments = function.get("arguments", "{}")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(id=str(value["id"]), name=str(function["name"]), arguments=arguments)


_ROLES = {
    "system": episode_pb2.ROLE_SYSTEM,
    "user": episode_pb2.ROLE_USER,
    "assistant": episode_pb2.ROLE_ASSISTANT,
    "agent": episode_pb2.ROLE_ASSISTANT,
    "tool": episode_pb2.ROLE_TOOL,
}
#: Episode statuses a list can filter on. ``deleted`` is reserved by the design and never
#: produced (a soft delete archives), so it is not offered.
_STATUSES: dict[str, episode_pb2.EpisodeStatus] = {
    name.removeprefix("EPISODE_STATUS_").lower(): cast("episode_pb2.EpisodeStatus", value)
    for name, value in episode_pb2.EpisodeStatus.items()
    if value and name != "EPISODE_STATUS_DELETED"
}
#: The statuses an episode can have, as :attr:`Episode.status` names them.
EPISODE_STATUSES: tuple[str, ...] = tuple(_STATUSES)


def _to_new_message(value: MessageLike) -> NewMessage:
    if isinstance(value, NewMessage):
        return value
    if isinstance(value, tuple):
        role, content = value
        return NewMessage(role=role, content=content)
    if isinstance(value, Mapping):  # ours, or OpenAI's chat format
        return NewMessage(
            role=value.get("role", "user"),
            content=value.get("content") or "",
            metadata=value.get("metadata") or {},
            created_at=value.get("created_at"),
            idempotency_key=value.get("idempotency_key"),
            tool_calls=tuple(_tool_call(c) for c in value.get("tool_calls") or ()),
            tool_call_id=value.get("tool_call_id"),
            name=value.get("name"),
        )
    raise TypeError(f"a message must be a NewMessage, a mapping or (role, content); got {value!r}")


def _timestamp(value: datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value if value.tzinfo else value.replace(tzinfo=UTC))
    return out


def _role(role: str) -> int:
    try:
        return _ROLES[role.lower()]
    except KeyError:
        raise ValueError(f"unknown role {role!r}; use system, user, assistant or tool") from None


# --------------------------------------------------------------------------- channels


def default_address(service: str) -> str:
    """Where ``service`` listens unless told otherwise: ``EPISODIC_<SERVICE>_ADDRESS``,
    else ``127.0.0.1:<EPISODIC_<SERVICE>_PORT or the default port>``."""
    return address_from_env(service)


#: Attempts of a call safe to repeat, the first included: the channel's retry policy on
#: UNAVAILABLE, and :func:`call`'s on a reset stream (which the channel never sees).
_MAX_ATTEMPTS = 5


def _service_config(service: str, methods: Sequence[str]) -> str:
    """gRPC retries (A6): only methods safe to repeat, only on UNAVAILABLE, with backoff."""
    return json.dumps(
        {
            "methodConfig": [
                {
                    "name": [{"service": f"episodic.v1.{service}", "method": m} for m in methods],
                    "retryPolicy": {
                        "maxAttempts": _MAX_ATTEMPTS,
                        "initialBackoff": "0.1s",
                        "maxBackoff": "2s",
                        "backoffMultiplier": 2,
                        # ABORTED: the call lost to a concurrent change and did not
                        # take effect (only calls safe to repeat are listed here).
                        "retryableStatusCodes": ["UNAVAILABLE", "ABORTED"],
                    },
                }
            ]
        }
    )


#: The methods each service's channel repeats on UNAVAILABLE: every call the SDK makes
#: without ``retry=False`` (tests/sdk check it), and only those — AddMessages,
#: RecordEvent and CreateThread only when keyed (the SDK sends unkeyed ones on the
#: ``noretry`` channel),
#: SetDatasetPolicy because it names the values it sets (``update_mask``).
_RETRIED = {
    "admin": (
        "AdminService",
        (
            "ListApiKeys",
            "ListAuditEvents",
            "ListDatasets",
            "GetDatasetPolicy",
            "SetDatasetPolicy",
            "ListEntities",
        ),
    ),
    "ingest": (
        "IngestService",
        (
            "GetThread",
            "ListMessages",
            "ListThreads",
            "AddMessages",
            "RecordEvent",
            "CreateThread",
            # The last outcome stands: a repeat records the same one again.
            "RecordOutcome",
        ),
    ),
    "recall": (
        "RecallService",
        (
            "Recall",
            "ListEpisodes",
            "SearchEpisodes",
            "GetEpisode",
            "EntityTimeline",
            "ListProcedures",
            "GetProcedure",
        ),
    ),
    "scheduler": ("SchedulerService", ()),
    "summariser": ("SummariserService", ("CheckProviders", "GetPipelineStatus")),
}


#: The process serving a service that shares another's address.
_PROCESS_OF = {"admin": "ingest"}

_STUBS: dict[str, Callable[[grpc.Channel], Any]] = {
    "admin": admin_grpc.AdminServiceStub,
    "ingest": ingest_grpc.IngestServiceStub,
    "recall": recall_grpc.RecallServiceStub,
    "scheduler": scheduler_grpc.SchedulerServiceStub,
    "summariser": summariser_grpc.SummariserServiceStub,
}


# --------------------------------------------------------------------------- flows

R = TypeVar("R")


@dataclass(frozen=True)
class Rpc:
    """A step of a flow: one attempt of a unary call. The driver sends ``request`` to
    ``method`` of ``stub`` on the channel ``channel`` ("ingest", or "ingest:noretry" for a
    call that must not be repeated) within ``timeout`` seconds, with the client's
    credentials when ``authenticate``, and resumes the flow with the response message — or
    throws the call's :class:`EpisodicRpcError` into it."""

    channel: str
    stub: str
    method: str
    request: Any
    timeout: float
    authenticate: bool = True


@dataclass(frozen=True)
class Sleep:
    """A step of a flow: wait ``seconds``, then resume it."""

    seconds: float


@dataclass(frozen=True)
class Emit(Generic[T]):
    """A step of a streaming flow (``iter_episodes``): hand ``item`` to the caller."""

    item: T


Step: TypeAlias = Rpc | Sleep
#: A call written once for both clients: yields steps, receives each step's answer, and
#: returns the result.
Flow: TypeAlias = Generator[Step, Any, R]
#: A flow that hands out items one by one (an iterator in the blocking client, an async
#: iterator in the asyncio client).
Stream: TypeAlias = Generator[Step | Emit[T], Any, None]


def present_as_method(
    method: Callable[..., Any], flow: Callable[..., Any], owner: str, result: str
) -> None:
    """Makes a driver's ``method`` (already ``functools.wraps(flow)``) describe itself as
    the method of ``owner`` (``"module:Class"``) it is: ``self`` for the flow's client argument and ``result``
    (``"{}"``, ``"Awaitable[{}]"``, ``"Iterator[{}]"``, ...) in place of the flow's
    ``Flow[X]``/``Stream[X]``, so ``help()`` and ``inspect.signature`` show what a caller
    gets."""
    signature = inspect.signature(flow)
    annotation = signature.return_annotation
    match = re.fullmatch(r"(?:Flow|Stream)\[(.*)\]", str(annotation))
    if match:
        annotation = result.format(match.group(1))
    first, *rest = signature.parameters.values()
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[first.replace(name="self", annotation=inspect.Parameter.empty), *rest],
        return_annotation=annotation,
    )
    method.__module__, _, cls = owner.partition(":")
    method.__qualname__ = f"{cls}.{flow.__name__}"


def _health_stub(channel: Any) -> Any:
    from grpc_health.v1 import health_pb2_grpc  # only wait_ready needs it

    return health_pb2_grpc.HealthStub(channel)


_STUB_FACTORIES: dict[str, Callable[[Any], Any]] = {**_STUBS, "health": _health_stub}


class ClientCore:
    """What both clients hold: addresses, default deadline, credentials, channel options and
    the channels themselves (opened lazily, one per service and retry mode, by the
    driver's :meth:`_open_channel`)."""

    def __init__(
        self,
        ingest: str | None = None,
        recall: str | None = None,
        scheduler: str | None = None,
        summariser: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        auto_idempotency_keys: bool = True,
        channel_options: Sequence[tuple[str, Any]] = (),
        api_key: str | None = None,
        tls: bool | None = None,
        ca_file: str | None = None,
        client_cert_file: str | None = None,
        client_key_file: str | None = None,
        rate_limit_retries: int = 3,
    ) -> None:
        """Addresses are ``host:port``; unset ones come from :func:`default_address`."""
        env = os.environ
        self.api_key = api_key if api_key is not None else env.get("EPISODIC_API_KEY") or None
        ca_file = ca_file or env.get("EPISODIC_TLS_CA_FILE") or None
        client_cert_file = client_cert_file or env.get("EPISODIC_TLS_CLIENT_CERT_FILE") or None
        client_key_file = client_key_file or env.get("EPISODIC_TLS_CLIENT_KEY_FILE") or None
        self._credentials = (
            channel_credentials(ca_file, client_cert_file, client_key_file)
            if tls or (tls is None and ca_file)
            else None
        )
        self._metadata = (("authorization", f"Bearer {self.api_key}"),) if self.api_key else ()
        self.rate_limit_retries = rate_limit_retries
        self.addresses = {
            "ingest": ingest or default_address("ingest"),
            "recall": recall or default_address("recall"),
            "scheduler": scheduler or default_address("scheduler"),
            "summariser": summariser or default_address("summariser"),
        }
        self.timeout = timeout
        self.auto_idempotency_keys = auto_idempotency_keys
        self._options = list(channel_options)
        self._channels: dict[str, Any] = {}
        self._stubs: dict[tuple[str, str], Any] = {}
        # Guards both dicts: first calls from several threads must not each open (and
        # leak) a channel, and close() may run while another thread calls. (The asyncio
        # client never holds it across an await.)
        self._lock = threading.Lock()

    def _open_channel(
        self, address: str, credentials: grpc.ChannelCredentials | None, options: list[Any]
    ) -> Any:
        """Opens a channel of the driver's kind (grpc.Channel or grpc.aio.Channel)."""
        raise NotImplementedError

    def _channel(self, key: str) -> Any:
        """The channel for ``key`` ("ingest", or "ingest:noretry" for calls that must not
        be repeated), opened on first use. Thread-safe: concurrent first calls share one."""
        with self._lock:
            channel = self._channels.get(key)
            if channel is None:
                service = key.removesuffix(":noretry")
                address = self.addresses[_PROCESS_OF.get(service, service)]
                channel = self._open_channel(address, self._credentials, self._options_for(key))
                self._channels[key] = channel
            return channel

    def _options_for(self, key: str) -> list[tuple[str, Any]]:
        service = key.removesuffix(":noretry")
        options = [*self._options, ("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        if key.endswith(":noretry"):
            return [*options, ("grpc.enable_retries", 0)]
        name, methods = _RETRIED[service]
        return [
            *options,
            ("grpc.enable_retries", 1),
            ("grpc.service_config", _service_config(name, methods)),
        ]

    def _stub(self, channel_key: str, stub: str) -> Any:
        found = self._stubs.get((channel_key, stub))
        if found is not None:
            return found
        channel = self._channel(channel_key)
        with self._lock:
            found = self._stubs.get((channel_key, stub))
            if found is None:
                found = _STUB_FACTORIES[stub](channel)
                self._stubs[(channel_key, stub)] = found
            return found

    def _prepare(self, step: Rpc) -> tuple[Callable[..., Any], dict[str, Any]]:
        """The stub method a driver calls for ``step``, and its keyword arguments."""
        fn: Callable[..., Any] = getattr(self._stub(step.channel, step.stub), step.method)
        kwargs: dict[str, Any] = {"timeout": step.timeout}
        if step.authenticate:
            kwargs["metadata"] = self._metadata
        return fn, kwargs

    def _take_channels(self) -> list[Any]:
        """Forgets every channel (a later call opens them again) and returns them to close."""
        with self._lock:
            channels = list(self._channels.values())
            self._channels.clear()
            self._stubs.clear()
        return channels


# --------------------------------------------------------------------------- tracing
#
# Client spans in OpenTelemetry's GenAI words, when the application traces: OpenTelemetry
# importable (it is not part of the core install) and a tracer provider set. Each attempt of
# a memory operation (episodic.semconv.MEMORY_RPCS: Recall is search_memory, DeleteEpisode
# delete_memory, ...) is a CLIENT span named by its operation, and every call carries the
# current trace context (``traceparent``), so the server's span is a child of the caller's.

_SERVICE_OF_STUB = {
    "admin": "AdminService",
    "ingest": "IngestService",
    "recall": "RecallService",
    "scheduler": "SchedulerService",
    "summariser": "SummariserService",
}
_otel: Any = None  # (trace, propagate, context) once imported; False: not installed
_tracer_of: tuple[Any, Any] | None = None  # (provider, its tracer)


def _opentelemetry() -> Any:
    global _otel
    if _otel is None:
        try:
            from opentelemetry import context, propagate, trace

            _otel = (trace, propagate, context)
        except ImportError:  # the core install: no tracing, nothing else changes
            _otel = False
    return _otel or None


def _host_port(address: str) -> tuple[str, int | None]:
    host, _, port = address.rpartition(":")
    if not host:
        return address, None
    return host.strip("[]"), int(port) if port.isdigit() else None


class ClientSpan:
    """The client side of one memory operation's attempt, current while the call runs;
    :meth:`end` reads the answer (or the error) into it."""

    __slots__ = ("_otel", "_span", "_spec", "_step", "_token")

    def __init__(self, otel: Any, span: Any, token: Any, spec: semconv.MemoryRpc, step: Rpc):
        self._otel = otel
        self._span = span
        self._token = token
        self._spec = spec
        self._step = step

    def end(self, response: Any = None, error: BaseException | None = None) -> None:
        """Ends the span: the standard's attributes of ``response``, or ``error.type``."""
        trace, _, context = self._otel
        span = self._span
        try:
            if error is not None:
                span.set_attribute(semconv.ERROR_TYPE, semconv.error_type(error))
                span.set_status(trace.Status(trace.StatusCode.ERROR, str(error)[:200]))
            else:
                memory = self._spec.extract(self._step.request, response)
                span.set_attributes(memory.attributes())
                if (
                    self._spec.operation not in semconv.CONTENT_FREE
                    and semconv.capture_content()
                    # The client cannot tell whether the dataset is stored encrypted (every
                    # dataset is by default): both switches, or no content.
                    and semconv.capture_encrypted_content()
                ):
                    if memory.query:
                        span.set_attribute(semconv.MEMORY_QUERY_TEXT, memory.query)
                    if memory.records:
                        span.set_attribute(
                            semconv.MEMORY_RECORDS, json.dumps(memory.records, ensure_ascii=False)
                        )
        except Exception:  # telemetry never fails a call
            pass
        finally:
            context.detach(self._token)
            span.end()


class _Untraced:
    """What :func:`trace_call` returns when there is no span: ending it does nothing."""

    __slots__ = ()

    def end(self, response: Any = None, error: BaseException | None = None) -> None:
        pass


UNTRACED = _Untraced()


def trace_call(core: ClientCore, step: Rpc, kwargs: dict[str, Any]) -> ClientSpan | _Untraced:
    """Called by a driver before it sends ``step``: while the application traces, adds the
    trace context to the call's metadata (in ``kwargs``) and, for a memory operation,
    starts its CLIENT span (returned; the driver ends it). :data:`UNTRACED` otherwise."""
    global _tracer_of
    otel = _opentelemetry()
    if otel is None or not step.authenticate:  # health checks are not worth a trace
        return UNTRACED
    trace, propagate, context = otel
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return UNTRACED  # OpenTelemetry installed, but nobody set a provider: tracing is off
    spec = semconv.MEMORY_RPCS.get(f"{_SERVICE_OF_STUB.get(step.stub)}/{step.method}")
    span = ctx = None
    if spec is not None:
        if _tracer_of is None or _tracer_of[0] is not provider:
            _tracer_of = (provider, provider.get_tracer("episodic.client"))
        host, port = _host_port(core.addresses[_PROCESS_OF.get(step.stub, step.stub)])
        attributes: dict[str, Any] = {
            semconv.OPERATION_NAME: spec.operation,
            semconv.PROVIDER_NAME: semconv.MEMORY_PROVIDER,
            semconv.SERVER_ADDRESS: host,
        }
        if port is not None:
            attributes[semconv.SERVER_PORT] = port
        store = getattr(step.request, "dataset", "")
        if isinstance(store, str) and store:
            attributes[semconv.MEMORY_STORE_ID] = store
        span = _tracer_of[1].start_span(
            spec.operation, kind=trace.SpanKind.CLIENT, attributes=attributes
        )
        ctx = trace.set_span_in_context(span)
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=ctx)
    if carrier:
        kwargs["metadata"] = (*kwargs.get("metadata", ()), *carrier.items())
    if span is None or spec is None:
        return UNTRACED
    # Current while the call runs: a gRPC client instrumentation's span nests below it.
    return ClientSpan(otel, span, context.attach(ctx), spec, step)


def call(
    core: ClientCore,
    service: str,
    method: str,
    request: Any,
    timeout: float | None,
    *,
    retry: bool = True,
) -> Flow[Any]:
    """One RPC of ``service`` within the call's deadline (``timeout``, else the client's).

    ``retry``: the channel repeats the call on UNAVAILABLE (gRPC service config) — only for
    calls safe to repeat — and so does this flow when the stream was reset (UNAVAILABLE
    with reason ``STREAM_RESET``, which the channel sees as INTERNAL). Refused by a rate
    limit (RESOURCE_EXHAUSTED with a RetryInfo) before anything happened, any call is safe
    to repeat: it is, once the server's delay has passed, up to ``rate_limit_retries``
    times and only if the deadline allows.
    """
    channel = service if retry else f"{service}:noretry"
    budget = core.timeout if timeout is None else timeout
    deadline = time.monotonic() + budget
    attempt = 0
    resets = 0
    while True:
        remaining = max(deadline - time.monotonic(), 0.001)
        try:
            return (yield Rpc(channel, service, method, request, remaining))
        except ResourceExhaustedError as error:
            wait = error.retry_after
            if (
                wait is None
                or attempt >= core.rate_limit_retries
                or time.monotonic() + wait >= deadline
            ):
                raise
            attempt += 1
        except UnavailableError as error:
            # gRPC's own retries (the channel's service config) repeat UNAVAILABLE but
            # never see a reset stream, which it reports as INTERNAL: repeat those here,
            # with the same policy, for the calls that are safe to repeat.
            if not retry or error.reason != STREAM_RESET or resets >= _MAX_ATTEMPTS - 1:
                raise
            wait = random.uniform(0, min(0.1 * 2**resets, 2.0))  # A6: full jitter
            if time.monotonic() + wait >= deadline:
                raise
            resets += 1
        yield Sleep(wait)


# --------------------------------------------------------------------------- operations
#
# Every public method of both clients, once. Each takes the client first and returns a
# flow; episodic.client and episodic.aio turn them into methods with the same name,
# signature and docstring.


def wait_ready(
    core: ClientCore, services: Iterable[str] = _SERVICES, timeout: float = 30.0
) -> Flow[None]:
    """Waits until each named service answers its health check with SERVING; raises
    UnavailableError naming the first one that does not within ``timeout`` seconds."""
    from grpc_health.v1 import health_pb2

    deadline = time.monotonic() + timeout
    for service in services:
        while True:
            try:
                # The health service is open: no credentials.
                answer = yield Rpc(
                    service,
                    "health",
                    "Check",
                    health_pb2.HealthCheckRequest(service=""),
                    2.0,
                    authenticate=False,
                )
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    break
            except EpisodicRpcError:
                pass
            if time.monotonic() > deadline:
                raise UnavailableError(
                    grpc.StatusCode.UNAVAILABLE,
                    f"{service} at {core.addresses[service]} is not serving",
                    method="Health.Check",
                )
            yield Sleep(0.1)


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
    for msg in (_to_new_message(m) for m in messages):
        key = msg.idempotency_key
        if not key and auto_idempotency_keys:
            key = f"auto:{uuid.uuid4()}"
        item = request.messages.add(
            role=_role(msg.role),
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
            item.created_at.CopyFrom(_timestamp(msg.created_at))
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
        request.occurred_at.CopyFrom(_timestamp(occurred_at))
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


# -- recall (Recall)


def recall(
    core: ClientCore,
    dataset: str,
    query: str | None = None,
    *,
    limit: int | None = None,
    similarity_weight: float | None = None,
    recency_weight: float | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    thread_ids: Sequence[str] = (),
    entities: Sequence[str] = (),
    event_type: str | None = None,
    as_of: datetime | None = None,
    literal_query: bool = False,
    actor: str | None = None,
    exclude_events: bool = False,
    exact_entities: bool = False,
    min_relevance: float | None = None,
    min_match: float | None = None,
    abstain: bool = False,
    include_procedures: bool = False,
    procedures: int | None = None,
    timeout: float | None = None,
) -> Flow[RecallResult]:
    """The dataset's most relevant current episodes, best first (and, with
    ``include_procedures``, the ``procedures`` — server default 3 — that fit the query:
    ``result.procedures``).

    Ranked by ``relevance_score = similarity × similarity_weight + recency ×
    recency_weight`` (server defaults 0.7 and 0.3; ``ScoredEpisode.relevance`` is another
    number, the calibrated 0–1 relevance that ``min_relevance`` filters on); without
    ``query``, plain recency order — which is how
    temporal questions ("the last 3 decisions about pricing") are asked:
    ``recall(ds, event_type="decision", entities=["pricing"], limit=3)``.
    ``limit``: how many (server default 3, at most 100). ``since``/``until`` bound the
    episode's span; ``entities`` must all be present (normalised like stored ones);
    ``as_of`` ranks as if it were that time (nothing that ended later is returned).
    Time in the query is understood ("2 days ago", "in July", "our third session"; see
    ``result.understanding``) unless ``literal_query``. Events (``episode.kind ==
    "event"``) come back beside summaries; ``actor`` keeps only the events of that actor,
    ``exclude_events`` leaves events out. ``entities`` match every alias of the entity
    ("atlas" finds "project Atlas") unless ``exact_entities``. ``min_relevance`` leaves out
    episodes whose calibrated ``relevance`` is below it (0: none left out; the README
    recommends a value), so a question nothing answers gets no episodes; ``min_match``
    answers nothing when the request's best match says the dataset likely holds no answer
    (0: always answers); ``abstain`` uses the values of both recommended for the embedding
    model Recall runs (an explicit ``min_relevance`` or ``min_match`` takes precedence, 0
    included: ``abstain=True, min_match=0`` keeps abstain's per-episode cut only).
    """
    request = recall_service_pb2.RecallRequest(
        dataset=dataset,
        query=query or "",
        include=[recall_service_pb2.RECALL_INCLUDE_EPISODES]
        + ([recall_service_pb2.RECALL_INCLUDE_PROCEDURES] if include_procedures else []),
        context_episodes=limit or 0,
        context_procedures=procedures or 0,
        thread_ids=list(thread_ids),
        entities=list(entities),
        event_type=event_type or "",
        literal_query=literal_query,
        actor=actor or "",
        exclude_events=exclude_events,
        exact_entities=exact_entities,
        abstain=abstain,
    )
    # Sent only when given: the fields have presence, and an unset one is abstain's to set.
    if min_relevance is not None:
        request.min_relevance = min_relevance
    if min_match is not None:
        request.min_match = min_match
    if similarity_weight is not None:
        request.similarity_weight = similarity_weight
    if recency_weight is not None:
        request.recency_weight = recency_weight
    for name, value in (("since", since), ("until", until), ("as_of", as_of)):
        if value is not None:
            getattr(request, name).CopyFrom(_timestamp(value))
    answer = yield from call(core, "recall", "Recall", request, timeout)
    return RecallResult(
        episodes=[ScoredEpisode.from_proto(e) for e in answer.episodes.episodes],
        episode_count=answer.episodes.episode_count,
        understanding=QueryUnderstanding.from_proto(answer),
        match=answer.episodes.match if answer.episodes.HasField("match") else None,
        abstained=answer.episodes.abstained,
        abstain_applied=answer.episodes.abstain_applied,
        procedures=[_scored_procedure(p) for p in answer.procedures],
        chunks_pending=answer.episodes.chunks_pending,
        episodes_pending=answer.episodes.episodes_pending,
    )


def _scored_procedure(m: episode_pb2.ScoredProcedure) -> ScoredProcedure:
    return ScoredProcedure(Procedure.from_proto(m.procedure), m.relevance)


# -- procedural memory (Ingest writes outcomes; Recall reads procedures; Admin deletes)

_OUTCOMES = {
    "success": episode_pb2.OUTCOME_SUCCESS,
    "failure": episode_pb2.OUTCOME_FAILURE,
    "partial": episode_pb2.OUTCOME_PARTIAL,
}


def record_outcome(
    core: ClientCore,
    thread_id: str,
    outcome: str,
    *,
    score: float | None = None,
    note: str = "",
    episode_id: str | None = None,
    timeout: float | None = None,
) -> Flow[OutcomeResult]:
    """Says how a thread turned out: ``outcome`` is "success", "failure" or "partial",
    with an optional ``score`` in [0, 1] and ``note``; ``episode_id`` narrows it to that
    episode's stretch. It may come before or after the episode exists; sending it again
    replaces it (the last one stands). Procedures are learned from successes."""
    if outcome not in _OUTCOMES:
        raise ValueError(f"unknown outcome {outcome!r}; use success, failure or partial")
    request = ingest_service_pb2.RecordOutcomeRequest(
        thread_id=thread_id, outcome=_OUTCOMES[outcome], note=note, episode_id=episode_id or ""
    )
    if score is not None:
        request.score = score
    # The last one stands: repeating the same outcome is harmless.
    answer = yield from call(core, "ingest", "RecordOutcome", request, timeout, retry=True)
    return OutcomeResult(
        thread_id=answer.thread_id,
        episode_id=answer.episode_id,
        outcome=outcome,
        changed=answer.changed,
        recorded_at=_time(answer, "recorded_at"),
    )


def recall_procedures(
    core: ClientCore,
    dataset: str,
    task: str | None = None,
    *,
    limit: int | None = None,
    timeout: float | None = None,
) -> Flow[list[ScoredProcedure]]:
    """How did we do this before? The dataset's procedures whose goals best fit ``task``
    (most supported without one), best first; procedures that failed more often than they
    worked are left out."""
    answer = yield from call(
        core,
        "recall",
        "Recall",
        recall_service_pb2.RecallRequest(
            dataset=dataset,
            query=task or "",
            include=[recall_service_pb2.RECALL_INCLUDE_PROCEDURES],
            context_procedures=limit or 0,
        ),
        timeout,
    )
    return [_scored_procedure(p) for p in answer.procedures]


def list_procedures(
    core: ClientCore,
    dataset: str,
    *,
    page_size: int = 0,
    page_token: str = "",
    timeout: float | None = None,
) -> Flow[Page[Procedure]]:
    """One page of a dataset's procedures, most successes first."""
    answer = yield from call(
        core,
        "recall",
        "ListProcedures",
        recall_service_pb2.ListProceduresRequest(
            dataset=dataset, page_size=page_size, page_token=page_token
        ),
        timeout,
    )
    return Page([Procedure.from_proto(p) for p in answer.procedures], answer.next_page_token)


def get_procedure(
    core: ClientCore, dataset: str, procedure_id: str, *, timeout: float | None = None
) -> Flow[Procedure]:
    """One procedure of ``dataset``."""
    answer = yield from call(
        core,
        "recall",
        "GetProcedure",
        recall_service_pb2.GetProcedureRequest(dataset=dataset, procedure_id=procedure_id),
        timeout,
    )
    return Procedure.from_proto(answer.procedure)


def delete_procedure(
    core: ClientCore, dataset: str, procedure_id: str, *, timeout: float | None = None
) -> Flow[int]:
    """Deletes a procedure and forgets the stretches it was learned from (they are not
    learned again); returns how many were forgotten."""
    answer = yield from call(
        core,
        "admin",
        "DeleteProcedure",
        admin_pb2.DeleteProcedureRequest(dataset=dataset, procedure_id=procedure_id),
        timeout,
        retry=False,
    )
    return int(answer.forgotten_sources)


# -- episode administration (Recall reads, Scheduler writes)


def list_episodes(
    core: ClientCore,
    dataset: str,
    *,
    status: str | None = None,
    thread_id: str | None = None,
    page_size: int = 0,
    page_token: str = "",
    timeout: float | None = None,
) -> Flow[Page[Episode]]:
    """One page of a dataset's episodes, newest first; ``status`` is e.g.
    ``"completed"`` or ``"failed"`` (any when None)."""
    if status is not None and status not in _STATUSES:
        raise ValueError(f"unknown status {status!r}; use one of {sorted(_STATUSES)}")
    answer = yield from call(
        core,
        "recall",
        "ListEpisodes",
        recall_service_pb2.ListEpisodesRequest(
            dataset=dataset,
            status=_STATUSES[status] if status else episode_pb2.EPISODE_STATUS_UNSPECIFIED,
            thread_id=thread_id or "",
            page_size=page_size,
            page_token=page_token,
        ),
        timeout,
    )
    return Page([Episode.from_proto(e) for e in answer.episodes], answer.next_page_token)


def iter_episodes(
    core: ClientCore,
    dataset: str,
    *,
    status: str | None = None,
    thread_id: str | None = None,
    timeout: float | None = None,
) -> Stream[Episode]:
    """Every episode of a dataset (optionally of one status or thread), newest first."""
    token = ""
    while True:
        page = yield from list_episodes(
            core,
            dataset,
            status=status,
            thread_id=thread_id,
            page_size=1000,
            page_token=token,
            timeout=timeout,
        )
        for item in page.items:
            yield Emit(item)
        token = page.next_page_token
        if not token:
            return


def search_episodes(
    core: ClientCore, dataset: str, query: str, *, limit: int = 0, timeout: float | None = None
) -> Flow[list[ScoredEpisode]]:
    """Current episodes matching ``query`` by text alone (no recency), best first."""
    answer = yield from call(
        core,
        "recall",
        "SearchEpisodes",
        recall_service_pb2.SearchEpisodesRequest(dataset=dataset, query=query, page_size=limit),
        timeout,
    )
    return [ScoredEpisode.from_proto(e) for e in answer.episodes]


def entity_timeline(
    core: ClientCore,
    dataset: str,
    entity: str,
    *,
    page_size: int = 0,
    page_token: str = "",
    timeout: float | None = None,
) -> Flow[EntityTimelinePage]:
    """Everything about one entity, in order: a page of the current episodes mentioning it
    under any alias, oldest first. ``entity`` is its id or any name of it ("atlas", "the
    Atlas project"); NotFoundError when the dataset has no such entity."""
    answer = yield from call(
        core,
        "recall",
        "EntityTimeline",
        recall_service_pb2.EntityTimelineRequest(
            dataset=dataset, entity=entity, page_size=page_size, page_token=page_token
        ),
        timeout,
    )
    return EntityTimelinePage(
        [Episode.from_proto(e) for e in answer.episodes],
        answer.next_page_token,
        entity=Entity.from_proto(answer.entity),
    )


def get_episode(
    core: ClientCore, episode_id: str, *, timeout: float | None = None
) -> Flow[Episode]:
    """One episode in any status (archived ones too, for provenance), or an event by the id
    recall and list_episodes give it."""
    answer = yield from call(
        core,
        "recall",
        "GetEpisode",
        recall_service_pb2.GetEpisodeRequest(episode_id=episode_id),
        timeout,
    )
    return Episode.from_proto(answer.episode)


def delete_episode(
    core: ClientCore, episode_id: str, *, timeout: float | None = None
) -> Flow[Episode]:
    """Soft-deletes an episode (it becomes archived and leaves recall) and returns it; an
    event's id (``Episode.is_event``) erases the event for good, returned as it was,
    marked archived."""
    answer = yield from call(
        core,
        "scheduler",
        "DeleteEpisode",
        scheduler_pb2.DeleteEpisodeRequest(episode_id=episode_id),
        timeout,
        retry=False,
    )
    return Episode.from_proto(answer.episode)


def retry_episode(
    core: ClientCore, episode_id: str, *, timeout: float | None = None
) -> Flow[Episode]:
    """Puts a failed episode back to pending (FailedPreconditionError otherwise)."""
    answer = yield from call(
        core,
        "scheduler",
        "RetryEpisode",
        scheduler_pb2.RetryEpisodeRequest(episode_id=episode_id),
        timeout,
        retry=False,
    )
    return Episode.from_proto(answer.episode)


def request_episode(
    core: ClientCore, thread_id: str, *, timeout: float | None = None
) -> Flow[Episode | None]:
    """Asks the Scheduler for an episode over the thread's uncaptured messages now (an
    operator's manual trigger); None when there was nothing to capture."""
    answer = yield from call(
        core,
        "scheduler",
        "RequestEpisode",
        scheduler_pb2.RequestEpisodeRequest(
            thread_id=thread_id, trigger=episode_pb2.EPISODE_TRIGGER_MANUAL
        ),
        timeout,
        retry=False,
    )
    return Episode.from_proto(answer.episode) if answer.episode_queued else None


def record_activity(
    core: ClientCore, thread_id: str, *, timeout: float | None = None
) -> Flow[datetime | None]:
    """Tells the Scheduler a thread received messages (Ingest does this after every
    write; exposed for completeness and tools). Returns when its idle timer fires."""
    answer = yield from call(
        core,
        "scheduler",
        "RecordActivity",
        scheduler_pb2.RecordActivityRequest(thread_id=thread_id),
        timeout,
        retry=False,
    )
    return _time(answer, "fire_at")


def record_thread_started(
    core: ClientCore, thread_id: str, *, timeout: float | None = None
) -> Flow[int]:
    """Tells the Scheduler a thread started (Ingest does this on CreateThread); returns
    how many sibling timers were pulled forward."""
    answer = yield from call(
        core,
        "scheduler",
        "RecordThreadStarted",
        scheduler_pb2.RecordThreadStartedRequest(thread_id=thread_id),
        timeout,
        retry=False,
    )
    return int(answer.timers_pulled_forward)


def run_sweep(
    core: ClientCore, *, as_of: datetime | None = None, timeout: float | None = None
) -> Flow[SweepResult]:
    """Runs one pass of the Scheduler's periodic work now (tests, operators)."""
    request = scheduler_pb2.RunSweepRequest()
    if as_of is not None:
        request.as_of.CopyFrom(_timestamp(as_of))
    a = yield from call(core, "scheduler", "RunSweep", request, timeout, retry=False)
    return SweepResult(
        a.episodes_created,
        a.timers_dropped,
        a.timers_caught_up,
        a.claims_reclaimed,
        a.backstop_episodes,
        a.threads_purged,
        a.threads_compacted,
    )


def process_pending(
    core: ClientCore, max_episodes: int = 0, *, timeout: float | None = None
) -> Flow[int]:
    """Makes the Summariser process up to ``max_episodes`` pending episodes now;
    returns how many completed."""
    answer = yield from call(
        core,
        "summariser",
        "ProcessPending",
        summariser_pb2.ProcessPendingRequest(max_episodes=max_episodes),
        timeout,
        retry=False,
    )
    return int(answer.completed)


def check_providers(
    core: ClientCore, *, timeout: float | None = None
) -> Flow[dict[str, ProviderHealth]]:
    """Whether the Summariser's LLM and embedding providers answer."""
    a = yield from call(
        core, "summariser", "CheckProviders", summariser_pb2.CheckProvidersRequest(), timeout
    )
    return {
        "llm": ProviderHealth(a.llm.name, a.llm.ok, a.llm.error),
        "embedder": ProviderHealth(a.embedder.name, a.embedder.ok, a.embedder.error),
    }


def list_datasets(
    core: ClientCore,
    *,
    prefix: str = "",
    page_size: int = 0,
    page_token: str = "",
    timeout: float | None = None,
) -> Flow[Page[DatasetSummary]]:
    """One page of the datasets, most recently active first (an admin key for every
    dataset); ``prefix`` keeps those starting with it, e.g. ``"acme/"``."""
    answer = yield from call(
        core,
        "admin",
        "ListDatasets",
        admin_pb2.ListDatasetsRequest(prefix=prefix, page_size=page_size, page_token=page_token),
        timeout,
    )
    return Page(
        [
            DatasetSummary(d.dataset, d.thread_count, d.message_count, _time(d, "last_activity_at"))
            for d in answer.datasets
        ],
        answer.next_page_token,
    )


def list_entities(
    core: ClientCore,
    dataset: str,
    *,
    page_size: int = 0,
    page_token: str = "",
    timeout: float | None = None,
) -> Flow[Page[Entity]]:
    """One page of a dataset's canonical entities, oldest first, with their aliases and
    counts (an admin key for the dataset)."""
    answer = yield from call(
        core,
        "admin",
        "ListEntities",
        admin_pb2.ListEntitiesRequest(dataset=dataset, page_size=page_size, page_token=page_token),
        timeout,
    )
    return Page([Entity.from_proto(e) for e in answer.entities], answer.next_page_token)


def merge_entities(
    core: ClientCore,
    dataset: str,
    into: str,
    sources: Sequence[str],
    *,
    timeout: float | None = None,
) -> Flow[Entity]:
    """Merges ``sources`` into ``into`` (each an entity id or any alias): their aliases
    become ``into``'s. Not retried automatically (a second merge of the same names finds
    them one entity already and is refused)."""
    answer = yield from call(
        core,
        "admin",
        "MergeEntities",
        admin_pb2.MergeEntitiesRequest(dataset=dataset, into=into, sources=list(sources)),
        timeout,
        retry=False,
    )
    return Entity.from_proto(answer.entity)


def split_entity(
    core: ClientCore, dataset: str, alias: str, *, timeout: float | None = None
) -> Flow[EntitySplit]:
    """Splits ``alias`` off its entity into a new entity of its own."""
    answer = yield from call(
        core,
        "admin",
        "SplitEntity",
        admin_pb2.SplitEntityRequest(dataset=dataset, alias=alias),
        timeout,
        retry=False,
    )
    return EntitySplit(Entity.from_proto(answer.split_off), Entity.from_proto(answer.remaining))


def delete_dataset(
    core: ClientCore, dataset: str, *, timeout: float | None = None
) -> Flow[ErasureReceipt]:
    """Erases a dataset — every thread, message, episode, embedding, fact and timer, and
    its data key — and returns the receipt (an admin key for the dataset). Not retried
    automatically: a second call while the first runs gets ABORTED, after it NOT_FOUND."""
    answer = yield from call(
        core,
        "admin",
        "DeleteDataset",
        admin_pb2.DeleteDatasetRequest(dataset=dataset),
        timeout,
        retry=False,
    )
    return ErasureReceipt.from_proto(answer.receipt)


def delete_thread(
    core: ClientCore, thread_id: str, *, timeout: float | None = None
) -> Flow[ErasureReceipt]:
    """Erases one thread and everything derived from it; returns the receipt."""
    answer = yield from call(
        core,
        "admin",
        "DeleteThread",
        admin_pb2.DeleteThreadRequest(thread_id=thread_id),
        timeout,
        retry=False,
    )
    return ErasureReceipt.from_proto(answer.receipt)


def get_dataset_policy(
    core: ClientCore, dataset: str, *, timeout: float | None = None
) -> Flow[DatasetPolicy]:
    """A dataset's retention and compaction policy, and whether it is encrypted."""
    answer = yield from call(
        core,
        "admin",
        "GetDatasetPolicy",
        admin_pb2.GetDatasetPolicyRequest(dataset=dataset),
        timeout,
    )
    return DatasetPolicy.from_proto(answer.policy)


class _Unchanged:
    """The type of :data:`UNCHANGED`."""

    def __repr__(self) -> str:
        return "UNCHANGED"


#: A policy field left as the dataset has it (``set_dataset_policy``'s default).
UNCHANGED = _Unchanged()


def set_dataset_policy(
    core: ClientCore,
    dataset: str,
    *,
    retention_days: int | _Unchanged | None = UNCHANGED,
    compact_after_days: int | _Unchanged | None = UNCHANGED,
    language: str | None = None,
    timeout: float | None = None,
) -> Flow[DatasetPolicy]:
    """Changes what is given of a dataset's policy and keeps the rest: its own retention
    and compaction in days (None: back to the global default), and the language of its
    text ("fr", "pt-BR", "german"; "auto": detected from its text). The request names the
    fields it changes (``update_mask``), so setting the language never resets a retention.
    Nothing given: the policy as it is."""
    request = admin_pb2.SetDatasetPolicyRequest(dataset=dataset)
    if not isinstance(retention_days, _Unchanged):
        request.update_mask.paths.append("retention_days")
        if retention_days is not None:
            request.retention_days = retention_days
    if not isinstance(compact_after_days, _Unchanged):
        request.update_mask.paths.append("compact_after_days")
        if compact_after_days is not None:
            request.compact_after_days = compact_after_days
    if language is not None:
        request.update_mask.paths.append("language")
        request.language = language
    if not request.update_mask.paths:  # an empty mask would mean every field
        return (yield from get_dataset_policy(core, dataset, timeout=timeout))
    answer = yield from call(core, "admin", "SetDatasetPolicy", request, timeout)
    return DatasetPolicy.from_proto(answer.policy)


def pipeline_status(
    core: ClientCore,
    dataset: str | None = None,
    *,
    max_errors: int = 0,
    check_providers: bool = True,
    timeout: float | None = None,
) -> Flow[PipelineStatus]:
    """Whether the pipeline moves, for one dataset or the whole suite: episodes per
    status, backlog ages, overdue timers, recent errors and (unless
    ``check_providers=False``, which avoids calling a remote LLM) provider health."""
    a = yield from call(
        core,
        "summariser",
        "GetPipelineStatus",
        summariser_pb2.GetPipelineStatusRequest(
            dataset=dataset or "",
            max_errors=max_errors,
            skip_provider_checks=not check_providers,
        ),
        timeout,
    )
    return PipelineStatus(
        observed_at=_time(a, "observed_at"),
        status_counts=dict(a.status_counts),
        semantic_status_counts=dict(a.semantic_status_counts),
        oldest_pending_age=_duration(a, "oldest_pending_age"),
        oldest_processing_age=_duration(a, "oldest_processing_age"),
        timers_due=a.timers_due,
        oldest_due_timer_age=_duration(a, "oldest_due_timer_age"),
        timers_waiting=a.timers_waiting,
        threads_uncaptured=a.threads_uncaptured,
        recent_errors=[EpisodeFailure.from_proto(e) for e in a.recent_errors],
        llm=_health(a, "llm"),
        embedder=_health(a, "embedder"),
        pending_waiting=a.pending_waiting,
        latest_retry_at=_time(a, "latest_retry_at"),
        failed_episodes=[EpisodeFailure.from_proto(e) for e in a.failed_episodes],
        threads_without_timer=a.threads_without_timer,
        oldest_untimed_thread_age=_duration(a, "oldest_untimed_thread_age"),
        lifecycle=LifecycleStatus(
            last_run_at=_time(a.lifecycle, "last_run_at"),
            threads_purged=a.lifecycle.threads_purged,
            threads_compacted=a.lifecycle.threads_compacted,
            messages_compacted=a.lifecycle.messages_compacted,
            erasures_resumed=a.lifecycle.erasures_resumed,
            datasets_erasing=a.lifecycle.datasets_erasing,
            threads_compacted_total=a.lifecycle.threads_compacted_total,
        ),
    )


def wait_for_episode(
    core: ClientCore,
    thread_id: str,
    *,
    end_sequence: int | None = None,
    timeout: float = 60.0,
    poll_interval: float = 0.2,
) -> Flow[Episode]:
    """Waits until the thread's episode covering ``end_sequence`` (default: the
    thread's last message) is summarised, and returns it — completed, or failed for
    good. Raises DeadlineExceededError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    thread = yield from get_thread(core, thread_id)
    if end_sequence is None:
        end_sequence = thread.message_count
    dataset = thread.dataset
    while True:
        page = yield from list_episodes(core, dataset, thread_id=thread_id, page_size=50)
        for episode in page:
            if episode.end_sequence >= end_sequence and episode.status in (
                "completed",
                "failed",
                "archived",
            ):
                return episode
        if time.monotonic() > deadline:
            raise DeadlineExceededError(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"no summarised episode of thread {thread_id} up to message {end_sequence} "
                f"after {timeout:.0f}s (are the scheduler and summariser running?)",
                method="wait_for_episode",
            )
        yield Sleep(poll_interval)
