"""OpenTelemetry tracing for the services, configured from the standard environment.

Exporters (``OTEL_TRACES_EXPORTER``, comma-separated):

- unset: ``otlp`` when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
  is set, otherwise none;
- ``otlp`` (batched; OTLP over gRPC, or http/protobuf when ``OTEL_EXPORTER_OTLP_PROTOCOL``
  asks for it and that exporter is installed), ``console`` (stdout), ``none``.

Independently, ``EPISODIC_TRACE_FILE=/path`` appends every finished span as one JSON line to
that file (flushed per span, safe for several threads and processes). Tests use it to read
the spans of service processes.

With no exporter at all nothing is installed: the API's no-op provider stays, so tracing
costs next to nothing, while the gRPC interceptors still carry an incoming ``traceparent``
through.

Database spans without a parent (poll loops, migrations) are not exported: a scheduler
polling every second would otherwise produce a trace per second per replica. Queries inside
an RPC or inside a span a worker opens are exported as usual.

Metrics (the instruments are in :mod:`episodic.metrics`): :func:`setup_metrics` serves them
in Prometheus format on a plain-HTTP port, and pushes them over OTLP when
``OTEL_METRICS_EXPORTER`` says ``otlp`` (or, unset, when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` is set; every ``OTEL_METRIC_EXPORT_INTERVAL``).
``console`` prints them; ``prometheus`` in that list is accepted and changes nothing (the
endpoint follows ``EPISODIC_METRICS_ENABLED``).
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import re
import threading
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import metrics as otel_metrics
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import (
    SERVICE_INSTANCE_ID,
    SERVICE_NAME,
    SERVICE_VERSION,
    OTELResourceDetector,
    Resource,
)
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import Link
from sqlalchemy import Engine

from episodic.semconv import TRACE_FILE_ENV as TRACE_FILE_ENV

log = logging.getLogger(__name__)

_SQLALCHEMY_SCOPE = "opentelemetry.instrumentation.sqlalchemy"

_lock = threading.Lock()
_provider: TracerProvider | None = None
_configured = False
_engines: weakref.WeakSet[Engine] = weakref.WeakSet()


# --------------------------------------------------------------------------- exporters


class JsonLinesSpanExporter(SpanExporter):
    """Appends one JSON object per span to a file.

    Each line holds ``trace_id``, ``span_id``, ``parent_span_id`` (hex, or null), ``name``,
    ``kind`` (``SERVER``, ``CLIENT``, …), ``links`` (``[{trace_id, span_id}]``),
    ``attributes``, ``service`` (the resource's service.name), ``status``, ``scope`` and the
    start/end times in Unix nanoseconds. Every line is one ``write(2)`` on an ``O_APPEND``
    descriptor, so lines of several processes sharing the file do not interleave.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)
        self._lock = threading.Lock()
        self._fd: int | None = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        data = b"".join(
            (json.dumps(span_to_dict(span), default=str, separators=(",", ":")) + "\n").encode()
            for span in spans
        )
        with self._lock:
            if self._fd is None:
                return SpanExportResult.FAILURE
            try:
                os.write(self._fd, data)
            except OSError:
                log.exception("cannot write spans to %s", self._path)
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # every export is written at once


def span_to_dict(span: ReadableSpan) -> dict[str, Any]:
    """The JSON shape written by :class:`JsonLinesSpanExporter`."""
    ctx = span.get_span_context()
    assert ctx is not None
    parent = span.parent
    return {
        "trace_id": trace.format_trace_id(ctx.trace_id),
        "span_id": trace.format_span_id(ctx.span_id),
        "parent_span_id": trace.format_span_id(parent.span_id) if parent else None,
        "name": span.name,
        "kind": span.kind.name,
        "links": [
            {
                "trace_id": trace.format_trace_id(link.context.trace_id),
                "span_id": trace.format_span_id(link.context.span_id),
            }
            for link in span.links
        ],
        "attributes": {k: _jsonable(v) for k, v in (span.attributes or {}).items()},
        "service": span.resource.attributes.get(SERVICE_NAME),
        "status": span.status.status_code.name,
        "scope": span.instrumentation_scope.name if span.instrumentation_scope else None,
        "start_time_unix_nano": span.start_time,
        "end_time_unix_nano": span.end_time,
    }


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


