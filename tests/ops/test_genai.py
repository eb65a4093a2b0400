"""episodic.genai: memory operations in the GenAI conventions' words, content only on
request (and never of an encrypted dataset unless the operator says so too), and the RPC →
operation mapping applied where it says."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from episodic import genai, telemetry
from episodic.errors import NotFound
from episodic.v1 import episode_pb2 as e
from episodic.v1 import recall_service_pb2 as rpb
from episodic.v1 import scheduler_service_pb2 as spb

REPO_ROOT = Path(__file__).resolve().parents[2]
QUERY = "what did Alice decide about the blue car"
SUMMARY = "Alice decided to buy the blue car (secret detail 4711)"


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """Tracing on, into memory, for genai's spans only (the process keeps its no-op
    provider)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(genai, "tracer", provider.get_tracer("episodic.genai"))
    monkeypatch.setattr(genai, "_tracing", lambda: True)
    monkeypatch.delenv(genai.CAPTURE_CONTENT_ENV, raising=False)
    monkeypatch.delenv(genai.CAPTURE_ENCRYPTED_ENV, raising=False)
    return exporter


class _Engine:
    @contextmanager
    def connect(self) -> Iterator[None]:
        yield None


class _Vault:
    def __init__(self, encrypted: bool) -> None:
        self.encrypted = encrypted

    def for_read(self, conn: Any, dataset: str) -> Any:
        return SimpleNamespace(key_id="k1" if self.encrypted else None)


def _episode(episode_id: str) -> e.Episode:
    return e.Episode(episode_id=episode_id, dataset="alice", summary=SUMMARY)


class _Recall:
    def __init__(self, encrypted: bool = False, fail: Exception | None = None) -> None:
        self.engine, self.vault, self.fail, self.calls = _Engine(), _Vault(encrypted), fail, 0

    @genai.memory_rpc("RecallService/Recall")
    def Recall(self, request: rpb.RecallRequest, context: Any) -> rpb.RecallResponse:
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        return rpb.RecallResponse(
            episodes=rpb.RecalledEpisodes(
                episodes=[
                    e.ScoredEpisode(episode=_episode("ep-1"), relevance_score=0.9),
                    e.ScoredEpisode(episode=_episode("ep-2"), relevance_score=0.5),
                ]
            )
        )


def _recall(servicer: _Recall) -> rpb.RecallResponse:
    request = rpb.RecallRequest(dataset="alice", query=QUERY, context_episodes=5)
    return servicer.Recall(request, None)


def _everything(span: Any) -> str:
    return json.dumps({"name": span.name, **dict(span.attributes)}, default=list)


def test_recall_is_search_memory_naming_store_records_and_top_k(
    exporter: InMemorySpanExporter,
) -> None:
    _recall(_Recall())
    (span,) = exporter.get_finished_spans()
    assert span.name == "search_memory"
    attrs = dict(span.attributes or {})
    assert attrs["gen_ai.operation.name"] == "search_memory"
    assert attrs["gen_ai.provider.name"] == "episodic"
    assert attrs["gen_ai.memory.store.id"] == "alice"
    assert attrs["gen_ai.memory.record.count"] == 2
    assert attrs["gen_ai.retrieval.top_k"] == 5
    assert list(attrs["episodic.memory.record_ids"]) == ["ep-1", "ep-2"]
    assert "gen_ai.memory.record.id" not in attrs  # one record id only for one record


def test_by_default_no_content_reaches_the_span(exporter: InMemorySpanExporter) -> None:
    _recall(_Recall())
    (span,) = exporter.get_finished_spans()
    everything = _everything(span)
    assert "gen_ai.memory.query.text" not in everything
    assert "gen_ai.memory.records" not in everything
    assert "blue car" not in everything and "4711" not in everything


@pytest.mark.parametrize("switch", ["false", "NO_CONTENT", "EVENT_ONLY", ""])
def test_the_switch_off_in_any_spelling_keeps_content_out(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, switch: str
) -> None:
    monkeypatch.setenv(genai.CAPTURE_CONTENT_ENV, switch)
    _recall(_Recall())
    assert "blue car" not in _everything(exporter.get_finished_spans()[0])


