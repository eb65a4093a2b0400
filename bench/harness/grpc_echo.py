"""The bare gRPC hop: a Python gRPC server that answers one method with canned bytes.

What a Python gRPC service cannot go below on this machine: the same sync server the
services run (``grpc.server`` with a thread pool of ``grpc_workers`` handler threads), the
request parsed as the service parses it, no interceptors, no database, the answer a
serialized response of the real size sent as it is. A bench times its calls beside the
service and the bare SQL in one run, so "the service over its SQL" can be read against
"the hop alone over the SQL": the part of a ratio no change inside the service can remove.

    with echo_server("episodic.v1.RecallService", "Recall", RecallRequest, answer_bytes) as address:
        stub = RecallServiceStub(grpc.insecure_channel(address))

The server runs in its own process (``python -m bench.harness.grpc_echo``), as the services do, so
its threads and its GIL are not the bench's.

Variants, to measure what the server's own settings cost (``bench/speed/ingest_bench.py
--echo-variants`` prints them beside the floor in one run): ``aio=True`` serves the same
answer from ``grpc.aio`` (an asyncio server: the handler is a coroutine on the event loop,
no handler thread pool); ``workers`` sizes the sync server's pool; ``options`` are channel
arguments of the server (``grpc.so_reuseport``, ``grpc.max_concurrent_streams``, …); ``env``
is added to the process's environment (``GRPC_POLL_STRATEGY``); ``work`` (``module:factory``,
sync server only) is called once in the server process and returns a function the handler
runs on every parsed request before it answers — e.g. the service's statement, so that the
echo measures the bare hop *with* the database work in its handler: a handler that blocks
mid-call costs the sync server more than one that answers at once, so "the hop alone" plus
"the statement alone" understates what a Python gRPC service can reach.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.harness import REPO

#: The services' handler threads per server (``Settings.grpc_workers``' default).
WORKERS = 16


def _imported(spec: str) -> Any:
    """``module:name`` imported."""
    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


def _handler(request_type: str, answer: bytes, *, aio: bool, work: str | None = None) -> Any:
    import grpc

    parse = _imported(request_type).FromString
    run = _imported(work)() if work else None

    def handle(request: Any, context: Any) -> bytes:
        if run is not None:
            run(request)
        return answer

    async def handle_async(request: Any, context: Any) -> bytes:
        return answer

    return grpc.unary_unary_rpc_method_handler(
        handle_async if aio else handle, request_deserializer=parse, response_serializer=None
    )


def serve(
    service: str,
    method: str,
    request_type: str,
    answer: bytes,
    *,
    workers: int = WORKERS,
    options: list[tuple[str, Any]] | None = None,
    work: str | None = None,
) -> None:
    """Serves ``service/method`` on a free loopback port, printing it, until killed:
    each request parsed as ``request_type`` (``module:Class``), ``work`` run on it (see
    the module's docstring), then ``answer`` sent."""
    import grpc

    handler = _handler(request_type, answer, aio=False, work=work)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers), options=options)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(service, {method: handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    sys.stdout.write(f"echo listening on port {port}\n")
    sys.stdout.flush()
    server.wait_for_termination()


def serve_aio(
    service: str,
    method: str,
    request_type: str,
    answer: bytes,
    *,
    options: list[tuple[str, Any]] | None = None,
) -> None:
    """:func:`serve` on ``grpc.aio``: the handler a coroutine on the server's event loop."""
    import grpc

    async def run() -> None:
        server = grpc.aio.server(options=options)
        server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    service, {method: _handler(request_type, answer, aio=True)}
                )
            ]
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        sys.stdout.write(f"echo listening on port {port}\n")
        sys.stdout.flush()
        await server.wait_for_termination()

    asyncio.run(run())


@contextmanager
def echo_server(service: str, method: str, request_class: type, answer: bytes) -> Iterator[str]:
    """Starts :func:`serve` in its own process for as long as the block runs; yields its
    address (``127.0.0.1:port``)."""
    with echo_process(service, method, request_class, answer) as (address, _):
        yield address


@contextmanager
def echo_process(
    service: str,
    method: str,
    request_class: type,
    answer: bytes,
    *,
    aio: bool = False,
    workers: int = WORKERS,
    options: dict[str, int | str] | None = None,
    env: dict[str, str] | None = None,
    work: str | None = None,
) -> Iterator[tuple[str, int]]:
    """Starts :func:`serve` (or :func:`serve_aio`) in its own process for as long as the
    block runs; yields its address (``127.0.0.1:port``) and its process id."""
    if aio and work:
        raise ValueError("work runs on the sync server only")
    request_type = f"{request_class.__module__}:{request_class.__name__}"
    extra = ["--aio"] if aio else ["--workers", str(workers)]
    if work:
        extra += ["--work", work]
    for key, value in (options or {}).items():
        extra += ["--option", f"{key}={value}"]
    with tempfile.NamedTemporaryFile(prefix="episodic-echo-", suffix=".bin") as canned:
        canned.write(answer)
        canned.flush()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.harness.grpc_echo",
                service,
                method,
                request_type,
                canned.name,
                *extra,
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("echo listening on port "):
                    yield f"127.0.0.1:{line.split()[-1]}", proc.pid
                    break
            else:
                raise RuntimeError(f"the echo server for {service}/{method} did not start")
        finally:
            proc.kill()
            proc.wait()


def _option(text: str) -> tuple[str, int | str]:
    key, _, value = text.partition("=")
    return key, int(value) if value.lstrip("-").isdigit() else value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("service", help="fully qualified, e.g. episodic.v1.RecallService")
    parser.add_argument("method", help="e.g. Recall")
    parser.add_argument("request_type", help="module:Class of the request, parsed per call")
    parser.add_argument("answer_file", help="the serialized response to send")
    parser.add_argument("--aio", action="store_true", help="serve with grpc.aio")
    parser.add_argument("--workers", type=int, default=WORKERS, help="sync server's pool")
    parser.add_argument(
        "--work", help="module:factory returning a function run on every request (sync only)"
    )
    parser.add_argument(
        "--option", action="append", default=[], type=_option, help="server channel arg k=v"
    )
    args = parser.parse_args(argv)
    answer = Path(args.answer_file).read_bytes()
    if args.aio:
        serve_aio(args.service, args.method, args.request_type, answer, options=args.option)
    else:
        serve(
            args.service,
            args.method,
            args.request_type,
            answer,
            workers=args.workers,
            options=args.option,
            work=args.work,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
