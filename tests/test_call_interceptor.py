"""The call interceptor builds a method's wrapped handler once (grpcio asks for one on
every call): later calls of that method reuse it, while the guard still admits every call
and a method the server does not know is never remembered (anyone can send any name)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import grpc

from episodic.server import CallInterceptor


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

    interceptor = CallInterceptor(guard=None)
    call = SimpleNamespace(method="/episodic.v1.IngestService/AddMessages")
    first = interceptor.intercept_service(continuation, call)
    second = interceptor.intercept_service(continuation, call)
    assert first is second and asked == [call.method]
    context = SimpleNamespace(code=lambda: None)
    assert second.unary_unary("request", context) == "request" and served == ["request"]

    for n in range(3):
        unknown = SimpleNamespace(method=f"/nobody.Service/Method{n}")
        assert interceptor.intercept_service(continuation, unknown) is None
        assert interceptor.intercept_service(continuation, unknown) is None
    assert len(asked) == 1 + 6  # asked every time: nothing remembered for them
    assert list(interceptor._handlers) == [call.method]


def test_a_statement_lost_to_another_transaction_is_aborted_and_an_outage_unavailable() -> None:
    """psycopg raises a deadlock and a statement timeout like a lost connection
    (OperationalError): the first is a call that did not take effect (ABORTED, retry it),
    the second one that ran out of time (DEADLINE_EXCEEDED), only the last an outage."""
    import psycopg
    import pytest
    from sqlalchemy.exc import OperationalError

    class Lost(psycopg.errors.DeadlockDetected):
        sqlstate = "40P01"

    raised: list[BaseException] = []

    def failing(request: Any, context: Any) -> Any:
        raise raised[-1]

    def continuation(details: Any) -> Any:
        return grpc.unary_unary_rpc_method_handler(failing)

    class Aborted(Exception):
        pass

    answered: list[Any] = []

    def abort_with_status(status: Any) -> None:
        answered.append(status)
        raise Aborted

    context = SimpleNamespace(code=lambda: None, abort_with_status=abort_with_status)
    handler = CallInterceptor(guard=None).intercept_service(
        continuation, SimpleNamespace(method="/episodic.v1.AdminService/MergeEntities")
    )

    class TimedOut(psycopg.errors.QueryCanceled):
        sqlstate = "57014"

    for orig, code in (
        (Lost("deadlock detected"), grpc.StatusCode.ABORTED),
        (
            TimedOut("canceling statement due to statement timeout"),
            grpc.StatusCode.DEADLINE_EXCEEDED,
        ),
        (psycopg.OperationalError("connection refused"), grpc.StatusCode.UNAVAILABLE),
    ):
        raised.append(OperationalError("statement", {}, orig))
        with pytest.raises(Aborted):
            handler.unary_unary("request", context)
        assert answered[-1].code == code
    assert "did not take effect" in answered[0].details


def test_a_session_the_database_ended_is_unavailable_not_internal() -> None:
    """A process frozen inside a transaction wakes to find PostgreSQL ended its session
    (idle_in_transaction_session_timeout, 25P03; transaction_timeout, 25P04): psycopg
    raises an InternalError, which is a retryable condition, not our bug."""
    import psycopg
    import pytest
    from sqlalchemy.exc import InternalError

    from episodic.store.db import is_database_outage

    class Ended(psycopg.errors.IdleInTransactionSessionTimeout):
        sqlstate = "25P03"

    def failing(request: Any, context: Any) -> Any:
        raise InternalError(
            "statement", {}, Ended("terminating connection due to idle-in-transaction timeout")
        )

    class Aborted(Exception):
        pass

    answered: list[Any] = []

    def abort_with_status(status: Any) -> None:
        answered.append(status)
        raise Aborted

    context = SimpleNamespace(code=lambda: None, abort_with_status=abort_with_status)
    handler = CallInterceptor(guard=None).intercept_service(
        lambda details: grpc.unary_unary_rpc_method_handler(failing),
        SimpleNamespace(method="/episodic.v1.SummariserService/GetPipelineStatus"),
    )
    with pytest.raises(Aborted):
        handler.unary_unary("request", context)
    assert answered[-1].code == grpc.StatusCode.UNAVAILABLE
    assert is_database_outage(InternalError("statement", {}, Ended("x")))
