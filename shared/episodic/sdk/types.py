"""The SDK's vocabulary: typed results built from the wire messages, and the messages a
caller writes (:class:`NewMessage`, :data:`MessageLike`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar, cast

from google.protobuf import json_format, struct_pb2, timestamp_pb2

from episodic.tool_calls import ToolCall
from episodic.v1 import admin_service_pb2 as admin_pb2
from episodic.v1 import entity_pb2, episode_pb2, ingest_service_pb2
from episodic.v1 import summariser_service_pb2 as summariser_pb2

# --------------------------------------------------------------------------- results


def time_of(message: Any, name: str) -> datetime | None:
    return getattr(message, name).ToDatetime(tzinfo=UTC) if message.HasField(name) else None


def duration_of(message: Any, name: str) -> timedelta | None:
    return getattr(message, name).ToTimedelta() if message.HasField(name) else None


def health_of(message: Any, name: str) -> ProviderHealth | None:
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
            created_at=time_of(m, "created_at"),
            last_message_at=time_of(m, "last_message_at"),
            ended_at=time_of(m, "ended_at"),
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
            time_of(m, "compacted_at"),
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
            created_at=time_of(m, "created_at"),
            received_at=time_of(m, "received_at"),
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
            started_at=time_of(m, "started_at"),
            ended_at=time_of(m, "ended_at"),
            trigger=_enum_name(m.trigger, episode_pb2.EpisodeTrigger, "EPISODE_TRIGGER_"),
            retry_count=m.retry_count,
            error=m.error,
            created_at=time_of(m, "created_at"),
            updated_at=time_of(m, "updated_at"),
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
                TimeExpression(e.text, e.kind, time_of(e, "start"), time_of(e, "end"))
                for e in m.expressions
            ],
            window_start=time_of(m, "window_start"),
            window_end=time_of(m, "window_end"),
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
            created_at=time_of(m, "created_at"),
            updated_at=time_of(m, "updated_at"),
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
            time_of(m, "created_at"),
            time_of(m, "received_at"),
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
            time_of(m, "updated_at"),
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
            started_at=time_of(m, "started_at"),
            finished_at=time_of(m, "finished_at"),
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
            created_at=time_of(m, "created_at"),
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
    """A tool call given as a ToolCall, or as OpenAI writes one, or flat
    (:meth:`ToolCall.from_openai`)."""
    return value if isinstance(value, ToolCall) else ToolCall.from_openai(value)


_ROLES = {
    "system": episode_pb2.ROLE_SYSTEM,
    "user": episode_pb2.ROLE_USER,
    "assistant": episode_pb2.ROLE_ASSISTANT,
    "agent": episode_pb2.ROLE_ASSISTANT,
    "tool": episode_pb2.ROLE_TOOL,
}
#: Episode statuses a list can filter on. ``deleted`` is reserved by the design and never
#: produced (a soft delete archives), so it is not offered.
STATUSES: dict[str, episode_pb2.EpisodeStatus] = {
    name.removeprefix("EPISODE_STATUS_").lower(): cast("episode_pb2.EpisodeStatus", value)
    for name, value in episode_pb2.EpisodeStatus.items()
    if value and name != "EPISODE_STATUS_DELETED"
}
#: The statuses an episode can have, as :attr:`Episode.status` names them.
EPISODE_STATUSES: tuple[str, ...] = tuple(STATUSES)


def to_new_message(value: MessageLike) -> NewMessage:
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


def timestamp_of(value: datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value if value.tzinfo else value.replace(tzinfo=UTC))
    return out


def role_value(role: str) -> int:
    try:
        return _ROLES[role.lower()]
    except KeyError:
        raise ValueError(f"unknown role {role!r}; use system, user, assistant or tool") from None
