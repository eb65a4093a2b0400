import datetime

from episodic.v1 import access_pb2 as _access_pb2
from episodic.v1 import episode_pb2 as _episode_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RecordActivityRequest(_message.Message):
    __slots__ = ("thread_id",)
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    def __init__(self, thread_id: _Optional[str] = ...) -> None: ...

class RecordActivityResponse(_message.Message):
    __slots__ = ("fire_at",)
    FIRE_AT_FIELD_NUMBER: _ClassVar[int]
    fire_at: _timestamp_pb2.Timestamp
    def __init__(self, fire_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RecordThreadStartedRequest(_message.Message):
    __slots__ = ("thread_id",)
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    def __init__(self, thread_id: _Optional[str] = ...) -> None: ...

class RecordThreadStartedResponse(_message.Message):
    __slots__ = ("timers_pulled_forward",)
    TIMERS_PULLED_FORWARD_FIELD_NUMBER: _ClassVar[int]
    timers_pulled_forward: int
    def __init__(self, timers_pulled_forward: _Optional[int] = ...) -> None: ...

class RequestEpisodeRequest(_message.Message):
    __slots__ = ("thread_id", "trigger")
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    trigger: _episode_pb2.EpisodeTrigger
    def __init__(self, thread_id: _Optional[str] = ..., trigger: _Optional[_Union[_episode_pb2.EpisodeTrigger, str]] = ...) -> None: ...

class RequestEpisodeResponse(_message.Message):
    __slots__ = ("episode_queued", "episode")
    EPISODE_QUEUED_FIELD_NUMBER: _ClassVar[int]
    EPISODE_FIELD_NUMBER: _ClassVar[int]
    episode_queued: bool
    episode: _episode_pb2.Episode
    def __init__(self, episode_queued: _Optional[bool] = ..., episode: _Optional[_Union[_episode_pb2.Episode, _Mapping]] = ...) -> None: ...

class RunSweepRequest(_message.Message):
    __slots__ = ("as_of",)
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    as_of: _timestamp_pb2.Timestamp
    def __init__(self, as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RunSweepResponse(_message.Message):
    __slots__ = ("episodes_created", "timers_dropped", "timers_caught_up", "claims_reclaimed", "backstop_episodes", "threads_purged", "threads_compacted")
    EPISODES_CREATED_FIELD_NUMBER: _ClassVar[int]
    TIMERS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    TIMERS_CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_RECLAIMED_FIELD_NUMBER: _ClassVar[int]
    BACKSTOP_EPISODES_FIELD_NUMBER: _ClassVar[int]
    THREADS_PURGED_FIELD_NUMBER: _ClassVar[int]
    THREADS_COMPACTED_FIELD_NUMBER: _ClassVar[int]
    episodes_created: int
    timers_dropped: int
    timers_caught_up: int
    claims_reclaimed: int
    backstop_episodes: int
    threads_purged: int
    threads_compacted: int
    def __init__(self, episodes_created: _Optional[int] = ..., timers_dropped: _Optional[int] = ..., timers_caught_up: _Optional[int] = ..., claims_reclaimed: _Optional[int] = ..., backstop_episodes: _Optional[int] = ..., threads_purged: _Optional[int] = ..., threads_compacted: _Optional[int] = ...) -> None: ...

class DeleteEpisodeRequest(_message.Message):
    __slots__ = ("episode_id",)
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    def __init__(self, episode_id: _Optional[str] = ...) -> None: ...

class DeleteEpisodeResponse(_message.Message):
    __slots__ = ("episode",)
    EPISODE_FIELD_NUMBER: _ClassVar[int]
    episode: _episode_pb2.Episode
    def __init__(self, episode: _Optional[_Union[_episode_pb2.Episode, _Mapping]] = ...) -> None: ...

class RetryEpisodeRequest(_message.Message):
    __slots__ = ("episode_id",)
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    def __init__(self, episode_id: _Optional[str] = ...) -> None: ...

class RetryEpisodeResponse(_message.Message):
    __slots__ = ("episode",)
    EPISODE_FIELD_NUMBER: _ClassVar[int]
    episode: _episode_pb2.Episode
    def __init__(self, episode: _Optional[_Union[_episode_pb2.Episode, _Mapping]] = ...) -> None: ...
