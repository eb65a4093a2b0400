"""Processes of episodic that fork children while gRPC calls are in flight (``episodic up``,
the tests and benches restarting pg_ctl with ``user=``) turn gRPC's fork handlers off
first (:mod:`episodic.forking`): with them on, such forks crashed the suite's child
(SIGSEGV before exec) and, measured, aborted the parent in gRPC's poller."""

from __future__ import annotations

import os
import subprocess
import sys

# A health server and a thread calling it without pause, while the main thread forks with
# user= (fork(), not vfork(): the fork handlers run) and execs /bin/true.
_SCRIPT = """
import os, subprocess, sys, threading
{first}
from concurrent import futures
import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
port = server.add_insecure_port("127.0.0.1:0")
server.start()
stop = threading.Event()

def call():
    with grpc.insecure_channel(f"127.0.0.1:{{port}}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while not stop.is_set():
            stub.Check(health_pb2.HealthCheckRequest(), timeout=5)

callers = [threading.Thread(target=call) for _ in range(4)]
for t in callers:
    t.start()
for _ in range(60):
    subprocess.run(["/bin/true"], user=os.getuid(), check=True)
stop.set()
for t in callers:
    t.join()
server.stop(0)
print("done")
"""


def _run(first: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    return subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(first=first)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_episodic_entry_points_fork_without_grpc_fork_handlers() -> None:
    # Control: gRPC's own default runs its fork handlers during calls (and says so).
    plain = _run("")
    assert "fork() handlers" in plain.stderr, "the check below could not fail here"
    for entry in ("import episodic.cli", "import episodic.testing"):
        run = _run(entry)
        assert run.returncode == 0 and run.stdout.strip() == "done", run.stderr[-2000:]
        assert "fork() handlers" not in run.stderr, entry