class _DropRootDatabaseSpans(SpanProcessor):
    """Forwards every span to ``inner`` except database spans that have no parent."""

    def __init__(self, inner: SpanProcessor) -> None:
        self._inner = inner

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self._inner.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        scope = span.instrumentation_scope
        if span.parent is None and scope is not None and scope.name.startswith(_SQLALCHEMY_SCOPE):
            return
        self._inner.on_end(span)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


# --------------------------------------------------------------------------- setup


def selected_exporters(environ: Mapping[str, str] | None = None) -> list[str]:
    """Which exporters the environment asks for: a subset of otlp, console, file."""
    env = os.environ if environ is None else environ
    raw = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if raw:
        names = [n.strip() for n in raw.split(",") if n.strip()]
    elif env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        names = ["otlp"]
    else:
        names = []
    chosen: list[str] = []
    for name in names:
        if name == "none":
            continue
        if name not in ("otlp", "console"):
            log.warning("OTEL_TRACES_EXPORTER: unsupported exporter %r ignored", name)
            continue
        if name not in chosen:
            chosen.append(name)
    if env.get(TRACE_FILE_ENV):
        chosen.append("file")
    return chosen


def _otlp_exporter(env: Mapping[str, str]) -> SpanExporter:
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", ""
    )
    protocol = protocol.lower()
    if protocol.startswith("http"):
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter as HttpExporter,
            )

            return HttpExporter()  # type: ignore[no-any-return]
        except ImportError:
            log.warning(
                "OTLP protocol %r needs opentelemetry-exporter-otlp-proto-http; using gRPC",
                protocol,
            )
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _service_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("episodic")
    except Exception:
        return None


#: This process's ``service.instance.id`` (a random UUID, as the resource conventions
#: recommend), unless ``OTEL_RESOURCE_ATTRIBUTES`` names one (a pod's name, say).
_INSTANCE_ID = str(uuid.uuid4())


def service_resource(service_name: str) -> Resource:
    """The OpenTelemetry resource of a service process (traces and metrics): its name,
    version and instance."""
    attributes: dict[str, Any] = {SERVICE_NAME: service_name}
    version = _service_version()
    if version:
        attributes[SERVICE_VERSION] = version
    if SERVICE_INSTANCE_ID not in OTELResourceDetector().detect().attributes:
        attributes[SERVICE_INSTANCE_ID] = _INSTANCE_ID
    # Resource.create also merges OTEL_RESOURCE_ATTRIBUTES (pod name, namespace, …).
    return Resource.create(attributes)


def build_tracer_provider(
    service_name: str, environ: Mapping[str, str] | None = None
) -> TracerProvider | None:
    """A provider with the exporters ``environ`` (default: the process environment) selects,
    or None when it selects none. Does not install it globally."""
    env = os.environ if environ is None else environ
    exporters = selected_exporters(env)
    if not exporters:
        return None
    provider = TracerProvider(resource=service_resource(service_name), shutdown_on_exit=True)
    for name in exporters:
        processor: SpanProcessor
        if name == "otlp":
            processor = BatchSpanProcessor(_otlp_exporter(env))
        elif name == "console":
            processor = SimpleSpanProcessor(ConsoleSpanExporter(service_name=service_name))
        else:
            processor = SimpleSpanProcessor(JsonLinesSpanExporter(env[TRACE_FILE_ENV]))
        provider.add_span_processor(_DropRootDatabaseSpans(processor))
    return provider


