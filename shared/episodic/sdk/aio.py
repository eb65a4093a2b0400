"""The asyncio SDK: :class:`AsyncEpisodicClient`, the Python client over ``grpc.aio``.

The same client as :class:`episodic.sdk.client.EpisodicClient` — the same methods, arguments,
results, errors, deadlines and retries — for asyncio programs (FastAPI or any asyncio
agent server), where a blocking call would stall the event loop::

    from episodic.sdk.aio import AsyncEpisodicClient

    async with AsyncEpisodicClient() as memory:
        thread = await memory.start_thread("user_42", label="car-search")
        await memory.add_messages(thread.thread_id, [("user", "I need a family car.")])
        await memory.end_thread(thread.thread_id)
        found = await memory.recall("user_42", "car recommendations")
        async for episode in memory.iter_episodes("user_42"):
            ...

Every call is written once in :mod:`episodic.sdk`; this module only performs its
steps with ``grpc.aio`` and ``asyncio.sleep``. Results and errors are the classes of
:mod:`episodic.sdk.client` (import them from there).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from functools import wraps
from typing import Any, Concatenate, ParamSpec, TypeVar

import grpc
import grpc.aio

from episodic import sdk as ops
from episodic.sdk import (
    ClientCore,
    Emit,
    EpisodicRpcError,
    Flow,
    Sleep,
    Step,
    Stream,
    present_as_method,
    translate_error,
)

__all__ = ["AsyncEpisodicClient"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def _awaitable(
    flow: Callable[Concatenate[ClientCore, P], Flow[R]],
) -> Callable[Concatenate[AsyncEpisodicClient, P], Coroutine[Any, Any, R]]:
    """The :class:`AsyncEpisodicClient` coroutine method that runs ``flow``."""

    @wraps(flow)
    async def method(self: AsyncEpisodicClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._run(flow(self, *args, **kwargs))

    present_as_method(method, flow, f"{__name__}:AsyncEpisodicClient", "{}")
    return method


def _async_stream(
    flow: Callable[Concatenate[ClientCore, P], Stream[T]],
) -> Callable[Concatenate[AsyncEpisodicClient, P], AsyncIterator[T]]:
    """The :class:`AsyncEpisodicClient` method iterating (``async for``) over what ``flow``
    emits."""

    @wraps(flow)
    def method(self: AsyncEpisodicClient, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
        return self._iterate(flow(self, *args, **kwargs))

    present_as_method(method, flow, f"{__name__}:AsyncEpisodicClient", "AsyncIterator[{}]")
    return method


class AsyncEpisodicClient(ClientCore):
    """An asyncio client for the four episodic services (``grpc.aio`` channels open lazily,
    one per service, on the event loop of the first call).

    Use it as an async context manager (or ``await`` :meth:`close`). Arguments, defaults,
    credentials (``api_key``, TLS), deadlines and retries are those of
    :class:`episodic.sdk.client.EpisodicClient`; every method is a coroutine with the same
    name, arguments and result, except :meth:`iter_episodes`, an async iterator.

    One client serves one event loop at a time; many tasks may share it. Used from a new
    loop (say, a second ``asyncio.run``), it opens new channels there.
    """

    _loop: asyncio.AbstractEventLoop | None = None

    # -- the driver: awaited grpc.aio calls and asyncio sleeps

    def _open_channel(
        self, address: str, credentials: grpc.ChannelCredentials | None, options: list[Any]
    ) -> grpc.aio.Channel:
        if credentials is not None:
            return grpc.aio.secure_channel(address, credentials, options=options)
        return grpc.aio.insecure_channel(address, options=options)

    async def _perform(self, step: Step) -> Any:
        if isinstance(step, Sleep):
            await asyncio.sleep(step.seconds)
            return None
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # grpc.aio channels belong to the loop they were opened on; that loop is gone
            # or elsewhere, so its channels cannot be awaited (nor closed) from here.
            self._take_channels()
            self._loop = loop
        fn, kwargs = self._prepare(step)
        traced = ops.trace_call(self, step, kwargs)
        try:
            response = await fn(step.request, **kwargs)
        except grpc.RpcError as err:
            error = translate_error(err, step.method)
            traced.end(error=error)
            raise error from None
        except BaseException as err:
            traced.end(error=err)
            raise
        traced.end(response)
        return response

    async def _run(self, flow: Flow[R]) -> R:
        reply: Any = None
        error: EpisodicRpcError | None = None
        while True:
            try:
                step = flow.send(reply) if error is None else flow.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            try:
                reply, error = await self._perform(step), None
            except EpisodicRpcError as err:
                reply, error = None, err

    async def _iterate(self, flow: Stream[T]) -> AsyncIterator[T]:
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
                reply, error = await self._perform(step), None
            except EpisodicRpcError as err:
                reply, error = None, err

    async def close(self) -> None:
        """Closes every channel (a later call opens them again)."""
        for channel in self._take_channels():
            await channel.close()

    async def __aenter__(self) -> AsyncEpisodicClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the calls (written once in episodic.sdk, shared with the blocking client)

    wait_ready = _awaitable(ops.wait_ready)
    create_thread = _awaitable(ops.create_thread)
    start_thread = _awaitable(ops.start_thread)
    add_messages = _awaitable(ops.add_messages)
    add_message = _awaitable(ops.add_message)
    record_event = _awaitable(ops.record_event)
    end_thread = _awaitable(ops.end_thread)
    get_thread = _awaitable(ops.get_thread)
    list_messages = _awaitable(ops.list_messages)
    load_session = _awaitable(ops.load_session)
    list_threads = _awaitable(ops.list_threads)
    recent_threads = _awaitable(ops.recent_threads)
    recall = _awaitable(ops.recall)
    recall_procedures = _awaitable(ops.recall_procedures)
    record_outcome = _awaitable(ops.record_outcome)
    list_procedures = _awaitable(ops.list_procedures)
    get_procedure = _awaitable(ops.get_procedure)
    delete_procedure = _awaitable(ops.delete_procedure)
    list_episodes = _awaitable(ops.list_episodes)
    iter_episodes = _async_stream(ops.iter_episodes)
    search_episodes = _awaitable(ops.search_episodes)
    get_episode = _awaitable(ops.get_episode)
    delete_episode = _awaitable(ops.delete_episode)
    retry_episode = _awaitable(ops.retry_episode)
    request_episode = _awaitable(ops.request_episode)
    record_activity = _awaitable(ops.record_activity)
    record_thread_started = _awaitable(ops.record_thread_started)
    run_sweep = _awaitable(ops.run_sweep)
    process_pending = _awaitable(ops.process_pending)
    check_providers = _awaitable(ops.check_providers)
    list_datasets = _awaitable(ops.list_datasets)
    delete_dataset = _awaitable(ops.delete_dataset)
    delete_thread = _awaitable(ops.delete_thread)
    list_entities = _awaitable(ops.list_entities)
    merge_entities = _awaitable(ops.merge_entities)
    split_entity = _awaitable(ops.split_entity)
    entity_timeline = _awaitable(ops.entity_timeline)
    get_dataset_policy = _awaitable(ops.get_dataset_policy)
    set_dataset_policy = _awaitable(ops.set_dataset_policy)
    pipeline_status = _awaitable(ops.pipeline_status)
    wait_for_episode = _awaitable(ops.wait_for_episode)
