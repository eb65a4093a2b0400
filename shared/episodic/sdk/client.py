"""The Python SDK: one client for the four services, typed results, deadlines and retries.

Example (with ``episodic up`` running)::

    from episodic.sdk.client import EpisodicClient
    from episodic.render import render_episodes

    with EpisodicClient() as memory:
        thread = memory.start_thread("user_42", label="car-search")
        memory.add_messages(thread.thread_id, [
            ("user", "I need a family car under $30k, SUVs feel too big."),
            ("assistant", "The Toyota Corolla Hybrid fits city commuting and your budget."),
        ])
        memory.end_thread(thread.thread_id)           # queues an episode (a checkpoint)
        memory.wait_for_episode(thread.thread_id)     # summarised in the background
        found = memory.recall("user_42", "car recommendations")
        print(render_episodes(found.episodes))

Addresses default to ``127.0.0.1`` and the ports ``episodic up`` uses (``EPISODIC_*_PORT``),
or ``EPISODIC_INGEST_ADDRESS`` / ``EPISODIC_RECALL_ADDRESS`` / ``EPISODIC_SCHEDULER_ADDRESS``
/ ``EPISODIC_SUMMARISER_ADDRESS`` when set.

Every call has a deadline (``timeout``, default 10 s). Calls that are safe to repeat are
retried on UNAVAILABLE by gRPC itself (the channel's service config, with backoff): every
read, Recall, and AddMessages — which the client makes safe by giving each message an
idempotency key unless you pass your own (``auto_idempotency_keys``). Errors come back as
:class:`EpisodicRpcError` subclasses carrying the gRPC code and the server's reason.

:class:`episodic.sdk.aio.AsyncEpisodicClient` is the same client for asyncio (``grpc.aio``):
the same methods, arguments and results, awaited. Both drive the calls written once in
:mod:`episodic.sdk` (requests, results, errors, retries); this module is the
blocking driver.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import wraps
from typing import Any, Concatenate, ParamSpec, TypeVar

import grpc

from episodic import sdk as ops
from episodic.sdk import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from episodic.sdk import (
    EPISODE_STATUSES,
    STREAM_RESET,
    UNCHANGED,
    AbortedError,
    AddMessagesResult,
    AlreadyExistsError,
    ClientCore,
    DatasetPolicy,
    DatasetSummary,
    DeadlineExceededError,
    Emit,
    EndThreadResult,
    Entity,
    EntitySplit,
    EntityTimelinePage,
    Episode,
    EpisodeFailure,
    EpisodicRpcError,
    ErasureReceipt,
    FailedPreconditionError,
    Flow,
    InvalidArgumentError,
    LifecycleStatus,
    Message,
    MessagePage,
    MessageReceipt,
    NewMessage,
    NotFoundError,
    OutcomeResult,
    Page,
    PermissionDeniedError,
    PipelineStatus,
    Procedure,
    ProcedureStep,
    ProviderHealth,
    QueryUnderstanding,
    RecallResult,
    RecordEventResult,
    ResourceExhaustedError,
    ScoredEpisode,
    ScoredProcedure,
    SessionOrdinal,
    Sleep,
    Step,
    Stream,
    SweepResult,
    Thread,
    ThreadCompaction,
    TimeExpression,
    ToolCall,
    UnauthenticatedError,
    UnavailableError,
    default_address,
    present_as_method,
    translate_error,
)
from episodic.sdk import MessageLike as MessageLike

# (DEFAULT_TIMEOUT and MessageLike stay importable from here, outside __all__, as before
# the shared core moved to episodic.sdk.)
__all__ = [
    "EPISODE_STATUSES",
    "STREAM_RESET",
    "UNCHANGED",
    "AbortedError",
    "AddMessagesResult",
    "AlreadyExistsError",
    "DatasetPolicy",
    "DatasetSummary",
    "DeadlineExceededError",
    "EndThreadResult",
    "Entity",
    "EntitySplit",
    "EntityTimelinePage",
    "Episode",
    "EpisodeFailure",
    "EpisodicClient",
    "EpisodicRpcError",
    "ErasureReceipt",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "LifecycleStatus",
    "Message",
    "MessagePage",
    "MessageReceipt",
    "NewMessage",
    "NotFoundError",
    "OutcomeResult",
    "Page",
    "PermissionDeniedError",
    "PipelineStatus",
    "Procedure",
    "ProcedureStep",
    "ProviderHealth",
    "QueryUnderstanding",
    "RecallResult",
    "RecordEventResult",
    "ResourceExhaustedError",
    "ScoredEpisode",
    "ScoredProcedure",
    "SessionOrdinal",
    "SweepResult",
    "Thread",
    "ThreadCompaction",
    "TimeExpression",
    "ToolCall",
    "UnauthenticatedError",
    "UnavailableError",
    "default_address",
]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def _blocking(
    flow: Callable[Concatenate[ClientCore, P], Flow[R]],
) -> Callable[Concatenate[EpisodicClient, P], R]:
    """The :class:`EpisodicClient` method that runs ``flow`` to its result."""

    @wraps(flow)
    def method(self: EpisodicClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._run(flow(self, *args, **kwargs))

    present_as_method(method, flow, f"{__name__}:EpisodicClient", "{}")
    return method


def _blocking_stream(
    flow: Callable[Concatenate[ClientCore, P], Stream[T]],
) -> Callable[Concatenate[EpisodicClient, P], Iterator[T]]:
    """The :class:`EpisodicClient` method that iterates over what ``flow`` emits."""

    @wraps(flow)
    def method(self: EpisodicClient, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        return self._iterate(flow(self, *args, **kwargs))

    present_as_method(method, flow, f"{__name__}:EpisodicClient", "Iterator[{}]")
    return method


class EpisodicClient(ClientCore):
    """A client for the four episodic services (channels open lazily, one per service).

    Use it as a context manager (or call :meth:`close`). ``timeout`` is the default
    deadline of every call in seconds; each method also takes ``timeout=``. It is safe to
    share one client between threads.

    Credentials: ``api_key`` (default ``EPISODIC_API_KEY``) is sent with every call as
    ``authorization: Bearer <key>``. TLS is on when ``tls=True`` or a ``ca_file`` is given
    (default ``EPISODIC_TLS_CA_FILE``; the system's roots otherwise), with a client
    certificate for mutual TLS (``client_cert_file``/``client_key_file``, defaults
    ``EPISODIC_TLS_CLIENT_CERT_FILE``/``_KEY_FILE``).

    A call refused by a rate limit (RESOURCE_EXHAUSTED with a RetryInfo) is retried after
    the delay the server asks for, up to ``rate_limit_retries`` times within its deadline.
    """

    # -- the driver: blocking calls and sleeps

    def _open_channel(
        self, address: str, credentials: grpc.ChannelCredentials | None, options: list[Any]
    ) -> grpc.Channel:
        if credentials is not None:
            return grpc.secure_channel(address, credentials, options=options)
        return grpc.insecure_channel(address, options=options)

    def _perform(self, step: Step) -> Any:
        if isinstance(step, Sleep):
            time.sleep(step.seconds)
            return None
        fn, kwargs = self._prepare(step)
        traced = ops.trace_call(self, step, kwargs)
        try:
            response = fn(step.request, **kwargs)
        except grpc.RpcError as err:
            error = translate_error(err, step.method)
            traced.end(error=error)
            raise error from None
        except BaseException as err:
            traced.end(error=err)
            raise
        traced.end(response)
        return response

    def _run(self, flow: Flow[R]) -> R:
        reply: Any = None
        error: EpisodicRpcError | None = None
        while True:
            try:
                step = flow.send(reply) if error is None else flow.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            try:
                reply, error = self._perform(step), None
            except EpisodicRpcError as err:
                reply, error = None, err

    def _iterate(self, flow: Stream[T]) -> Iterator[T]:
        reply: Any = None
        error: EpisodicRpcError | None = None
        while True:
            try:
                step = flow.send(reply) if error is None else flow.throw(error)
            except StopIteration:
                return
            if isinstance(step, Emit):
                reply, error = None, None
                yield step.item
                continue
            try:
                reply, error = self._perform(step), None
            except EpisodicRpcError as err:
                reply, error = None, err

    def close(self) -> None:
        """Closes every channel (a later call opens them again)."""
        for channel in self._take_channels():
            channel.close()

    def __enter__(self) -> EpisodicClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the calls (written once in episodic.sdk, shared with the asyncio client)

    wait_ready = _blocking(ops.wait_ready)
    create_thread = _blocking(ops.create_thread)
    start_thread = _blocking(ops.start_thread)
    add_messages = _blocking(ops.add_messages)
    add_message = _blocking(ops.add_message)
    record_event = _blocking(ops.record_event)
    end_thread = _blocking(ops.end_thread)
    get_thread = _blocking(ops.get_thread)
    list_messages = _blocking(ops.list_messages)
    load_session = _blocking(ops.load_session)
    list_threads = _blocking(ops.list_threads)
    recent_threads = _blocking(ops.recent_threads)
    recall = _blocking(ops.recall)
    recall_procedures = _blocking(ops.recall_procedures)
    record_outcome = _blocking(ops.record_outcome)
    list_procedures = _blocking(ops.list_procedures)
    get_procedure = _blocking(ops.get_procedure)
    delete_procedure = _blocking(ops.delete_procedure)
    list_episodes = _blocking(ops.list_episodes)
    iter_episodes = _blocking_stream(ops.iter_episodes)
    search_episodes = _blocking(ops.search_episodes)
    get_episode = _blocking(ops.get_episode)
    delete_episode = _blocking(ops.delete_episode)
    retry_episode = _blocking(ops.retry_episode)
    request_episode = _blocking(ops.request_episode)
    record_activity = _blocking(ops.record_activity)
    record_thread_started = _blocking(ops.record_thread_started)
    run_sweep = _blocking(ops.run_sweep)
    process_pending = _blocking(ops.process_pending)
    check_providers = _blocking(ops.check_providers)
    list_datasets = _blocking(ops.list_datasets)
    delete_dataset = _blocking(ops.delete_dataset)
    delete_thread = _blocking(ops.delete_thread)
    list_entities = _blocking(ops.list_entities)
    merge_entities = _blocking(ops.merge_entities)
    split_entity = _blocking(ops.split_entity)
    entity_timeline = _blocking(ops.entity_timeline)
    get_dataset_policy = _blocking(ops.get_dataset_policy)
    set_dataset_policy = _blocking(ops.set_dataset_policy)
    pipeline_status = _blocking(ops.pipeline_status)
    wait_for_episode = _blocking(ops.wait_for_episode)
