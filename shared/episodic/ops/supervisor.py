"""`episodic up`: the database and the four services on one machine.

Each service runs as its own process (exactly as in Kubernetes) in its own session, so a
Ctrl-C reaches only this supervisor, which then stops them in order: services first
(SIGTERM: they drain and release their claims), then PostgreSQL. A service that dies is
restarted with backoff; the backoff starts over once a service has run
:data:`HEALTHY_AFTER` seconds. The embedded PostgreSQL is watched too: if it dies it is
started again on the same data directory and socket (the services reconnect by themselves
and answer UNAVAILABLE meanwhile).
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from episodic.config import Settings
from episodic.ops.runtime import EmbeddedPostgres
from episodic.serving.stop_signals import StopSignals

START_ORDER = ("scheduler", "ingest", "summariser", "recall")
READY_TIMEOUT = 120.0
#: A process that ran this long is healthy: its next failure restarts without backoff.
HEALTHY_AFTER = 60.0
MAX_BACKOFF = 30.0
#: Held (an advisory lock) by the ``episodic up`` that runs on a data directory.
UP_LOCK = "up.lock"


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[str] | None = None
    port: int | None = None
    metrics_port: int | None = None  # where its Prometheus /metrics listens (None: none)
    restarts: int = 0  # consecutive restarts; back to 0 after HEALTHY_AFTER seconds up
    started_at: float = 0.0
    ready: threading.Event = field(default_factory=threading.Event)


def backoff(restarts: int) -> float:
    """Seconds to wait before the ``restarts``-th consecutive restart (1, 2, 4 … 30)."""
    return min(MAX_BACKOFF, 0.5 * 2**restarts)


class Supervisor:
    def __init__(self, settings: Settings, services: list[str] | None = None) -> None:
        self.settings = settings
        wanted = set(services or START_ORDER) & set(available_services())
        self.children = [Child(name) for name in START_ORDER if name in wanted]
        # Ctrl-C / SIGTERM: a handler that takes no lock (serving/stop_signals.py).
        self.stopping = StopSignals()
        self.database_url: str | None = settings.database.database_url
        self._pg: EmbeddedPostgres | None = None
        self._lock_fd: int | None = None
        # Set while the embedded PostgreSQL is down or still starting after a restart.
        self._database_down = False
        self._service_key: str | None = None
        self._master_key_file: Path | None = settings.privacy.master_key_file
        self.log_dir = settings.database.data_dir.expanduser().resolve() / "logs"

    # -- lifecycle -----------------------------------------------------------------
    def run(self) -> int:
        self.stopping.install()
        try:
            from episodic.serving.server import auth_required

            auth_required(self.settings)  # refuses an open server beyond loopback
            self._prepare_master_key()
            self._start_database()
            self._migrate()
            self._mint_service_key()
            for child in self.children:
                if self.stopping.is_set():
                    break
                self._start(child)
            if not self.stopping.is_set():
                self._print_banner()
            while not self.stopping.wait(0.5):
                self._restart_database()
                self._restart_dead()
            return 0
        except Exception as err:  # startup failed: say why, clean up, non-zero exit
            print(f"episodic up: {getattr(err, 'message', err)}", file=sys.stderr, flush=True)
            return 1
        finally:
            if self.stopping.signum:  # said here: printing in the handler could hang
                print(f"\nstopping (signal {self.stopping.signum}) …", flush=True)
            self._stop_all()

    # -- database --------------------------------------------------------------------
    def _start_database(self) -> None:
        if self.database_url:
            print("database: EPISODIC_DATABASE_URL (external)", flush=True)
            return
        data_dir = self.settings.database.data_dir.expanduser().resolve()
        self._hold_data_dir(data_dir)
        pg = EmbeddedPostgres(data_dir / "pgdata")
        self._pg = pg
        self.database_url = pg.start()
        print(f"database: embedded PostgreSQL at {self.database_url}", flush=True)

    def _hold_data_dir(self, data_dir: Path) -> None:
        """One ``episodic up`` per data directory. A second one would adopt the first's
        running PostgreSQL (the wheel reuses a server already up on its data), fail on the
        ports the first holds, and stop that PostgreSQL on its way out. An advisory lock,
        held for the run and released by the kernel however the run ends (a killed run
        leaves nothing to clean up), tells it to leave the first alone."""
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(data_dir / UP_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise RuntimeError(
                f"another `episodic up` (pid {holder}) is running on {data_dir}: use that "
                "one, stop it first (Ctrl-C where it runs), or give this one a data "
                "directory of its own (EPISODIC_DATA_DIR) and other ports"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def _migrate(self) -> None:
        from episodic.store import migrate

        assert self.database_url
        migrate.upgrade(self.database_url, self.settings.database.embedding_dimension)

    def _prepare_master_key(self) -> None:
        """Encryption at rest is on by default: without EPISODIC_MASTER_KEY_FILE, the data
        directory's keyring is used, created on first start."""
        if self._master_key_file is not None:
            print(f"encryption: master keyring {self._master_key_file}", flush=True)
            return
        if self.settings.privacy.encryption == "off":
            print(
                "encryption: off (EPISODIC_ENCRYPTION=off): new datasets in the clear", flush=True
            )
            return
        from episodic.crypto import KEYRING_FILE_NAME, LocalKeyring

        data_dir = self.settings.database.data_dir.expanduser().resolve()
        path = data_dir / KEYRING_FILE_NAME
        if path.exists():
            print(f"encryption: master keyring {path}", flush=True)
        else:
            data_dir.mkdir(parents=True, exist_ok=True)
            LocalKeyring.create(path)
            print(
                f"encryption: generated a master key in {path} — BACK IT UP: without it "
                "the encrypted data cannot be read (not even from backups)",
                flush=True,
            )
        self._master_key_file = path

    # -- services --------------------------------------------------------------------
    def _env(self, child: Child) -> dict[str, str]:
        env = dict(os.environ)
        env["EPISODIC_DATABASE_URL"] = self.database_url or ""
        scheduler = next((c for c in self.children if c.name == "scheduler"), None)
        if scheduler is not None and scheduler.port:
            env["EPISODIC_SCHEDULER_ADDRESS"] = f"127.0.0.1:{scheduler.port}"
        if child.port:  # keep the port across restarts so clients can reconnect
            env[f"EPISODIC_{child.name.upper()}_PORT"] = str(child.port)
        if self._service_key:
            env["EPISODIC_SERVICE_KEY"] = self._service_key
        if self._master_key_file is not None:
            env["EPISODIC_MASTER_KEY_FILE"] = str(self._master_key_file)
        return env

    def _mint_service_key(self) -> None:
        """With keys required and no EPISODIC_SERVICE_KEY, this run gets a service key of
        its own (Ingest needs one to call the Scheduler), revoked when it stops."""
        from episodic.serving.server import auth_required

        if not auth_required(self.settings) or self.settings.auth.service_key.get_secret_value():
            return
        from episodic.access import Role
        from episodic.store import keys
        from episodic.store.db import make_engine

        assert self.database_url
        engine = make_engine(self.database_url, pool_size=1, application_name="episodic-up")
        try:
            with engine.begin() as conn:
                minted = keys.create_key(
                    conn,
                    role=Role.SERVICE,
                    datasets=["*"],
                    name="episodic up (this run's services)",
                    created_by="episodic up",
                )
        finally:
            engine.dispose()
        self._service_key = minted.secret

    def _revoke_service_key(self) -> None:
        if not self._service_key or not self.database_url:
            return
        from episodic.store import keys
        from episodic.store.db import make_engine

        engine = make_engine(self.database_url, pool_size=1, application_name="episodic-up")
        try:
            with engine.begin() as conn:
                keys.revoke_key(conn, self._service_key)
        except Exception as err:  # the database may be gone already; the key dies with it
            print(f"could not revoke this run's service key: {err}", file=sys.stderr)
        finally:
            engine.dispose()

    def _start(self, child: Child) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        child.ready.clear()
        child.started_at = time.monotonic()
        child.proc = subprocess.Popen(
            [sys.executable, "-m", f"episodic.services.{child.name}"],
            env=self._env(child),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # Ctrl-C reaches only us; we stop children in order
        )
        threading.Thread(target=self._pump, args=(child, child.proc), daemon=True).start()
        deadline = time.monotonic() + READY_TIMEOUT
        while not child.ready.wait(0.2):
            if child.proc.poll() is not None:
                raise RuntimeError(
                    f"{child.name} exited with {child.proc.returncode}; see "
                    f"{self.log_dir / (child.name + '.log')}"
                )
            if self.stopping.is_set() or time.monotonic() > deadline:
                if not self.stopping.is_set():
                    raise RuntimeError(f"{child.name} did not become ready in {READY_TIMEOUT}s")
                return

    def _pump(self, child: Child, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        with open(self.log_dir / f"{child.name}.log", "a", encoding="utf-8") as log:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                if "metrics on port" in line and not child.ready.is_set():
                    child.metrics_port = int(line.rsplit("port", 1)[1].split()[0])
                elif "listening on port" in line and not child.ready.is_set():
                    child.port = int(line.rsplit("port", 1)[1].split()[0])
                    child.ready.set()
                elif " ERROR " in line or "Traceback" in line:
                    print(f"[{child.name}] {line}", end="", flush=True)

    def _restart_dead(self) -> None:
        for child in self.children:
            if self.stopping.is_set():
                return
            if child.proc is not None and child.proc.poll() is not None:
                if time.monotonic() - child.started_at >= HEALTHY_AFTER:
                    child.restarts = 0  # it was healthy: this is a new failure, not a loop
                child.restarts += 1
                delay = backoff(child.restarts)
                print(
                    f"{child.name} exited with {child.proc.returncode}; restarting in "
                    f"{delay:.1f}s (restart {child.restarts})",
                    flush=True,
                )
                if self.stopping.wait(delay):
                    return
                try:
                    self._start(child)
                except RuntimeError as err:
                    print(f"episodic up: {err}", file=sys.stderr, flush=True)

    def _restart_database(self) -> None:
        """Starts the embedded PostgreSQL again if it died (kill -9, OOM killer)."""
        if self._pg is None:
            return
        if self._pg.running():
            # A start can time out while crash recovery goes on (a loaded machine); the
            # server then comes up by itself, and is announced once it accepts connections.
            if self._database_down and self._pg.accepting():
                self._database_down = False
                print("embedded PostgreSQL is back", flush=True)
            return
        self._database_down = True
        print("embedded PostgreSQL is not running; starting it again", flush=True)
        try:
            self._pg.restart()
            self._database_down = False
            print("embedded PostgreSQL is back", flush=True)
        except Exception as err:  # keep supervising: the next check tries again
            print(f"episodic up: PostgreSQL did not start: {err}", file=sys.stderr, flush=True)

    def _print_banner(self) -> None:
        host = self.settings.service.bind_host
        print("episodic is up:", flush=True)
        for child in self.children:
            # The service's line is unchanged (scripts read "<name> grpc://host:port" as a
            # whole line); its /metrics address goes on the line under it.
            print(f"  {child.name:<11} grpc://{host}:{child.port}", flush=True)
            if child.metrics_port is not None:
                print(f"  {'':<11} metrics http://{host}:{child.metrics_port}/metrics", flush=True)
        print(f"  logs        {self.log_dir}", flush=True)
        from episodic.serving.server import describe_auth

        print(f"  {describe_auth(self.settings)}", flush=True)
        print("Press Ctrl-C to stop.", flush=True)

    def _stop_all(self) -> None:
        grace = self.settings.service.shutdown_grace.total_seconds() + 10
        # Reverse order: readers and writers first, the scheduler last.
        for child in reversed(self.children):
            if child.proc is not None and child.proc.poll() is None:
                child.proc.send_signal(signal.SIGTERM)
        for child in reversed(self.children):
            if child.proc is None:
                continue
            try:
                child.proc.wait(grace)
            except subprocess.TimeoutExpired:
                print(f"{child.name} did not stop in {grace:.0f}s; killing it", flush=True)
                child.proc.kill()
                child.proc.wait(10)
        self._revoke_service_key()
        if self._pg is not None:
            self._pg.stop()
            print("database stopped", flush=True)
        if self._lock_fd is not None:  # the data directory is free for the next run
            os.close(self._lock_fd)
            self._lock_fd = None
        print("episodic stopped", flush=True)


def available_services() -> list[str]:
    """Services whose process entry point exists in this installation."""
    import importlib.util

    return [n for n in START_ORDER if importlib.util.find_spec(f"episodic.services.{n}.__main__")]
