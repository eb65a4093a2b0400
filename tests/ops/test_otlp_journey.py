"""One journey, followed from what a real OTLP receiver got: the four services run as
separate processes exporting OTLP over gRPC (configured only by the standard ``OTEL_*``
variables) to a TraceService in this test (the collector's own wire format, from the
OpenTelemetry protos). A message is written, the thread ended, the episode summarised by
the worker on its own and recalled; then the spans must tell that story."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from episodic.testing.processes import wait_until
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from episodic.v1 import recall_service_pb2 as rpb
from episodic.v1 import recall_service_pb2_grpc as rg

DATASET = "journey"


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@dataclass
class Received:
    """A span as the receiver got it, with its resource."""

    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str
    links: list[tuple[str, str]]
    attributes: dict[str, Any]
    resource: dict[str, Any]

    @property
    def service(self) -> str:
        return str(self.resource.get("service.name"))


@dataclass
class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """The collector's TraceService: keeps every span it is sent."""

    spans: list[Received] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        got: list[Received] = []
        resources = []
        for rs in request.resource_spans:
            resource = {a.key: _value(a.value) for a in rs.resource.attributes}
            resources.append(resource)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(
                        Received(
                            name=s.name,
                            kind=PbSpan.SpanKind.Name(s.kind).removeprefix("SPAN_KIND_"),
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex(),
                            links=[(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            resource=resource,
                        )
                    )
        with self.lock:
            self.spans.extend(got)
            self.resources.extend(resources)
        return trace_service_pb2.ExportTraceServiceResponse()

    def snapshot(self) -> list[Received]:
        with self.lock:
            return list(self.spans)


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, int]]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    receiver = Receiver()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield receiver, port
    server.stop(grace=None)


def _one(spans: list[Received], **match: Any) -> Received:
    found = [s for s in spans if all(getattr(s, k) == v for k, v in match.items())]
    assert len(found) == 1, (match, [(s.name, s.kind, s.service) for s in found])
    return found[0]


