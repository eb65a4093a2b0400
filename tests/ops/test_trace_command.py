"""``episodic trace <episode id>``: the journey of an episode, from the span file the four
services wrote while it was written, summarised and recalled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from episodic import convert
from episodic.cli import main
from episodic.ops import journey
from episodic.testing.processes import wait_until
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from episodic.v1 import recall_service_pb2 as rpb
from episodic.v1 import recall_service_pb2_grpc as rg
from episodic.v1 import scheduler_service_pb2 as schpb
from episodic.v1 import scheduler_service_pb2_grpc as schg
from episodic.v1 import summariser_service_pb2 as spb
from episodic.v1 import summariser_service_pb2_grpc as sg
from tests.scheduler.helpers import db_now


def test_trace_follows_an_episode_from_its_write_to_its_recall(
    spawn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    spans_file = tmp_path / "spans.jsonl"
    env = {"EPISODIC_TRACE_FILE": str(spans_file)}
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
    assert ended.episode_id
    sg.SummariserServiceStub(summariser.channel()).ProcessPending(
        spb.ProcessPendingRequest(), timeout=60
    )
    recall_stub = rg.RecallServiceStub(recall.channel())
    for _ in range(2):
        recall_stub.Recall(
            rpb.RecallRequest(
                dataset="traced", query="blue car", include=[rpb.RECALL_INCLUDE_EPISODES]
            ),
            timeout=30,
        )

    def recalled_twice() -> bool:
        found = journey.journey(journey.read_spans(spans_file), ended.episode_id)
        return len(found.recalls) == 2 and bool(found.attempts) and bool(found.armed_by)

    wait_until(recalled_twice, timeout=30, message="the journey's spans in the file")
    assert main(["trace", ended.episode_id, "--spans", str(spans_file)]) == 0
    out = capsys.readouterr().out
    armed, rest = out.split("fired:", 1)
    assert "/episodic.v1.IngestService/EndThread (episodic-ingest" in armed
    fired, rest = rest.split("summarise attempts:", 1)
    assert "/episodic.v1.SchedulerService/RequestEpisode (episodic-scheduler" in fired
    attempts, recalls = rest.split("recalls that returned it:", 1)
    assert "1. " in attempts and "-> completed" in attempts and "2. " not in attempts
    assert "create_memory in traced" in attempts
    assert recalls.count("search_memory (episodic-recall") == 2
    assert "rank 1 of 1" in recalls

    assert main(["trace", "00000000-0000-0000-0000-000000000000", "--spans", str(spans_file)]) == 1
    assert "no span names this episode" in capsys.readouterr().out


def test_trace_reads_otlp_json_too(tmp_path: Path) -> None:
    """A collector's file exporter writes OTLP/JSON export requests, one per line."""
    ids = {"traceId": "0af7651916cd43dd8448eb211c80319c"}
    request = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": "service.name", "value": {"stringValue": "episodic-recall"}}
                    ]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                **ids,
                                "spanId": "b7ad6b7169203331",
                                "name": "search_memory",
                                "kind": 1,
                                "startTimeUnixNano": "1700000000000000000",
                                "endTimeUnixNano": "1700000000001000000",
                                "attributes": [
                                    {
                                        "key": "gen_ai.operation.name",
                                        "value": {"stringValue": "search_memory"},
                                    },
                                    {
                                        "key": "episodic.memory.record_ids",
                                        "value": {
                                            "arrayValue": {
                                                "values": [
                                                    {"stringValue": "ep-2"},
                                                    {"stringValue": "ep-1"},
                                                ]
                                            }
                                        },
                                    },
                                    {
                                        "key": "gen_ai.memory.record.count",
                                        "value": {"intValue": "2"},
                                    },
                                ],
                            }
                        ]
                    }
                ],
            }
        ]
    }
    path = tmp_path / "otlp.jsonl"
    path.write_text(json.dumps(request) + "\n")
    found = journey.journey(journey.read_spans(path), "ep-1")
    (span,) = found.recalls
    assert span["service"] == "episodic-recall"
    assert "rank 2 of 2" in journey.render(found)


# Imports a core install (grpcio + protobuf) does not have: refused in the child below.
_BLOCKED = ("opentelemetry", "sqlalchemy", "psycopg", "pydantic", "pydantic_settings", "numpy")
_CORE_ONLY = f"""
import importlib.abc, sys

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {_BLOCKED!r}:
            raise ImportError(f"{{name}} is not installed (blocked: core install)")
        return None

sys.meta_path.insert(0, Refuse())
from episodic.cli import main
code = main(sys.argv[1:])
leaked = sorted(m for m in sys.modules if m.split(".")[0] in {_BLOCKED!r})
print("LEAKED", leaked)
sys.exit(code)
"""


def _core_trace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CORE_ONLY, "trace", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def _span(name: str, span_id: str, *, parent: str | None = None, **attributes: object) -> dict:  # type: ignore[type-arg]
    return {
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "span_id": span_id,
        "parent_span_id": parent,
        "name": name,
        "kind": "INTERNAL",
        "links": [],
        "attributes": attributes,
        "service": "episodic-recall",
        "status": "UNSET",
        "start_time_unix_nano": 1_700_000_000_000_000_000,
        "end_time_unix_nano": 1_700_000_000_002_000_000,
    }


