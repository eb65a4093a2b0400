"""A fake OpenAI-compatible server that speaks the real wire format.

Serves ``POST /v1/chat/completions``, ``POST /v1/embeddings``, ``POST /v1/rerank`` and
``GET /v1/models`` on 127.0.0.1 from a background thread (stdlib ``ThreadingHTTPServer``).
Each endpoint has a queue of scripted responses (status, headers, body); when its queue is
empty it answers validly: chat with a canned episode JSON, embeddings from a
:class:`HashingEmbedder` of the configured dimension, rerank (the Jina/Cohere format that
vLLM and text-embeddings-inference serve) with the cosine of those embeddings. Every
request is recorded.

In-process use::

    with FakeOpenAI(dimension=768) as fake:
        fake.enqueue_chat(status=429, headers={"Retry-After": "1"})
        summariser = OpenAIChatSummariser(base_url=fake.base_url, model="m")
        ...
        assert fake.requests_to("chat")[0].json()["model"] == "m"

As a process (for service-level tests)::

    python -m tests.providers.fake_openai --port 0 --dimension 384
    # prints "listening on port N"; SIGTERM or Ctrl-C stops it

A process is scripted over HTTP: ``POST /_fake/enqueue`` with ``{"endpoint": "chat",
"status": 500}`` (or ``"content"``/``"result"``/``"body"``/``"headers"``/``"vectors"``),
``GET /_fake/requests`` lists what it received, ``POST /_fake/reset`` clears both.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from episodic.providers.embedding import HashingEmbedder

Endpoint = Literal["chat", "embeddings", "models", "rerank"]
ENDPOINTS: tuple[Endpoint, ...] = ("chat", "embeddings", "models", "rerank")

#: What the default chat answer contains (a valid episode).
DEFAULT_CHAT_RESULT: dict[str, Any] = {
    "summary": "The user discussed their plans with the agent.",
    "key_learnings": ["user has plans"],
    "entities": ["Project Atlas"],
    "event_type": "conversation",
    "actor": "user",
}


@dataclass
class FakeResponse:
    """A scripted answer. ``body``: bytes/str are sent as is, anything else as JSON; None
    means "the endpoint's default valid answer" (with this status and headers). ``hold``:
    the server does not answer until :meth:`FakeOpenAI.stop` (to provoke client timeouts
    without sleeping)."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    hold: bool = False


