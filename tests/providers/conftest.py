"""Fixtures of the provider tests: the fake OpenAI-compatible server and a retry policy that
records its waits instead of sleeping."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from episodic.providers import RetryPolicy
from tests.providers.fake_openai import FakeOpenAI


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dimension=384) as server:
        yield server


@pytest.fixture
def waits() -> list[float]:
    """The backoff waits the retry policy asked for (nothing actually sleeps)."""
    return []


@pytest.fixture
def policy(waits: list[float]) -> RetryPolicy:
    return RetryPolicy(
        max_retries=3,
        backoff_base=0.001,
        backoff_max=0.004,
        retry_after_cap=5.0,
        sleep=waits.append,
    )
