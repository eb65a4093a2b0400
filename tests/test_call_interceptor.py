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
