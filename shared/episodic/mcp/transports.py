"""Running the server (:func:`serve`): over stdio, each line of the host's input checked
first (:class:`_CheckedLines`: a line that is no JSON-RPC message is answered with -32700 or
-32600 instead of the silence of the SDK's stdio transport), or over streamable HTTP, each
POST's body checked the same way (:class:`_CheckedBodies`)."""

import io
import json
import os
import re
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager, suppress
from typing import IO, Any, Literal, cast, get_args

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ClientRequest,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from episodic.mcp.memory import DATASET_ENV
from episodic.mcp.server import build_server
from episodic.sdk.client import EpisodicClient


def _valid_id(value: object) -> bool:
    """A JSON-RPC id MCP allows: a string or an integer (not null, a number with a fraction,
    or a boolean). A string must be Unicode text: an id of a lone surrogate (``"\\ud800"``,
    which Python's JSON reader takes) echoed in the answer could not be written as UTF-8,
    and the SDK's writer died on it, taking the server with it."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return False
        return True
    return isinstance(value, int) and not isinstance(value, bool)


def _jsonrpc_error(id_: str | int | None, code: int, message: str) -> SessionMessage:
    return SessionMessage(
        JSONRPCError(jsonrpc="2.0", id=id_, error=ErrorData(code=code, message=message))
    )


def _invalid_request(value: object, err: ValidationError) -> SessionMessage:
    """The -32600 answer to JSON ``value`` that is no valid JSON-RPC message (``err`` says
    why), with the request's id when it is a request with a valid one."""
    if isinstance(value, list):
        reason = "batches are not supported: send one JSON-RPC message at a time"
        return _jsonrpc_error(None, INVALID_REQUEST, f"Invalid request: {reason}")
    if not isinstance(value, dict):
        reason = "a JSON-RPC message is a JSON object"
        return _jsonrpc_error(None, INVALID_REQUEST, f"Invalid request: {reason}")
    raw_id = value.get("id")
    id_ = raw_id if "method" in value and _valid_id(raw_id) else None
    problems = err.errors(include_url=False)
    kind = "JSONRPCRequest" if "id" in value else "JSONRPCNotification"
    if "method" not in value:
        kind = "JSONRPCResponse"
    if problems[0]["type"] == "json_invalid":  # what Python's json reads, jiter does not
        reason = (
            f"{problems[0]['msg']} (a lone surrogate escape such as \\ud800 is no Unicode text)"
        )
    elif value.get("jsonrpc") != "2.0":
        reason = '"jsonrpc" must be "2.0"'
    elif "id" in value and not _valid_id(raw_id):
        reason = "id must be a string or an integer"
    else:
        mine = [p for p in problems if p["loc"][:1] == (kind,)] or problems
        reason = "; ".join(
            f"{'.'.join(str(part) for part in p['loc'][1:]) or 'message'}: {p['msg']}"
            for p in mine[:3]
        )
    return _jsonrpc_error(id_, INVALID_REQUEST, f"Invalid request: {reason}")


def _answer_to_line(line: str) -> SessionMessage | None:
    """The error answering a line of stdio input (or a POST's body) that is no valid
    JSON-RPC message, or None for one the server is to serve (:func:`_check_line`)."""
    return _check_line(line)[0]


def _check_line(line: str) -> tuple[SessionMessage | None, Any]:
    """The error answering ``line`` and None, or None and the message it holds: -32700
    (id null) for a line that is not JSON, -32600 for JSON that is no valid message
    (JSON-RPC 2.0), -32602 for a request of MCP's whose params do not fit it. The SDK
    reads a request with an invalid id as a notification, which gets no answer either: so
    is one with an ``id``."""
    try:
        message = jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as err:
        try:
            value = json.loads(line)  # Python's reader: lone surrogates are JSON to it
        except (ValueError, RecursionError):
            reason = err.errors(include_url=False)[0]["msg"]
            return _jsonrpc_error(None, PARSE_ERROR, f"Parse error: {reason}"), None
        return _invalid_request(value, err), None
    if isinstance(message, JSONRPCNotification):
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):  # pragma: no cover - jiter read it
            return None, message
        if isinstance(value, dict) and "id" in value:
            reason = "id must be a string or an integer"
            return _jsonrpc_error(None, INVALID_REQUEST, f"Invalid request: {reason}"), None
    if isinstance(message, JSONRPCRequest):
        problem = _params_problem(message)
        if problem:
            answer = _jsonrpc_error(message.id, INVALID_PARAMS, f"Invalid params: {problem}")
            return answer, None
    return None, message


#: MCP's requests of a client by method, each a model of its params.
_REQUESTS: dict[str, Any] = {
    get_args(model.model_fields["method"].annotation)[0]: model for model in get_args(ClientRequest)
}


def _params_problem(request: JSONRPCRequest) -> str | None:
    """What is wrong with the params of ``request`` (a method MCP defines) — the SDK
    answers only "Invalid request parameters", which names none of them — or None. A
    method MCP does not define is the SDK's to answer (-32601)."""
    model = _REQUESTS.get(request.method)
    if model is None:
        return None
    shaped: dict[str, Any] = {"method": request.method}
    if request.params is not None:
        shaped["params"] = request.params
    try:
        model.model_validate(shaped)
    except ValidationError as err:
        return "; ".join(
            f"{'.'.join(str(part) for part in p['loc'])}: "
            + re.sub(r" or instance of \w+", "", p["msg"])
            for p in err.errors(include_url=False)[:3]
        )
    return None


