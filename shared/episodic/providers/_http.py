"""The one HTTP call both OpenAI-compatible providers make: POST JSON, retry what is worth
retrying, turn everything else into a :class:`~episodic.errors.ProviderError`.

Retried: HTTP 429 and 5xx, connection failures and timeouts (summarising and embedding have
no side effects, so a repeated request is harmless). Not retried: other 4xx (a bad key, an
unknown model or a rejected body does not heal by waiting). The wait is exponential with
jitter, or the server's ``Retry-After`` when it sends one, capped so a confused server cannot
park a worker for an hour.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from episodic import metrics
from episodic.errors import ProviderError

log = logging.getLogger(__name__)

#: Transport failures worth another attempt.
RETRYABLE_TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    httpx.TimeoutException,
    httpx.ConnectError,
    httpx.RemoteProtocolError,
    httpx.ReadError,
)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry. Tests pass tiny values and a recording ``sleep``."""

    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    retry_after_cap: float = 30.0
    sleep: Callable[[float], None] = time.sleep


class RetryableStatus(Exception):
    """An HTTP answer that may succeed when asked again (429, 5xx)."""

    def __init__(self, status: int, body: str, retry_after: float | None) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body
        self.retry_after = retry_after


def snippet(text: str | bytes | None, limit: int = 300) -> str:
    """A short, single-line excerpt for error messages (full bodies can be megabytes)."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Parses a ``Retry-After`` header: delta-seconds or an HTTP date. ``None`` if absent or
    unreadable (then the normal backoff applies)."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _wait(policy: RetryPolicy) -> Callable[[RetryCallState], float]:
    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RetryableStatus) and exc.retry_after is not None:
            return min(exc.retry_after, policy.retry_after_cap)
        # Exponential with "equal jitter": replicas that failed together do not retry together.
        ceiling = min(policy.backoff_max, policy.backoff_base * 2.0 ** (state.attempt_number - 1))
        return float(ceiling * (0.5 + random.random() / 2))

    return wait


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, (RetryableStatus, *RETRYABLE_TRANSPORT_ERRORS))


def _reason(exc: BaseException | None) -> str:
    """A failure as a metric label: one of a few fixed words, never the message."""
    if isinstance(exc, RetryableStatus):
        return "http_429" if exc.status == 429 else "http_5xx"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    return "connection"


def _log_retry(provider: str) -> Callable[[RetryCallState], None]:
    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        metrics.provider_retry(provider, _reason(exc))
        log.warning(
            "%s: attempt %d failed (%s); retrying in %.2fs",
            provider,
            state.attempt_number,
            exc,
            state.next_action.sleep if state.next_action else 0.0,
        )

    return before_sleep


def post_json(
    client: httpx.Client,
    url: str,
    body: dict[str, Any],
    *,
    policy: RetryPolicy,
    provider: str,
) -> Any:
    """POSTs ``body`` as JSON and returns the decoded JSON answer.

    Raises ProviderError when the request still fails after ``policy.max_retries`` retries,
    fails in a way retrying cannot fix, or the answer is not JSON.
    """
    retrying = Retrying(
        stop=stop_after_attempt(policy.max_retries + 1),
        wait=_wait(policy),
        retry=retry_if_exception(_is_retryable),
        sleep=policy.sleep,
        before_sleep=_log_retry(provider),
        reraise=True,
    )
    attempts = policy.max_retries + 1
    try:
        for attempt in retrying:
            with attempt:
                response = client.post(url, json=body)
                if response.status_code == 429 or response.status_code >= 500:
                    raise RetryableStatus(
                        response.status_code,
                        response.text,
                        parse_retry_after(response.headers.get("retry-after")),
                    )
    except RetryableStatus as exc:
        metrics.provider_error(provider, _reason(exc))
        raise ProviderError(
            f"{provider}: {url} answered HTTP {exc.status} {attempts} time(s) in a row: "
            f"{snippet(exc.body)!r}",
            provider=provider,
            status=str(exc.status),
        ) from exc
    except RETRYABLE_TRANSPORT_ERRORS as exc:
        metrics.provider_error(provider, _reason(exc))
        raise ProviderError(
            f"{provider}: cannot reach {url} after {attempts} attempt(s): "
            f"{type(exc).__name__}: {exc}",
            provider=provider,
        ) from exc
    except httpx.HTTPError as exc:
        metrics.provider_error(provider, "connection")
        raise ProviderError(
            f"{provider}: request to {url} failed: {type(exc).__name__}: {exc}",
            provider=provider,
        ) from exc

    if response.status_code >= 400:
        metrics.provider_error(provider, "http_4xx")
        raise ProviderError(
            f"{provider}: {url} answered HTTP {response.status_code}: {snippet(response.text)!r}",
            provider=provider,
            status=str(response.status_code),
        )
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        metrics.provider_error(provider, "invalid_response")
        raise ProviderError(
            f"{provider}: {url} answered HTTP {response.status_code} with a body that is not "
            f"JSON: {snippet(response.text)!r}",
            provider=provider,
        ) from exc


def make_client(timeout: float, api_key: str | None) -> httpx.Client:
    """An httpx client with a total timeout and, when a key is set, a Bearer header."""
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return httpx.Client(timeout=httpx.Timeout(timeout), headers=headers)


def get_status(client: httpx.Client, url: str, provider: str) -> int:
    """GETs ``url`` once (for ``check()``): the status code, or ProviderError if unreachable."""
    try:
        return client.get(url).status_code
    except httpx.HTTPError as exc:
        metrics.provider_error(provider, "connection")
        raise ProviderError(
            f"{provider}: cannot reach {url}: {type(exc).__name__}: {exc}", provider=provider
        ) from exc
