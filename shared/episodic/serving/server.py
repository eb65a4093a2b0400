"""What every service process shares: the gRPC server with error mapping, health and
reflection, a database health monitor, and graceful shutdown on SIGTERM/SIGINT.

:func:`serve` is the one bootstrap of the four services: each ``__main__`` only says what
its service adds (a :class:`Service`: servicers, start and shutdown hooks)."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import inspect
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent import futures
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import grpc
from google.protobuf import any_pb2, descriptor_pool, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from grpc_status import rpc_status
from sqlalchemy import Engine, text
from sqlalchemy.exc import DisconnectionError, OperationalError

from episodic import access, loops, metrics, requests
from episodic.config import Settings, get_settings
from episodic.errors import (
    ERROR_DOMAIN,
    Aborted,
    ConfigurationError,
    DeadlineExceeded,
    EpisodicError,
    InvalidArgument,
    Unavailable,
    describe_error,
    log_failure,
)
from episodic.serving.guard import Guard, call_cost, is_loopback, peer_address
from episodic.serving.stop_signals import StopSignals
from episodic.serving.transport import (
    Admission,
    AdmissionLimits,
    CallContext,
    EventLoopThread,
    read_request,
)
from episodic.store.db import (
    CONCURRENT_CHANGE,
    SESSION_ENDED,
    STATEMENT_CANCELLED,
    is_database_outage,
    make_engine,
    sqlstate,
)
from episodic.telemetry import (
    grpc_server_interceptor,
    instrument_engine,
    record_grpc_status,
    setup_metrics,
    setup_telemetry,
    shutdown_telemetry,
)
from episodic.tls import server_credentials

# The logger keeps the module's first name: log configurations and filters select it.
log = logging.getLogger("episodic.server")


def _status_for(err: EpisodicError) -> status_pb2.Status:
    """The google.rpc.Status of a domain error: its code and message, one ErrorInfo
    (AIP-193), and a RetryInfo when the caller should wait before trying again."""
    info = any_pb2.Any()
    info.Pack(
        error_details_pb2.ErrorInfo(reason=err.reason, domain=ERROR_DOMAIN, metadata=err.metadata)
    )
    details = [info]
    retry_after = getattr(err, "retry_after", None)
    if retry_after is not None:
        retry = any_pb2.Any()
        delay = duration_pb2.Duration()
        delay.FromTimedelta(timedelta(seconds=max(retry_after, 0.0)))
        retry.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
        details.append(retry)
    return status_pb2.Status(code=err.code.value[0], message=err.message, details=details)


# Probes call Health every few seconds and reflection is tooling: neither is measured
# (nor traced, see episodic.telemetry).
_UNMEASURED = ("/grpc.health.", "/grpc.reflection.")

#: What a handler call comes back with: its response, or the status it answers instead.
Answer = tuple[Any, "status_pb2.Status | None"]


def _size(request: Any) -> int:
    return request.ByteSize() if hasattr(request, "ByteSize") else 0


def _code_name(status: status_pb2.Status | None) -> str:
    return "OK" if status is None else code_pb2.Code.Name(status.code)


def _second_request() -> InvalidArgument:
    return InvalidArgument(
        "a unary call carries one request message and this call sent more; send each "
        "request as a call of its own",
        reason="SECOND_REQUEST_MESSAGE",
    )


def _reads_only(method: str) -> bool:
    """Whether ``/package.Service/Method`` is one a reader's key may call (its access rule
    asks for READER): such methods change nothing. Unknown methods are taken to change."""
    try:
        descriptor = descriptor_pool.Default().FindMethodByName(method.strip("/").replace("/", "."))
    except KeyError:
        return False
    rule = access.rule_of(descriptor)
    return rule is not None and rule.role is access.Role.READER


async def _end_of_requests(context: grpc.aio.ServicerContext, timeout: float) -> None:
    """Raises unless the call's request stream ends after its one message: a unary call
    carries one (methods are served client-streaming, see :meth:`CallInterceptor._wrap`,
    so a client may stream more, and reading only the first dropped the rest silently).
    An honest client's end of stream arrives with its message, so this read does not
    wait; one that neither ends nor sends is cut off after ``timeout`` like a stalled
    request."""
    more = await read_request(context, timeout)
    if more is not grpc.aio.EOF:
        raise _second_request()


class CallInterceptor(grpc.aio.ServerInterceptor):
    """The one place every call of every service passes, in this order:

    - the door (:mod:`episodic.serving.transport`): the call's peer has room for another open call,
      its request arrives in time, and the handler threads have room for it — otherwise
      RESOURCE_EXHAUSTED (with a RetryInfo) or DEADLINE_EXCEEDED, and no thread was used;
    - bytes that are not a valid request (bad protobuf, invalid UTF-8 in a string field,
      nesting too deep, oversized Structs) answer INVALID_ARGUMENT naming the problem — see
      :mod:`episodic.requests`; grpcio would answer INTERNAL and log a traceback;
    - then, in a handler thread: the guard (:mod:`episodic.serving.guard`) admits the caller — API
      key, role, global scope, rate limit, calls in flight per key — and the handler runs
      as that principal (:func:`episodic.access.current`); health and reflection are not
      guarded (they reveal no data) and are answered on the event loop;
    - domain errors answer their own code with a ``google.rpc.ErrorInfo`` (AIP-193);
    - a statement that lost to another transaction (a deadlock, a serialisation failure,
      a lock it could not get) answers ABORTED: the database is up, the call did not take
      effect, and it may be tried again; one a statement timeout stopped answers
      DEADLINE_EXCEEDED;
    - a database that is down or restarting answers UNAVAILABLE (retryable);
    - anything else is our bug: INTERNAL with a generic message, logged without the
      exception's text (which may quote user content), with its traceback frames;
    - every call but health checks and reflection is measured: ``rpc.server.call.duration``
      by method and the status code it answered (:mod:`episodic.metrics`).

    The servicers' handlers are synchronous functions ``(request, context)``; their
    context is a :class:`~episodic.serving.transport.CallContext`.
    """

    def __init__(
        self,
        guard: Guard | None = None,
        *,
        pool: futures.Executor | None = None,
        limits: AdmissionLimits | None = None,
        handlers: int = 0,
    ) -> None:
        self.guard = guard
        self.pool = pool  # None: the event loop's default executor
        self.admission = Admission(limits or AdmissionLimits(), handlers=handlers)
        # Per method, its wrapped handler, built on the method's first call: gRPC asks the
        # interceptors for a handler on EVERY call, and building one (the lookup, the
        # guard's rule, the closures, the handler tuple) was ~5 µs of it. Sound because
        # this interceptor comes last (build_server): what ``continuation`` returns for a
        # method is the servicer's handler, fixed once the server started. Only methods
        # found are kept, so unknown names sent by anyone cannot grow it.
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        method = handler_call_details.method
        known = self._handlers.get(method)
        if known is not None:
            return known
        handler = await continuation(handler_call_details)
        if (
            handler is None
            or handler.unary_unary is None
            or inspect.iscoroutinefunction(handler.unary_unary)  # health, reflection
        ):
            return handler
        known = self._handlers[method] = self._wrap(method, handler)
        return known

    def answer(
        self, method: str, inner: Callable[[Any, Any], Any], request: Any, context: CallContext
    ) -> Answer:
        """Runs ``inner`` (the servicer's handler) for ``request`` in the calling thread, as
        the principal the guard admits, and turns what it raises into the status the call
        answers. Never raises (but for BaseExceptions that end the process)."""
        if isinstance(request, requests.Unparsable):
            return None, _status_for(request.error())
        guard = self.guard if self.guard is not None and self.guard.governs(method) else None
        try:
            if guard is None:
                return inner(request, context), None
            principal = guard.admit(
                method, context.invocation_metadata(), _size(request), context.peer()
            )
            with guard.running(principal, call_cost(request)), access.running_as(principal):
                return inner(request, context), None
        except EpisodicError as err:
            return None, _status_for(err)
        except (OperationalError, DisconnectionError) as err:
            if sqlstate(err) == STATEMENT_CANCELLED:
                return None, _status_for(
                    DeadlineExceeded(
                        "the database did not answer in time (the call's deadline or the "
                        "service's statement ceiling); the call did not take effect"
                    )
                )
            if sqlstate(err) in CONCURRENT_CHANGE:
                log.info("%s lost to a concurrent transaction: %s", method, describe_error(err))
                return None, _status_for(
                    Aborted(
                        "the call lost to a concurrent change (deadlock or lock conflict) "
                        "and did not take effect; retry it",
                        reason="CONCURRENT_CHANGE",
                    )
                )
            # The database is down or restarting: a retryable condition, not a bug.
            log.warning("database unavailable in %s: %s", method, describe_error(err))
            return None, _status_for(Unavailable("the database is unavailable; retry with backoff"))
        except Exception as err:
            if sqlstate(err) in SESSION_ENDED:
                # The process was frozen or cut off inside a transaction, and PostgreSQL
                # ended its session (store/db.py): retryable, not our bug.
                log.warning("database ended the session of %s: %s", method, describe_error(err))
                return None, _status_for(
                    Unavailable("the database ended this call's session; retry")
                )
            if is_database_outage(err):
                # A Citus worker down or restarting, reported by the coordinator as an
                # internal error (store/db.py, CITUS_LOST_NODE): retryable, not our bug.
                log.warning("database unavailable in %s: %s", method, describe_error(err))
                return None, _status_for(
                    Unavailable("the database is unavailable; retry with backoff")
                )
            log_failure(log, f"unhandled error in {method}", err)
            return None, status_pb2.Status(
                code=code_pb2.INTERNAL, message=f"internal error in {method}"
            )

    async def serve(
        self,
        method: str,
        inner: Callable[[Any, Any], Any],
        context: grpc.aio.ServicerContext,
        reads_only: bool = False,
    ) -> Answer:
        """The door, on the event loop: admits the call, reads its request within the
        request timeout, and hands it to a handler thread (:meth:`answer`). The call's
        slots are given back when its handler returns, not when its caller leaves: a
        cancelled call's thread is busy until then. ``reads_only``: the method changes
        nothing (:func:`_reads_only`), so a second request message is looked for beside its
        handler rather than before it."""
        admission = self.admission
        peer = peer_address(context.peer())
        try:
            admission.open(peer)
        except EpisodicError as err:
            return None, _status_for(err)
        guard = self.guard
        if guard is not None and guard.governs(method):
            # Refused from what the replica knows (no key, a key known bad or over its
            # limits) before the request is read or a handler thread is taken: a caller
            # refused again and again costs the others next to nothing.
            try:
                refusal = guard.refusal_before_reading(
                    method, context.invocation_metadata(), context.peer()
                )
            except BaseException:  # our bug: answered as one, but never with the slot kept
                admission.close(peer)
                raise
            if refusal is not None:
                hold = getattr(refusal, "hold", 0.0)
                if hold > 0:
                    # A caller back before its last retry hint ran out is answered when it
                    # runs out: a timer here, where answering at once would invite the next
                    # call at once (its open slot is kept meanwhile, within the peer's cap).
                    await asyncio.sleep(hold)
                admission.close(peer)
                return None, _status_for(refusal)
        dispatched = False
        tail: asyncio.Future[Any] | None = None
        try:
            request = await read_request(context, admission.limits.request_timeout)
            if request is grpc.aio.EOF:
                return None, _status_for(
                    InvalidArgument("the call ended without its request message")
                )
            if reads_only:
                # Checked beside the handler (a read changes nothing, and an honest
                # client's end of stream came with its message): no wait on the way in.
                tail = asyncio.ensure_future(context.read())
            else:
                # Before the handler, so a call that streams a second request stores
                # nothing of the first.
                await _end_of_requests(context, admission.limits.request_timeout)
            admission.dispatch()
            dispatched = True
        except EpisodicError as err:
            return None, _status_for(err)
        finally:
            if not dispatched:
                admission.close(peer)

        def handler_returned(_: object) -> None:
            admission.finished()
            admission.close(peer)

        call = CallContext(
            tuple(context.invocation_metadata() or ()),  # type: ignore[arg-type]
            context.peer(),
            context.time_remaining(),
        )
        work = asyncio.get_running_loop().run_in_executor(
            # The handler runs in the call's context (its trace, its span), as it would
            # inline.
            self.pool,
            contextvars.copy_context().run,
            self.answer,
            method,
            inner,
            request,
            call,
        )
        work.add_done_callback(handler_returned)
        answer = await asyncio.shield(work)
        if tail is not None:
            if not tail.done():
                # An honest client's end of stream came with its message, so this waits only
                # for one that keeps its stream open (the call only: the handler thread and
                # the peer's slot are free already), at most the request timeout.
                await asyncio.wait({tail}, timeout=admission.limits.request_timeout or None)
            if not tail.done():
                tail.add_done_callback(lambda task: task.cancelled() or task.exception())
            elif (
                not tail.cancelled()
                and tail.exception() is None
                and tail.result() is not grpc.aio.EOF
            ):
                return None, _status_for(_second_request())
        return answer

    def _wrap(self, method: str, handler: Any) -> grpc.RpcMethodHandler:
        inner = handler.unary_unary
        measured = not method.startswith(_UNMEASURED)
        reads_only = _reads_only(method)

        async def behavior(_requests: Any, context: grpc.aio.ServicerContext) -> Any:
            started = time.perf_counter()
            code = "CANCELLED"  # unless it returns: the caller left (or the server stopped)
            try:
                response, status = await self.serve(method, inner, context, reads_only)
                code = _code_name(status)
            finally:
                if measured:
                    metrics.rpc_finished(method, code, time.perf_counter() - started)
            if status is not None:
                record_grpc_status(status.code, status.message)
                await context.abort_with_status(rpc_status.to_status(status))
            return response

        # Served as a client-streaming method: the interceptor gets the call before its
        # request arrives (grpc.aio reads a unary request before calling the handler, with
        # no bound), and reads the one message itself. The wire format is the same.
        return grpc.stream_unary_rpc_method_handler(
            behavior,
            request_deserializer=requests.guarded_deserializer(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )


@dataclass
class ServiceRuntime:
    """A running service process: its server (on its own event loop), health state and
    shutdown hooks. Calls it from any thread but the loop's."""

    name: str  # fully qualified gRPC service name, e.g. "episodic.v1.IngestService"
    server: grpc.aio.Server
    health: health.aio.HealthServicer
    port: int
    loop: EventLoopThread
    pool: futures.ThreadPoolExecutor
    engine: Engine | None = None
    shutdown_grace: float = 10.0
    on_shutdown: list[Callable[[], object]] = field(default_factory=list)
    stopped: threading.Event = field(default_factory=threading.Event)
    # A plaintext server answering health checks only (Kubernetes' gRPC probes cannot
    # speak TLS); None when the service's own port answers them.
    health_server: grpc.aio.Server | None = None
    health_port: int | None = None
    #: The other gRPC services this process serves (Ingest's AdminService): their health
    #: names follow the service's own.
    also_serves: tuple[str, ...] = ()
    #: The door's counts of open calls (per peer) and calls in the handler pool; read them
    #: from the loop's thread (``loop.run``), where they change.
    admission: Admission | None = None

    def start(self) -> None:
        self.loop.run(self.server.start())
        if self.health_server is not None:
            self.loop.run(self.health_server.start())

    def set_health(self, name: str, status: int) -> None:
        if not self.loop.running:  # stopped: nobody asks any more
            return
        self.loop.run(self.health.set(name, status), timeout=5)  # type: ignore[arg-type]

    def set_serving(self, serving: bool) -> None:
        """Readiness: the service's own name (and those of the other services the process
        serves) follows the database. The overall name "" is liveness — SERVING while the
        process runs, so a database outage takes replicas out of rotation without making
        Kubernetes restart them."""
        for name in (self.name, *self.also_serves):
            self.set_health(
                name,
                health_pb2.HealthCheckResponse.SERVING
                if serving
                else health_pb2.HealthCheckResponse.NOT_SERVING,
            )

    def set_alive(self, alive: bool) -> None:
        self.set_health(
            "",
            health_pb2.HealthCheckResponse.SERVING
            if alive
            else health_pb2.HealthCheckResponse.NOT_SERVING,
        )

    def stop(self, grace: float | None = None) -> None:
        """Stops taking calls and lets in-flight ones finish within ``grace`` seconds."""
        self.loop.run(self.server.stop(grace))
        if self.health_server is not None:
            self.loop.run(self.health_server.stop(0))
        self.pool.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        """Stops taking calls, lets in-flight ones finish, then runs the shutdown hooks
        (which release claims so another replica picks the work up at once)."""
        if self.stopped.is_set():
            return
        self.stopped.set()
        self.set_serving(False)
        self.set_alive(False)
        log.info("%s shutting down (grace %.1fs)", self.name, self.shutdown_grace)
        self.stop(self.shutdown_grace)
        for hook in self.on_shutdown:
            try:
                hook()
            except Exception as err:
                log_failure(log, "shutdown hook failed", err)
        if self.engine is not None:
            self.engine.dispose()
        shutdown_telemetry()
        self.loop.stop()

    def wait(self) -> None:
        self.loop.run(self.server.wait_for_termination())


def listen_address(host: str, port: int) -> str:
    """``host:port`` as gRPC reads it: an IPv6 host (``::``, ``::1``) in brackets."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


#: How long a connection with no call open is kept before the server closes it (clients
#: reconnect on their next call): what is left of stalled callers is freed.
CONNECTION_IDLE_MS = 5 * 60 * 1000


def build_server(
    *,
    name: str,
    register: Callable[[grpc.Server], None],
    service_names: Iterable[str],
    host: str,
    port: int,
    workers: int,
    engine: Engine | None,
    shutdown_grace: float,
    max_request_bytes: int = 8 * 1024 * 1024,
    guard: Guard | None = None,
    credentials: grpc.ServerCredentials | None = None,
    interceptors: Iterable[grpc.aio.ServerInterceptor] = (),
    health_port: int | None = None,
    limits: AdmissionLimits | None = None,
    max_connections: int = 0,
) -> ServiceRuntime:
    """A gRPC server for ``service_names`` with health, reflection, the call interceptor
    (``guard`` admits callers; None: no authentication at all; ``limits`` are the door's
    caps) and tracing, listening on ``host:port`` — with TLS when ``credentials`` are
    given. ``workers`` handler threads run the servicers' (synchronous) handlers; the
    server itself runs on an event loop thread of its own (:mod:`episodic.serving.transport`)."""
    loop = EventLoopThread(f"{name.split('.')[-1]}-grpc")
    pool = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name.split(".")[-1])
    options: list[tuple[str, Any]] = [
        # gRPC refuses a larger request before reading it into memory
        # (RESOURCE_EXHAUSTED, naming the limit).
        ("grpc.max_receive_message_length", max_request_bytes),
        ("grpc.so_reuseport", 0),
        ("grpc.max_connection_idle_ms", CONNECTION_IDLE_MS),
    ]
    if max_connections:
        # Enforced by gRPC's core before the handshake.
        options.append(("grpc.max_allowed_incoming_connections", max_connections))
    health_servicer = health.aio.HealthServicer()

    door = CallInterceptor(guard, pool=pool, limits=limits, handlers=workers)

    async def make() -> tuple[grpc.aio.Server, int, grpc.aio.Server | None, int | None]:
        server = grpc.aio.server(
            # Sync handlers the call interceptor does not wrap (none today) run here too.
            migration_thread_pool=pool,
            # Tracing first, so its span covers the door and the error mapping.
            interceptors=[
                grpc_server_interceptor(),
                *interceptors,
                door,
            ],
            options=options,
        )
        register(server)  # type: ignore[arg-type]
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        reflection.enable_server_reflection(
            [*service_names, health.SERVICE_NAME, reflection.SERVICE_NAME], server
        )
        address = listen_address(host, port)
        bound = (
            server.add_secure_port(address, credentials)
            if credentials is not None
            else server.add_insecure_port(address)
        )
        probe = probe_port = None
        if health_port is not None:
            # Health only, without TLS: what it reveals (SERVING or not) is no secret.
            probe = grpc.aio.server()
            health_pb2_grpc.add_HealthServicer_to_server(health_servicer, probe)
            probe_port = probe.add_insecure_port(listen_address(host, health_port))
        return server, bound, probe, probe_port

    try:
        server, bound, probe, probe_port = loop.run(make())
    except RuntimeError as err:  # grpc.aio raises when it cannot bind
        loop.stop()
        raise RuntimeError(f"{name}: cannot listen on {host}:{port} (port in use?): {err}") from err
    if bound == 0:
        loop.stop()
        raise RuntimeError(f"{name}: cannot listen on {host}:{port} (port in use?)")
    if probe is not None and probe_port == 0:
        loop.stop()
        raise RuntimeError(f"{name}: cannot listen on {host}:{health_port} for health")
    runtime = ServiceRuntime(
        name=name,
        server=server,
        health=health_servicer,
        port=bound,
        loop=loop,
        pool=pool,
        engine=engine,
        shutdown_grace=shutdown_grace,
        also_serves=tuple(n for n in service_names if n != name),
        health_server=probe,
        health_port=probe_port,
        admission=door.admission,
    )
    runtime.set_serving(False)
    runtime.set_alive(True)
    return runtime


def database_reachable(engine: Engine) -> bool:
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        return True
    except Exception:
        return False


#: Health name of a background loop (``episodic.loop.scheduler.timers``, …): NOT_SERVING
#: while its pass has run longer than EPISODIC_LOOP_STALL_AFTER (see episodic.loops).
LOOP_HEALTH_PREFIX = "episodic.loop."


def monitor_health(runtime: ServiceRuntime, interval: float = 2.0) -> threading.Thread:
    """Keeps readiness (the service's health name) NOT_SERVING while the database is
    unreachable, a background loop of this process is stalled, or every handler thread has
    been stuck without finishing a call (:meth:`Admission.handlers_stalled`): health must
    say whether the replica serves, not merely whether it runs. Each loop also answers
    under its own health name. A runtime without a database watches the rest."""

    def loop() -> None:
        last: bool | None = None  # serving, as last set
        last_ok: bool | None = None  # database reachable, as last seen
        stalled_before: set[str] = set()
        handlers_before = False
        while not runtime.stopped.wait(interval if last is not None else 0):
            ok = runtime.engine is None or database_reachable(runtime.engine)
            if runtime.stopped.is_set():
                return
            stalls = {s.loop: s for s in loops.stalls()}
            for watch in loops.watches():
                runtime.set_health(
                    LOOP_HEALTH_PREFIX + watch.name,
                    health_pb2.HealthCheckResponse.NOT_SERVING
                    if watch.name in stalls
                    else health_pb2.HealthCheckResponse.SERVING,
                )
            for name in sorted(stalls.keys() - stalled_before):
                log.warning("%s: %s", runtime.name, stalls[name])
            for name in sorted(stalled_before - stalls.keys()):
                log.info("%s: loop %s is moving again", runtime.name, name)
            stalled_before = set(stalls)
            door = runtime.admission
            handlers = door is not None and door.handlers_stalled()
            if handlers and not handlers_before and door is not None:
                log.warning(
                    "%s: all %d handler threads busy for %.0fs without finishing a call; "
                    "not serving until one does",
                    runtime.name,
                    door.handlers,
                    door.handlers_stalled_for(),
                )
            elif handlers_before and not handlers:
                log.info("%s: handler threads are finishing calls again", runtime.name)
            handlers_before = handlers
            if ok != last_ok:
                log.info("%s database %s", runtime.name, "reachable" if ok else "UNREACHABLE")
                last_ok = ok
            serving = ok and not stalls and not handlers
            if serving != last:
                runtime.set_serving(serving)
                last = serving

    thread = threading.Thread(target=loop, name="db-health", daemon=True)
    thread.start()
    return thread


def run_until_signalled(
    runtime: ServiceRuntime, ready_line: str | None = None, health_interval: float = 2.0
) -> None:
    """Starts the server, prints where it listens, and blocks until SIGTERM/SIGINT."""
    runtime.start()
    monitor_health(runtime, health_interval)
    # A handler that takes no lock (stop_signals.py: an Event set from a handler could
    # wait forever for the lock the interrupted main thread held).
    stop = StopSignals().install()
    # Everything imported and built so far lives as long as the process: out of the
    # collector's sight, a full collection no longer walks it while serving, nor at exit
    # (the interpreter's last collection over it took ~0.5 s of every stop).
    gc.freeze()
    # Parent processes (episodic up, tests) wait for this line to know the port.
    # One write: a log line from another thread must not land inside it.
    sys.stdout.write((ready_line or f"{runtime.name} listening on port {runtime.port}") + "\n")
    sys.stdout.flush()
    stop.wait()
    log.info("%s received signal %d", runtime.name, stop.signum)
    runtime.shutdown()


def setup_logging(service: str) -> None:
    """One line per record on stderr, with the service name (12-factor logs), and tracing
    from the standard OTEL_* variables."""
    setup_telemetry(f"episodic-{service}")
    logging.basicConfig(
        level=os.environ.get("EPISODIC_LOG_LEVEL", "INFO").upper(),
        format=f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s",
    )
    # One INFO line per provider request drowns the service's own log.
    logging.getLogger("httpx").setLevel(logging.WARNING)


# --------------------------------------------------------------------------- bootstrap

#: The gRPC service each process serves, by the name ``episodic up`` and the settings use.
GRPC_SERVICES = {
    "ingest": "episodic.v1.IngestService",
    "scheduler": "episodic.v1.SchedulerService",
    "summariser": "episodic.v1.SummariserService",
    "recall": "episodic.v1.RecallService",
}


#: The services whose work runs in background loops nobody waits on: their statements
#: are bounded by EPISODIC_DB_BACKGROUND_STATEMENT_TIMEOUT.
BACKGROUND_SERVICES = frozenset({"scheduler", "summariser"})


@dataclass
class Service:
    """What one service adds to the common bootstrap: its servicers (``register``), the
    other gRPC services its process serves (``also_serves``, fully qualified), work to
    start once the server listens (background loops) and hooks to run after in-flight calls
    finished on shutdown (release claims, stop loops, close channels), in order."""

    register: Callable[[grpc.Server], None]
    also_serves: list[str] = field(default_factory=list)
    on_start: list[Callable[[], object]] = field(default_factory=list)
    on_shutdown: list[Callable[[], object]] = field(default_factory=list)


def auth_required(settings: Settings) -> bool:
    """Whether callers need API keys (EPISODIC_AUTH). ``auto`` means yes, except in
    development mode on loopback; ``auto`` on any other address is a configuration error
    (ConfigurationError), so nobody exposes an open server by accident."""
    mode = settings.auth.auth
    if mode == "auto" and not is_loopback(settings.service.bind_host):
        raise ConfigurationError(
            f"the server would listen on {settings.service.bind_host}, beyond this machine, "
            "without API keys. Set EPISODIC_AUTH=required (and create keys with `episodic "
            "keys create`), or EPISODIC_AUTH=disabled to run it open on purpose."
        )
    return mode == "required"


def describe_auth(settings: Settings) -> str:
    """One line saying how callers are authenticated (printed at startup)."""
    mode = settings.auth.auth
    if mode == "required":
        return "auth: API keys required"
    if mode == "disabled":
        return "auth: DISABLED (EPISODIC_AUTH=disabled): anyone who reaches a port may call"
    return (
        "auth: development mode on loopback: no API keys needed (set EPISODIC_AUTH=required "
        "to require them)"
    )


def start_metrics(name: str, settings: Settings) -> int | None:
    """Metrics of service ``name``: Prometheus text on ``EPISODIC_METRICS_PORT`` (unless
    ``EPISODIC_METRICS_ENABLED=false``) and OTLP when the OTEL_* variables ask for it.
    Prints ``<service> metrics on port N`` (parents find the port in that line, as they
    find the gRPC port in the ready line) and returns N, or None without an endpoint. A
    port it cannot bind is an OSError whose text names the port and the way past it."""
    port = None
    if settings.metrics.metrics_enabled:
        port = settings.metrics.port_for(name, getattr(settings.service, f"{name}_port"))
    host = settings.service.bind_host
    try:
        bound = setup_metrics(f"episodic-{name}", host=host, port=port)
    except OSError as err:
        # The default ports are fixed (9464-9467), so a second suite on the host meets them
        # taken: name the port and the two settings that get past it.
        raise OSError(
            err.errno,
            f"cannot serve metrics on {host}:{port} ({err.strerror or err}); "
            "EPISODIC_METRICS_PORT=0 takes any free port, EPISODIC_METRICS_ENABLED=false "
            "serves none",
        ) from err
    if bound is not None:
        sys.stdout.write(f"{GRPC_SERVICES[name]} metrics on port {bound}\n")
        sys.stdout.flush()
    return bound


def serve(
    name: str,
    build: Callable[[Settings, Engine], Service],
    *,
    engine_options: Callable[[Settings], dict[str, Any]] | None = None,
    reads_only: bool = False,
) -> None:
    """Runs service ``name`` (ingest, scheduler, summariser, recall) until SIGTERM/SIGINT:
    settings, logging, tracing and metrics, the database engine (``engine_options(settings)`` are
    passed to :func:`~episodic.store.db.make_engine`), the service's own parts from ``build``, then
    the gRPC server with health and reflection. A configuration the service cannot work
    with (``build`` raises an :class:`EpisodicError`, e.g. a schema of another embedding
    dimension) is one log line and exit status 2, not a traceback. A service that
    ``reads_only`` (Recall) connects to EPISODIC_DATABASE_READ_URL when it is set: its calls,
    its key checks and its health all follow the replica, so it keeps answering while the
    primary restarts."""
    settings = get_settings()
    setup_logging(name)
    metrics.observe_loops()
    idle_timeout = settings.database.db_idle_transaction_timeout
    if not idle_timeout or idle_timeout >= settings.recovery.orphan_reclaim_after:
        log.warning(
            "EPISODIC_DB_IDLE_TRANSACTION_TIMEOUT (%s) is not below "
            "EPISODIC_ORPHAN_RECLAIM_AFTER (%s): a worker frozen inside a transaction keeps "
            "its claims' rows locked past the reclaim time",
            settings.database.db_idle_transaction_timeout,
            settings.recovery.orphan_reclaim_after,
        )
    try:
        start_metrics(name, settings)
    except OSError as err:
        log.error("%s cannot start: %s", name, err.strerror or err)
        sys.exit(2)
    engine = instrument_engine(  # traces show the database time
        make_engine(
            settings.database.read_sqlalchemy_url()
            if reads_only
            else settings.database.sqlalchemy_url(),
            pool_size=settings.database.db_pool_size,
            application_name=f"episodic-{name}",
            # Bounds on every session: one stuck session must not stall the others.
            session_settings=settings.database.session_settings(
                background=name in BACKGROUND_SERVICES
            ),
            **(engine_options(settings) if engine_options else {}),
        )
    )
    try:
        service = build(settings, engine)
        grpc_names = [GRPC_SERVICES[name], *service.also_serves]
        guard = Guard(
            engine,
            grpc_names,
            required=auth_required(settings),
            cache_ttl=settings.auth.auth_cache_ttl.total_seconds(),
            requests_per_second=settings.auth.rate_limit_requests,
            bytes_per_second=settings.auth.rate_limit_bytes,
            max_calls_in_flight=settings.auth.max_calls_in_flight_per_key,
            unauthenticated_per_second=settings.auth.rate_limit_unauthenticated,
            handler_seconds_per_second=settings.auth.handler_seconds_per_key,
        )
        if guard.unguarded_methods():  # a contract without an access rule: fail closed
            raise ConfigurationError(
                f"RPCs without an access rule: {', '.join(guard.unguarded_methods())}"
            )
        credentials = (
            server_credentials(
                settings.tls.tls_cert_file,  # type: ignore[arg-type]
                settings.tls.tls_key_file,  # type: ignore[arg-type]
                settings.tls.tls_client_ca_file,
            )
            if settings.tls.server_tls
            else None
        )
    except (EpisodicError, OSError) as err:
        log.error("%s cannot start: %s", name, getattr(err, "message", err))
        engine.dispose()
        sys.exit(2)
    log.info("%s; TLS %s", describe_auth(settings), "on" if credentials else "off")
    grpc_name = GRPC_SERVICES[name]
    runtime = build_server(
        name=grpc_name,
        register=service.register,
        service_names=grpc_names,
        host=settings.service.bind_host,
        port=getattr(settings.service, f"{name}_port"),
        workers=settings.service.grpc_workers,
        engine=engine,
        shutdown_grace=settings.service.shutdown_grace.total_seconds(),
        max_request_bytes=settings.service.max_request_bytes,
        guard=guard,
        credentials=credentials,
        health_port=settings.service.health_port,
        limits=AdmissionLimits(
            request_timeout=settings.service.request_body_timeout.total_seconds(),
            max_calls_per_peer=settings.service.max_calls_per_peer,
            max_calls_in_flight=settings.service.max_calls_in_flight,
            handlers_stall_after=settings.service.handlers_stall_after.total_seconds(),
        ),
        max_connections=settings.service.max_connections,
    )
    runtime.on_shutdown.extend(service.on_shutdown)
    for start in service.on_start:
        start()
    run_until_signalled(
        runtime, health_interval=settings.service.db_health_interval.total_seconds()
    )
