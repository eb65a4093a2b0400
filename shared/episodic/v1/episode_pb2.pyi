import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_SYSTEM: _ClassVar[Role]
    ROLE_USER: _ClassVar[Role]
    ROLE_ASSISTANT: _ClassVar[Role]
    ROLE_TOOL: _ClassVar[Role]

class EpisodeStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EPISODE_STATUS_UNSPECIFIED: _ClassVar[EpisodeStatus]
    EPISODE_STATUS_PENDING: _ClassVar[EpisodeStatus]
    EPISODE_STATUS_PROCESSING: _ClassVar[EpisodeStatus]
    EPISODE_STATUS_COMPLETED: _ClassVar[EpisodeStatus]
    EPISODE_STATUS_FAILED: _ClassVar[EpisodeStatus]
    EPISODE_STATUS_ARCHIVED: _ClassVar[EpisodeStatus]
    EPISODE_STATUS_DELETED: _ClassVar[EpisodeStatus]

class SemanticStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEMANTIC_STATUS_UNSPECIFIED: _ClassVar[SemanticStatus]
    SEMANTIC_STATUS_PENDING: _ClassVar[SemanticStatus]
    SEMANTIC_STATUS_PROCESSING: _ClassVar[SemanticStatus]
    SEMANTIC_STATUS_COMPLETED: _ClassVar[SemanticStatus]
    SEMANTIC_STATUS_FAILED: _ClassVar[SemanticStatus]
    SEMANTIC_STATUS_SKIPPED: _ClassVar[SemanticStatus]

