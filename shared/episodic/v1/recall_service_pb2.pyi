import datetime

from episodic.v1 import access_pb2 as _access_pb2
from episodic.v1 import entity_pb2 as _entity_pb2
from episodic.v1 import episode_pb2 as _episode_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RecallInclude(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RECALL_INCLUDE_UNSPECIFIED: _ClassVar[RecallInclude]
    RECALL_INCLUDE_EPISODES: _ClassVar[RecallInclude]
    RECALL_INCLUDE_PROCEDURES: _ClassVar[RecallInclude]
RECALL_INCLUDE_UNSPECIFIED: RecallInclude
RECALL_INCLUDE_EPISODES: RecallInclude
RECALL_INCLUDE_PROCEDURES: RecallInclude

class RecallRequest(_message.Message):
    __slots__ = ("dataset", "query", "include", "context_episodes", "similarity_weight", "recency_weight", "since", "until", "thread_ids", "entities", "event_type", "as_of", "literal_query", "actor", "exclude_events", "exact_entities", "min_relevance", "min_match", "abstain", "context_procedures")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_EPISODES_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    RECENCY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    THREAD_IDS_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    LITERAL_QUERY_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_EVENTS_FIELD_NUMBER: _ClassVar[int]
    EXACT_ENTITIES_FIELD_NUMBER: _ClassVar[int]
    MIN_RELEVANCE_FIELD_NUMBER: _ClassVar[int]
    MIN_MATCH_FIELD_NUMBER: _ClassVar[int]
    ABSTAIN_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_PROCEDURES_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    query: str
    include: _containers.RepeatedScalarFieldContainer[RecallInclude]
    context_episodes: int
    similarity_weight: float
    recency_weight: float
    since: _timestamp_pb2.Timestamp
    until: _timestamp_pb2.Timestamp
    thread_ids: _containers.RepeatedScalarFieldContainer[str]
    entities: _containers.RepeatedScalarFieldContainer[str]
    event_type: str
    as_of: _timestamp_pb2.Timestamp
    literal_query: bool
    actor: str
    exclude_events: bool
    exact_entities: bool
    min_relevance: float
    min_match: float
    abstain: bool
    context_procedures: int
    def __init__(self, dataset: _Optional[str] = ..., query: _Optional[str] = ..., include: _Optional[_Iterable[_Union[RecallInclude, str]]] = ..., context_episodes: _Optional[int] = ..., similarity_weight: _Optional[float] = ..., recency_weight: _Optional[float] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., thread_ids: _Optional[_Iterable[str]] = ..., entities: _Optional[_Iterable[str]] = ..., event_type: _Optional[str] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., literal_query: _Optional[bool] = ..., actor: _Optional[str] = ..., exclude_events: _Optional[bool] = ..., exact_entities: _Optional[bool] = ..., min_relevance: _Optional[float] = ..., min_match: _Optional[float] = ..., abstain: _Optional[bool] = ..., context_procedures: _Optional[int] = ...) -> None: ...

class RecalledEpisodes(_message.Message):
    __slots__ = ("episodes", "episode_count", "match", "abstained", "abstain_applied", "chunks_pending", "episodes_pending")
    EPISODES_FIELD_NUMBER: _ClassVar[int]
    EPISODE_COUNT_FIELD_NUMBER: _ClassVar[int]
    MATCH_FIELD_NUMBER: _ClassVar[int]
    ABSTAINED_FIELD_NUMBER: _ClassVar[int]
    ABSTAIN_APPLIED_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_PENDING_FIELD_NUMBER: _ClassVar[int]
    EPISODES_PENDING_FIELD_NUMBER: _ClassVar[int]
    episodes: _containers.RepeatedCompositeFieldContainer[_episode_pb2.ScoredEpisode]
    episode_count: int
    match: float
    abstained: bool
    abstain_applied: bool
    chunks_pending: bool
    episodes_pending: bool
    def __init__(self, episodes: _Optional[_Iterable[_Union[_episode_pb2.ScoredEpisode, _Mapping]]] = ..., episode_count: _Optional[int] = ..., match: _Optional[float] = ..., abstained: _Optional[bool] = ..., abstain_applied: _Optional[bool] = ..., chunks_pending: _Optional[bool] = ..., episodes_pending: _Optional[bool] = ...) -> None: ...

class RecallResponse(_message.Message):
    __slots__ = ("episodes", "understanding", "procedures", "query_language")
    EPISODES_FIELD_NUMBER: _ClassVar[int]
    UNDERSTANDING_FIELD_NUMBER: _ClassVar[int]
    PROCEDURES_FIELD_NUMBER: _ClassVar[int]
    QUERY_LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    episodes: RecalledEpisodes
    understanding: QueryUnderstanding
    procedures: _containers.RepeatedCompositeFieldContainer[_episode_pb2.ScoredProcedure]
    query_language: str
    def __init__(self, episodes: _Optional[_Union[RecalledEpisodes, _Mapping]] = ..., understanding: _Optional[_Union[QueryUnderstanding, _Mapping]] = ..., procedures: _Optional[_Iterable[_Union[_episode_pb2.ScoredProcedure, _Mapping]]] = ..., query_language: _Optional[str] = ...) -> None: ...

class QueryUnderstanding(_message.Message):
    __slots__ = ("ranked_query", "expressions", "window_start", "window_end", "ordinal", "time_only", "applied", "notes")
    RANKED_QUERY_FIELD_NUMBER: _ClassVar[int]
    EXPRESSIONS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_FIELD_NUMBER: _ClassVar[int]
    ORDINAL_FIELD_NUMBER: _ClassVar[int]
    TIME_ONLY_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    ranked_query: str
    expressions: _containers.RepeatedCompositeFieldContainer[TimeExpression]
    window_start: _timestamp_pb2.Timestamp
    window_end: _timestamp_pb2.Timestamp
    ordinal: SessionOrdinal
    time_only: bool
    applied: bool
    notes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ranked_query: _Optional[str] = ..., expressions: _Optional[_Iterable[_Union[TimeExpression, _Mapping]]] = ..., window_start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., window_end: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ordinal: _Optional[_Union[SessionOrdinal, _Mapping]] = ..., time_only: _Optional[bool] = ..., applied: _Optional[bool] = ..., notes: _Optional[_Iterable[str]] = ...) -> None: ...