@dataclass
class RecordedRequest:
    """A request the fake received. ``headers`` keys are lowercase."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def endpoint(self) -> str:
        """ "chat", "embeddings", "models" or the raw path."""
        return _endpoint_of(self.path) or self.path

    def json(self) -> Any:
        """The body decoded as JSON."""
        return json.loads(self.body)


def _endpoint_of(path: str) -> Endpoint | None:
    path = path.split("?", 1)[0].rstrip("/")
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/embeddings"):
        return "embeddings"
    if path.endswith("/models"):
        return "models"
    if path.endswith("/rerank"):
        return "rerank"
    return None


def chat_completion(content: str | None, model: str = "fake-model", **extra: Any) -> dict[str, Any]:
    """A chat-completions answer in the real wire format with ``content`` as the message.
    ``extra`` overrides fields of the choice (e.g. ``finish_reason="length"``)."""
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": content, "refusal": None},
        "logprobs": None,
        "finish_reason": "stop",
    }
    choice.update(extra)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def embeddings_answer(vectors: list[list[float]], model: str = "fake-model") -> dict[str, Any]:
    """An embeddings answer in the real wire format."""
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": list(v)} for i, v in enumerate(vectors)
        ],
        "model": model,
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }


def rerank_answer(results: list[tuple[int, float]], model: str = "fake-model") -> dict[str, Any]:
    """A rerank answer in the Jina/Cohere wire format: (document index, score), best first."""
    return {
        "id": "rerank-fake",
        "model": model,
        "results": [{"index": i, "relevance_score": score} for i, score in results],
        "usage": {"total_tokens": 1},
    }


class FakeOpenAI:
    """The fake server; see the module docstring. Thread-safe."""

    def __init__(
        self,
        *,
        dimension: int = 384,
        chat_result: dict[str, Any] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        require_api_key: str | None = None,
        models: list[str] | None = None,
    ) -> None:
        self.dimension = dimension
        self.chat_result = dict(chat_result or DEFAULT_CHAT_RESULT)
        self.require_api_key = require_api_key
        self.models = models or ["fake-model"]
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._queues: dict[str, deque[FakeResponse]] = {e: deque() for e in ENDPOINTS}
        self._requests: list[RecordedRequest] = []
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> FakeOpenAI:
        """Binds (port 0 picks a free port) and serves from a daemon thread."""
        if self._server is not None:
            return self
        self._release.clear()
        self._server = ThreadingHTTPServer((self._host, self._port), _make_handler(self))
        self._server.daemon_threads = True
        # A short poll interval: shutdown() waits up to one interval for the loop to notice.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="fake-openai",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Releases held requests, stops serving and closes the socket."""
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """What to configure as a provider's base URL (``http://127.0.0.1:N/v1``)."""
        return f"http://{self._host}:{self.port}/v1"

    # -- scripting

    def enqueue(self, endpoint: Endpoint, response: FakeResponse) -> None:
        """Queues ``response`` as the next answer of ``endpoint``."""
        if endpoint not in self._queues:
            raise ValueError(f"unknown endpoint {endpoint!r}; one of {ENDPOINTS}")
        with self._lock:
            self._queues[endpoint].append(response)

    def enqueue_chat(
        self,
        content: str | None = None,
        *,
        result: dict[str, Any] | None = None,
        status: int = 200,
        headers: dict[str, str] | None = None,
        body: Any = None,
        hold: bool = False,
        **choice: Any,
    ) -> None:
        """Queues a chat answer: ``content`` (the model's raw text), or ``result`` (a dict
        sent as JSON content), or a whole raw ``body``; with none of them and status 200,
        the default episode. ``choice`` overrides fields of the choice."""
        if body is None and (content is not None or result is not None or choice):
            text = content if content is not None else json.dumps(result or self.chat_result)
            body = chat_completion(text, **choice)
        self.enqueue("chat", FakeResponse(status, dict(headers or {}), body, hold))

    def enqueue_embeddings(
        self,
        vectors: list[list[float]] | None = None,
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        body: Any = None,
        hold: bool = False,
    ) -> None:
        """Queues an embeddings answer: explicit ``vectors``, a raw ``body``, or (neither)
        hashing embeddings of the request's input."""
        if body is None and vectors is not None:
            body = embeddings_answer(vectors)
        self.enqueue("embeddings", FakeResponse(status, dict(headers or {}), body, hold))

    def reset(self) -> None:
        """Forgets queued responses and recorded requests."""
        with self._lock:
            for queue in self._queues.values():
                queue.clear()
            self._requests.clear()

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (a copy), oldest first."""
        with self._lock:
            return list(self._requests)

    def requests_to(self, endpoint: Endpoint) -> list[RecordedRequest]:
        """The requests received by one endpoint."""
        return [r for r in self.requests if r.endpoint == endpoint]

    # -- serving

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next(self, endpoint: Endpoint) -> FakeResponse | None:
        with self._lock:
            queue = self._queues[endpoint]
            return queue.popleft() if queue else None

    def _default_body(self, endpoint: Endpoint, request: RecordedRequest) -> tuple[int, Any]:
        if endpoint == "models":
            return 200, {
                "object": "list",
                "data": [{"id": m, "object": "model", "owned_by": "fake"} for m in self.models],
            }
        try:
            payload = request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return 400, _error("request body is not JSON")
        if not isinstance(payload, dict) or "model" not in payload:
            return 400, _error("'model' is required")
        if endpoint == "chat":
            if not isinstance(payload.get("messages"), list):
                return 400, _error("'messages' must be a list")
            return 200, chat_completion(json.dumps(self.chat_result), payload["model"])
        if endpoint == "rerank":
            query, documents = payload.get("query"), payload.get("documents")
            if not isinstance(query, str) or not isinstance(documents, list):
                return 400, _error("'query' (a string) and 'documents' (a list) are required")
            embedder = HashingEmbedder(self.dimension)
            scores = (
                embedder.embed([str(d) for d in documents]) @ embedder.embed_query(query)
            ).tolist()
            order = sorted(range(len(scores)), key=lambda i: -scores[i])
            top_n = payload.get("top_n") or len(order)
            return 200, rerank_answer([(i, scores[i]) for i in order[:top_n]], payload["model"])
        inputs = payload.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not all(isinstance(t, str) for t in inputs):
            return 400, _error("'input' must be a string or a list of strings")
        # Like OpenAI's text-embedding-3 models, honour a requested "dimensions".
        dimension = payload.get("dimensions") or self.dimension
        vectors = HashingEmbedder(int(dimension)).embed(inputs).tolist()
        return 200, embeddings_answer(vectors, payload["model"])

    def _admin(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        if method == "POST" and path == "/_fake/reset":
            self.reset()
            return 200, {"ok": True}
        if method == "GET" and path == "/_fake/requests":
            return 200, [
                {
                    "method": r.method,
                    "path": r.path,
                    "headers": r.headers,
                    "body": r.body.decode("utf-8", "replace"),
                }
                for r in self.requests
            ]
        if method == "POST" and path == "/_fake/enqueue":
            spec = json.loads(body or b"{}")
            endpoint = spec.pop("endpoint", None)
            if endpoint == "chat":
                self.enqueue_chat(**spec)
            elif endpoint == "embeddings":
                self.enqueue_embeddings(**spec)
            elif endpoint in ("models", "rerank"):
                self.enqueue(endpoint, FakeResponse(**spec))
            else:
                return 400, _error(f"unknown endpoint {endpoint!r}")
            return 200, {"ok": True}
        return 404, _error(f"no such admin route {method} {path}")

    def _handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        if path.startswith("/_fake/"):
            status, payload = self._admin(method, path, body)
            return status, {}, json.dumps(payload).encode()
        request = RecordedRequest(method, path, headers, body)
        self._record(request)
        endpoint = _endpoint_of(path)
        allowed = {"chat": "POST", "embeddings": "POST", "models": "GET", "rerank": "POST"}
        if endpoint is None or allowed[endpoint] != method:
            return 404, {}, json.dumps(_error(f"no route {method} {path}")).encode()
        if self.require_api_key is not None and headers.get("authorization") != (
            f"Bearer {self.require_api_key}"
        ):
            return 401, {}, json.dumps(_error("invalid api key", "invalid_api_key")).encode()
        scripted = self._next(endpoint)
        if scripted is not None and scripted.hold:
            self._release.wait(timeout=60)
        if scripted is None or (scripted.body is None and scripted.status < 400):
            status, payload = self._default_body(endpoint, request)
            if scripted is not None:
                status = scripted.status if status == 200 else status
        else:
            status, payload = scripted.status, scripted.body
        if payload is None:
            payload = _error(f"scripted HTTP {status}")
        raw = payload if isinstance(payload, bytes) else None
        if raw is None:
            raw = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        return status, dict(scripted.headers if scripted else {}), raw


def _error(message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def _make_handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers (httpx pools connections)

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, extra, raw = fake._handle(self.command, self.path, headers, body)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for key, value in extra.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                # The client gave up (a timeout test, a held request released at stop()).
                self.close_connection = True

        do_GET = do_POST = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


def main(argv: list[str] | None = None) -> None:
    """Runs the fake as a process until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--dimension", type=int, default=384, help="default embedding size")
    parser.add_argument("--api-key", default=None, help="require this Bearer key")
    args = parser.parse_args(argv)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    fake = FakeOpenAI(
        dimension=args.dimension, host=args.host, port=args.port, require_api_key=args.api_key
    ).start()
    print(f"listening on port {fake.port}", flush=True)
    try:
        stop.wait()
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
