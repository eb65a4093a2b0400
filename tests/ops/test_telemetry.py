"""episodic.telemetry: exporter selection, the JSON-lines span file, trace-context links,
the gRPC interceptors and SQLAlchemy instrumentation.

Process-global setup (``setup_telemetry``, the SQLAlchemy instrumentor) is exercised in child
processes so this test process keeps the API's default no-op provider."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from sqlalchemy import create_engine

from episodic import telemetry
from episodic.errors import NotFound
from episodic.serving.server import build_server

REPO_ROOT = Path(__file__).resolve().parents[2]


def read_spans(path: Path) -> list[dict]:  # type: ignore[type-arg]
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def run_python(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EPISODIC_"))}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=REPO_ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


# --------------------------------------------------------------------------- selection


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, []),
        ({"OTEL_TRACES_EXPORTER": "none"}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, ["otlp"]),
        (
            {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"},
            [],
        ),
        ({"OTEL_TRACES_EXPORTER": "console"}, ["console"]),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "otlp, console,otlp"}, ["otlp", "console"]),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, []),
        ({"OTEL_TRACES_EXPORTER": "none", "EPISODIC_TRACE_FILE": "/tmp/x"}, ["file"]),
        ({"EPISODIC_TRACE_FILE": "/tmp/x", "OTEL_TRACES_EXPORTER": "console"}, ["console", "file"]),
    ],
)
def test_selected_exporters(env: dict[str, str], expected: list[str]) -> None:
    assert telemetry.selected_exporters(env) == expected


def test_no_exporter_builds_no_provider() -> None:
    assert telemetry.build_tracer_provider("svc", {}) is None
    assert telemetry.build_tracer_provider("svc", {"OTEL_TRACES_EXPORTER": "none"}) is None


def test_otlp_provider_builds_without_a_collector() -> None:
    # The exporter connects lazily: building (and shutting down) needs no collector.
    provider = telemetry.build_tracer_provider(
        "svc", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}
    )
    assert provider is not None
    assert provider.resource.attributes["service.name"] == "svc"
    provider.shutdown()


# --------------------------------------------------------------------------- span file


@pytest.fixture
def file_provider(tmp_path: Path) -> Iterator[tuple[TracerProvider, Path]]:
    path = tmp_path / "spans.jsonl"
    provider = telemetry.build_tracer_provider(
        "episodic-test", {"OTEL_TRACES_EXPORTER": "none", "EPISODIC_TRACE_FILE": str(path)}
    )
    assert provider is not None
    yield provider, path
    provider.shutdown()


def test_file_exporter_writes_one_json_line_per_span(
    file_provider: tuple[TracerProvider, Path],
) -> None:
    provider, path = file_provider
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("trigger") as trigger:
        carrier = telemetry.current_trace_context()
    with (
        tracer.start_as_current_span(
            "work", kind=trace.SpanKind.SERVER, links=telemetry.link_from(carrier)
        ) as work,
        tracer.start_as_current_span("step", attributes={"n": 3, "tags": ("a", "b")}),
    ):
        pass
    # Written at span end, not at shutdown.
    spans = {s["name"]: s for s in read_spans(path)}
    assert set(spans) == {"trigger", "work", "step"}

    t_ctx, w_ctx = trigger.get_span_context(), work.get_span_context()
    assert spans["trigger"]["parent_span_id"] is None
    assert spans["trigger"]["trace_id"] == f"{t_ctx.trace_id:032x}"
    assert spans["work"]["kind"] == "SERVER"
    assert spans["work"]["links"] == [
        {"trace_id": f"{t_ctx.trace_id:032x}", "span_id": f"{t_ctx.span_id:016x}"}
    ]
    assert spans["step"]["parent_span_id"] == f"{w_ctx.span_id:016x}"
    assert spans["step"]["trace_id"] == spans["work"]["trace_id"]
    assert spans["step"]["attributes"] == {"n": 3, "tags": ["a", "b"]}
    assert spans["step"]["kind"] == "INTERNAL"
    assert {s["service"] for s in spans.values()} == {"episodic-test"}
    for span in spans.values():
        assert len(span["span_id"]) == 16
        assert span["end_time_unix_nano"] >= span["start_time_unix_nano"]


def test_file_exporter_is_safe_across_threads(file_provider: tuple[TracerProvider, Path]) -> None:
    provider, path = file_provider
    tracer = provider.get_tracer("test")

    def burst(i: int) -> None:
        for j in range(50):
            with tracer.start_as_current_span(f"s{i}-{j}", attributes={"pad": "x" * 500}):
                pass

    threads = [threading.Thread(target=burst, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    names = [s["name"] for s in read_spans(path)]  # every line parses
    assert sorted(names) == sorted(f"s{i}-{j}" for i in range(8) for j in range(50))


def test_database_spans_without_parent_are_dropped(
    file_provider: tuple[TracerProvider, Path],
) -> None:
    provider, path = file_provider
    db_tracer = provider.get_tracer("opentelemetry.instrumentation.sqlalchemy")
    with db_tracer.start_as_current_span("SELECT poll"):
        pass
    with (
        provider.get_tracer("test").start_as_current_span("rpc"),
        db_tracer.start_as_current_span("SELECT in rpc"),
    ):
        pass
    assert sorted(s["name"] for s in read_spans(path)) == ["SELECT in rpc", "rpc"]


# --------------------------------------------------------------------------- links


def test_link_from_round_trips_a_stored_context() -> None:
    provider = TracerProvider()
    tracer = provider.get_tracer("test")
    assert telemetry.current_trace_context() == {}  # no active span
    with tracer.start_as_current_span("trigger") as span:
        carrier = telemetry.current_trace_context()
        stored = json.loads(json.dumps(carrier))  # as it comes back from a JSON column
    assert set(stored) >= {"traceparent"}
    links = telemetry.link_from(stored)
    assert len(links) == 1
    assert links[0].context.trace_id == span.get_span_context().trace_id
    assert links[0].context.span_id == span.get_span_context().span_id
    assert links[0].context.is_remote


def test_with_tracing_off_the_server_carries_an_incoming_trace_through_without_spans() -> None:
    if telemetry.telemetry_enabled():
        pytest.skip("another test installed a global tracer provider in this process")
    seen: list[dict[str, str]] = []

    def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        seen.append(telemetry.current_trace_context())
        return request

    def register(server: grpc.Server) -> None:
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "test.v1.EchoService", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
                ),
            )
        )

    runtime = build_server(
        name="test.v1.EchoService",
        register=register,
        service_names=["test.v1.EchoService"],
        host="127.0.0.1",
        port=0,
        workers=2,
        engine=None,
        shutdown_grace=1.0,
    )
    runtime.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{runtime.port}") as channel:
            echo_call = channel.unary_unary("/test.v1.EchoService/Echo")
            parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
            assert echo_call(b"hi", metadata=(("traceparent", parent),), timeout=5) == b"hi"
            assert echo_call(b"hi", timeout=5) == b"hi"
    finally:
        runtime.shutdown()

    # The handler ran in the caller's trace (its calls carry it on), and no span of its
    # own was made (the parent is the caller's span, not a new one).
    assert seen[0]["traceparent"] == parent
    assert seen[1] == {}  # no trace context came, none is made up


@pytest.mark.parametrize("carrier", [None, {}, {"traceparent": "garbage"}, {"other": "x"}])
def test_link_from_ignores_missing_or_malformed_context(carrier: dict[str, str] | None) -> None:
    provider = TracerProvider()
    # Even inside an active span, a bad carrier must not link to that span.
    with provider.get_tracer("test").start_as_current_span("active"):
        assert telemetry.link_from(carrier) == []


# --------------------------------------------------------------------------- gRPC


def test_grpc_interceptors_join_spans_record_errors_and_skip_health() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    seen_in_handler: dict[str, str] = {}

    def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        seen_in_handler.update(telemetry.current_trace_context())
        return request

    def missing(request: bytes, context: grpc.ServicerContext) -> bytes:
        raise NotFound("no such thing")

    def boom(request: bytes, context: grpc.ServicerContext) -> bytes:
        raise RuntimeError("bug")

    def register(server: grpc.Server) -> None:
        handler = grpc.method_handlers_generic_handler(
            "test.v1.EchoService",
            {
                "Echo": grpc.unary_unary_rpc_method_handler(echo),
                "Missing": grpc.unary_unary_rpc_method_handler(missing),
                "Boom": grpc.unary_unary_rpc_method_handler(boom),
            },
        )
        server.add_generic_rpc_handlers((handler,))

    runtime = build_server(
        name="test.v1.EchoService",
        register=register,
        service_names=["test.v1.EchoService"],
        host="127.0.0.1",
        port=0,
        workers=2,
        engine=None,
        shutdown_grace=1.0,
        interceptors=[telemetry.grpc_server_interceptor(tracer_provider=provider)],
    )
    runtime.start()
    runtime.set_serving(True)
    try:
        raw = grpc.insecure_channel(f"127.0.0.1:{runtime.port}")
        channel = telemetry.instrument_grpc_client(raw, tracer_provider=provider)
        health = health_pb2_grpc.HealthStub(channel)
        resp = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        assert resp.status == health_pb2.HealthCheckResponse.SERVING
        assert exporter.get_finished_spans() == ()  # health checks are not traced

        assert channel.unary_unary("/test.v1.EchoService/Echo")(b"hi", timeout=5) == b"hi"
        spans = exporter.get_finished_spans()
        exporter.clear()

        # Domain errors reach the client through the error interceptor's abort_with_status;
        # the server span records the code, and only server-side errors mark it ERROR.
        for method, code in (
            ("Missing", grpc.StatusCode.NOT_FOUND),
            ("Boom", grpc.StatusCode.INTERNAL),
        ):
            with pytest.raises(grpc.RpcError) as err:
                channel.unary_unary(f"/test.v1.EchoService/{method}")(b"", timeout=5)
            assert err.value.code() == code
        raw.close()
    finally:
        runtime.shutdown()

    failed = {s.name: s for s in exporter.get_finished_spans() if s.kind == trace.SpanKind.SERVER}
    missing_span = failed["/test.v1.EchoService/Missing"]
    assert missing_span.attributes["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]
    assert missing_span.status.status_code == StatusCode.UNSET
    boom_span = failed["/test.v1.EchoService/Boom"]
    assert boom_span.attributes["rpc.grpc.status_code"] == grpc.StatusCode.INTERNAL.value[0]
    assert boom_span.status.status_code == StatusCode.ERROR

    by_kind = {s.kind: s for s in spans}
    assert set(by_kind) == {trace.SpanKind.CLIENT, trace.SpanKind.SERVER}, spans
    client, server = by_kind[trace.SpanKind.CLIENT], by_kind[trace.SpanKind.SERVER]
    assert server.name == client.name == "/test.v1.EchoService/Echo"
    assert server.context.trace_id == client.context.trace_id
    assert server.parent is not None and server.parent.span_id == client.context.span_id
    # Inside the handler the active span is the server span.
    sid = f"{server.context.span_id:016x}"
    assert seen_in_handler["traceparent"].split("-")[2] == sid


# --------------------------------------------------------------------------- process setup


def test_setup_telemetry_is_idempotent_and_writes_the_span_file(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    run_python(
        """
        from opentelemetry import trace
        from episodic import telemetry
        telemetry.setup_telemetry("episodic-first")
        provider = trace.get_tracer_provider()
        telemetry.setup_telemetry("episodic-second")
        assert trace.get_tracer_provider() is provider
        assert telemetry.telemetry_enabled()
        with trace.get_tracer("t").start_as_current_span("hello"):
            pass
        telemetry.shutdown_telemetry()
        telemetry.shutdown_telemetry()
        """,
        {"OTEL_TRACES_EXPORTER": "none", "EPISODIC_TRACE_FILE": str(path)},
    )
    spans = read_spans(path)
    assert [(s["name"], s["service"]) for s in spans] == [("hello", "episodic-first")]


def test_setup_telemetry_without_exporter_installs_nothing() -> None:
    proc = run_python(
        """
        from opentelemetry import trace
        from episodic import telemetry
        telemetry.setup_telemetry("episodic-test")
        assert not telemetry.telemetry_enabled()
        span = trace.get_tracer("t").start_span("x")
        assert not span.is_recording()
        print(type(trace.get_tracer_provider()).__name__)
        telemetry.shutdown_telemetry()
        """,
        {"OTEL_TRACES_EXPORTER": "none"},
    )
    assert proc.stdout.strip() == "ProxyTracerProvider"


def test_instrument_engine_is_a_no_op_while_tracing_is_off() -> None:
    if telemetry.telemetry_enabled():
        pytest.skip("another test installed a global tracer provider in this process")
    from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor

    engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    assert telemetry.instrument_engine(engine) is engine
    assert not SQLAlchemyInstrumentor().is_instrumented_by_opentelemetry
    engine.dispose()


def test_instrument_engine_traces_queries_once_under_their_parent(
    db_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "spans.jsonl"
    run_python(
        """
        import os
        from opentelemetry import trace
        from sqlalchemy import create_engine, text
        from episodic import telemetry
        from episodic.config import to_sqlalchemy_url

        telemetry.setup_telemetry("episodic-test")
        url = to_sqlalchemy_url(os.environ["TEST_DB_URL"])
        first, second = create_engine(url), create_engine(url)
        telemetry.instrument_engine(first)
        telemetry.instrument_engine(first)   # again: no duplicate spans
        telemetry.instrument_engine(second)  # a second engine keeps the first traced
        tracer = trace.get_tracer("t")
        for engine in (first, second):
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))  # no parent: not exported
            with tracer.start_as_current_span("rpc"), engine.connect() as conn:
                conn.execute(text("SELECT 2"))
        telemetry.shutdown_telemetry()
        """,
        {"OTEL_TRACES_EXPORTER": "none", "EPISODIC_TRACE_FILE": str(path), "TEST_DB_URL": db_url},
    )
    spans = read_spans(path)
    rpcs = {s["span_id"] for s in spans if s["name"] == "rpc"}
    assert len(rpcs) == 2
    db = [s for s in spans if s["scope"].startswith("opentelemetry.instrumentation.sqlalchemy")]
    assert all(s["parent_span_id"] in rpcs for s in db), db
    selects = [s for s in db if s["name"].startswith("SELECT")]
    assert len(selects) == 2, selects  # one per query: no double instrumentation
    assert {s["parent_span_id"] for s in selects} == rpcs
    assert all(s["kind"] == "CLIENT" for s in selects)