def setup_telemetry(service_name: str) -> None:
    """Configures tracing for this process from the environment. Only the first call does
    anything; later calls (another service name included) are ignored."""
    global _provider, _configured
    with _lock:
        if _configured:
            return
        _configured = True
        provider = build_tracer_provider(service_name)
        if provider is None:
            log.debug("tracing off: no exporter configured")
            return
        trace.set_tracer_provider(provider)
        _provider = provider
        log.info("tracing on for %s: %s", service_name, ", ".join(selected_exporters()))


def shutdown_telemetry() -> None:
    """Flushes and stops the exporters. Call it on the shutdown path, after the server
    stopped; safe to call more than once or without setup."""
    global _provider
    with _lock:
        provider, _provider = _provider, None
    try:
        if provider is not None:
            try:
                provider.force_flush()
            finally:
                provider.shutdown()
    finally:
        shutdown_metrics()


def telemetry_enabled() -> bool:
    """Whether spans are recorded by an SDK provider in this process."""
    return isinstance(trace.get_tracer_provider(), TracerProvider)


# --------------------------------------------------------------------------- gRPC


def _untraced_methods():  # type: ignore[no-untyped-def]
    from opentelemetry.instrumentation.grpc import filters

    # Probes call Health every few seconds; reflection is tooling. Neither is worth a trace.
    return filters.any_of(filters.health_check(), filters.service_prefix("grpc.reflection."))


# Server-side errors per the OpenTelemetry gRPC conventions; client errors (NOT_FOUND,
# INVALID_ARGUMENT, …) keep the span status UNSET and show only in rpc.grpc.status_code.
_SERVER_ERRORS = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)


