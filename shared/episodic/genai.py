"""OpenTelemetry's GenAI semantic conventions, as this suite speaks them.

Agent-observability tools read traces by these names: a memory operation (``search_memory``,
``create_memory``, …), a model call (``chat``, ``embeddings``) and the two GenAI client
metrics. Every attribute name, operation value and the RPC → operation mapping live in
:mod:`episodic.semconv` (re-exported here) and nowhere else; servicers carry a one-line decorator (:func:`memory_rpc`) and the pipeline a
``with`` (:func:`memory_span`, :func:`chat_span`, :func:`embeddings_span`).

Conventions followed: :data:`SEMCONV_VERSION`. The memory operations are of development
stability and unreleased; names are spelled exactly as the registry there spells them. The
token-usage histogram ``gen_ai.client.token.usage`` is the one of the released conventions
(v1.37–v1.40), which every GenAI instrumentation emits today.

Memory records are episodes (events included); the memory store is the dataset.

Content stays out unless asked for: the query text (``gen_ai.memory.query.text``) and the
records (``gen_ai.memory.records``) are recorded only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` asks for span content (``true``,
``SPAN_ONLY``, ``SPAN_AND_EVENT``), and for a dataset stored encrypted only when the
operator also sets ``EPISODIC_GENAI_CAPTURE_ENCRYPTED_CONTENT=true``. Model prompts and
completions are never recorded.

Tracing off (no exporter, :func:`episodic.telemetry.telemetry_enabled`), the decorator calls
the handler directly: no span, no attribute, no lookup.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from episodic.semconv import (  # the names, re-exported: genai.X as before
    CAPTURE_CONTENT_ENV,  # noqa: F401
    CAPTURE_ENCRYPTED_ENV,  # noqa: F401
    CHAT,
    CONTENT_FREE,
    CONTENT_WITHHELD,
    CREATE_MEMORY,  # noqa: F401
    CREATE_MEMORY_STORE,  # noqa: F401
    DELETE_MEMORY,  # noqa: F401
    DELETE_MEMORY_STORE,  # noqa: F401
    EMBEDDINGS,
    EMBEDDINGS_DIMENSION_COUNT,
    ERROR_TYPE,
    MEMORY_PROVIDER,
    MEMORY_QUERY_TEXT,
    MEMORY_RECORD_COUNT,  # noqa: F401
    MEMORY_RECORD_ID,  # noqa: F401
    MEMORY_RECORDS,
    MEMORY_RPCS,
    MEMORY_STORE_ID,  # noqa: F401
    OPERATION_DURATION_METRIC,  # noqa: F401
    OPERATION_NAME,
    PROVIDER_NAME,
    RECORD_IDS,  # noqa: F401
    RECORD_KIND,  # noqa: F401
    REQUEST_MAX_TOKENS,  # noqa: F401
    REQUEST_MODEL,
    REQUEST_TEMPERATURE,
    RESPONSE_FINISH_REASONS,
    RESPONSE_ID,
    RESPONSE_MODEL,
    RETRIEVAL_TOP_K,  # noqa: F401
    SEARCH_MEMORY,  # noqa: F401
    SEMCONV_REPOSITORY,  # noqa: F401
    SEMCONV_VERSION,  # noqa: F401
    SERVER_ADDRESS,
    SERVER_PORT,
    SUMMARISER_KIND,
    TOKEN_TYPE,
    TOKEN_USAGE_METRIC,  # noqa: F401
    TRIGGER,  # noqa: F401
    UPDATE_MEMORY,  # noqa: F401
    UPSERT_MEMORY,  # noqa: F401
    USAGE_INPUT_TOKENS,
    USAGE_OUTPUT_TOKENS,
    Extract,  # noqa: F401
    Memory,
    MemoryRpc,  # noqa: F401
    capture_content,
    capture_encrypted_content,
    error_type,
)

tracer = trace.get_tracer("episodic.genai")


def _tracing() -> bool:
    """Whether an SDK provider records spans in this process (checked per call: cheap)."""
    return isinstance(trace.get_tracer_provider(), TracerProvider)


def _failed(span: trace.Span, err: BaseException) -> None:
    if span.is_recording():
        span.set_attribute(ERROR_TYPE, error_type(err))
        span.set_status(Status(StatusCode.ERROR, str(err)[:200]))


# --------------------------------------------------------------------------- memory


def _encrypted(servicer: Any, dataset: str) -> bool:
    """Whether ``dataset`` is stored encrypted, asked of the servicer's vault (True when
    that cannot be told: content stays out)."""
    vault, engine = getattr(servicer, "vault", None), getattr(servicer, "engine", None)
    if vault is None or engine is None:
        return True
    try:
        with engine.connect() as conn:
            return vault.for_read(conn, dataset).key_id is not None
    except Exception:
        return True


def _content(span: trace.Span, operation: str, memory: Memory, servicer: Any) -> None:
    if operation in CONTENT_FREE or not capture_content():
        return
    if memory.store is None or (
        _encrypted(servicer, memory.store) and not capture_encrypted_content()
    ):
        span.set_attribute(CONTENT_WITHHELD, "encrypted")
        return
    if memory.query:
        span.set_attribute(MEMORY_QUERY_TEXT, memory.query)
    if memory.records:
        span.set_attribute(MEMORY_RECORDS, json.dumps(memory.records, ensure_ascii=False))


F = TypeVar("F", bound=Callable[..., Any])


def memory_rpc(rpc: str) -> Callable[[F], F]:
    """Decorates a servicer's handler (``def Recall(self, request, context)``): while
    tracing is on, the call runs inside a span named by its memory operation
    (:data:`MEMORY_RPCS`), a child of the call's SERVER span, with the standard's
    attributes read from the request and the response."""
    spec = MEMORY_RPCS[rpc]

    def decorate(handler: F) -> F:
        @functools.wraps(handler)
        def traced(self: Any, request: Any, context: Any) -> Any:
            if not _tracing():
                return handler(self, request, context)
            with tracer.start_as_current_span(
                spec.operation,
                kind=SpanKind.INTERNAL,
                attributes={OPERATION_NAME: spec.operation, PROVIDER_NAME: MEMORY_PROVIDER},
                record_exception=False,
                set_status_on_exception=False,
            ) as span:
                try:
                    response = handler(self, request, context)
                except BaseException as err:
                    _failed(span, err)
                    raise
                try:
                    memory = spec.extract(request, response)
                    span.set_attributes(memory.attributes())
                    _content(span, spec.operation, memory, self)
                except Exception:  # telemetry never fails a call
                    pass
                return response

        return traced  # type: ignore[return-value]

    return decorate


@contextmanager
def memory_span(
    operation: str,
    *,
    store: str,
    record: str | None = None,
    count: int | None = 1,
    links: Sequence[Link] = (),
    **suite: Any,
) -> Iterator[trace.Span]:
    """A memory operation the suite does on its own (the Summariser completing an episode:
    ``create_memory``; re-summarising or re-embedding one: ``update_memory``), linked to
    the work that asked for it; ``suite`` adds the suite's own attributes."""
    attributes: dict[str, Any] = {
        OPERATION_NAME: operation,
        PROVIDER_NAME: MEMORY_PROVIDER,
        **Memory(store=store, record=record, count=count).attributes(),
        **{k: v for k, v in suite.items() if v is not None},
    }
    with tracer.start_as_current_span(
        operation,
        kind=SpanKind.INTERNAL,
        links=list(links),
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as err:
            _failed(span, err)
            raise


# --------------------------------------------------------------------------- model calls

#: Bucket boundaries the conventions advise for the two client metrics.
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)  # fmt: skip
TOKEN_BUCKETS = tuple(float(4**i) for i in range(14))  # 1, 4, 16, … 67108864

