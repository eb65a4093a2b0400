import datetime

from episodic.v1 import access_pb2 as _access_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
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

class GetPipelineStatusRequest(_message.Message):
    __slots__ = ("dataset", "max_errors", "skip_provider_checks")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    MAX_ERRORS_FIELD_NUMBER: _ClassVar[int]
    SKIP_PROVIDER_CHECKS_FIELD_NUMBER: _ClassVar[int]
    dataset: str
    max_errors: int
    skip_provider_checks: bool
    def __init__(self, dataset: _Optional[str] = ..., max_errors: _Optional[int] = ..., skip_provider_checks: _Optional[bool] = ...) -> None: ...

class EpisodeError(_message.Message):
    __slots__ = ("episode_id", "thread_id", "dataset", "status", "retry_count", "error", "updated_at")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RETRY_COUNT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    thread_id: str
    dataset: str
    status: str
    retry_count: int
    error: str
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, episode_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., dataset: _Optional[str] = ..., status: _Optional[str] = ..., retry_count: _Optional[int] = ..., error: _Optional[str] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetPipelineStatusResponse(_message.Message):
    __slots__ = ("status_counts", "semantic_status_counts", "oldest_pending_age", "oldest_processing_age", "timers_due", "oldest_due_timer_age", "timers_waiting", "threads_uncaptured", "recent_errors", "llm", "embedder", "observed_at", "pending_waiting", "latest_retry_at", "failed_episodes", "threads_without_timer", "oldest_untimed_thread_age", "lifecycle")
    class StatusCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class SemanticStatusCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    STATUS_COUNTS_FIELD_NUMBER: _ClassVar[int]
    SEMANTIC_STATUS_COUNTS_FIELD_NUMBER: _ClassVar[int]
    OLDEST_PENDING_AGE_FIELD_NUMBER: _ClassVar[int]
    OLDEST_PROCESSING_AGE_FIELD_NUMBER: _ClassVar[int]
    TIMERS_DUE_FIELD_NUMBER: _ClassVar[int]
    OLDEST_DUE_TIMER_AGE_FIELD_NUMBER: _ClassVar[int]
    TIMERS_WAITING_FIELD_NUMBER: _ClassVar[int]
    THREADS_UNCAPTURED_FIELD_NUMBER: _ClassVar[int]
    RECENT_ERRORS_FIELD_NUMBER: _ClassVar[int]
    LLM_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    PENDING_WAITING_FIELD_NUMBER: _ClassVar[int]
    LATEST_RETRY_AT_FIELD_NUMBER: _ClassVar[int]
    FAILED_EPISODES_FIELD_NUMBER: _ClassVar[int]
    THREADS_WITHOUT_TIMER_FIELD_NUMBER: _ClassVar[int]
    OLDEST_UNTIMED_THREAD_AGE_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_FIELD_NUMBER: _ClassVar[int]
    status_counts: _containers.ScalarMap[str, int]
    semantic_status_counts: _containers.ScalarMap[str, int]
    oldest_pending_age: _duration_pb2.Duration
    oldest_processing_age: _duration_pb2.Duration
    timers_due: int
    oldest_due_timer_age: _duration_pb2.Duration
    timers_waiting: int
    threads_uncaptured: int
    recent_errors: _containers.RepeatedCompositeFieldContainer[EpisodeError]
    llm: ProviderHealth
    embedder: ProviderHealth
    observed_at: _timestamp_pb2.Timestamp
    pending_waiting: int
    latest_retry_at: _timestamp_pb2.Timestamp
    failed_episodes: _containers.RepeatedCompositeFieldContainer[EpisodeError]
    threads_without_timer: int
    oldest_untimed_thread_age: _duration_pb2.Duration
    lifecycle: LifecycleStatus
    def __init__(self, status_counts: _Optional[_Mapping[str, int]] = ..., semantic_status_counts: _Optional[_Mapping[str, int]] = ..., oldest_pending_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., oldest_processing_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., timers_due: _Optional[int] = ..., oldest_due_timer_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., timers_waiting: _Optional[int] = ..., threads_uncaptured: _Optional[int] = ..., recent_errors: _Optional[_Iterable[_Union[EpisodeError, _Mapping]]] = ..., llm: _Optional[_Union[ProviderHealth, _Mapping]] = ..., embedder: _Optional[_Union[ProviderHealth, _Mapping]] = ..., observed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pending_waiting: _Optional[int] = ..., latest_retry_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., failed_episodes: _Optional[_Iterable[_Union[EpisodeError, _Mapping]]] = ..., threads_without_timer: _Optional[int] = ..., oldest_untimed_thread_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., lifecycle: _Optional[_Union[LifecycleStatus, _Mapping]] = ...) -> None: ...

class LifecycleStatus(_message.Message):
    __slots__ = ("last_run_at", "threads_purged", "threads_compacted", "messages_compacted", "erasures_resumed", "datasets_erasing", "threads_compacted_total")
    LAST_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    THREADS_PURGED_FIELD_NUMBER: _ClassVar[int]
    THREADS_COMPACTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_COMPACTED_FIELD_NUMBER: _ClassVar[int]
    ERASURES_RESUMED_FIELD_NUMBER: _ClassVar[int]
    DATASETS_ERASING_FIELD_NUMBER: _ClassVar[int]
    THREADS_COMPACTED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    last_run_at: _timestamp_pb2.Timestamp
    threads_purged: int
    threads_compacted: int
    messages_compacted: int
    erasures_resumed: int
    datasets_erasing: int
    threads_compacted_total: int
    def __init__(self, last_run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., threads_purged: _Optional[int] = ..., threads_compacted: _Optional[int] = ..., messages_compacted: _Optional[int] = ..., erasures_resumed: _Optional[int] = ..., datasets_erasing: _Optional[int] = ..., threads_compacted_total: _Optional[int] = ...) -> None: ...