def record_grpc_status(code: int | grpc.StatusCode, details: str = "") -> None:
    """Records on the current (server) span the status a call answers with: how the call
    interceptor reports its aborts, which the instrumentation's context wrapper does not
    see (``abort_with_status`` goes straight to gRPC). Only server-side errors mark the
    span ERROR."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    status = code if isinstance(code, grpc.StatusCode) else _STATUS_BY_NUMBER.get(code)
    if status is None:
        return
    span.set_attribute("rpc.grpc.status_code", status.value[0])
    if status in _SERVER_ERRORS:
        span.set_status(trace.Status(trace.StatusCode.ERROR, f"{status}:{details}"))


_STATUS_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def _rewrapped(handler: Any, wrap: Callable[[Any], Any]) -> Any:
    """``handler`` with its (unary-response) behaviour passed through ``wrap``."""
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            wrap(handler.unary_unary),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(
            wrap(handler.stream_unary),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    return handler


class _PropagatingServerInterceptor(grpc.aio.ServerInterceptor):
    """Tracing off (no exporter): no spans, but a call that carries trace context (a
    ``traceparent``) runs in it, so the calls its handler makes carry the caller's trace on
    — what the instrumentation's interceptor does with the no-op provider, without its
    per-call cost (a span object, attributes, a wrapped servicer context: ~15 % of a
    one-message AddMessages, bench/speed/ingest_bench.py). A call without trace context gets its
    handler as is."""

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        metadata = handler_call_details.invocation_metadata or ()
        fields = propagate.get_global_textmap().fields
        if not any(key in fields for key, _ in metadata):
            return handler
        carrier = {key: value for key, value in metadata if isinstance(value, str)}

        def wrap(inner: Any) -> Any:
            async def behavior(request: Any, context: Any) -> Any:
                token = otel_context.attach(propagate.extract(carrier))
                try:
                    return await inner(request, context)
                finally:
                    otel_context.detach(token)

            return behavior

        if not all(
            inspect.iscoroutinefunction(b) for b in (handler.unary_unary, handler.stream_unary) if b
        ):
            return handler  # a sync handler: only the call interceptor's are async
        return _rewrapped(handler, wrap)


def grpc_server_interceptor(
    tracer_provider: trace.TracerProvider | None = None,
) -> grpc.aio.ServerInterceptor:
    """The OpenTelemetry server interceptor (for grpc.aio servers, which every service
    runs: episodic.serving.transport), health checks and reflection excluded. Pass it first in the
    server's interceptors so its span covers the door and the error mapping; the call
    interceptor records the codes it answers with (:func:`record_grpc_status`). While
    tracing is off (no ``tracer_provider`` and no exporter configured, see
    :func:`setup_telemetry`, which must run first), an interceptor that only carries
    incoming trace context through."""
    if tracer_provider is None and not telemetry_enabled():
        return _PropagatingServerInterceptor()
    from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters

    return aio_server_interceptor(  # type: ignore[no-any-return]
        tracer_provider=tracer_provider, filter_=filters.negate(_untraced_methods())
    )


instrument_grpc_server = grpc_server_interceptor


def instrument_grpc_client(
    channel: grpc.Channel, tracer_provider: trace.TracerProvider | None = None
) -> grpc.Channel:
    """``channel`` with a client interceptor: outgoing calls get a CLIENT span and carry
    ``traceparent``, so the server's span joins the caller's trace."""
    from opentelemetry.instrumentation.grpc import client_interceptor, filters
    from opentelemetry.instrumentation.grpc.grpcext import intercept_channel

    interceptor = client_interceptor(
        tracer_provider=tracer_provider, filter_=filters.negate(_untraced_methods())
    )
    return intercept_channel(channel, interceptor)  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- database


def instrument_engine(
    engine: Engine, tracer_provider: trace.TracerProvider | None = None
) -> Engine:
    """Adds SQLAlchemy query spans to ``engine`` (once per engine) and returns it.

    Without ``tracer_provider`` this is a no-op while tracing is off, so a service without
    an exporter pays nothing per query. The SQLAlchemy instrumentor is process-global: a
    second engine re-instruments all engines passed here.
    """
    if tracer_provider is None and not telemetry_enabled():
        return engine
    from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor

    with _lock:
        if engine in _engines:
            return engine
        _engines.add(engine)
        instrumentor = SQLAlchemyInstrumentor()
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()
        instrumentor.instrument(engines=list(_engines), tracer_provider=tracer_provider)
        global _database_tracer
        _database_tracer = trace.get_tracer(_SQLALCHEMY_SCOPE, tracer_provider=tracer_provider)
    return engine


# Spans of statements sent without SQLAlchemy (episodic.store.raw_statement): the same
# scope as the instrumentation's, so they are filtered (no parent: dropped) and found
# (a backend's "database" view) like every other statement's.
_database_tracer: trace.Tracer | None = None
# Per engine: the connection attributes its spans carry (read once from a live connection).
_database_attributes: weakref.WeakKeyDictionary[Engine, dict[str, Any]] = (
    weakref.WeakKeyDictionary()
)


class _DatabaseSpan:
    """A statement's CLIENT span, ended when the block exits."""

    __slots__ = ("_span",)

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def __enter__(self) -> _DatabaseSpan:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._span.end()

    def failed(self, err: BaseException) -> None:
        """The statement failed: the span's status says so (as the instrumentation's)."""
        if self._span.is_recording():
            self._span.set_status(trace.Status(trace.StatusCode.ERROR, str(err)))


class _NoDatabaseSpan:
    __slots__ = ()

    def __enter__(self) -> _NoDatabaseSpan:
        return self

    def __exit__(self, *_exc: object) -> None:
        pass

    def failed(self, err: BaseException) -> None:
        pass


_NO_DATABASE_SPAN = _NoDatabaseSpan()


