"""`episodic up`: starts the embedded database and every service, stops all cleanly."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import psutil
import pytest
from sqlalchemy import text

from episodic.ops.supervisor import available_services
from episodic.store.db import make_engine
from episodic.testing.database import SERVER_DIRECTORY_PREFIX, server_data_parent
from episodic.testing.processes import TEST_ENV
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as pb
from episodic.v1 import ingest_service_pb2_grpc as g


@pytest.fixture
def home() -> Iterator[Path]:
    """``episodic up``'s data directory (and working directory): not under pytest's
    basetemp, whose root (``/tmp/pytest-of-root``) every pytest session of the user shares
    and closes to 0700 when it starts; PostgreSQL, run as another user under root, then
    could not reach its data to start again (the killed-PostgreSQL test failed beside another
    pytest session). Named like the suite's own servers, so a killed run's directory is
    removed by the next run (``remove_abandoned``)."""
    path = Path(tempfile.mkdtemp(prefix=SERVER_DIRECTORY_PREFIX, dir=server_data_parent()))
    yield path
    shutil.rmtree(path, ignore_errors=True)


PORT_VARS = [
    "EPISODIC_INGEST_PORT",
    "EPISODIC_SCHEDULER_PORT",
    "EPISODIC_SUMMARISER_PORT",
    "EPISODIC_RECALL_PORT",
]


def _up_env(home: Path, extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """``episodic up``'s environment: ``home`` its data directory, the embedded database,
    ports chosen by the system."""
    env = {**os.environ, **TEST_ENV, "EPISODIC_DATA_DIR": str(home)}
    env.pop("EPISODIC_DATABASE_URL", None)
    env.pop("EPISODIC_SCHEDULER_ADDRESS", None)
    env.update({var: "0" for var in PORT_VARS})
    env.update(extra_env or {})
    return env


def _start_up(
    home: Path, extra_env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], list[str], queue.Queue[str | None]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "episodic.cli", "up"],
        cwd=home,
        env=_up_env(home, extra_env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
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
    deadline = time.monotonic() + 120
    while True:
        line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        if line is None:
            pytest.fail("episodic up exited early:\n" + "".join(output))
        if line.startswith("Press Ctrl-C"):
            return proc, output, lines
        assert time.monotonic() < deadline, "".join(output)


def _stop(proc: subprocess.Popen[str]) -> None:
    """After a test, failed or not: ``episodic up`` stopped, and with it every process it
    started. SIGKILL alone would orphan its services and its PostgreSQL (the supervisor
    stops them on SIGTERM), which then outlive the test run."""
    if proc.poll() is not None:
        return
    descendants = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
    for child in descendants:  # what a stuck stop left behind
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()


def _postmaster_pid(home: Path) -> int:
    return int((home / "pgdata" / "postmaster.pid").read_text().split()[0])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_up_runs_everything_and_stops_without_orphans(home: Path, sig: int) -> None:
    proc, output, _ = _start_up(home)
    try:
        banner = "".join(output)
        services = {
            line.split()[0]: int(re.search(r"grpc://[^ ]+:(\d+)", line).group(1))  # type: ignore[union-attr]
            for line in banner.splitlines()
            if "grpc://" in line
        }
        assert set(services) == set(available_services()) and "ingest" in services, banner
        # Each service's /metrics address beside its gRPC address, and it answers.
        metrics = re.findall(
            r"^  (\w+) +grpc://\S+\n {2,}metrics (http://\S+/metrics)$", banner, re.M
        )
        assert {name for name, _ in metrics} == set(services), banner
        with urllib.request.urlopen(dict(metrics)["ingest"], timeout=10) as page:
            assert page.status == 200 and b"# TYPE" in page.read()
        children = psutil.Process(proc.pid).children(recursive=True)
        service_pids = [c.pid for c in children if "episodic.services." in " ".join(c.cmdline())]
        assert len(service_pids) == len(services)
        postmaster = _postmaster_pid(home)
        assert psutil.pid_exists(postmaster)

        # The suite works: a write through Ingest succeeds.
        with grpc.insecure_channel(f"127.0.0.1:{services['ingest']}") as channel:
            stub = g.IngestServiceStub(channel)
            thread = stub.CreateThread(pb.CreateThreadRequest(dataset="demo"), timeout=10).thread
            stub.AddMessages(
                pb.AddMessagesRequest(
                    thread_id=thread.thread_id,
                    messages=[pb.NewMessage(role=e.ROLE_USER, content="hi")],
                ),
                timeout=10,
            )

        # Encrypted at rest by default, with a master key made on first start.
        keyring = home / "master-keys.json"
        assert "generated a master key" in banner and "BACK IT UP" in banner, banner
        assert keyring.exists() and keyring.stat().st_mode & 0o777 == 0o600
        url = next(
            line.split(" at ", 1)[1]
            for line in banner.splitlines()
            if "embedded PostgreSQL at" in line
        )
        engine = make_engine(url, pool_size=1)
        try:
            with engine.connect() as conn:
                assert conn.execute(
                    text("SELECT key_id IS NOT NULL FROM datasets WHERE dataset = 'demo'")
                ).scalar_one()
                stored = conn.execute(text("SELECT content FROM messages")).scalar_one()
            assert bytes(stored).startswith(b"\x01")
        finally:
            engine.dispose()

        proc.send_signal(sig)
        assert proc.wait(90) == 0, "".join(output)
        assert "episodic stopped" in "".join(output)
        for pid in [*service_pids, postmaster]:
            assert not _alive(pid), f"process {pid} survived episodic up"
    finally:
        _stop(proc)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_second_up_on_the_same_data_leaves_the_first_running(home: Path) -> None:
    """A second ``episodic up`` on the data directory of a running one says so and exits;
    it used to adopt the first's PostgreSQL, fail on a port, and stop that PostgreSQL on
    its way out."""
    proc, output, _ = _start_up(home)
    try:
        postmaster = _postmaster_pid(home)
        second = subprocess.run(
            [sys.executable, "-m", "episodic.cli", "up"],
            cwd=home,
            env=_up_env(home),
            capture_output=True,
            text=True,
            timeout=120,
        )
        said = second.stdout + second.stderr
        assert second.returncode == 1, said
        assert f"another `episodic up` (pid {proc.pid}) is running on" in said, said
        assert "database stopped" not in said, said
        assert _alive(postmaster) and _postmaster_pid(home) == postmaster
        # The commands that work on the database find the running one by themselves.
        listed = subprocess.run(
            [sys.executable, "-m", "episodic.cli", "keys", "list"],
            cwd=home,
            env=_up_env(home),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert listed.returncode == 0, listed.stderr
        # The first still serves, on the same PostgreSQL.
        port = int(re.search(r"ingest +grpc://[^ ]+:(\d+)", "".join(output)).group(1))  # type: ignore[union-attr]
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = g.IngestServiceStub(channel)
            stub.CreateThread(pb.CreateThreadRequest(dataset="still-up"), timeout=10)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(90) == 0, "".join(output)
        # Its lock went with it: the data directory takes a new run.
        again, _, _ = _start_up(home)
        _stop(again)
    finally:
        _stop(proc)


def test_up_restarts_a_service_that_dies(home: Path) -> None:
    proc, output, lines = _start_up(home)
    try:
        children = psutil.Process(proc.pid).children(recursive=False)
        victim = next(c for c in children if "episodic.services.ingest" in " ".join(c.cmdline()))
        victim.kill()
        deadline = time.monotonic() + 60
        while "restarting" not in "".join(output):
            assert time.monotonic() < deadline, "".join(output)
            with contextlib.suppress(queue.Empty):
                lines.get(timeout=1)

        def restarted() -> bool:
            return any(
                "episodic.services.ingest" in " ".join(c.cmdline()) and c.pid != victim.pid
                for c in psutil.Process(proc.pid).children(recursive=False)
            )

        while not restarted():
            assert time.monotonic() < deadline, "".join(output)
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(90) == 0
    finally:
        _stop(proc)


def test_up_starts_a_killed_postgres_again(home: Path) -> None:
    proc, output, lines = _start_up(home)
    try:
        services = {
            line.split()[0]: int(line.rsplit(":", 1)[1])
            for line in "".join(output).splitlines()
            if "grpc://" in line
        }
        os.kill(_postmaster_pid(home), signal.SIGKILL)
        deadline = time.monotonic() + 90
        while "embedded PostgreSQL is back" not in "".join(output):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(output)
            with contextlib.suppress(queue.Empty):
                lines.get(timeout=1)
        # Writes work again, through the same Ingest (it reconnects by itself).
        with grpc.insecure_channel(f"127.0.0.1:{services['ingest']}") as channel:
            stub = g.IngestServiceStub(channel)
            while True:
                try:
                    stub.CreateThread(pb.CreateThreadRequest(dataset="after"), timeout=5)
                    break
                except grpc.RpcError as err:
                    assert err.code() == grpc.StatusCode.UNAVAILABLE, err
                    assert time.monotonic() < deadline, "".join(output)
                    time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(90) == 0
    finally:
        _stop(proc)


def test_restart_backoff_starts_over_after_a_healthy_run(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from episodic.config import Settings
    from episodic.ops import supervisor

    sup = supervisor.Supervisor(Settings(), services=["ingest"])
    child = sup.children[0]
    waits: list[float] = []
    monkeypatch.setattr(sup, "_start", lambda c: setattr(c, "started_at", clock[0]))
    monkeypatch.setattr(sup.stopping, "wait", lambda delay: waits.append(delay) or False)
    clock = [1000.0]
    monkeypatch.setattr(supervisor.time, "monotonic", lambda: clock[0])

    class Dead:
        returncode = 1

        def poll(self) -> int:
            return 1

    child.proc = Dead()  # type: ignore[assignment]
    child.started_at = clock[0]
    for _ in range(3):  # dies at once, three times: the backoff grows
        sup._restart_dead()
    clock[0] += supervisor.HEALTHY_AFTER + 1  # then it runs healthily for a while
    sup._restart_dead()
    assert waits == [supervisor.backoff(n) for n in (1, 2, 3, 1)]


def test_a_database_start_that_timed_out_is_announced_once_it_accepts(capsys) -> None:  # type: ignore[no-untyped-def]
    """On a loaded machine crash recovery can outlast the start's timeout; the server then
    comes up by itself, and the supervisor must still say so (and only once it answers)."""
    from episodic.config import Settings
    from episodic.ops import supervisor

    class Recovering:
        alive = False
        answers = False

        def running(self) -> bool:
            return self.alive

        def accepting(self) -> bool:
            return self.answers

        def restart(self) -> str:
            self.alive = True  # the postmaster started, recovery still running
            raise RuntimeError("pg_ctl: server did not start in time")

    pg = Recovering()
    sup = supervisor.Supervisor(Settings(), services=["ingest"])
    sup._pg = pg  # type: ignore[assignment]
    sup._restart_database()
    sup._restart_database()  # running, not accepting yet: nothing announced
    assert "is back" not in capsys.readouterr().out
    pg.answers = True
    sup._restart_database()
    sup._restart_database()
    assert capsys.readouterr().out.count("embedded PostgreSQL is back") == 1


def test_up_with_keys_required_runs_the_whole_loop(home: Path) -> None:
    """EPISODIC_AUTH=required: callers need keys, and the services reach each other with a
    service key `episodic up` mints for the run (and revokes when it stops)."""
    from episodic.sdk.client import EpisodicClient, UnauthenticatedError

    loops = {"EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2", "EPISODIC_SCHEDULER_POLL_INTERVAL": "0.2"}
    proc, output, _ = _start_up(home, {"EPISODIC_AUTH": "required", **loops})
    try:
        banner = "".join(output)
        assert "auth: API keys required" in banner
        database = next(
            line.split(" at ", 1)[1].strip()
            for line in banner.splitlines()
            if line.startswith("database: embedded PostgreSQL at")
        )
        services = {
            line.split()[0]: f"127.0.0.1:{line.rsplit(':', 1)[1].strip()}"
            for line in banner.splitlines()
            if "grpc://" in line
        }
        made = subprocess.run(
            [
                sys.executable,
                "-m",
                "episodic.cli",
                "keys",
                "create",
                "--dataset",
                "me",
                "--role",
                "writer",
            ],
            env={**os.environ, "EPISODIC_DATABASE_URL": database},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert made.returncode == 0, made.stderr
        key = made.stdout.strip().splitlines()[-1]
        addresses = {s: services[s] for s in ("ingest", "recall", "scheduler", "summariser")}
        with EpisodicClient(**addresses) as anonymous, pytest.raises(UnauthenticatedError):
            anonymous.recall("me", "anything")
        with EpisodicClient(**addresses, api_key=key, timeout=30) as client:
            thread = client.start_thread("me", "keys")
            client.add_messages(thread.thread_id, [("user", "We picked the Pro tier.")])
            assert client.end_thread(thread.thread_id).episode_id  # Ingest → Scheduler, keyed
            deadline = time.monotonic() + 90
            while not client.recall("me", "tier").episodes:
                assert time.monotonic() < deadline, "".join(output)
                time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(90) == 0
    finally:
        _stop(proc)
