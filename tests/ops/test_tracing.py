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


def test_the_routed_statement_sent_without_sqlalchemy_is_traced_like_the_others(
    spawn, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """A thread's second AddMessages (no idempotency keys) is its remembered route: one
    statement on the pool's psycopg connection, not through SQLAlchemy
    (episodic.store.raw_statement). Its span must look like the instrumentation's spans of
    the first call's statements: same scope, kind, connection attributes, a child of the
    call's SERVER span."""
    trace_file = tmp_path / "spans.jsonl"
    ingest = spawn("ingest", env={"EPISODIC_TRACE_FILE": str(trace_file)})
    stub = ig.IngestServiceStub(ingest.channel())
    thread = stub.CreateThread(ipb.CreateThreadRequest(dataset="traced"), timeout=10).thread
    for content in ("first: looked up, in a transaction", "second: the remembered route"):
        stub.AddMessages(
            ipb.AddMessagesRequest(
                thread_id=thread.thread_id,
                messages=[ipb.NewMessage(role=e.ROLE_USER, content=content)],
            ),
            timeout=10,
        )

    def two_calls():  # type: ignore[no-untyped-def]
        spans = _spans(trace_file)
        calls = [s for s in spans if s["name"] == "/episodic.v1.IngestService/AddMessages"]
        return spans if len(calls) == 2 else None

    spans = wait_until(two_calls, timeout=30, message="the spans of both AddMessages")
    first, second = sorted(
        (s for s in spans if s["name"] == "/episodic.v1.IngestService/AddMessages"),
        key=lambda s: s["start_time_unix_nano"],
    )
    # Database spans only: a call's children also include the Scheduler notice's.
    statements = [s for s in spans if "db.statement" in s["attributes"]]
    looked_up = [s for s in statements if s["parent_span_id"] == first["span_id"]]
    routed = [s for s in statements if s["parent_span_id"] == second["span_id"]]
    assert len(looked_up) >= 2, looked_up  # the lookup and the append, at least
    # The routed call: exactly one statement, the route-checked append.
    assert len(routed) == 1, routed
    (span,) = routed
    assert "%(key_id)s" in span["attributes"]["db.statement"]
    assert span["attributes"]["db.statement"].startswith("WITH bumped AS (UPDATE threads")
    reference = next(s for s in looked_up if s["attributes"]["db.statement"].startswith("WITH"))
    assert span["scope"] == reference["scope"] == "opentelemetry.instrumentation.sqlalchemy"
    assert span["kind"] == reference["kind"] == "CLIENT"
    assert span["name"] == reference["name"]  # "WITH <database>"
    assert span["attributes"].keys() == reference["attributes"].keys()
    for key, value in reference["attributes"].items():
        if key != "db.statement":
            assert span["attributes"][key] == value, key
    assert span["trace_id"] == second["trace_id"]