def database_span(
    engine: Engine, statement: str, connection: Any
) -> _DatabaseSpan | _NoDatabaseSpan:
    """The span of a statement sent on ``connection`` (psycopg) of ``engine`` without
    SQLAlchemy, shaped like OpenTelemetry's SQLAlchemy instrumentation's (the default,
    pre-stable database conventions: name ``<operation> <database>``, kind CLIENT,
    ``db.statement``, ``db.system``, ``db.operation``, ``db.name``, ``db.user``, ``net.*``),
    a child of the current span; nothing unless ``engine`` was passed to
    :func:`instrument_engine` with tracing on. ``with database_span(…) as span:`` ends it
    when the block exits; ``span.failed(err)`` marks a failure."""
    tracer = _database_tracer
    if tracer is None or engine not in _engines:
        return _NO_DATABASE_SPAN
    attributes = _database_attributes.get(engine)
    if attributes is None:
        attributes = _database_attributes[engine] = _connection_attributes(connection)
    database = attributes.get("db.name")
    tokens = _LEADING_COMMENT.sub("", statement, count=1).split()
    operation = " ".join([*tokens[:1], *([database] if database else [])]) or "postgresql"
    span = tracer.start_span(operation, kind=trace.SpanKind.CLIENT)
    if span.is_recording():
        span.set_attributes(
            {
                **attributes,
                "db.statement": statement,
                "db.system": "postgresql",
                "db.operation": operation,
            }
        )
    return _DatabaseSpan(span)


_LEADING_COMMENT = re.compile(r"^/\*.*?\*/")


def _connection_attributes(connection: Any) -> dict[str, Any]:
    """The attributes the instrumentation gives a statement's span, from the psycopg
    connection's ``info`` (a socket path is a peer name of transport ``other``)."""
    info = connection.info
    attributes: dict[str, Any] = {"db.name": info.dbname, "db.user": info.user}
    if info.host and info.host.startswith("/"):
        attributes["net.transport"] = "other"
        if info.port:
            attributes["net.peer.name"] = os.path.join(info.host, f".s.PGSQL.{info.port}")
    else:  # the instrumentation reads a TCP peer from the URL: no net.transport then
        attributes["net.peer.name"] = info.host
        if info.port:
            attributes["net.peer.port"] = int(info.port)
    return attributes


# --------------------------------------------------------------------------- metrics

_meter_provider: MeterProvider | None = None
_metrics_configured = False
_metrics_server: Any = None  # the WSGI server behind /metrics


def selected_metric_exporters(environ: Mapping[str, str] | None = None) -> list[str]:
    """Which push exporters of metrics the environment asks for: a subset of otlp,
    console (the Prometheus endpoint is not one of them: EPISODIC_METRICS_* governs it)."""
    env = os.environ if environ is None else environ
    raw = env.get("OTEL_METRICS_EXPORTER", "").strip().lower()
    if raw:
        names = [n.strip() for n in raw.split(",") if n.strip()]
    elif env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        names = ["otlp"]
    else:
        names = []
    chosen: list[str] = []
    for name in names:
        if name in ("none", "prometheus"):
            continue
        if name not in ("otlp", "console"):
            log.warning("OTEL_METRICS_EXPORTER: unsupported exporter %r ignored", name)
            continue
        if name not in chosen:
            chosen.append(name)
    return chosen


def _otlp_metric_exporter(env: Mapping[str, str]) -> MetricExporter:
    protocol = env.get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL") or env.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", ""
    )
    if protocol.lower().startswith("http"):
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter as HttpExporter,
            )

            return HttpExporter()  # type: ignore[no-any-return]
        except ImportError:
            log.warning(
                "OTLP protocol %r needs opentelemetry-exporter-otlp-proto-http; using gRPC",
                protocol,
            )
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter()


def build_meter_provider(
    service_name: str,
    *,
    prometheus_registry: Any = None,
    environ: Mapping[str, str] | None = None,
) -> MeterProvider | None:
    """A meter provider whose readers are a Prometheus reader registered in
    ``prometheus_registry`` (a ``prometheus_client.CollectorRegistry``; None: no Prometheus)
    and the push exporters ``environ`` selects; None when there is no reader at all. Does
    not install it globally."""
    env = os.environ if environ is None else environ
    readers: list[MetricReader] = []
    if prometheus_registry is not None:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader

        readers.append(PrometheusMetricReader(registry=prometheus_registry))
    for name in selected_metric_exporters(env):
        exporter = _otlp_metric_exporter(env) if name == "otlp" else ConsoleMetricExporter()
        readers.append(PeriodicExportingMetricReader(exporter))
    if not readers:
        return None
    return MeterProvider(
        metric_readers=readers, resource=service_resource(service_name), shutdown_on_exit=False
    )


