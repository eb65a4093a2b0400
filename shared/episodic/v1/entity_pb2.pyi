import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Entity(_message.Message):
    __slots__ = ("entity_id", "name", "aliases", "episode_count", "created_at")
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ALIASES_FIELD_NUMBER: _ClassVar[int]
    EPISODE_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    entity_id: str
    name: str
    aliases: _containers.RepeatedCompositeFieldContainer[EntityAlias]
    episode_count: int
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, entity_id: _Optional[str] = ..., name: _Optional[str] = ..., aliases: _Optional[_Iterable[_Union[EntityAlias, _Mapping]]] = ..., episode_count: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class EntityAlias(_message.Message):
    __slots__ = ("alias", "episode_count")
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    EPISODE_COUNT_FIELD_NUMBER: _ClassVar[int]
    alias: str
    episode_count: int
    def __init__(self, alias: _Optional[str] = ..., episode_count: _Optional[int] = ...) -> None: ...
