"""How every call of the SDK reaches a service: :func:`call`, one RPC within the call's
deadline, repeated after a rate limit's delay or a reset stream when that is safe, and
:func:`wait_ready`, the health checks. Every other flow (:mod:`episodic.sdk.operations`)
goes through :func:`call`, so its retry policy is in one place."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable
from typing import Any

import grpc

from episodic.sdk.channels import MAX_ATTEMPTS, SERVICES
from episodic.sdk.errors import (
    STREAM_RESET,
    EpisodicRpcError,
    ResourceExhaustedError,
    UnavailableError,
)
from episodic.sdk.flow import ClientCore, Flow, Rpc, Sleep


def call(
    core: ClientCore,
    service: str,
    method: str,
    request: Any,
    timeout: float | None,
    *,
    retry: bool = True,
) -> Flow[Any]:
    """One RPC of ``service`` within the call's deadline (``timeout``, else the client's).

    ``retry``: the channel repeats the call on UNAVAILABLE (gRPC service config) — only for
    calls safe to repeat — and so does this flow when the stream was reset (UNAVAILABLE
    with reason ``STREAM_RESET``, which the channel sees as INTERNAL). Refused by a rate
    limit (RESOURCE_EXHAUSTED with a RetryInfo) before anything happened, any call is safe
    to repeat: it is, once the server's delay has passed, up to ``rate_limit_retries``
    times and only if the deadline allows.
    """
    channel = service if retry else f"{service}:noretry"
    budget = core.timeout if timeout is None else timeout
    deadline = time.monotonic() + budget
    attempt = 0
    resets = 0
    while True:
        remaining = max(deadline - time.monotonic(), 0.001)
        try:
            return (yield Rpc(channel, service, method, request, remaining))
        except ResourceExhaustedError as error:
            wait = error.retry_after
            if (
                wait is None
                or attempt >= core.rate_limit_retries
                or time.monotonic() + wait >= deadline
            ):
                raise
            attempt += 1
        except UnavailableError as error:
            # gRPC's own retries (the channel's service config) repeat UNAVAILABLE but
            # never see a reset stream, which it reports as INTERNAL: repeat those here,
            # with the same policy, for the calls that are safe to repeat.
            if not retry or error.reason != STREAM_RESET or resets >= MAX_ATTEMPTS - 1:
                raise
            wait = random.uniform(0, min(0.1 * 2**resets, 2.0))  # A6: full jitter
            if time.monotonic() + wait >= deadline:
                raise
            resets += 1
        yield Sleep(wait)


# --------------------------------------------------------------------------- operations
#
# Every public method of both clients, once. Each takes the client first and returns a
# flow; episodic.sdk.client and episodic.sdk.aio turn them into methods with the same name,
# signature and docstring.


def wait_ready(
    core: ClientCore, services: Iterable[str] = SERVICES, timeout: float = 30.0
) -> Flow[None]:
    """Waits until each named service answers its health check with SERVING; raises
    UnavailableError naming the first one that does not within ``timeout`` seconds."""
    from grpc_health.v1 import health_pb2

    deadline = time.monotonic() + timeout
    for service in services:
        while True:
            try:
                # The health service is open: no credentials.
                answer = yield Rpc(
                    service,
                    "health",
                    "Check",
                    health_pb2.HealthCheckRequest(service=""),
                    2.0,
                    authenticate=False,
                )
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    break
            except EpisodicRpcError:
                pass
            if time.monotonic() > deadline:
                raise UnavailableError(
                    grpc.StatusCode.UNAVAILABLE,
                    f"{service} at {core.addresses[service]} is not serving",
                    method="Health.Check",
                )
            yield Sleep(0.1)