class TimeExpression(_message.Message):
    __slots__ = ("text", "kind", "start", "end")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    text: str
    kind: str
    start: _timestamp_pb2.Timestamp
    end: _timestamp_pb2.Timestamp
    def __init__(self, text: _Optional[str] = ..., kind: _Optional[str] = ..., start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SessionOrdinal(_message.Message):
    __slots__ = ("text", "position", "from_end", "count", "scope", "event_type", "thread_ids")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    FROM_END_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    THREAD_IDS_FIELD_NUMBER: _ClassVar[int]
    text: str
    position: int
    from_end: bool
    count: int
    scope: str
    event_type: str
    thread_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, text: _Optional[str] = ..., position: _Optional[int] = ..., from_end: _Optional[bool] = ..., count: _Optional[int] = ..., scope: _Optional[str] = ..., event_type: _Optional[str] = ..., thread_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ListEpisodesRequest(_message.Message):
    __slots__ = ("dataset", "status", "page_size", "page_token", "thread_id")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    status: _episode_pb2.EpisodeStatus
    page_size: int
    page_token: str
    thread_id: str
    def __init__(self, dataset: _Optional[str] = ..., status: _Optional[_Union[_episode_pb2.EpisodeStatus, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., thread_id: _Optional[str] = ...) -> None: ...

class ListEpisodesResponse(_message.Message):
    __slots__ = ("episodes", "next_page_token")
    EPISODES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    episodes: _containers.RepeatedCompositeFieldContainer[_episode_pb2.Episode]
    next_page_token: str
    def __init__(self, episodes: _Optional[_Iterable[_Union[_episode_pb2.Episode, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SearchEpisodesRequest(_message.Message):
    __slots__ = ("dataset", "query", "page_size")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    query: str
    page_size: int
    def __init__(self, dataset: _Optional[str] = ..., query: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class SearchEpisodesResponse(_message.Message):
    __slots__ = ("episodes",)
    EPISODES_FIELD_NUMBER: _ClassVar[int]
    episodes: _containers.RepeatedCompositeFieldContainer[_episode_pb2.ScoredEpisode]
    def __init__(self, episodes: _Optional[_Iterable[_Union[_episode_pb2.ScoredEpisode, _Mapping]]] = ...) -> None: ...

class GetEpisodeRequest(_message.Message):
    __slots__ = ("episode_id",)
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    def __init__(self, episode_id: _Optional[str] = ...) -> None: ...

class GetEpisodeResponse(_message.Message):
    __slots__ = ("episode",)
    EPISODE_FIELD_NUMBER: _ClassVar[int]
    episode: _episode_pb2.Episode
    def __init__(self, episode: _Optional[_Union[_episode_pb2.Episode, _Mapping]] = ...) -> None: ...

class EntityTimelineRequest(_message.Message):
    __slots__ = ("dataset", "entity", "page_size", "page_token")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    entity: str
    page_size: int
    page_token: str
    def __init__(self, dataset: _Optional[str] = ..., entity: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class EntityTimelineResponse(_message.Message):
    __slots__ = ("entity", "episodes", "next_page_token")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    EPISODES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entity: _entity_pb2.Entity
    episodes: _containers.RepeatedCompositeFieldContainer[_episode_pb2.Episode]
    next_page_token: str
    def __init__(self, entity: _Optional[_Union[_entity_pb2.Entity, _Mapping]] = ..., episodes: _Optional[_Iterable[_Union[_episode_pb2.Episode, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListProceduresRequest(_message.Message):
    __slots__ = ("dataset", "page_size", "page_token")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    page_size: int
    page_token: str
    def __init__(self, dataset: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListProceduresResponse(_message.Message):
    __slots__ = ("procedures", "next_page_token")
    PROCEDURES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    procedures: _containers.RepeatedCompositeFieldContainer[_episode_pb2.Procedure]
    next_page_token: str
    def __init__(self, procedures: _Optional[_Iterable[_Union[_episode_pb2.Procedure, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetProcedureRequest(_message.Message):
    __slots__ = ("procedure_id", "dataset")
    PROCEDURE_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    procedure_id: str
    dataset: str
    def __init__(self, procedure_id: _Optional[str] = ..., dataset: _Optional[str] = ...) -> None: ...

class GetProcedureResponse(_message.Message):
    __slots__ = ("procedure",)
    PROCEDURE_FIELD_NUMBER: _ClassVar[int]
    procedure: _episode_pb2.Procedure
    def __init__(self, procedure: _Optional[_Union[_episode_pb2.Procedure, _Mapping]] = ...) -> None: ...
