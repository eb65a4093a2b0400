"""OpenTelemetry's GenAI semantic conventions, as this suite speaks them.

Agent-observability tools read traces by these names: a memory operation (``search_memory``,
``create_memory``, …), a model call (``chat``, ``embeddings``) and the two GenAI client
metrics. Every attribute name, operation value and the RPC → operation mapping live here and
nowhere else; servicers carry a one-line decorator (:func:`memory_rpc`) and the pipeline a
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
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

#: The conventions this module follows: open-telemetry/semantic-conventions-genai, main at
#: model/gen-ai/registry.yaml 002c8a6 / spans.yaml 7e7e4e7 (CHANGELOG "Unreleased": the
#: memory operations of #140), all development stability.
SEMCONV_VERSION = "semantic-conventions-genai@002c8a6 (unreleased, development)"
SEMCONV_REPOSITORY = "https://github.com/open-telemetry/semantic-conventions-genai"

# --------------------------------------------------------------------------- names

OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

# memory
MEMORY_STORE_ID = "gen_ai.memory.store.id"
MEMORY_RECORD_ID = "gen_ai.memory.record.id"
MEMORY_RECORD_COUNT = "gen_ai.memory.record.count"
MEMORY_QUERY_TEXT = "gen_ai.memory.query.text"  # opt-in
MEMORY_RECORDS = "gen_ai.memory.records"  # opt-in
RETRIEVAL_TOP_K = "gen_ai.retrieval.top_k"

# inference and embeddings
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
EMBEDDINGS_DIMENSION_COUNT = "gen_ai.embeddings.dimension.count"
TOKEN_TYPE = "gen_ai.token.type"

# operation values
SEARCH_MEMORY = "search_memory"
CREATE_MEMORY = "create_memory"
UPDATE_MEMORY = "update_memory"
UPSERT_MEMORY = "upsert_memory"
DELETE_MEMORY = "delete_memory"
CREATE_MEMORY_STORE = "create_memory_store"
DELETE_MEMORY_STORE = "delete_memory_store"
CHAT = "chat"
EMBEDDINGS = "embeddings"

# metrics
TOKEN_USAGE_METRIC = "gen_ai.client.token.usage"
OPERATION_DURATION_METRIC = "gen_ai.client.operation.duration"

#: ``gen_ai.provider.name`` of the memory operations: this suite is the memory system.
MEMORY_PROVIDER = "episodic"

# The suite's own, beside the standard's (the standard has one record id per span).
RECORD_IDS = "episodic.memory.record_ids"  # every episode a search returned, in order
RECORD_KIND = "episodic.memory.record_kind"  # "episode" or "event"
SUMMARISER_KIND = "episodic.summariser.kind"  # "llm" or "extractive" (offline, no model)
CONTENT_WITHHELD = "episodic.genai.content_withheld"  # why content asked for was left out

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
CAPTURE_ENCRYPTED_ENV = "EPISODIC_GENAI_CAPTURE_ENCRYPTED_CONTENT"
_SPAN_CONTENT = {"true", "1", "yes", "span_only", "span_and_event"}

tracer = trace.get_tracer("episodic.genai")


def capture_content(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the GenAI content switch asks for content on spans."""
    env = os.environ if environ is None else environ
    return env.get(CAPTURE_CONTENT_ENV, "").strip().lower() in _SPAN_CONTENT


def capture_encrypted_content(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the operator also lets content of encrypted datasets onto spans."""
    env = os.environ if environ is None else environ
    return env.get(CAPTURE_ENCRYPTED_ENV, "").strip().lower() in {"true", "1", "yes"}


def _tracing() -> bool:
    """Whether an SDK provider records spans in this process (checked per call: cheap)."""
    return isinstance(trace.get_tracer_provider(), TracerProvider)


def error_type(err: BaseException) -> str:
    """A low-cardinality ``error.type``: the gRPC status name of the suite's errors (their
    ``code``), else the exception's class name."""
    code = getattr(err, "code", None)
    name = getattr(code, "name", None)
    if isinstance(name, str):
        return name
    return type(err).__qualname__


def _failed(span: trace.Span, err: BaseException) -> None:
    if span.is_recording():
        span.set_attribute(ERROR_TYPE, error_type(err))
        span.set_status(Status(StatusCode.ERROR, str(err)[:200]))


# --------------------------------------------------------------------------- memory


