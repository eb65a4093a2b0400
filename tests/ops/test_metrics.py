"""Metrics: every service serves Prometheus text on its /metrics port, and the series move
with the work — RPC latency by method and code, messages ingested, timers fired and their
lag, the pipeline gauges, the Summariser's outcomes and durations, Recall's candidates.

The services run as real processes; /metrics is scraped over HTTP and polled against a
deadline (a scrape may come before a callback of another thread recorded its value).
Process-global setup is exercised in child processes, so this test process keeps the API's
no-op meter provider."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import urllib.request
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from episodic import metrics
from episodic.config import MetricsSettings
from episodic.store.status import PipelineStatus
from episodic.telemetry import build_meter_provider, selected_metric_exporters, serve_prometheus
from episodic.testing.processes import ServiceProcess, wait_until
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from episodic.v1 import recall_service_pb2 as rpb
from episodic.v1 import recall_service_pb2_grpc as rg
from episodic.v1 import scheduler_service_pb2 as schpb
from episodic.v1 import scheduler_service_pb2_grpc as schg
from episodic.v1 import summariser_service_pb2 as spb
from episodic.v1 import summariser_service_pb2_grpc as sg

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(service: ServiceProcess) -> Samples:
    """Every sample of the service's /metrics, keyed by name and labels."""
    with urllib.request.urlopen(service.metrics_url, timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain")
        body = answer.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (0 when none)."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def eventually(service: ServiceProcess, check: Callable[[Samples], bool], message: str) -> Samples:
    def attempt() -> Samples | None:
        samples = scrape(service)
        return samples if check(samples) else None

    found: Samples = wait_until(attempt, timeout=15, message=message)
    return found


def ts(when: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(when)
    return out


RPC = "rpc_server_call_duration_seconds_count"


def test_every_service_serves_metrics_that_move(spawn) -> None:  # type: ignore[no-untyped-def]
    env = {"EPISODIC_METRICS_PIPELINE_CACHE": "0"}  # the gauges follow every scrape
    scheduler = spawn("scheduler", env=env)
    wired = {**env, "EPISODIC_SCHEDULER_ADDRESS": scheduler.address}
    with ThreadPoolExecutor(3) as pool:  # the three start side by side
        ingest, summariser, recall = pool.map(
            lambda name: spawn(name, env=wired), ["ingest", "summariser", "recall"]
        )
    services = [ingest, scheduler, summariser, recall]
    ports = {s.metrics_port for s in services}
    assert None not in ports and len(ports) == 4, ports

    before = scrape(ingest)
    assert value(before, "episodic_messages_ingested_total") == 0
    # The pipeline gauges come from the Scheduler alone, computed at scrape time.
    gauges = scrape(scheduler)
    for status in ("pending", "processing", "completed", "failed", "archived"):
        assert any(
            n == "episodic_pipeline_episodes" and ("status", status) in labels
            for n, labels in gauges
        ), status
    assert value(gauges, "episodic_pipeline_episodes") == 0
    assert not value(scrape(ingest), "episodic_pipeline_episodes")

    # Ingest: messages stored, RPCs by method and code (an error call included).
    stub = ig.IngestServiceStub(ingest.channel())
    thread = stub.CreateThread(ipb.CreateThreadRequest(dataset="metrics"), timeout=10).thread
    stub.AddMessages(
        ipb.AddMessagesRequest(
            thread_id=thread.thread_id,
            messages=[
                ipb.NewMessage(
                    role=e.ROLE_USER, content="We picked the blue car.", idempotency_key="a"
                ),
                ipb.NewMessage(role=e.ROLE_ASSISTANT, content="Blue it is, then."),
            ],
        ),
        timeout=10,
    )
    stub.AddMessages(  # a client retry: answered from the first call, not stored again
        ipb.AddMessagesRequest(
            thread_id=thread.thread_id,
            messages=[
                ipb.NewMessage(
                    role=e.ROLE_USER, content="We picked the blue car.", idempotency_key="a"
                )
            ],
        ),
        timeout=10,
    )
    with pytest.raises(grpc.RpcError) as missing:
        stub.GetThread(ipb.GetThreadRequest(thread_id=str(uuid.uuid4())), timeout=10)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND

    add = "episodic.v1.IngestService/AddMessages"
    after = eventually(
        ingest,
        lambda s: (
            value(s, RPC, rpc_method=add) >= 2
            and value(s, RPC, rpc_response_status_code="NOT_FOUND") >= 1
        ),
        "AddMessages and the failed GetThread measured",
    )
    assert value(after, "episodic_messages_ingested_total", role="user") == 1
    assert value(after, "episodic_messages_ingested_total", role="assistant") == 1
    assert value(after, "episodic_messages_deduplicated_total") == 1
    assert (
        value(after, RPC, rpc_method=add, rpc_response_status_code="OK", rpc_system_name="grpc")
        == 2
    )
    assert value(after, RPC, rpc_method="episodic.v1.IngestService/GetThread") == 1
    assert value(after, "rpc_server_call_duration_seconds_sum", rpc_method=add) > 0
    assert value(after, "rpc_server_call_duration_seconds_bucket", rpc_method=add, le="+Inf") == 2
    # Health checks (the readiness polls of the test harness) are not measured.
    assert not any("Health" in dict(labels).get("rpc_method", "") for _, labels in after)

    # Scheduler: Ingest's notice armed a timer; a sweep an hour later fires it late.
    eventually(
        scheduler,
        lambda s: value(s, "episodic_pipeline_timers", state="waiting") == 1,
        "the timer armed by AddMessages is waiting",
    )
    sched = schg.SchedulerServiceStub(scheduler.channel())
    swept = sched.RunSweep(
        schpb.RunSweepRequest(as_of=ts(datetime.now(UTC) + timedelta(hours=1))), timeout=30
    )
    assert swept.episodes_created == 1
    fired = eventually(
        scheduler,
        lambda s: value(s, "episodic_scheduler_timers_fired_total") == 1,
        "the timer fired",
    )
    assert (
        value(
            fired, "episodic_scheduler_timers_fired_total", trigger="inactivity", outcome="episode"
        )
        == 1
    )
    assert value(fired, "episodic_scheduler_timer_lag_seconds_count", trigger="inactivity") == 1
    # Armed for 30 min of quiet, fired by a pass at +1 h: about 30 min late.
    lag = value(fired, "episodic_scheduler_timer_lag_seconds_sum")
    assert 25 * 60 < lag < 35 * 60, lag
    assert value(fired, "episodic_pipeline_episodes", status="pending") == 1
    assert value(fired, "episodic_pipeline_timers", state="waiting") == 0
    assert value(fired, RPC, rpc_method="episodic.v1.SchedulerService/RunSweep") == 1

    # Summariser: the episode completes; summarise and embed are timed.
    done = sg.SummariserServiceStub(summariser.channel()).ProcessPending(
        spb.ProcessPendingRequest(), timeout=60
    )
    assert done.completed == 1
    worked = eventually(
        summariser,
        lambda s: value(s, "episodic_summariser_episodes_total", outcome="completed") == 1,
        "the completed episode counted",
    )
    assert value(worked, "episodic_summariser_summarise_duration_seconds_count", outcome="ok") == 1
    assert value(worked, "episodic_summariser_embed_duration_seconds_count", target="summary") == 1
    assert value(worked, "episodic_summariser_embed_duration_seconds_count", target="chunks") == 1
    settled = eventually(
        scheduler,
        lambda s: value(s, "episodic_pipeline_episodes", status="completed") == 1,
        "the gauges see the completed episode",
    )
    assert value(settled, "episodic_pipeline_episodes", status="pending") == 0
    assert value(settled, "episodic_pipeline_oldest_age_seconds", status="pending") == 0

    # Recall: one ranking over the dataset's one episode.
    rg.RecallServiceStub(recall.channel()).Recall(
        rpb.RecallRequest(
            dataset="metrics", query="blue car", include=[rpb.RECALL_INCLUDE_EPISODES]
        ),
        timeout=30,
    )
    ranked = eventually(
        recall,
        lambda s: value(s, "episodic_recall_candidates_count") >= 1,
        "the recall ranking measured",
    )
    assert value(ranked, "episodic_recall_candidates_sum") >= 1
    assert value(ranked, "episodic_recall_results_sum") >= 1

    for service in services:
        samples = scrape(service)
        # Every sample is one the metrics module declares (the dashboards and alerts are
        # checked against the same names), and no label carries a dataset or an id.
        assert {name for name, _ in samples} <= metrics.prometheus_names(), service.name
        labels = {v for _, ls in samples for _, v in ls}
        assert "metrics" not in labels and thread.thread_id not in labels, service.name
        assert value(samples, "target_info", service_name=f"episodic-{service.name}") == 1
        assert value(samples, "process_resident_memory_bytes") > 0
        assert value(samples, RPC) >= 1, service.name


# --------------------------------------------------------------------------- settings


def test_metrics_port_defaults_per_service_and_follows_any_port() -> None:
    settings = MetricsSettings()
    assert settings.port_for("ingest", 50051) == 9464
    assert settings.port_for("recall", 50054) == 9467
    assert settings.port_for("scheduler", 0) == 0  # replicas on any port never collide
    assert MetricsSettings(metrics_port=9100).port_for("summariser", 0) == 9100


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", ""])
def test_the_metrics_server_serves_its_registry_on_any_path_and_stops(host: str) -> None:
    if host == "::1" and not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    registry = CollectorRegistry()
    Counter("probe_calls", "calls seen by the probe", registry=registry).inc(3)
    server = serve_prometheus(registry, host, 0)
    url_host = "[::1]" if host == "::1" else "127.0.0.1"
    try:
        for path in ("/metrics", "/"):
            with urllib.request.urlopen(f"http://{url_host}:{server.server_port}{path}") as r:
                body = r.read().decode()
            samples = {
                s.name: s.value for f in text_string_to_metric_families(body) for s in f.samples
            }
            assert samples["probe_calls_total"] == 3.0
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(OSError):  # the port is closed once it stopped
        urllib.request.urlopen(f"http://{url_host}:{server.server_port}/metrics", timeout=5)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://collector:4317"}, ["otlp"]),
        ({"OTEL_METRICS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, []),
        ({"OTEL_METRICS_EXPORTER": "prometheus"}, []),  # the endpoint has its own setting
        ({"OTEL_METRICS_EXPORTER": "otlp, console,otlp"}, ["otlp", "console"]),
        ({"OTEL_METRICS_EXPORTER": "statsd"}, []),
    ],
)
def test_selected_metric_exporters(env: dict[str, str], expected: list[str]) -> None:
    assert selected_metric_exporters(env) == expected


def test_meter_provider_has_a_reader_per_exporter() -> None:
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from prometheus_client import CollectorRegistry

    assert build_meter_provider("episodic-test", environ={}) is None
    registry = CollectorRegistry()
    provider = build_meter_provider(
        "episodic-test",
        prometheus_registry=registry,
        environ={"OTEL_METRICS_EXPORTER": "console"},
    )
    assert provider is not None
    try:
        readers = provider._metric_readers
        assert len(readers) == 2
        assert any(isinstance(r, PeriodicExportingMetricReader) for r in readers)
    finally:
        provider.shutdown()


def test_a_service_without_metrics_prints_no_port() -> None:
    """EPISODIC_METRICS_ENABLED=false: no endpoint, no line (and nothing bound)."""
    script = textwrap.dedent(
        """
        from episodic.config import get_settings
        from episodic.serving.server import start_metrics
        print("port", start_metrics("ingest", get_settings()))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env={"EPISODIC_METRICS_ENABLED": "false", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["port None"]


def test_a_taken_metrics_port_is_named_with_the_settings_that_get_past_it() -> None:
    """The default metrics ports are fixed, so a second suite on a host meets them taken:
    the error names the port and EPISODIC_METRICS_PORT=0 (it said only "Address already
    in use", and `episodic up` exited without saying which port or what to change)."""
    script = textwrap.dedent(
        """
        from episodic.config import get_settings
        from episodic.serving.server import start_metrics
        try:
            start_metrics("ingest", get_settings())
        except OSError as err:
            print(err.strerror)
        """
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-c", script],
            env={
                "EPISODIC_METRICS_PORT": str(port),
                "EPISODIC_BIND_HOST": "127.0.0.1",
                "PATH": "/usr/bin:/bin",
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 0, proc.stderr
    message = proc.stdout.strip()
    assert f"cannot serve metrics on 127.0.0.1:{port}" in message
    assert "EPISODIC_METRICS_PORT=0" in message


# --------------------------------------------------------------------------- gauges


def test_pipeline_gauges_read_once_per_interval_and_survive_a_failed_read() -> None:
    clock = [100.0]
    answers: list[PipelineStatus | Exception] = [
        PipelineStatus(
            observed_at=datetime.now(UTC),
            status_counts={"pending": 3},
            oldest_pending_age=timedelta(minutes=2),
            timers_due=1,
        ),
        RuntimeError("database gone"),
        PipelineStatus(observed_at=datetime.now(UTC)),
    ]

    def read() -> PipelineStatus:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    gauges = metrics.PipelineGauges(
        read, ttl=5, statuses=("pending", "failed"), semantic_statuses=(), clock=lambda: clock[0]
    )
    options = None

    def observed(callback) -> dict[tuple[tuple[str, object], ...], float]:  # type: ignore[no-untyped-def]
        return {tuple(sorted((o.attributes or {}).items())): o.value for o in callback(options)}

    assert observed(gauges._episodes) == {(("status", "pending"),): 3, (("status", "failed"),): 0}
    assert observed(gauges._oldest)[(("status", "pending"),)] == 120
    assert observed(gauges._timers)[(("state", "due"),)] == 1
    assert gauges.reads == 1  # one query for every gauge of the scrape
    clock[0] += 4.9
    assert observed(gauges._episodes)[(("status", "pending"),)] == 3
    assert gauges.reads == 1
    clock[0] += 0.2  # past the interval: read again — it fails, the gauges go absent
    assert observed(gauges._episodes) == {}
    assert observed(gauges._oldest_due_timer) == {}
    assert gauges.reads == 2  # the failure is cached too: an outage is not hammered
    clock[0] += 5
    assert observed(gauges._episodes)[(("status", "pending"),)] == 0
    assert observed(gauges._oldest_due_timer) == {(): 0.0}


def test_the_metrics_reference_lists_every_metric() -> None:
    """docs/reference/metrics.md is generated from SPECS (tests/test_docs.py checks it is
    current); every metric is on it by its Prometheus name."""
    page = (Path(__file__).resolve().parents[2] / "docs/reference/metrics.md").read_text()
    for spec in metrics.SPECS:
        assert f"`{spec.prometheus_name}`" in page, spec.prometheus_name