def test_a_message_to_the_recall_that_used_it_over_otlp(spawn, receiver) -> None:  # type: ignore[no-untyped-def]
    got, port = receiver
    otel = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_TRACES_INSECURE": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # ms: export promptly, the test waits on it
        "OTEL_METRICS_EXPORTER": "none",
    }
    scheduler = spawn("scheduler", env=otel)
    ingest = spawn("ingest", env={**otel, "EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    # The worker on its own (woken by NOTIFY, polling as a backstop), as in production.
    spawn("summariser", env={**otel, "EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"})
    recall = spawn("recall", env=otel)

    stub = ig.IngestServiceStub(ingest.channel())
    recall_stub = rg.RecallServiceStub(recall.channel())
    thread = stub.CreateThread(ipb.CreateThreadRequest(dataset=DATASET), timeout=10).thread
    stub.AddMessages(
        ipb.AddMessagesRequest(
            thread_id=thread.thread_id,
            messages=[ipb.NewMessage(role=e.ROLE_USER, content="I decided to buy the blue car.")],
        ),
        timeout=10,
    )
    ended = stub.EndThread(ipb.EndThreadRequest(thread_id=thread.thread_id), timeout=10)
    assert ended.episode_queued and ended.episode_id
    episode_id = ended.episode_id

    def completed() -> bool:
        episode = recall_stub.GetEpisode(rpb.GetEpisodeRequest(episode_id=episode_id), timeout=10)
        assert episode.episode.status != e.EPISODE_STATUS_FAILED, episode.episode
        return episode.episode.status == e.EPISODE_STATUS_COMPLETED

    wait_until(completed, timeout=60, interval=0.1, message="the episode completed")
    found = recall_stub.Recall(
        rpb.RecallRequest(
            dataset=DATASET,
            query="blue car",
            include=[rpb.RECALL_INCLUDE_EPISODES],
            context_episodes=3,
        ),
        timeout=30,
    )
    assert [s.episode.episode_id for s in found.episodes.episodes] == [episode_id]

    wanted = {
        ("/episodic.v1.IngestService/AddMessages", "episodic-ingest"),
        ("/episodic.v1.SchedulerService/RecordActivity", "episodic-scheduler"),
        ("/episodic.v1.SchedulerService/RequestEpisode", "episodic-scheduler"),
        ("/episodic.v1.IngestService/EndThread", "episodic-ingest"),
        ("summarise episode", "episodic-summariser"),
        ("llm.summarise", "episodic-summariser"),
        ("create_memory", "episodic-summariser"),
        ("/episodic.v1.RecallService/Recall", "episodic-recall"),
        ("search_memory", "episodic-recall"),
    }

    def all_arrived() -> list[Received] | None:
        spans = got.snapshot()
        names = {(s.name, s.service) for s in spans}
        return spans if wanted <= names else None

    spans = wait_until(all_arrived, timeout=30, interval=0.1, message="spans over OTLP")

    # The write: AddMessages (Ingest) → its notice to the Scheduler, one trace.
    add = _one(spans, name="/episodic.v1.IngestService/AddMessages", kind="SERVER")
    notice = _one(
        spans,
        name="/episodic.v1.SchedulerService/RecordActivity",
        kind="SERVER",
        service="episodic-scheduler",
    )
    assert notice.trace_id == add.trace_id and add.service == "episodic-ingest"

    # The firing: EndThread asks the Scheduler for the episode, in EndThread's trace.
    end = _one(spans, name="/episodic.v1.IngestService/EndThread", kind="SERVER")
    fired = _one(
        spans,
        name="/episodic.v1.SchedulerService/RequestEpisode",
        kind="SERVER",
        service="episodic-scheduler",
    )
    assert fired.trace_id == end.trace_id

    # The Summariser's work: its own trace, linked to the firing.
    summarise = _one(spans, name="summarise episode", service="episodic-summariser")
    assert summarise.trace_id != fired.trace_id
    assert (fired.trace_id, fired.span_id) in summarise.links
    assert summarise.attributes["episodic.episode_id"] == episode_id
    created = _one(spans, name="create_memory", service="episodic-summariser")
    assert created.parent_span_id == summarise.span_id
    assert (fired.trace_id, fired.span_id) in created.links
    assert created.attributes["gen_ai.operation.name"] == "create_memory"
    assert created.attributes["gen_ai.memory.record.id"] == episode_id
    assert created.attributes["gen_ai.memory.store.id"] == DATASET
    llm = _one(spans, name="llm.summarise", service="episodic-summariser")
    assert llm.attributes["episodic.summariser.kind"] == "extractive"

    # The recall: search_memory under Recall's SERVER span, naming the episode.
    recall_server = _one(spans, name="/episodic.v1.RecallService/Recall", kind="SERVER")
    # (the GetEpisode polls are search_memory spans too, each under its own call)
    search = _one(spans, name="search_memory", parent_span_id=recall_server.span_id)
    assert search.service == "episodic-recall"
    assert search.trace_id == recall_server.trace_id
    assert search.attributes["gen_ai.operation.name"] == "search_memory"
    assert search.attributes["gen_ai.memory.store.id"] == DATASET
    assert search.attributes["gen_ai.memory.record.id"] == episode_id
    assert search.attributes["episodic.memory.record_ids"] == [episode_id]
    assert search.attributes["gen_ai.memory.record.count"] == 1
    assert search.attributes["gen_ai.retrieval.top_k"] == 3
    # No content by default, anywhere in the journey.
    assert not any("gen_ai.memory.query.text" in s.attributes for s in spans)
    assert not any("blue car" in repr(s.attributes) for s in spans if s.name == "search_memory")

    # Every resource names its service, version and instance; one instance per process.
    with got.lock:
        resources = list(got.resources)
    assert resources
    for resource in resources:
        assert str(resource.get("service.name", "")).startswith("episodic-"), resource
        assert resource.get("service.version"), resource
        assert resource.get("service.instance.id"), resource
    instances = {r["service.name"]: set() for r in resources}
    for r in resources:
        instances[r["service.name"]].add(r["service.instance.id"])
    assert set(instances) == {
        "episodic-ingest",
        "episodic-scheduler",
        "episodic-summariser",
        "episodic-recall",
    }
    assert all(len(ids) == 1 for ids in instances.values()), instances
    assert len({next(iter(ids)) for ids in instances.values()}) == 4