@dataclass
class Memory:
    """What one memory operation says about itself: the standard's fields, and content
    (set only when :func:`capture_content` allows it and the store is not encrypted)."""

    store: str | None = None
    record: str | None = None
    count: int | None = None
    top_k: int | None = None
    record_ids: Sequence[str] = ()
    record_kind: str | None = None
    query: str | None = None  # content
    records: list[dict[str, Any]] | None = None  # content

    def attributes(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.store:
            out[MEMORY_STORE_ID] = self.store
        if self.record:
            out[MEMORY_RECORD_ID] = self.record
        if self.count is not None:
            out[MEMORY_RECORD_COUNT] = self.count
        if self.top_k:
            out[RETRIEVAL_TOP_K] = self.top_k
        if self.record_ids:
            out[RECORD_IDS] = list(self.record_ids)
        if self.record_kind:
            out[RECORD_KIND] = self.record_kind
        return out


Extract = Callable[[Any, Any], Memory]


@dataclass(frozen=True)
class MemoryRpc:
    """One RPC's memory operation: its value of ``gen_ai.operation.name`` and how its
    request and response say which store and records it touched."""

    operation: str
    extract: Extract


def _scored_search(request: Any, episodes: Sequence[Any], top_k: int | None) -> Memory:
    ids = [s.episode.episode_id for s in episodes]
    return Memory(
        store=request.dataset,
        count=len(ids),
        top_k=top_k,
        record=ids[0] if len(ids) == 1 else None,
        record_ids=ids,
        query=request.query or None,
        records=[
            {"id": s.episode.episode_id, "content": s.episode.summary, "score": s.relevance_score}
            for s in episodes
        ],
    )


def _recall(request: Any, response: Any) -> Memory:
    return _scored_search(request, response.episodes.episodes, request.context_episodes or None)


def _search(request: Any, response: Any) -> Memory:
    return _scored_search(request, response.episodes, request.page_size or None)


def _one_episode(field: str, kind: str | None = None) -> Extract:
    def extract(request: Any, response: Any) -> Memory:
        episode = getattr(response, field)
        return Memory(
            store=episode.dataset or None,
            record=episode.episode_id or request.episode_id,
            count=1,
            record_kind=kind,
            records=[{"id": episode.episode_id, "content": episode.summary}],
        )

    return extract


def _list(request: Any, response: Any) -> Memory:
    ids = [e.episode_id for e in response.episodes]
    return Memory(
        store=request.dataset or None,
        count=len(ids),
        top_k=request.page_size or None,
        record_ids=ids,
        records=[{"id": e.episode_id, "content": e.summary} for e in response.episodes],
    )


def _erased(request: Any, response: Any) -> Memory:
    receipt = response.receipt
    deleted = receipt.rows_deleted
    count = deleted.get("episodes", 0) + deleted.get("events", 0) if deleted else None
    return Memory(store=receipt.dataset or getattr(request, "dataset", None), count=count)


def _event(request: Any, response: Any) -> Memory:
    event = response.event
    return Memory(
        store=request.dataset,
        record=event.episode_id or None,
        count=1,
        record_kind="event",
        records=[{"id": event.episode_id, "content": event.summary}],
    )


#: Which RPC is which memory operation (the RPCs not named here are none: a thread, its
#: messages and its end are the raw material episodes are made of, not memory records;
#: the episode's own creation is the Summariser's ``create_memory``, see :func:`memory_span`).
MEMORY_RPCS: dict[str, MemoryRpc] = {
    "RecallService/Recall": MemoryRpc(SEARCH_MEMORY, _recall),
    "RecallService/SearchEpisodes": MemoryRpc(SEARCH_MEMORY, _search),
    "RecallService/ListEpisodes": MemoryRpc(SEARCH_MEMORY, _list),
    "RecallService/GetEpisode": MemoryRpc(SEARCH_MEMORY, _one_episode("episode")),
    "IngestService/RecordEvent": MemoryRpc(CREATE_MEMORY, _event),
    "SchedulerService/DeleteEpisode": MemoryRpc(DELETE_MEMORY, _one_episode("episode")),
    "SchedulerService/RetryEpisode": MemoryRpc(UPDATE_MEMORY, _one_episode("episode")),
    "AdminService/DeleteThread": MemoryRpc(DELETE_MEMORY, _erased),
    "AdminService/DeleteDataset": MemoryRpc(DELETE_MEMORY_STORE, _erased),
}

_CONTENT_FREE = {DELETE_MEMORY, DELETE_MEMORY_STORE}  # what was deleted is not shown


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
    if operation in _CONTENT_FREE or not capture_content():
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