def setup_metrics(service_name: str, *, host: str, port: int | None) -> int | None:
    """Configures metrics for this process: Prometheus text at ``http://host:port/metrics``
    unless ``port`` is None (0: any free port), plus the push exporters of the environment.
    Returns the port /metrics listens on (None: no endpoint). Only the first call does
    anything. Raises OSError when the port cannot be bound."""
    from prometheus_client import REGISTRY

    global _meter_provider, _metrics_configured, _metrics_server
    with _lock:
        if _metrics_configured:
            return _metrics_server.server_port if _metrics_server is not None else None
        _metrics_configured = True
        # The global registry also has prometheus_client's process and Python collectors.
        provider = build_meter_provider(
            service_name, prometheus_registry=REGISTRY if port is not None else None
        )
        if provider is None:
            log.debug("metrics off: no endpoint and no exporter configured")
            return None
        bound = None
        if port is not None:
            try:
                # The server answers every path; /metrics is the one to scrape.
                _metrics_server = serve_prometheus(REGISTRY, host.strip("[]"), port)
            except OSError:
                provider.shutdown()
                raise
            bound = int(_metrics_server.server_port)
        otel_metrics.set_meter_provider(provider)
        _meter_provider = provider
        exporters = selected_metric_exporters()
        log.info(
            "metrics on for %s: %s",
            service_name,
            ", ".join([*([f"prometheus :{bound}/metrics"] if bound else []), *exporters]),
        )
        return bound


#: How often the /metrics server's loop looks for a shutdown request: ``shutdown()`` waits up
#: to this long. prometheus_client's own ``start_http_server`` polls every 0.5 s, which was
#: half of a service's stop.
METRICS_SHUTDOWN_POLL = 0.05


def serve_prometheus(registry: Any, host: str, port: int) -> Any:
    """``prometheus_client.start_http_server`` with a shorter shutdown poll: a threading WSGI
    server answering every path with the registry's text, in a daemon thread. Returns the
    server (``server_port``, ``shutdown()``, ``server_close()``)."""
    import socket
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    from prometheus_client import make_wsgi_app
    from prometheus_client.exposition import ThreadingWSGIServer

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # a scrape is not news
            pass

    family = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0][0]

    class MetricsServer(ThreadingWSGIServer):
        address_family = family  # IPv6 when the host is one

    server = make_server(host, port, make_wsgi_app(registry), MetricsServer, handler_class=Quiet)
    threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": METRICS_SHUTDOWN_POLL},
        name="metrics-http",
        daemon=True,
    ).start()
    return server


def shutdown_metrics() -> None:
    """Stops /metrics and flushes the push exporters; safe to call more than once."""
    global _meter_provider, _metrics_server
    with _lock:
        provider, _meter_provider = _meter_provider, None
        server, _metrics_server = _metrics_server, None
    if server is not None:
        server.shutdown()
        server.server_close()
    if provider is not None:
        provider.shutdown()


# --------------------------------------------------------------------------- propagation


def current_trace_context() -> dict[str, str]:
    """The active trace context as a W3C carrier (``{"traceparent": …}``), to store beside
    work that another process picks up later; empty when no span is active."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def link_from(carrier: Mapping[str, str] | None) -> list[Link]:
    """Links to the span stored in ``carrier`` (from :func:`current_trace_context`), for a
    span that continues work started elsewhere: ``tracer.start_as_current_span(name,
    links=link_from(row.trace_context))``. Empty for a missing or malformed carrier."""
    if not carrier:
        return []
    # Extract into an empty context: a malformed carrier must not yield the active span.
    extracted = propagate.extract(dict(carrier), context=Context())
    ctx = trace.get_current_span(extracted).get_span_context()
    return [Link(ctx)] if ctx.is_valid else []
