"""The SDK's client spans (OpenTelemetry, only when it is importable and a provider is
set): a ``traceparent`` on every call, and the GenAI memory operation it performs."""

from __future__ import annotations

import json
from typing import Any

from episodic import semconv
from episodic.sdk.channels import PROCESS_OF
from episodic.sdk.flow import ClientCore, Rpc

# --------------------------------------------------------------------------- tracing
#
# Client spans in OpenTelemetry's GenAI words, when the application traces: OpenTelemetry
# importable (it is not part of the core install) and a tracer provider set. Each attempt of
# a memory operation (episodic.semconv.MEMORY_RPCS: Recall is search_memory, DeleteEpisode
# delete_memory, ...) is a CLIENT span named by its operation, and every call carries the
# current trace context (``traceparent``), so the server's span is a child of the caller's.

_SERVICE_OF_STUB = {
    "admin": "AdminService",
    "ingest": "IngestService",
    "recall": "RecallService",
    "scheduler": "SchedulerService",
    "summariser": "SummariserService",
}
_otel: Any = None  # (trace, propagate, context) once imported; False: not installed
_tracer_of: tuple[Any, Any] | None = None  # (provider, its tracer)


def _opentelemetry() -> Any:
    global _otel
    if _otel is None:
        try:
            from opentelemetry import context, propagate, trace

            _otel = (trace, propagate, context)
        except ImportError:  # the core install: no tracing, nothing else changes
            _otel = False
    return _otel or None


def _host_port(address: str) -> tuple[str, int | None]:
    host, _, port = address.rpartition(":")
    if not host:
        return address, None
    return host.strip("[]"), int(port) if port.isdigit() else None


class ClientSpan:
    """The client side of one memory operation's attempt, current while the call runs;
    :meth:`end` reads the answer (or the error) into it."""

    __slots__ = ("_otel", "_span", "_spec", "_step", "_token")

    def __init__(self, otel: Any, span: Any, token: Any, spec: semconv.MemoryRpc, step: Rpc):
        self._otel = otel
        self._span = span
        self._token = token
        self._spec = spec
        self._step = step

    def end(self, response: Any = None, error: BaseException | None = None) -> None:
        """Ends the span: the standard's attributes of ``response``, or ``error.type``."""
        trace, _, context = self._otel
        span = self._span
        try:
            if error is not None:
                span.set_attribute(semconv.ERROR_TYPE, semconv.error_type(error))
                span.set_status(trace.Status(trace.StatusCode.ERROR, str(error)[:200]))
            else:
                memory = self._spec.extract(self._step.request, response)
                span.set_attributes(memory.attributes())
                if (
                    self._spec.operation not in semconv.CONTENT_FREE
                    and semconv.capture_content()
                    # The client cannot tell whether the dataset is stored encrypted (every
                    # dataset is by default): both switches, or no content.
                    and semconv.capture_encrypted_content()
                ):
                    if memory.query:
                        span.set_attribute(semconv.MEMORY_QUERY_TEXT, memory.query)
                    if memory.records:
                        span.set_attribute(
                            semconv.MEMORY_RECORDS, json.dumps(memory.records, ensure_ascii=False)
                        )
        except Exception:  # telemetry never fails a call
            pass
        finally:
            context.detach(self._token)
            span.end()


class _Untraced:
    """What :func:`trace_call` returns when there is no span: ending it does nothing."""

    __slots__ = ()

    def end(self, response: Any = None, error: BaseException | None = None) -> None:
        pass


UNTRACED = _Untraced()


def trace_call(core: ClientCore, step: Rpc, kwargs: dict[str, Any]) -> ClientSpan | _Untraced:
    """Called by a driver before it sends ``step``: while the application traces, adds the
    trace context to the call's metadata (in ``kwargs``) and, for a memory operation,
    starts its CLIENT span (returned; the driver ends it). :data:`UNTRACED` otherwise."""
    global _tracer_of
    otel = _opentelemetry()
    if otel is None or not step.authenticate:  # health checks are not worth a trace
        return UNTRACED
    trace, propagate, context = otel
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return UNTRACED  # OpenTelemetry installed, but nobody set a provider: tracing is off
    spec = semconv.MEMORY_RPCS.get(f"{_SERVICE_OF_STUB.get(step.stub)}/{step.method}")
    span = ctx = None
    if spec is not None:
        if _tracer_of is None or _tracer_of[0] is not provider:
            _tracer_of = (provider, provider.get_tracer("episodic.client"))
        host, port = _host_port(core.addresses[PROCESS_OF.get(step.stub, step.stub)])
        attributes: dict[str, Any] = {
            semconv.OPERATION_NAME: spec.operation,
            semconv.PROVIDER_NAME: semconv.MEMORY_PROVIDER,
            semconv.SERVER_ADDRESS: host,
        }
        if port is not None:
            attributes[semconv.SERVER_PORT] = port
        store = getattr(step.request, "dataset", "")
        if isinstance(store, str) and store:
            attributes[semconv.MEMORY_STORE_ID] = store
        span = _tracer_of[1].start_span(
            spec.operation, kind=trace.SpanKind.CLIENT, attributes=attributes
        )
        ctx = trace.set_span_in_context(span)
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=ctx)
    if carrier:
        kwargs["metadata"] = (*kwargs.get("metadata", ()), *carrier.items())
    if span is None or spec is None:
        return UNTRACED
    # Current while the call runs: a gRPC client instrumentation's span nests below it.
    return ClientSpan(otel, span, context.attach(ctx), spec, step)