def test_trace_reads_spans_on_a_core_install_without_opentelemetry(tmp_path: Path) -> None:
    """``episodic trace`` reads a span file and OTLP/JSON with only the core install: no
    OpenTelemetry SDK (nor API), no server dependency is imported, the journey is printed."""
    spans = tmp_path / "spans.jsonl"
    spans.write_text(
        json.dumps(
            _span(
                "search_memory",
                "b7ad6b7169203331",
                **{
                    "gen_ai.operation.name": "search_memory",
                    "episodic.memory.record_ids": ["ep-1"],
                    "gen_ai.memory.record.count": 1,
                },
            )
        )
        + "\n"
    )
    done = _core_trace("ep-1", "--spans", str(spans))
    assert done.returncode == 0, done.stderr
    assert "search_memory (episodic-recall" in done.stdout and "rank 1 of 1" in done.stdout
    assert "LEAKED []" in done.stdout, done.stdout

    # The OTLP/JSON of the test above, on the core install too.
    otlp = tmp_path / "otlp.jsonl"
    test_trace_reads_otlp_json_too(tmp_path)  # writes otlp.jsonl
    done = _core_trace("ep-1", "--spans", str(otlp))
    assert done.returncode == 0, done.stderr
    assert "rank 2 of 2" in done.stdout and "LEAKED []" in done.stdout, done.stdout


def test_a_recall_seen_by_the_sdk_and_the_service_counts_once() -> None:
    """The SDK's CLIENT search_memory and the Recall service's own, in one trace, are one
    recall; an SDK span whose service span is not in the file still counts."""
    names = {"gen_ai.operation.name": "search_memory", "episodic.memory.record_ids": ["ep-1"]}
    client = {**_span("search_memory", "00000000000000c1", **names), "kind": "CLIENT"}
    server = _span("search_memory", "00000000000000c2", parent="00000000000000c1", **names)
    alone = {
        **_span("search_memory", "00000000000000c3", **names),
        "kind": "CLIENT",
        "trace_id": "1af7651916cd43dd8448eb211c80319c",
    }
    found = journey.journey([client, server, alone], "ep-1")
    assert [s["span_id"] for s in found.recalls] == ["00000000000000c2", "00000000000000c3"]


def _traceparent() -> tuple[str, tuple[tuple[str, str], ...]]:
    """A fresh trace of the test's own: its id, and the metadata that makes a call its child."""
    trace_id, span_id = os.urandom(16).hex(), os.urandom(8).hex()
    return trace_id, (("traceparent", f"00-{trace_id}-{span_id}-01"),)


def test_an_idle_episode_names_the_write_that_armed_its_timer(
    spawn, engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    """Two writes, each (re)arming the thread's 30-minute idle timer; the thread then stays
    quiet. The clock is driven past the deadline by an admin sweep with a later horizon
    (RunSweep as_of = now + 31 min: the scheduler's own loop is off), which fires the timer.
    The journey names the last write — the one whose timer fired — as what armed it: not
    the first write (its arming was superseded), not the sweep (it only fired)."""
    spans_file = tmp_path / "spans.jsonl"
    env = {"EPISODIC_TRACE_FILE": str(spans_file)}
    scheduler = spawn("scheduler", env={**env, "EPISODIC_SCHEDULER_POLL_INTERVAL": "0"})
    ingest = spawn("ingest", env={**env, "EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    summariser = spawn("summariser", env=env)

    stub = ig.IngestServiceStub(ingest.channel())
    thread = stub.CreateThread(ipb.CreateThreadRequest(dataset="idle"), timeout=10).thread

    def armed_in(trace_id: str) -> bool:
        return any(
            s["name"] == "/episodic.v1.SchedulerService/RecordActivity"
            and s["trace_id"] == trace_id
            for s in journey.read_spans(spans_file)
        )

    writes = []
    for content in ("We should look at flights to Lisbon.", "Book the Tuesday one, window seat."):
        trace_id, metadata = _traceparent()
        stub.AddMessages(
            ipb.AddMessagesRequest(
                thread_id=thread.thread_id,
                messages=[ipb.NewMessage(role=e.ROLE_USER, content=content)],
            ),
            timeout=10,
            metadata=metadata,
        )
        # Each write's activity notice reaches the Scheduler before the next write.
        wait_until(lambda t=trace_id: armed_in(t), timeout=30, message="the timer (re)armed")
        writes.append(trace_id)

    later = db_now(engine) + timedelta(minutes=31)
    swept = schg.SchedulerServiceStub(scheduler.channel()).RunSweep(
        schpb.RunSweepRequest(as_of=convert.ts(later)), timeout=30
    )
    assert swept.episodes_created == 1
    sg.SummariserServiceStub(summariser.channel()).ProcessPending(
        spb.ProcessPendingRequest(), timeout=60
    )
    with engine.connect() as conn:
        episode_id, trigger = conn.execute(
            text("SELECT episode_id, trigger FROM episodes WHERE thread_id = :t"),
            {"t": thread.thread_id},
        ).one()
    assert trigger == "inactivity"

    def followed() -> journey.Journey | None:
        found = journey.journey(journey.read_spans(spans_file), str(episode_id))
        return found if found.attempts and found.armed_by else None

    found = wait_until(followed, timeout=30, message="the idle episode's journey")
    assert found is not None
    (armed,) = found.armed_by
    assert armed["name"] == "/episodic.v1.IngestService/AddMessages"
    assert armed["trace_id"] == writes[1]  # the last write, whose timer fired
    (fired,) = found.fired
    assert fired["name"] == "scheduler.fire_timers" and fired["service"] == "episodic-scheduler"
    assert found.triggers == ["inactivity"]

    assert main(["trace", str(episode_id), "--spans", str(spans_file)]) == 0
    out = capsys.readouterr().out
    armed_part, rest = out.split("fired:", 1)
    assert f"AddMessages (episodic-ingest, trace {writes[1][:8]})" in armed_part
    assert writes[0][:8] not in armed_part and "RunSweep" not in armed_part
    assert "trigger: inactivity" in rest.split("summarise attempts:", 1)[0]
