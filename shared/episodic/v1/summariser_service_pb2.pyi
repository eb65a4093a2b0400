from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ProcessPendingRequest(_message.Message):
    __slots__ = ("max_episodes",)
    MAX_EPISODES_FIELD_NUMBER: _ClassVar[int]
    max_episodes: int
    def __init__(self, max_episodes: _Optional[int] = ...) -> None: ...

class ProcessPendingResponse(_message.Message):
    __slots__ = ("completed", "failed", "semantic_processed")
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    SEMANTIC_PROCESSED_FIELD_NUMBER: _ClassVar[int]
    completed: int
    failed: int
    semantic_processed: int
    def __init__(self, completed: _Optional[int] = ..., failed: _Optional[int] = ..., semantic_processed: _Optional[int] = ...) -> None: ...

class CheckProvidersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ProviderHealth(_message.Message):
    __slots__ = ("name", "ok", "error")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    name: str
    ok: bool
    error: str
    def __init__(self, name: _Optional[str] = ..., ok: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class CheckProvidersResponse(_message.Message):
    __slots__ = ("llm", "embedder")
    LLM_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    llm: ProviderHealth
    embedder: ProviderHealth
    def __init__(self, llm: _Optional[_Union[ProviderHealth, _Mapping]] = ..., embedder: _Optional[_Union[ProviderHealth, _Mapping]] = ...) -> None: ...