def test_the_switch_on_records_query_and_records_of_a_clear_dataset(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(genai.CAPTURE_CONTENT_ENV, "true")
    _recall(_Recall(encrypted=False))
    attrs = dict(exporter.get_finished_spans()[0].attributes or {})
    assert attrs["gen_ai.memory.query.text"] == QUERY
    records = json.loads(str(attrs["gen_ai.memory.records"]))
    assert [r["id"] for r in records] == ["ep-1", "ep-2"]
    assert records[0]["content"] == SUMMARY and records[0]["score"] == pytest.approx(0.9)


def test_an_encrypted_dataset_needs_the_operators_opt_in_too(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(genai.CAPTURE_CONTENT_ENV, "SPAN_ONLY")
    _recall(_Recall(encrypted=True))
    withheld = exporter.get_finished_spans()[0]
    assert "blue car" not in _everything(withheld) and "4711" not in _everything(withheld)
    assert (withheld.attributes or {})["episodic.genai.content_withheld"] == "encrypted"

    monkeypatch.setenv(genai.CAPTURE_ENCRYPTED_ENV, "true")
    _recall(_Recall(encrypted=True))
    shown = exporter.get_finished_spans()[1]
    assert (shown.attributes or {})["gen_ai.memory.query.text"] == QUERY


def test_a_failed_operation_carries_error_type_and_raises_as_before(
    exporter: InMemorySpanExporter,
) -> None:
    servicer = _Recall(fail=NotFound("no such dataset"))
    with pytest.raises(NotFound):
        _recall(servicer)
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None and span.attributes["error.type"] == "NOT_FOUND"
    assert span.status.status_code is StatusCode.ERROR
    assert "gen_ai.memory.record.count" not in span.attributes


def test_with_tracing_off_the_handler_runs_without_a_span(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(genai, "_tracing", lambda: False)
    servicer = _Recall()
    assert len(_recall(servicer).episodes.episodes) == 2 and servicer.calls == 1
    assert exporter.get_finished_spans() == ()


def test_delete_episode_is_delete_memory_of_that_record_without_content(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(genai.CAPTURE_CONTENT_ENV, "true")

    class Scheduler:
        engine, vault = _Engine(), _Vault(False)

        @genai.memory_rpc("SchedulerService/DeleteEpisode")
        def DeleteEpisode(self, request: Any, context: Any) -> Any:
            return spb.DeleteEpisodeResponse(episode=_episode(request.episode_id))

    Scheduler().DeleteEpisode(spb.DeleteEpisodeRequest(episode_id="ep-9"), None)
    (span,) = exporter.get_finished_spans()
    attrs = dict(span.attributes or {})
    assert span.name == attrs["gen_ai.operation.name"] == "delete_memory"
    assert attrs["gen_ai.memory.record.id"] == "ep-9"
    assert attrs["gen_ai.memory.store.id"] == "alice"
    assert "4711" not in _everything(span)


def test_memory_span_links_the_work_that_asked_for_it(exporter: InMemorySpanExporter) -> None:
    provider = TracerProvider()
    origin = provider.get_tracer("t").start_span("RequestEpisode")
    origin.end()
    carrier = {"traceparent": f"00-{origin.context.trace_id:032x}-{origin.context.span_id:016x}-01"}
    with genai.memory_span(
        genai.CREATE_MEMORY, store="alice", record="ep-1", links=telemetry.link_from(carrier)
    ):
        pass
    (span,) = exporter.get_finished_spans()
    assert span.name == "create_memory"
    assert (span.attributes or {})["gen_ai.memory.record.id"] == "ep-1"
    assert [link.context.span_id for link in span.links] == [origin.context.span_id]


# --------------------------------------------------------------------------- the mapping


def test_every_mapped_rpc_is_decorated_once_on_its_handler() -> None:
    """The mapping and the servicers agree: each RPC named in MEMORY_RPCS decorates the
    handler of that name, in a service module, exactly once."""
    found: dict[str, str] = {}
    pattern = re.compile(r'@genai\.memory_rpc\("(\w+)/(\w+)"\)\n\s+def (\w+)\(')
    for path in (REPO_ROOT / "services").rglob("*.py"):
        for service, method, handler in pattern.findall(path.read_text()):
            assert method == handler, f"{path}: {service}/{method} decorates {handler}"
            assert f"{service}/{method}" not in found
            found[f"{service}/{method}"] = str(path)
    assert set(found) == set(genai.MEMORY_RPCS)
    allowed = {
        genai.SEARCH_MEMORY,
        genai.CREATE_MEMORY,
        genai.UPDATE_MEMORY,
        genai.UPSERT_MEMORY,
        genai.DELETE_MEMORY,
        genai.CREATE_MEMORY_STORE,
        genai.DELETE_MEMORY_STORE,
    }
    assert {rpc.operation for rpc in genai.MEMORY_RPCS.values()} <= allowed


def test_attribute_names_are_spelled_in_one_module() -> None:
    """No other module spells a gen_ai.* attribute: the names live in episodic.semconv
    (re-exported by episodic.genai; apart so the SDK and `episodic trace` need no
    OpenTelemetry)."""
    offenders = []
    for root in (REPO_ROOT / "services", REPO_ROOT / "shared" / "episodic", REPO_ROOT / "tools"):
        for path in root.rglob("*.py"):
            if path.name == "semconv.py":
                continue
            if re.search(r"[\"']gen_ai\.", path.read_text()):
                offenders.append(str(path))
    assert offenders == []


def test_every_resource_names_the_service_its_version_and_instance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    attrs = telemetry.service_resource("episodic-recall").attributes
    assert attrs["service.name"] == "episodic-recall"
    assert attrs["service.instance.id"] and "service.version" in attrs
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.instance.id=recall-0")
    assert telemetry.service_resource("x").attributes["service.instance.id"] == "recall-0"
