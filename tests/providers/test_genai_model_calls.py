"""The Summariser's model calls as GenAI spans and metrics: ``chat`` for the
OpenAI-compatible LLM, ``embeddings`` for the embedders, the two GenAI client metrics, and
no prompt or completion on any of them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from episodic import genai, metrics
from episodic.errors import ProviderError
from episodic.providers import (
    ChatMessage,
    OpenAIChatSummariser,
    RetryPolicy,
    SummaryRequest,
)
from episodic.providers.embedding import CachedEmbedder, HashingEmbedder, OpenAIEmbedder
from tests.providers.fake_openai import FakeOpenAI

SECRET = "the launch code is 0000"
GOOD = {
    "summary": "The user set a launch code.",
    "key_learnings": [],
    "entities": [],
    "event_type": "conversation",
    "actor": "user",
}


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(genai, "tracer", provider.get_tracer("episodic.genai"))
    return exporter


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> InMemoryMetricReader:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("episodic")
    monkeypatch.setattr(
        metrics, "_genai_tokens", meter.create_histogram(genai.TOKEN_USAGE_METRIC, unit="{token}")
    )
    monkeypatch.setattr(
        metrics,
        "_genai_duration",
        meter.create_histogram(genai.OPERATION_DURATION_METRIC, unit="s"),
    )
    return reader


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    out: dict[str, list[Any]] = {}
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out.setdefault(m.name, []).extend(m.data.data_points)
    return out


def _request() -> SummaryRequest:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    return SummaryRequest([ChatMessage(1, "user", SECRET, when)], 1)


def _summariser(fake: FakeOpenAI, policy: RetryPolicy) -> OpenAIChatSummariser:
    return OpenAIChatSummariser(base_url=fake.base_url, model="gpt-test", retry=policy)


def test_a_summary_is_a_chat_span_with_models_finish_reasons_and_usage(
    fake: FakeOpenAI,
    policy: RetryPolicy,
    spans: InMemorySpanExporter,
    reader: InMemoryMetricReader,
) -> None:
    fake.enqueue_chat(result=GOOD)
    _summariser(fake, policy).summarise(_request())
    (span,) = spans.get_finished_spans()
    attrs = dict(span.attributes or {})
    assert span.name == "chat gpt-test" and span.kind is SpanKind.CLIENT
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == "gpt-test"
    assert attrs["gen_ai.response.model"] == "fake-model"
    assert list(attrs["gen_ai.response.finish_reasons"]) == ["stop"]
    assert attrs["gen_ai.usage.input_tokens"] == 1 and attrs["gen_ai.usage.output_tokens"] == 1
    assert attrs["server.address"] == "127.0.0.1" and isinstance(attrs["server.port"], int)
    assert "error.type" not in attrs
    assert SECRET not in str(attrs)  # no prompt, no completion

    points = _points(reader)
    tokens = {p.attributes["gen_ai.token.type"]: p.sum for p in points["gen_ai.client.token.usage"]}
    assert tokens == {"input": 1, "output": 1}
    (duration,) = points["gen_ai.client.operation.duration"]
    assert duration.count == 1 and duration.attributes["gen_ai.operation.name"] == "chat"
    assert "error.type" not in duration.attributes


def test_a_failed_chat_call_carries_error_type_on_span_and_metric(
    fake: FakeOpenAI,
    policy: RetryPolicy,
    spans: InMemorySpanExporter,
    reader: InMemoryMetricReader,
) -> None:
    for _ in range(4):
        fake.enqueue_chat(status=500, body={"error": {"message": "down"}})
    with pytest.raises(ProviderError):
        _summariser(fake, policy).summarise(_request())
    (span,) = spans.get_finished_spans()
    assert (span.attributes or {})["error.type"] == "500"
    assert span.status.status_code is StatusCode.ERROR
    (duration,) = _points(reader)["gen_ai.client.operation.duration"]
    assert duration.attributes["error.type"] == "500"


def test_an_unusable_answer_is_error_type_invalid_response(
    fake: FakeOpenAI, policy: RetryPolicy, spans: InMemorySpanExporter
) -> None:
    fake.enqueue_chat(content="not json")
    fake.enqueue_chat(result=GOOD)
    _summariser(fake, policy).summarise(_request())
    first, second = spans.get_finished_spans()
    assert (first.attributes or {})["error.type"] == "invalid_response"
    assert "error.type" not in (second.attributes or {})


def test_remote_embeddings_are_one_span_per_request(
    fake: FakeOpenAI, policy: RetryPolicy, spans: InMemorySpanExporter
) -> None:
    embedder = OpenAIEmbedder(
        base_url=fake.base_url, model="embed-test", dimension=384, batch_size=2, retry=policy
    )
    CachedEmbedder(embedder).embed(["a", "b", "c"])  # the cache adds no span of its own
    first, second = spans.get_finished_spans()
    for span, batch in ((first, 2), (second, 1)):
        attrs = dict(span.attributes or {})
        assert span.name == "embeddings embed-test" and span.kind is SpanKind.CLIENT
        assert attrs["gen_ai.operation.name"] == "embeddings"
        assert attrs["episodic.embeddings.batch_size"] == batch
        assert attrs["gen_ai.embeddings.dimension.count"] == 384
        assert attrs["gen_ai.usage.input_tokens"] == 1


def test_a_model_in_this_process_is_an_internal_embeddings_span(
    spans: InMemorySpanExporter,
) -> None:
    cached = CachedEmbedder(HashingEmbedder(64))
    cached.embed(["a", "b"])
    cached.embed(["a", "b"])  # remembered: no model call, no span
    (span,) = spans.get_finished_spans()
    attrs = dict(span.attributes or {})
    assert span.kind is SpanKind.INTERNAL and span.name == "embeddings hashing:64"
    assert attrs["gen_ai.provider.name"] == "episodic.local"
    assert attrs["episodic.embeddings.batch_size"] == 2


def test_the_extractive_summariser_says_it_calls_no_model() -> None:
    assert genai.summariser_attributes(HashingEmbedder(8))[genai.SUMMARISER_KIND] == "extractive"
    llm = OpenAIChatSummariser(base_url="http://x", model="m")
    assert genai.summariser_attributes(llm)[genai.SUMMARISER_KIND] == "llm"


def test_a_query_embedded_in_process_is_one_embeddings_span(
    spans: InMemorySpanExporter,
) -> None:
    """Recall embeds its query without a cache; through the Summariser's cache it is still
    one span, not two."""
    HashingEmbedder(64).embed_query("what did we decide")
    CachedEmbedder(HashingEmbedder(64)).embed_query("what did we decide")
    first, second = spans.get_finished_spans()
    for span in (first, second):
        assert span.name == "embeddings hashing:64"
        assert (span.attributes or {})["episodic.embeddings.batch_size"] == 1
