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
failed = []

def call():
    with grpc.insecure_channel(f"127.0.0.1:{{port}}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while not stop.is_set():
            try:
                stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
            except grpc.RpcError as error:
                failed.append(error.code())

# Daemon callers and the finally: with gRPC's default a fork may crash (the child or the
# parent); the script must still end, so the control below reports rather than hangs.
callers = [threading.Thread(target=call, daemon=True) for _ in range(4)]
for t in callers:
    t.start()
try:
    for _ in range(60):
        subprocess.run(["/bin/true"], user=os.getuid(), check=True)
finally:
    stop.set()
    for t in callers:
        t.join(timeout=10)
server.stop(0)
print("done", len(failed))
"""


def _run(first: str) -> tuple[int | None, str, str]:
    """(exit code or None if it hung, stdout, stderr) of the script with ``first`` first."""
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT.format(first=first)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    except subprocess.TimeoutExpired as hung:  # a child stuck after a fork: killed
        return None, _text(hung.stdout), _text(hung.stderr)
    return done.returncode, done.stdout, done.stderr


def _text(output: bytes | str | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def test_episodic_entry_points_fork_without_grpc_fork_handlers() -> None:
    # Control: gRPC's own default runs its fork handlers during calls (and says so; it may
    # also crash a child or abort, which is the harm, and is why the control's exit is not
    # checked).
    _, _, plain_stderr = _run("")
    assert "fork() handlers" in plain_stderr, "the check below could not fail here"
    for entry in ("import episodic.cli", "import episodic.testing"):
        code, stdout, stderr = _run(entry)
        assert code == 0 and stdout.strip() == "done 0", stderr[-2000:]
        assert "fork() handlers" not in stderr, entry