#: ``gen_ai.provider.name`` of an OpenAI-compatible endpoint (the API spoken: the server
#: may be Ollama, vLLM or llama.cpp, which ``server.address`` tells).
OPENAI = "openai"
#: … of a model run in this process (MiniLM, E5 through ONNX; hashing).
LOCAL = "episodic.local"


def _metrics() -> Any:
    from episodic import metrics  # it names its GenAI instruments after this module

    return metrics


def _server(base_url: str | None) -> dict[str, Any]:
    if not base_url:
        return {}
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return {}
    return {SERVER_ADDRESS: parts.hostname, SERVER_PORT: port} if parts.hostname else {}


def provider_error_type(err: BaseException) -> str:
    """``error.type`` of a failed model call: the HTTP status the provider answered with,
    else the client library's exception (timeout, connection), else the class name."""
    metadata = getattr(err, "metadata", None)
    status = metadata.get("status") if isinstance(metadata, Mapping) else None
    if status:
        return str(status)
    cause = err.__cause__
    if cause is not None and type(cause).__module__.startswith("httpx"):
        return type(cause).__qualname__
    return type(err).__qualname__


class ModelCall:
    """One model call's span and metrics; :meth:`answered` reads the provider's JSON."""

    def __init__(self, span: trace.Span, metric_attributes: dict[str, Any]) -> None:
        self.span = span
        self.metric_attributes = metric_attributes
        self.error: str | None = None

    def answered(self, answer: Any) -> None:
        """Response model, id, finish reasons and token usage from an OpenAI-shaped answer
        (``usage.prompt_tokens``/``completion_tokens``, or ``input_tokens``/``output_tokens``)."""
        if not isinstance(answer, Mapping):
            return
        attributes: dict[str, Any] = {}
        model = answer.get("model")
        if isinstance(model, str) and model:
            attributes[RESPONSE_MODEL] = model
            self.metric_attributes[RESPONSE_MODEL] = model
        if isinstance(answer.get("id"), str):
            attributes[RESPONSE_ID] = answer["id"]
        choices = answer.get("choices")
        if isinstance(choices, list):
            reasons = [
                str(c.get("finish_reason"))
                for c in choices
                if isinstance(c, Mapping) and c.get("finish_reason")
            ]
            if reasons:
                attributes[RESPONSE_FINISH_REASONS] = reasons
        usage = answer.get("usage")
        if isinstance(usage, Mapping):
            for key, name, kind in (
                ("prompt_tokens", USAGE_INPUT_TOKENS, "input"),
                ("input_tokens", USAGE_INPUT_TOKENS, "input"),
                ("completion_tokens", USAGE_OUTPUT_TOKENS, "output"),
                ("output_tokens", USAGE_OUTPUT_TOKENS, "output"),
            ):
                value = usage.get(key)
                if (
                    isinstance(value, int)
                    and not isinstance(value, bool)
                    and name not in attributes
                ):
                    attributes[name] = value
                    _metrics().genai_tokens(value, {**self.metric_attributes, TOKEN_TYPE: kind})
        if self.span.is_recording():
            self.span.set_attributes(attributes)

    def failed(self, error: str) -> None:
        """The call answered, but not usably (``invalid_response``, …)."""
        self.error = error
        if self.span.is_recording():
            self.span.set_attribute(ERROR_TYPE, error)
            self.span.set_status(Status(StatusCode.ERROR, error))


