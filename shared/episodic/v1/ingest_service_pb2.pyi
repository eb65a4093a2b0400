import datetime

from episodic.v1 import access_pb2 as _access_pb2
from episodic.v1 import episode_pb2 as _episode_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateThreadRequest(_message.Message):
    __slots__ = ("dataset", "thread_id", "label", "metadata", "idempotency_key")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    thread_id: str
    label: str
    metadata: _struct_pb2.Struct
    idempotency_key: str
    def __init__(self, dataset: _Optional[str] = ..., thread_id: _Optional[str] = ..., label: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class CreateThreadResponse(_message.Message):
    __slots__ = ("thread", "created")
    THREAD_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    thread: _episode_pb2.Thread
    created: bool
    def __init__(self, thread: _Optional[_Union[_episode_pb2.Thread, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class NewMessage(_message.Message):
    __slots__ = ("thread_id", "role", "content", "metadata", "created_at", "idempotency_key", "tool_calls", "tool_call_id", "name")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    role: _episode_pb2.Role
    content: str
    metadata: _struct_pb2.Struct
    created_at: _timestamp_pb2.Timestamp
    idempotency_key: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[_episode_pb2.ToolCall]
    tool_call_id: str
    name: str
    def __init__(self, thread_id: _Optional[str] = ..., role: _Optional[_Union[_episode_pb2.Role, str]] = ..., content: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[_episode_pb2.ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class AddMessagesRequest(_message.Message):
    __slots__ = ("thread_id", "messages")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    messages: _containers.RepeatedCompositeFieldContainer[NewMessage]
    def __init__(self, thread_id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[NewMessage, _Mapping]]] = ...) -> None: ...

class AddMessagesResponse(_message.Message):
    __slots__ = ("stored_count", "thread_id", "receipts")
    STORED_COUNT_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    stored_count: int
    thread_id: str
    receipts: _containers.RepeatedCompositeFieldContainer[MessageReceipt]
    def __init__(self, stored_count: _Optional[int] = ..., thread_id: _Optional[str] = ..., receipts: _Optional[_Iterable[_Union[MessageReceipt, _Mapping]]] = ...) -> None: ...

class MessageReceipt(_message.Message):
    __slots__ = ("sequence", "idempotency_key", "stored", "created_at", "received_at")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    STORED_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_AT_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    idempotency_key: str
    stored: bool
    created_at: _timestamp_pb2.Timestamp
    received_at: _timestamp_pb2.Timestamp
    def __init__(self, sequence: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., stored: _Optional[bool] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., received_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class EndThreadRequest(_message.Message):
    __slots__ = ("thread_id",)
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    def __init__(self, thread_id: _Optional[str] = ...) -> None: ...

class EndThreadResponse(_message.Message):
    __slots__ = ("thread_id", "episode_queued", "episode_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    EPISODE_QUEUED_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    episode_queued: bool
    episode_id: str
    def __init__(self, thread_id: _Optional[str] = ..., episode_queued: _Optional[bool] = ..., episode_id: _Optional[str] = ...) -> None: ...

class GetThreadRequest(_message.Message):
    __slots__ = ("thread_id",)
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    def __init__(self, thread_id: _Optional[str] = ...) -> None: ...

class GetThreadResponse(_message.Message):
    __slots__ = ("thread",)
    THREAD_FIELD_NUMBER: _ClassVar[int]
    thread: _episode_pb2.Thread
    def __init__(self, thread: _Optional[_Union[_episode_pb2.Thread, _Mapping]] = ...) -> None: ...

class ListMessagesRequest(_message.Message):
    __slots__ = ("thread_id", "page_size", "page_token", "start_sequence", "end_sequence")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    START_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    END_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    page_size: int
    page_token: str
    start_sequence: int
    end_sequence: int
    def __init__(self, thread_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., start_sequence: _Optional[int] = ..., end_sequence: _Optional[int] = ...) -> None: ...

class ListMessagesResponse(_message.Message):
    __slots__ = ("messages", "next_page_token", "compaction")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_episode_pb2.Message]
    next_page_token: str
    compaction: _episode_pb2.ThreadCompaction
    def __init__(self, messages: _Optional[_Iterable[_Union[_episode_pb2.Message, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., compaction: _Optional[_Union[_episode_pb2.ThreadCompaction, _Mapping]] = ...) -> None: ...

class ListThreadsRequest(_message.Message):
    __slots__ = ("dataset", "page_size", "page_token")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    page_size: int
    page_token: str
    def __init__(self, dataset: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListThreadsResponse(_message.Message):
    __slots__ = ("threads", "next_page_token")
    THREADS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    threads: _containers.RepeatedCompositeFieldContainer[_episode_pb2.Thread]
    next_page_token: str
    def __init__(self, threads: _Optional[_Iterable[_Union[_episode_pb2.Thread, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RecordOutcomeRequest(_message.Message):
    __slots__ = ("thread_id", "outcome", "score", "note", "episode_id")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    outcome: _episode_pb2.Outcome
    score: float
    note: str
    episode_id: str
    def __init__(self, thread_id: _Optional[str] = ..., outcome: _Optional[_Union[_episode_pb2.Outcome, str]] = ..., score: _Optional[float] = ..., note: _Optional[str] = ..., episode_id: _Optional[str] = ...) -> None: ...

class RecordOutcomeResponse(_message.Message):
    __slots__ = ("thread_id", "episode_id", "outcome", "changed", "recorded_at")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    episode_id: str
    outcome: _episode_pb2.Outcome
    changed: bool
    recorded_at: _timestamp_pb2.Timestamp
    def __init__(self, thread_id: _Optional[str] = ..., episode_id: _Optional[str] = ..., outcome: _Optional[_Union[_episode_pb2.Outcome, str]] = ..., changed: _Optional[bool] = ..., recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RecordEventRequest(_message.Message):
    __slots__ = ("dataset", "actor", "event_type", "summary", "entities", "occurred_at", "thread_id", "idempotency_key")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    actor: str
    event_type: str
    summary: str
    entities: _containers.RepeatedScalarFieldContainer[str]
    occurred_at: _timestamp_pb2.Timestamp
    thread_id: str
    idempotency_key: str
    def __init__(self, dataset: _Optional[str] = ..., actor: _Optional[str] = ..., event_type: _Optional[str] = ..., summary: _Optional[str] = ..., entities: _Optional[_Iterable[str]] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., thread_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class RecordEventResponse(_message.Message):
    __slots__ = ("event", "stored")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    STORED_FIELD_NUMBER: _ClassVar[int]
    event: _episode_pb2.Episode
    stored: bool
    def __init__(self, event: _Optional[_Union[_episode_pb2.Episode, _Mapping]] = ..., stored: _Optional[bool] = ...) -> None: ...