class _UnownedText(io.TextIOWrapper):
    """A text layer whose close leaves the binary stream open (it is not ours to close)."""

    def close(self) -> None:
        with suppress(ValueError):
            self.detach()


class _CheckedLines:
    """stdin's lines for the SDK's stdio transport, JSON-RPC messages only: a line that is
    none is answered here, on the transport's write stream, and not passed on (the SDK
    turns it into an exception the server drops, so the host would wait for an answer
    until its own timeout). Blank lines are no messages and get no answer."""

    def __init__(self, source: anyio.AsyncFile[str]) -> None:
        self._source = source
        self._answers: Any = None
        self._ready = anyio.Event()
        # Until an initialize request has come, only initialize and ping are served: the
        # SDK answered any other with "Invalid request parameters", which says nothing of
        # the order (MCP's lifecycle: a session begins with initialize).
        self._initialized = False

    def _before_initialize(self, message: Any) -> SessionMessage | None:
        if self._initialized or not isinstance(message, JSONRPCRequest):
            return None
        if message.method == "initialize":
            self._initialized = True
            return None
        if message.method == "ping":
            return None
        reason = f"{message.method} before initialize: a session begins with initialize"
        return _jsonrpc_error(message.id, INVALID_REQUEST, f"Invalid request: {reason}")

    def answer_on(self, write_stream: Any) -> None:
        self._answers = write_stream
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._source:
            if not line.strip():
                continue
            answer, message = _check_line(line)
            if answer is None:
                answer = self._before_initialize(message)
            if answer is None:
                yield line
                continue
            await self._ready.wait()
            try:
                await self._answers.send(answer)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return


@contextmanager
def _stdin_for_the_wire() -> Iterator[IO[bytes]]:
    """The host's messages on fd 0, read through a private duplicate while fd 0 points at
    the null device, as the SDK's stdio transport does when it reads stdin itself (nothing
    the server runs can read them); fd 0 is restored on exit. The duplicate is never
    closed: a worker thread may still block on it (the SDK's reason too)."""
    try:
        wire = os.dup(0)
    except OSError:
        yield sys.stdin.buffer
        return
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield os.fdopen(wire, "rb", closefd=False)
    finally:
        os.dup2(wire, 0)


async def _serve_stdio(server: MCPServer[Any]) -> None:
    """``server.run("stdio")`` (MCPServer.run_stdio_async) with stdin's lines checked
    first (:class:`_CheckedLines`): the SDK's stdio_server takes the lines from us and
    still owns stdout. ``_lowlevel_server`` is what run_stdio_async runs (mcp is pinned)."""
    lowlevel = server._lowlevel_server
    with _stdin_for_the_wire() as wire:
        text = _UnownedText(wire, encoding="utf-8", errors="replace")
        lines = _CheckedLines(anyio.wrap_file(text))
        async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
            lines.answer_on(write_stream)
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


class _CheckedBodies:
    """Streamable HTTP's POSTs to ``path``, JSON-RPC messages only: a body that is none gets
    the answer a line on stdio gets (:func:`_answer_to_line`: -32700 or -32600, naming
    what is wrong) with status 400, as the transport's specification asks. The SDK
    answered -32602 with pydantic's text (its models' names, a link to its docs), and a
    request with an id of null with 202 and no answer at all. A valid body goes on to the
    SDK's app, read back as it was sent."""

    def __init__(self, app: Any, path: str) -> None:
        self._app = app
        self._path = path

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self._path:
            await self._app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        answer = _answer_to_line(body.decode("utf-8", errors="replace")) if body.strip() else None
        refused = answer.message if answer is not None else None
        if isinstance(refused, JSONRPCError) and refused.error.code == INVALID_PARAMS:
            # A valid message whose params do not fit: the SDK answers it inside the
            # session, where the client awaits it (a 400 would fail the whole request).
            answer = None
        if answer is None:
            sent = False

            async def replay() -> dict[str, Any]:
                nonlocal sent
                if sent:
                    return await receive()
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}

            await self._app(scope, replay, send)
            return
        error = answer.message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(error)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": error})


async def _serve_http(server: MCPServer[Any], host: str, port: int, path: str) -> None:
    """Streamable HTTP on ``host:port`` at ``path``. The socket is bound first, so the
    line announcing the URL names the real port (``--port 0`` picks a free one)."""
    import uvicorn

    app = _CheckedBodies(server.streamable_http_app(streamable_http_path=path, host=host), path)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"episodic mcp: streamable HTTP on http://{shown}:{bound}{path}", file=sys.stderr)
    sys.stderr.flush()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def serve(
    client: EpisodicClient,
    *,
    dataset: str | None = None,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    path: str = "/mcp",
) -> None:
    """Runs the MCP server until the host disconnects (stdio) or it is interrupted (HTTP)."""
    server = build_server(client, dataset or os.environ.get(DATASET_ENV) or None)
    if transport == "stdio":
        anyio.run(_serve_stdio, server)
    else:
        anyio.run(_serve_http, server, host, port, path)