@contextmanager
def model_call(
    operation: str,
    model: str,
    *,
    provider: str,
    base_url: str | None = None,
    **request: Any,
) -> Iterator[ModelCall]:
    """A ``chat`` or ``embeddings`` call: a span named ``{operation} {model}`` (CLIENT for a
    remote endpoint, INTERNAL for a model in this process) and the two GenAI client metrics.
    ``request`` adds request attributes (``gen_ai.request.*``, batch sizes) by full name.
    Nothing user-written is recorded."""
    common: dict[str, Any] = {
        OPERATION_NAME: operation,
        PROVIDER_NAME: provider,
        REQUEST_MODEL: model,
        **_server(base_url),
    }
    kind = SpanKind.CLIENT if base_url else SpanKind.INTERNAL
    started = time.perf_counter()
    with tracer.start_as_current_span(
        f"{operation} {model}",
        kind=kind,
        attributes={**common, **{k: v for k, v in request.items() if v is not None}},
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        call = ModelCall(span, dict(common))
        try:
            yield call
        except BaseException as err:
            call.error = provider_error_type(err)
            if span.is_recording():
                span.set_attribute(ERROR_TYPE, call.error)
                span.set_status(Status(StatusCode.ERROR, str(err)[:200]))
            raise
        finally:
            attrs = dict(call.metric_attributes)
            if call.error:
                attrs[ERROR_TYPE] = call.error
            _metrics().genai_call_finished(time.perf_counter() - started, attrs)


def chat(model: str, *, base_url: str, temperature: float | None = None) -> Any:
    """``with genai.chat(model, base_url=…) as call: answer = post(…); call.answered(answer)``."""
    return model_call(
        CHAT, model, provider=OPENAI, base_url=base_url, **{REQUEST_TEMPERATURE: temperature}
    )


def embeddings(
    model: str, *, batch: int, base_url: str | None = None, dimension: int | None = None
) -> Any:
    """An ``embeddings`` call of ``batch`` texts: remote (``base_url``) or in this process."""
    return model_call(
        EMBEDDINGS,
        model,
        provider=OPENAI if base_url else LOCAL,
        base_url=base_url,
        **{EMBEDDINGS_DIMENSION_COUNT: dimension, "episodic.embeddings.batch_size": batch},
    )


def summariser_attributes(summariser: Any) -> dict[str, Any]:
    """What the pipeline's summarise span says of the summariser: an LLM (whose call is a
    ``chat`` span below it) or the offline extractive one (no model call at all)."""
    name = str(getattr(summariser, "name", type(summariser).__name__))
    kind = "llm" if hasattr(summariser, "base_url") else "extractive"
    return {SUMMARISER_KIND: kind, "episodic.summariser.name": name}


def local_embeddings(embedder: Any, batch: int) -> AbstractContextManager[Any]:
    """An ``embeddings`` span for a model run in this process; nothing for a remote one
    (an OpenAI-compatible embedder's HTTP batches have their own spans)."""
    if getattr(embedder, "base_url", None):
        return nullcontext()
    return embeddings(
        str(getattr(embedder, "name", type(embedder).__name__)),
        batch=batch,
        dimension=getattr(embedder, "dimension", None),
    )
