"""The call interceptor builds a method's wrapped handler once (grpcio asks for one on
every call): later calls of that method reuse it, while the guard still admits every call
and a method the server does not know is never remembered (anyone can send any name)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import grpc

from episodic.serving.server import CallInterceptor
from episodic.serving.transport import CallContext


def test_a_methods_handler_is_built_once_and_unknown_methods_are_not_kept() -> None:
    asked: list[str] = []
    served: list[Any] = []

    def echo(request: Any, context: Any) -> Any:
        served.append(request)
        return request

    def continuation(details: Any) -> Any:
        asked.append(details.method)
        if details.method != "/episodic.v1.IngestService/AddMessages":
            return None
        return grpc.unary_unary_rpc_method_handler(echo)

    async def continued(details: Any) -> Any:
        return continuation(details)

    interceptor = CallInterceptor(guard=None)

    def intercept(call: Any) -> Any:
        return asyncio.run(interceptor.intercept_service(continued, call))

    call = SimpleNamespace(method="/episodic.v1.IngestService/AddMessages")
    first = intercept(call)
    second = intercept(call)
    assert first is second and asked == [call.method]
    # Served as client-streaming: the door reads the request itself (episodic.serving.transport).
    assert second.stream_unary is not None and second.unary_unary is None
    assert interceptor.answer(call.method, echo, "request", CallContext()) == ("request", None)
    assert served == ["request"]

    for n in range(3):
        unknown = SimpleNamespace(method=f"/nobody.Service/Method{n}")
        assert intercept(unknown) is None
        assert intercept(unknown) is None
    assert len(asked) == 1 + 6  # asked every time: nothing remembered for them
    assert list(interceptor._handlers) == [call.method]


def test_a_statement_lost_to_another_transaction_is_aborted_and_an_outage_unavailable() -> None:
    """psycopg raises a deadlock and a statement timeout like a lost connection
    (OperationalError): the first is a call that did not take effect (ABORTED, retry it),
    the second one that ran out of time (DEADLINE_EXCEEDED), the third an outage. A session
    PostgreSQL ended (a process frozen inside a transaction wakes: 25P03, 25P04) comes as an
    InternalError, and is an outage too, not our bug; so is a Citus worker lost mid-call."""
    import psycopg
    from sqlalchemy.exc import InternalError, OperationalError

    from episodic.store.db import is_database_outage

    class Lost(psycopg.errors.DeadlockDetected):
        sqlstate = "40P01"

    raised: list[BaseException] = []

    def failing(request: Any, context: Any) -> Any:
        raise raised[-1]

    interceptor = CallInterceptor(guard=None)
    answered: list[Any] = []

    class TimedOut(psycopg.errors.QueryCanceled):
        sqlstate = "57014"

    class Ended(psycopg.errors.IdleInTransactionSessionTimeout):
        sqlstate = "25P03"

    ended = InternalError("statement", {}, Ended("terminating connection due to idle timeout"))
    for error, code in (
        (OperationalError("statement", {}, Lost("deadlock detected")), grpc.StatusCode.ABORTED),
        (
            OperationalError(
                "statement", {}, TimedOut("canceling statement due to statement timeout")
            ),
            grpc.StatusCode.DEADLINE_EXCEEDED,
        ),
        (
            OperationalError("statement", {}, psycopg.OperationalError("connection refused")),
            grpc.StatusCode.UNAVAILABLE,
        ),
        (ended, grpc.StatusCode.UNAVAILABLE),
    ):
        raised.append(error)
        response, status = interceptor.answer(
            "/episodic.v1.AdminService/MergeEntities", failing, "request", CallContext()
        )
        assert response is None and status is not None
        answered.append(status)
        assert status.code == code.value[0]
    assert "did not take effect" in answered[0].message
    assert is_database_outage(ended)
    # Citus reports a worker connection that broke mid-transaction as XX000 (internal_error):
    # a worker down, an outage; another XX000 is still our bug (INTERNAL).
    internal = psycopg.errors.lookup("XX000")
    for message, code in (
        ("failure on connection marked as essential: 127.0.0.1:5433", grpc.StatusCode.UNAVAILABLE),
        # a worker's connection gone mid-statement: libpq's words, relayed without a code
        (
            "server closed the connection unexpectedly\n\tThis probably means the server "
            "terminated abnormally\n\tbefore or while processing the request.",
            grpc.StatusCode.UNAVAILABLE,
        ),
        (
            "could not commit transaction for shard 102008 on at least one active node",
            grpc.StatusCode.UNAVAILABLE,
        ),
        ("cache lookup failed for relation 16384", grpc.StatusCode.INTERNAL),
    ):
        raised.append(InternalError("statement", {}, internal(message)))
        _, status = interceptor.answer(
            "/episodic.v1.AdminService/MergeEntities", failing, "request", CallContext()
        )
        assert status is not None and status.code == code.value[0], message


def test_the_door_holds_a_refusal_for_as_long_as_the_guard_says(monkeypatch: Any) -> None:
    """A caller back before its last retry hint ran out (Guard.refusal_before_reading sets
    the refusal's ``hold``) is answered after the hold, on a timer of the event loop, and
    keeps its open-call slot until then; a refusal without a hold is answered at once."""
    from episodic.errors import ResourceExhausted
    from episodic.serving import server as server_module

    slept: list[float] = []
    open_while_held: list[int] = []
    real_sleep = asyncio.sleep

    async def recording_sleep(seconds: float) -> None:
        slept.append(seconds)
        open_while_held.append(sum(interceptor.admission.per_peer.values()))
        await real_sleep(0)

    monkeypatch.setattr(server_module.asyncio, "sleep", recording_sleep)
    refusal = ResourceExhausted("over its calls in flight", retry_after=0.1)
    guard = SimpleNamespace(
        governs=lambda method: True,
        refusal_before_reading=lambda method, metadata, peer: refusal,
    )
    interceptor = CallInterceptor(guard=guard)  # type: ignore[arg-type]
    context = SimpleNamespace(peer=lambda: "ipv4:10.0.0.12:1", invocation_metadata=lambda: ())

    def serve() -> Any:
        return asyncio.run(interceptor.serve("/episodic.v1.RecallService/Recall", None, context))  # type: ignore[arg-type]

    response, status = serve()
    assert response is None and status.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert slept == []
    refusal.hold = 0.25
    response, status = serve()
    assert status.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert slept == [0.25] and open_while_held == [1]
    assert not interceptor.admission.per_peer  # the slot is given back after the answer