class EpisodeTrigger(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EPISODE_TRIGGER_UNSPECIFIED: _ClassVar[EpisodeTrigger]
    EPISODE_TRIGGER_EXPLICIT: _ClassVar[EpisodeTrigger]
    EPISODE_TRIGGER_NEW_THREAD: _ClassVar[EpisodeTrigger]
    EPISODE_TRIGGER_INACTIVITY: _ClassVar[EpisodeTrigger]
    EPISODE_TRIGGER_BACKSTOP: _ClassVar[EpisodeTrigger]
    EPISODE_TRIGGER_MANUAL: _ClassVar[EpisodeTrigger]

class EpisodeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EPISODE_KIND_UNSPECIFIED: _ClassVar[EpisodeKind]
    EPISODE_KIND_SUMMARY: _ClassVar[EpisodeKind]
    EPISODE_KIND_EVENT: _ClassVar[EpisodeKind]

class EventSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_SOURCE_UNSPECIFIED: _ClassVar[EventSource]
    EVENT_SOURCE_AGENT: _ClassVar[EventSource]
    EVENT_SOURCE_CLASSIFIER: _ClassVar[EventSource]

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_UNSPECIFIED: _ClassVar[Outcome]
    OUTCOME_SUCCESS: _ClassVar[Outcome]
    OUTCOME_FAILURE: _ClassVar[Outcome]
    OUTCOME_PARTIAL: _ClassVar[Outcome]
ROLE_UNSPECIFIED: Role
ROLE_SYSTEM: Role
ROLE_USER: Role
ROLE_ASSISTANT: Role
ROLE_TOOL: Role
EPISODE_STATUS_UNSPECIFIED: EpisodeStatus
EPISODE_STATUS_PENDING: EpisodeStatus
EPISODE_STATUS_PROCESSING: EpisodeStatus
EPISODE_STATUS_COMPLETED: EpisodeStatus
EPISODE_STATUS_FAILED: EpisodeStatus
EPISODE_STATUS_ARCHIVED: EpisodeStatus
EPISODE_STATUS_DELETED: EpisodeStatus
SEMANTIC_STATUS_UNSPECIFIED: SemanticStatus
SEMANTIC_STATUS_PENDING: SemanticStatus
SEMANTIC_STATUS_PROCESSING: SemanticStatus
SEMANTIC_STATUS_COMPLETED: SemanticStatus
SEMANTIC_STATUS_FAILED: SemanticStatus
SEMANTIC_STATUS_SKIPPED: SemanticStatus
EPISODE_TRIGGER_UNSPECIFIED: EpisodeTrigger
EPISODE_TRIGGER_EXPLICIT: EpisodeTrigger
EPISODE_TRIGGER_NEW_THREAD: EpisodeTrigger
EPISODE_TRIGGER_INACTIVITY: EpisodeTrigger
EPISODE_TRIGGER_BACKSTOP: EpisodeTrigger
EPISODE_TRIGGER_MANUAL: EpisodeTrigger
EPISODE_KIND_UNSPECIFIED: EpisodeKind
EPISODE_KIND_SUMMARY: EpisodeKind
EPISODE_KIND_EVENT: EpisodeKind
EVENT_SOURCE_UNSPECIFIED: EventSource
EVENT_SOURCE_AGENT: EventSource
EVENT_SOURCE_CLASSIFIER: EventSource
OUTCOME_UNSPECIFIED: Outcome
OUTCOME_SUCCESS: Outcome
OUTCOME_FAILURE: Outcome
OUTCOME_PARTIAL: Outcome

class Thread(_message.Message):
    __slots__ = ("thread_id", "dataset", "label", "metadata", "message_count", "captured_sequence", "created_at", "last_message_at", "ended_at", "compaction")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    CAPTURED_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_MESSAGE_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    dataset: str
    label: str
    metadata: _struct_pb2.Struct
    message_count: int
    captured_sequence: int
    created_at: _timestamp_pb2.Timestamp
    last_message_at: _timestamp_pb2.Timestamp
    ended_at: _timestamp_pb2.Timestamp
    compaction: ThreadCompaction
    def __init__(self, thread_id: _Optional[str] = ..., dataset: _Optional[str] = ..., label: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., message_count: _Optional[int] = ..., captured_sequence: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_message_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., compaction: _Optional[_Union[ThreadCompaction, _Mapping]] = ...) -> None: ...

class ThreadCompaction(_message.Message):
    __slots__ = ("compacted_at", "through_sequence", "content_digest", "episode_id", "summary")
    COMPACTED_AT_FIELD_NUMBER: _ClassVar[int]
    THROUGH_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    compacted_at: _timestamp_pb2.Timestamp
    through_sequence: int
    content_digest: str
    episode_id: str
    summary: str
    def __init__(self, compacted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., through_sequence: _Optional[int] = ..., content_digest: _Optional[str] = ..., episode_id: _Optional[str] = ..., summary: _Optional[str] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("thread_id", "sequence", "role", "content", "metadata", "created_at", "received_at", "idempotency_key", "tool_calls", "tool_call_id", "name")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_AT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    sequence: int
    role: Role
    content: str
    metadata: _struct_pb2.Struct
    created_at: _timestamp_pb2.Timestamp
    received_at: _timestamp_pb2.Timestamp
    idempotency_key: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    tool_call_id: str
    name: str
    def __init__(self, thread_id: _Optional[str] = ..., sequence: _Optional[int] = ..., role: _Optional[_Union[Role, str]] = ..., content: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., received_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("id", "name", "arguments")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    arguments: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments: _Optional[str] = ...) -> None: ...

class Episode(_message.Message):
    __slots__ = ("episode_id", "thread_id", "dataset", "status", "semantic_status", "summary", "key_learnings", "entities", "event_type", "actor", "message_count", "start_sequence", "end_sequence", "started_at", "ended_at", "trigger", "retry_count", "error", "created_at", "updated_at", "thread_label", "kind", "event_source", "chunks_pending")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SEMANTIC_STATUS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    KEY_LEARNINGS_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    START_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    END_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    RETRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    THREAD_LABEL_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    EVENT_SOURCE_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_PENDING_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    thread_id: str
    dataset: str
    status: EpisodeStatus
    semantic_status: SemanticStatus
    summary: str
    key_learnings: _containers.RepeatedScalarFieldContainer[str]
    entities: _containers.RepeatedScalarFieldContainer[str]
    event_type: str
    actor: str
    message_count: int
    start_sequence: int
    end_sequence: int
    started_at: _timestamp_pb2.Timestamp
    ended_at: _timestamp_pb2.Timestamp
    trigger: EpisodeTrigger
    retry_count: int
    error: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    thread_label: str
    kind: EpisodeKind
    event_source: EventSource
    chunks_pending: bool
    def __init__(self, episode_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., dataset: _Optional[str] = ..., status: _Optional[_Union[EpisodeStatus, str]] = ..., semantic_status: _Optional[_Union[SemanticStatus, str]] = ..., summary: _Optional[str] = ..., key_learnings: _Optional[_Iterable[str]] = ..., entities: _Optional[_Iterable[str]] = ..., event_type: _Optional[str] = ..., actor: _Optional[str] = ..., message_count: _Optional[int] = ..., start_sequence: _Optional[int] = ..., end_sequence: _Optional[int] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., trigger: _Optional[_Union[EpisodeTrigger, str]] = ..., retry_count: _Optional[int] = ..., error: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., thread_label: _Optional[str] = ..., kind: _Optional[_Union[EpisodeKind, str]] = ..., event_source: _Optional[_Union[EventSource, str]] = ..., chunks_pending: _Optional[bool] = ...) -> None: ...

class ScoredEpisode(_message.Message):
    __slots__ = ("episode", "relevance_score", "similarity", "recency", "lexical", "semantic", "relevance")
    EPISODE_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_SCORE_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    RECENCY_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_FIELD_NUMBER: _ClassVar[int]
    SEMANTIC_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    episode: Episode
    relevance_score: float
    similarity: float
    recency: float
    lexical: float
    semantic: float
    relevance: float
    def __init__(self, episode: _Optional[_Union[Episode, _Mapping]] = ..., relevance_score: _Optional[float] = ..., similarity: _Optional[float] = ..., recency: _Optional[float] = ..., lexical: _Optional[float] = ..., semantic: _Optional[float] = ..., relevance: _Optional[float] = ...) -> None: ...

class Procedure(_message.Message):
    __slots__ = ("procedure_id", "dataset", "goal", "example_goals", "steps", "success_count", "failure_count", "partial_count", "sources", "created_at", "updated_at", "extractor")
    PROCEDURE_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    GOAL_FIELD_NUMBER: _ClassVar[int]
    EXAMPLE_GOALS_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_COUNT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_COUNT_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXTRACTOR_FIELD_NUMBER: _ClassVar[int]
    procedure_id: str
    dataset: str
    goal: str
    example_goals: _containers.RepeatedScalarFieldContainer[str]
    steps: _containers.RepeatedCompositeFieldContainer[ProcedureStep]
    success_count: int
    failure_count: int
    partial_count: int
    sources: _containers.RepeatedCompositeFieldContainer[ProcedureSource]
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    extractor: str
    def __init__(self, procedure_id: _Optional[str] = ..., dataset: _Optional[str] = ..., goal: _Optional[str] = ..., example_goals: _Optional[_Iterable[str]] = ..., steps: _Optional[_Iterable[_Union[ProcedureStep, _Mapping]]] = ..., success_count: _Optional[int] = ..., failure_count: _Optional[int] = ..., partial_count: _Optional[int] = ..., sources: _Optional[_Iterable[_Union[ProcedureSource, _Mapping]]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., extractor: _Optional[str] = ...) -> None: ...

class ProcedureStep(_message.Message):
    __slots__ = ("tool", "purpose", "writes", "arguments")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    WRITES_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    tool: str
    purpose: str
    writes: bool
    arguments: _containers.RepeatedCompositeFieldContainer[ProcedureArgument]
    def __init__(self, tool: _Optional[str] = ..., purpose: _Optional[str] = ..., writes: _Optional[bool] = ..., arguments: _Optional[_Iterable[_Union[ProcedureArgument, _Mapping]]] = ...) -> None: ...

class ProcedureArgument(_message.Message):
    __slots__ = ("name", "source")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    name: str
    source: str
    def __init__(self, name: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class ProcedureSource(_message.Message):
    __slots__ = ("thread_id", "episode_id", "outcome")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    episode_id: str
    outcome: Outcome
    def __init__(self, thread_id: _Optional[str] = ..., episode_id: _Optional[str] = ..., outcome: _Optional[_Union[Outcome, str]] = ...) -> None: ...

class ScoredProcedure(_message.Message):
    __slots__ = ("procedure", "relevance")
    PROCEDURE_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    procedure: Procedure
    relevance: float
    def __init__(self, procedure: _Optional[_Union[Procedure, _Mapping]] = ..., relevance: _Optional[float] = ...) -> None: ...
