"""Every SDK test runs against both clients: the blocking EpisodicClient and the asyncio
AsyncEpisodicClient, the latter behind an adapter that runs each coroutine to completion
on its own event loop — so each test body is written once, in the blocking style."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from functools import wraps
from typing import Any

import pytest

from episodic.sdk.aio import AsyncEpisodicClient
from episodic.sdk.client import EpisodicClient


async def _collect(items: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in items]


class BlockingAdapter:
    """An :class:`AsyncEpisodicClient` with the blocking client's interface: a coroutine
    method runs on the adapter's event loop until done, an async iterator is drained into
    a list. Attributes (``addresses``, ``timeout``, ...) are the client's own."""

    def __init__(self, client: AsyncEpisodicClient) -> None:
        self.client = client
        self._runner = asyncio.Runner()
        self._closed = False

    def run(self, awaitable: Any) -> Any:
        """Runs a coroutine on the adapter's loop (the one the client's channels use)."""
        return self._runner.run(awaitable)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.client, name)
        if not callable(value):
            return value

        @wraps(value)
        def blocking(*args: Any, **kwargs: Any) -> Any:
            result = value(*args, **kwargs)
            if inspect.iscoroutine(result):
                return self._runner.run(result)
            if isinstance(result, AsyncIterator):
                return iter(self._runner.run(_collect(result)))
            return result

        return blocking

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._runner.run(self.client.close())
        finally:
            self._runner.close()

    def __enter__(self) -> BlockingAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture(params=["sync", "async"])
def client_kind(request: pytest.FixtureRequest) -> str:
    """Which client a test drives: "sync" (EpisodicClient) or "async" (AsyncEpisodicClient)."""
    return str(request.param)


@pytest.fixture
def make_client(client_kind: str) -> Iterator[Callable[..., Any]]:
    """``make_client(ingest=..., recall=..., **options)``: a client of this run's kind
    (EpisodicClient arguments); every one is closed when the test ends."""
    made: list[Any] = []

    def _make(*args: Any, **kwargs: Any) -> Any:
        client: Any = (
            EpisodicClient(*args, **kwargs)
            if client_kind == "sync"
            else BlockingAdapter(AsyncEpisodicClient(*args, **kwargs))
        )
        made.append(client)
        return client

    yield _make
    for client in reversed(made):
        client.close()
