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
    __slots__ = ("thread_id", "sequence", "role", "content", "metadata", "created_at", "received_at", "idempotency_key")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_AT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    sequence: int
    role: Role
    content: str
    metadata: _struct_pb2.Struct
    created_at: _timestamp_pb2.Timestamp
    received_at: _timestamp_pb2.Timestamp
    idempotency_key: str
    def __init__(self, thread_id: _Optional[str] = ..., sequence: _Optional[int] = ..., role: _Optional[_Union[Role, str]] = ..., content: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., received_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class Episode(_message.Message):
    __slots__ = ("episode_id", "thread_id", "dataset", "status", "semantic_status", "summary", "key_learnings", "entities", "event_type", "actor", "message_count", "start_sequence", "end_sequence", "started_at", "ended_at", "trigger", "retry_count", "error", "created_at", "updated_at", "thread_label", "kind", "event_source")
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
    def __init__(self, episode_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., dataset: _Optional[str] = ..., status: _Optional[_Union[EpisodeStatus, str]] = ..., semantic_status: _Optional[_Union[SemanticStatus, str]] = ..., summary: _Optional[str] = ..., key_learnings: _Optional[_Iterable[str]] = ..., entities: _Optional[_Iterable[str]] = ..., event_type: _Optional[str] = ..., actor: _Optional[str] = ..., message_count: _Optional[int] = ..., start_sequence: _Optional[int] = ..., end_sequence: _Optional[int] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., trigger: _Optional[_Union[EpisodeTrigger, str]] = ..., retry_count: _Optional[int] = ..., error: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., thread_label: _Optional[str] = ..., kind: _Optional[_Union[EpisodeKind, str]] = ..., event_source: _Optional[_Union[EventSource, str]] = ...) -> None: ...

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
