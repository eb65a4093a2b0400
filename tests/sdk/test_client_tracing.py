"""The SDK's client spans: a memory operation is a CLIENT span in OpenTelemetry's GenAI
words, and the call carries the trace context, so the service's span is its child — when
the application traces (OpenTelemetry importable and a tracer provider set). Without
OpenTelemetry (the core install) the client works as before.

Each test that takes ``make_client`` runs with the blocking and the asyncio client."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from episodic import semconv
from episodic.ops import journey
from episodic.sdk.client import NotFoundError
from episodic.testing.processes import wait_until
from tests.recall.factory import make_episode

DATASET = "traced_sdk"


@pytest.fixture
def app_spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The application traces: a provider of its own, as ``trace.set_tracer_provider``
    would install it (patched in, so the rest of this test process keeps the no-op one)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    monkeypatch.delenv(semconv.CAPTURE_CONTENT_ENV, raising=False)
    monkeypatch.delenv(semconv.CAPTURE_ENCRYPTED_ENV, raising=False)
    yield exporter
    provider.shutdown()


@pytest.fixture
def traced_services(spawn, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Ingest, Recall and the Scheduler writing their spans to one file."""
    spans = tmp_path / "spans.jsonl"
    env = {semconv.TRACE_FILE_ENV: str(spans)}
    scheduler = spawn("scheduler", env=env)
    ingest = spawn("ingest", env={**env, "EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    recall = spawn("recall", env=env)
    return ingest, recall, scheduler, spans


def _server_span(spans: Path, name: str, trace_id: str) -> dict[str, Any]:
    def found() -> list[dict[str, Any]]:
        return [
            s
            for s in journey.read_spans(spans)
            if s["kind"] == "SERVER" and s["name"] == name and s["trace_id"] == trace_id
        ]

    wait_until(lambda: bool(found()), timeout=20, message=f"the server span {name}")
    (span,) = found()
    return span


def test_memory_operations_are_client_spans_parenting_the_server_span(
    traced_services, make_client, client_kind: str, engine, app_spans: InMemorySpanExporter
) -> None:  # type: ignore[no-untyped-def]
    ingest, recall, scheduler, spans = traced_services
    with engine.begin() as conn:
        made = make_episode(conn, DATASET, ["we agreed on the Pro tier for project Atlas"])
    episode_id = str(made.episode_id)
    client = make_client(
        ingest=ingest.address, recall=recall.address, scheduler=scheduler.address, timeout=20
    )
    agent = trace.get_tracer_provider().get_tracer("agent")

    if client_kind == "sync":
        with agent.start_as_current_span("agent turn") as turn:
            thread = client.start_thread(DATASET)  # not a memory operation: no client span
            found = client.recall(DATASET, "Pro tier for Atlas", limit=2)
    else:  # the turn in the event loop, as an asyncio agent runs it

        async def agent_turn() -> tuple[Any, Any, Any]:
            with agent.start_as_current_span("agent turn") as turn:
                thread = await client.client.start_thread(DATASET)
                found = await client.client.recall(DATASET, "Pro tier for Atlas", limit=2)
            return turn, thread, found

        turn, thread, found = client.run(agent_turn())
    assert [s.episode.episode_id for s in found.episodes] == [episode_id]

    by_name = {s.name: s for s in app_spans.get_finished_spans()}
    assert set(by_name) == {"agent turn", "search_memory"}
    search = by_name["search_memory"]
    attrs = dict(search.attributes or {})
    assert search.kind is trace.SpanKind.CLIENT
    assert search.parent is not None and search.parent.span_id == turn.get_span_context().span_id
    assert attrs[semconv.OPERATION_NAME] == "search_memory"
    assert attrs[semconv.PROVIDER_NAME] == "episodic"
    assert attrs[semconv.MEMORY_STORE_ID] == DATASET
    assert attrs[semconv.RETRIEVAL_TOP_K] == 2
    assert attrs[semconv.MEMORY_RECORD_COUNT] == 1
    assert list(attrs[semconv.RECORD_IDS]) == [episode_id]
    assert attrs[semconv.MEMORY_RECORD_ID] == episode_id
    assert attrs[semconv.SERVER_PORT] == int(recall.address.rsplit(":", 1)[1])
    # Content is opt-in: neither the query nor the records by default.
    assert semconv.MEMORY_QUERY_TEXT not in attrs and semconv.MEMORY_RECORDS not in attrs

    # The query and the records only with both switches: the client cannot tell whether
    # the dataset is stored encrypted (by default every one is).
    for switches, shown in (
        ({semconv.CAPTURE_CONTENT_ENV: "true"}, False),
        ({semconv.CAPTURE_CONTENT_ENV: "true", semconv.CAPTURE_ENCRYPTED_ENV: "true"}, True),
    ):
        app_spans.clear()
        with pytest.MonkeyPatch.context() as env:
            for name, value in switches.items():
                env.setenv(name, value)
            client.recall(DATASET, "Pro tier for Atlas", limit=2)
        (searched,) = app_spans.get_finished_spans()
        content = dict(searched.attributes or {})
        assert (content.get(semconv.MEMORY_QUERY_TEXT) == "Pro tier for Atlas") is shown
        assert (episode_id in str(content.get(semconv.MEMORY_RECORDS, ""))) is shown

    # The services' spans are children of the application's: one trace across processes.
    trace_id = trace.format_trace_id(turn.get_span_context().trace_id)
    served = _server_span(spans, "/episodic.v1.RecallService/Recall", trace_id)
    assert served["parent_span_id"] == trace.format_span_id(search.get_span_context().span_id)
    created = _server_span(spans, "/episodic.v1.IngestService/CreateThread", trace_id)
    assert created["parent_span_id"] == trace.format_span_id(turn.get_span_context().span_id)

    # Delete: delete_memory naming the record; a failed one says why in error.type.
    app_spans.clear()
    client.delete_episode(episode_id)
    with pytest.raises(NotFoundError):
        client.delete_episode("00000000-0000-0000-0000-000000000000")
    deleted, missing = app_spans.get_finished_spans()
    assert deleted.name == missing.name == "delete_memory"
    assert deleted.attributes[semconv.MEMORY_RECORD_ID] == episode_id  # type: ignore[index]
    assert deleted.attributes[semconv.MEMORY_STORE_ID] == DATASET  # type: ignore[index]
    assert missing.attributes[semconv.ERROR_TYPE] == "NOT_FOUND"  # type: ignore[index]
    assert missing.status.status_code is trace.StatusCode.ERROR
    served_delete = _server_span(
        spans,
        "/episodic.v1.SchedulerService/DeleteEpisode",
        trace.format_trace_id(deleted.get_span_context().trace_id),
    )
    assert served_delete["parent_span_id"] == trace.format_span_id(
        deleted.get_span_context().span_id
    )

    # Erasure of the thread: delete_memory of the store's records; of the dataset:
    # delete_memory_store.
    app_spans.clear()
    client.delete_thread(thread.thread_id)
    client.delete_dataset(DATASET)
    assert [s.name for s in app_spans.get_finished_spans()] == [
        "delete_memory",
        "delete_memory_store",
    ]
    assert all(
        s.attributes[semconv.MEMORY_STORE_ID] == DATASET  # type: ignore[index]
        for s in app_spans.get_finished_spans()
    )


def test_no_provider_set_means_no_span_and_no_trace_context(
    traced_services, make_client, engine
) -> None:  # type: ignore[no-untyped-def]
    """OpenTelemetry importable but no provider set (the API's default): nothing is
    recorded and the call starts its own trace on the server."""
    ingest, recall, _, spans = traced_services
    with engine.begin() as conn:
        make_episode(conn, DATASET, ["the blue car"])
    client = make_client(ingest=ingest.address, recall=recall.address, timeout=20)
    client.recall(DATASET, "blue car")

    def served() -> list[dict[str, Any]]:
        return [
            s for s in journey.read_spans(spans) if s["name"] == "/episodic.v1.RecallService/Recall"
        ]

    wait_until(lambda: bool(served()), timeout=20, message="the Recall server span")
    assert served()[0]["parent_span_id"] is None


_WITHOUT_OPENTELEMETRY = """
import importlib.abc, sys

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "opentelemetry":
            raise ImportError(f"{name} is not installed (blocked: core install)")
        return None

sys.meta_path.insert(0, Refuse())
from episodic.sdk.client import EpisodicClient
with EpisodicClient(recall=sys.argv[1], timeout=20) as memory:
    found = memory.recall(sys.argv[2], "blue car")
print("FOUND", [s.episode.summary for s in found.episodes])
print("OTEL", sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


def test_the_sdk_works_without_opentelemetry(traced_services, engine) -> None:  # type: ignore[no-untyped-def]
    _, recall, _, _ = traced_services
    with engine.begin() as conn:
        make_episode(conn, DATASET, ["the blue car"])
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_OPENTELEMETRY, recall.address, DATASET],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr
    assert "FOUND ['the blue car']" in done.stdout and "OTEL []" in done.stdout, done.stdout
