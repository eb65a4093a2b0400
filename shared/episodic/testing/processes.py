"""Service processes for integration tests: each service runs as ``python -m
episodic.services.<name>`` in its own process against the test's database, on a free port."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import grpc

from episodic.testing.keys import keyring_file

# Fast, deterministic defaults for tests; a test overrides what it exercises.
TEST_ENV = {
    "EPISODIC_EMBEDDING_PROVIDER": "hashing",
    "EPISODIC_SCHEDULER_POLL_INTERVAL": "0",
    "EPISODIC_SUMMARISER_POLL_INTERVAL": "0",
    "EPISODIC_SHUTDOWN_GRACE": "5",
    "EPISODIC_GRPC_WORKERS": "16",
    "EPISODIC_DB_POOL_SIZE": "5",
    "EPISODIC_SCHEDULER_ADDRESS": "127.0.0.1:1",  # nothing listens: set when a test runs one
    "OTEL_TRACES_EXPORTER": "none",
    "EPISODIC_METRICS_PORT": "0",  # any free port: tests run services side by side
    "PYTHONUNBUFFERED": "1",
}


@dataclass
class ServiceProcess:
    """A running service; ``address`` is host:port once it printed its ready line."""

    name: str
    proc: subprocess.Popen[str]
    port: int
    output: list[str] = field(default_factory=list)
    metrics_port: int | None = None  # where /metrics listens (None: no endpoint)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        assert self.metrics_port is not None, f"{self.name} serves no /metrics"
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def channel(self) -> grpc.Channel:
        return grpc.insecure_channel(self.address)

    def terminate(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def log(self) -> str:
        return "".join(self.output)


def start_service(
    name: str,
    database_url: str,
    env: dict[str, str] | None = None,
    timeout: float = 60.0,
    credentials: grpc.ChannelCredentials | None = None,
    python: str | None = None,
) -> ServiceProcess:
    """Starts ``episodic.services.<name>`` and waits (on its output, not a sleep) until it
    listens and answers SERVING. ``credentials``: how to reach a TLS server for that check.
    ``python``: another interpreter (a benchmark runs an older checkout's venv beside this
    one, to compare in one run)."""
    full_env = {
        **os.environ,
        **TEST_ENV,
        "EPISODIC_MASTER_KEY_FILE": str(keyring_file()),
        "EPISODIC_DATABASE_URL": database_url,
    }
    full_env[f"EPISODIC_{name.upper()}_PORT"] = "0"
    full_env.update(env or {})
    if not full_env["EPISODIC_MASTER_KEY_FILE"]:  # a test running without encryption
        del full_env["EPISODIC_MASTER_KEY_FILE"]
    proc = subprocess.Popen(
        [python or sys.executable, "-m", f"episodic.services.{name}"],
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    output: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + timeout
    metrics_port: int | None = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            proc.kill()
            raise TimeoutError(f"{name} did not start in {timeout}s:\n{''.join(output)}")
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            continue
        if line is None:
            raise RuntimeError(f"{name} exited with {proc.wait()}:\n{''.join(output)}")
        if "metrics on port" in line:  # printed before the ready line
            metrics_port = int(line.rsplit("port", 1)[1].split()[0])
        if "listening on port" in line:
            port = int(line.rsplit("port", 1)[1].split()[0])
            service = ServiceProcess(
                name=name, proc=proc, port=port, output=output, metrics_port=metrics_port
            )
            wait_serving(
                service.address,
                timeout=max(1.0, deadline - time.monotonic()),
                service=f"episodic.v1.{name.capitalize()}Service",
                credentials=credentials,
            )
            return service


def wait_serving(
    address: str,
    timeout: float = 30.0,
    service: str = "",
    credentials: grpc.ChannelCredentials | None = None,
) -> None:
    """Polls the standard health service until ``service`` answers SERVING (readiness: the
    service's own name is SERVING only once its database answers)."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    deadline = time.monotonic() + timeout
    channel = (
        grpc.secure_channel(address, credentials)
        if credentials is not None
        else grpc.insecure_channel(address)
    )
    with channel:
        stub: Any = health_pb2_grpc.HealthStub(channel)  # typeshed's stub declares no methods
        while True:
            try:
                resp = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2)
                if resp.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{address} not SERVING after {timeout}s")
            time.sleep(0.05)


def wait_until(predicate, timeout: float = 30.0, interval: float = 0.05, message: str = ""):  # type: ignore[no-untyped-def]
    """Polls ``predicate`` until it returns a truthy value (returned) or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s: {message}")
        time.sleep(interval)


def queued_episode_id(
    recall: Any,
    dataset: str,
    thread_id: str,
    ended: Any,
    *,
    end_sequence: int,
    timeout: float = 60.0,
) -> str:
    """The id of the episode an ``EndThread`` queued (``ended`` is its response).

    EndThread names the episode only when the Scheduler answered within
    ``EPISODIC_SCHEDULER_NOTIFY_TIMEOUT``; on a loaded machine it may not, and the
    Scheduler queues it moments later. Then this polls ``recall`` (a RecallService stub)
    for the thread's episode that ends at ``end_sequence``, any status."""
    if ended.episode_id:
        return str(ended.episode_id)
    from episodic.v1 import episode_pb2 as epb
    from episodic.v1 import recall_service_pb2 as rpb

    def listed() -> str | None:
        page = recall.ListEpisodes(
            rpb.ListEpisodesRequest(dataset=dataset, thread_id=thread_id), timeout=10
        )
        return next(
            (
                e.episode_id
                for e in page.episodes
                if e.end_sequence == end_sequence and e.kind != epb.EPISODE_KIND_EVENT
            ),
            None,
        )

    return str(wait_until(listed, timeout=timeout, message=f"thread {thread_id}'s episode queued"))
