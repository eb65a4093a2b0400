"""The names this suite's telemetry speaks, without importing OpenTelemetry.

OpenTelemetry's GenAI semantic conventions (attribute names, operation values, metric
names), the RPC → memory operation mapping and how a request and its response say which
store and records an operation touched. :mod:`episodic.genai` (the services' spans),
the SDK's client spans (:mod:`episodic.sdk.tracing`) and ``episodic trace``
(:mod:`episodic.ops.journey`) all read them from here, and the last two must work on the core
install, which has no OpenTelemetry: so nothing here imports it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The conventions followed: open-telemetry/semantic-conventions-genai, main at
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
TRIGGER = "episodic.trigger"  # on the summarise span: what opened the episode
SUMMARISER_KIND = "episodic.summariser.kind"  # "llm" or "extractive" (offline, no model)
CONTENT_WITHHELD = "episodic.genai.content_withheld"  # why content asked for was left out

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
CAPTURE_ENCRYPTED_ENV = "EPISODIC_GENAI_CAPTURE_ENCRYPTED_CONTENT"
_SPAN_CONTENT = {"true", "1", "yes", "span_only", "span_and_event"}

#: The suite's span file: one JSON object per finished span (episodic.telemetry writes it,
#: ``episodic trace`` and the console read it).
TRACE_FILE_ENV = "EPISODIC_TRACE_FILE"


def capture_content(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the GenAI content switch asks for content on spans."""
    env = os.environ if environ is None else environ
    return env.get(CAPTURE_CONTENT_ENV, "").strip().lower() in _SPAN_CONTENT


def capture_encrypted_content(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the operator also lets content of encrypted datasets onto spans."""
    env = os.environ if environ is None else environ
    return env.get(CAPTURE_ENCRYPTED_ENV, "").strip().lower() in {"true", "1", "yes"}


def error_type(err: BaseException) -> str:
    """A low-cardinality ``error.type``: the gRPC status name of the suite's errors (their
    ``code``), else the exception's class name."""
    code = getattr(err, "code", None)
    name = getattr(code, "name", None)
    if isinstance(name, str):
        return name
    return type(err).__qualname__


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

CONTENT_FREE = {DELETE_MEMORY, DELETE_MEMORY_STORE}  # what was deleted is not shown
