"""One trace across processes: Ingest → Scheduler (parent/child over gRPC), and the
Summariser's work linked to the trace of the trigger that created the episode."""

from __future__ import annotations

import json
from pathlib import Path

from episodic.testing.processes import wait_until
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from episodic.v1 import recall_service_pb2 as rpb
from episodic.v1 import recall_service_pb2_grpc as rg
from episodic.v1 import summariser_service_pb2 as spb
from episodic.v1 import summariser_service_pb2_grpc as sg


def _spans(path: Path) -> list[dict]:  # type: ignore[type-arg]
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _one(spans, **match):  # type: ignore[no-untyped-def]
    found = [s for s in spans if all(s.get(k) == v for k, v in match.items())]
    return found[0] if len(found) == 1 else None


def test_trace_crosses_ingest_scheduler_and_links_summariser(spawn, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    trace_file = tmp_path / "spans.jsonl"
    env = {"EPISODIC_TRACE_FILE": str(trace_file)}
    scheduler = spawn("scheduler", env=env)
    ingest = spawn("ingest", env={**env, "EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    summariser = spawn("summariser", env=env)
    recall = spawn("recall", env=env)

    stub = ig.IngestServiceStub(ingest.channel())
    thread = stub.CreateThread(ipb.CreateThreadRequest(dataset="traced"), timeout=10).thread
    stub.AddMessages(
        ipb.AddMessagesRequest(
            thread_id=thread.thread_id,
            messages=[ipb.NewMessage(role=e.ROLE_USER, content="I decided to buy the blue car.")],
        ),
        timeout=10,
    )
    ended = stub.EndThread(ipb.EndThreadRequest(thread_id=thread.thread_id), timeout=10)
    assert ended.episode_queued and ended.episode_id
    done = sg.SummariserServiceStub(summariser.channel()).ProcessPending(
        spb.ProcessPendingRequest(), timeout=60
    )
    assert done.completed == 1
    found = rg.RecallServiceStub(recall.channel()).Recall(
        rpb.RecallRequest(
            dataset="traced", query="blue car", include=[rpb.RECALL_INCLUDE_EPISODES]
        ),
        timeout=30,
    )
    assert found.episodes.episodes[0].episode.episode_id == ended.episode_id

    def complete_set():  # type: ignore[no-untyped-def]
        spans = _spans(trace_file)
        names = {s["name"] for s in spans}
        wanted = {
            "/episodic.v1.IngestService/AddMessages",
            "/episodic.v1.SchedulerService/RecordActivity",
            "/episodic.v1.IngestService/EndThread",
            "/episodic.v1.SchedulerService/RequestEpisode",
            "summarise episode",
            "/episodic.v1.RecallService/Recall",
        }
        return spans if wanted <= names else None

    spans = wait_until(complete_set, timeout=30, message="spans from all three services")

    # AddMessages (Ingest, SERVER) → RecordActivity (Ingest, CLIENT) → (Scheduler, SERVER).
    add = _one(spans, name="/episodic.v1.IngestService/AddMessages", kind="SERVER")
    notify_client = _one(spans, name="/episodic.v1.SchedulerService/RecordActivity", kind="CLIENT")
    notify_server = _one(spans, name="/episodic.v1.SchedulerService/RecordActivity", kind="SERVER")
    assert add and notify_client and notify_server
    assert add["service"] == "episodic-ingest" and notify_server["service"] == "episodic-scheduler"
    assert notify_client["trace_id"] == add["trace_id"] == notify_server["trace_id"]
    assert notify_client["parent_span_id"] == add["span_id"]
    assert notify_server["parent_span_id"] == notify_client["span_id"]

    # EndThread → RequestEpisode in one trace; the episode row carries that context …
    end = _one(spans, name="/episodic.v1.IngestService/EndThread", kind="SERVER")
    request_server = _one(spans, name="/episodic.v1.SchedulerService/RequestEpisode", kind="SERVER")
    assert end and request_server and request_server["trace_id"] == end["trace_id"]

    # … and the Summariser's span (its own trace) links back to it.
    summarise = _one(spans, name="summarise episode")
    assert summarise["service"] == "episodic-summariser"
    assert summarise["trace_id"] != end["trace_id"]
    assert {"trace_id": end["trace_id"], "span_id": request_server["span_id"]} in summarise["links"]
    assert summarise["attributes"]["episodic.episode_id"] == ended.episode_id
    # The summariser's database work is traced under its span.
    children = [s for s in spans if s["parent_span_id"] == summarise["span_id"]]
    assert children, "summarise episode has child spans (llm, embed, database)"

    # Recall's trace shows the database time: query spans under the server span.
    recall_span = _one(spans, name="/episodic.v1.RecallService/Recall", kind="SERVER")
    db_spans = [
        s
        for s in spans
        if s["trace_id"] == recall_span["trace_id"] and "db.statement" in s["attributes"]
    ]
    assert db_spans and all(s["service"] == "episodic-recall" for s in db_spans)
