"""The services of a chaos run: N replicas of each, as processes (:class:`Cluster`), each
replica a :class:`Slot` that a fault can kill and restart in place, and a watchdog that
restarts a process which exits on its own."""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from episodic.testing.chaos.config import SERVICES
from episodic.testing.processes import ServiceProcess, start_service
from episodic.testing.proxy import TcpProxy

log = logging.getLogger(__name__)


@dataclass
class Slot:
    """One replica of one service: its current process and every one before it."""

    name: str
    index: int
    process: ServiceProcess | None = None
    port: int = 0
    generations: list[ServiceProcess] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock)
    frozen: bool = False

    @property
    def label(self) -> str:
        return f"{self.name}-{self.index}"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


class Cluster:
    """N replicas of each service against one database, Ingest's Scheduler address on the
    proxy; restarts replicas in place and watches for processes that die on their own."""

    def __init__(self, db_url: str, env: dict[str, str], proxy: TcpProxy, replicas: int) -> None:
        self.db_url = db_url
        self.env = env
        self.proxy = proxy
        self.slots: dict[str, list[Slot]] = {
            name: [Slot(name, i) for i in range(replicas)] for name in SERVICES
        }
        self.unexpected: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None

    def _env_for(self, name: str, port: int) -> dict[str, str]:
        env = dict(self.env)
        env[f"EPISODIC_{name.upper()}_PORT"] = str(port)
        if name == "ingest":
            env["EPISODIC_SCHEDULER_ADDRESS"] = self.proxy.address
        return env

    def _launch(self, slot: Slot, timeout: float = 120.0) -> None:
        """Starts the slot's process, on its old port when it had one; retries until
        ``timeout`` (the database may be restarting)."""
        deadline = time.monotonic() + timeout
        port = slot.port
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                process = start_service(
                    slot.name,
                    self.db_url,
                    self._env_for(slot.name, port),
                    timeout=max(5.0, deadline - time.monotonic()),
                )
            except (RuntimeError, TimeoutError) as err:
                last = err
                if port and ("cannot listen" in str(err) or "Failed to bind" in str(err)):
                    log.warning("%s: port %d is taken; using a new one", slot.label, port)
                    port = 0
                time.sleep(0.2)
                continue
            slot.process = process
            slot.port = process.port
            slot.generations.append(process)
            if slot.name == "scheduler":
                self.proxy.set_targets(self.addresses("scheduler"))
            return
        raise RuntimeError(f"{slot.label} did not start within {timeout:.0f}s: {last}")

    def start(self) -> None:
        """Starts every replica, the Schedulers first (Ingest's notices go to them)."""
        with ThreadPoolExecutor(max_workers=8) as pool:
            for names in (("scheduler",), ("ingest", "summariser", "recall")):
                futures = [pool.submit(self._launch, s) for n in names for s in self.slots[n]]
                for future in futures:
                    future.result()
        self._watchdog = threading.Thread(target=self._watch, name="chaos-watchdog", daemon=True)
        self._watchdog.start()

    def addresses(self, name: str) -> list[str]:
        return [s.address for s in self.slots[name] if s.port]

    def address(self, name: str, index: int) -> str:
        slots = self.slots[name]
        return slots[index % len(slots)].address

    def kill_and_restart(self, name: str, index: int, delay: float) -> str:
        """SIGKILL, ``delay`` seconds down, then a new process on the same port."""
        slot = self.slots[name][index]
        with slot.lock:
            assert slot.process is not None
            pid = slot.process.proc.pid
            slot.process.kill()
            self._stop.wait(delay)
            self._launch(slot)
            assert slot.process is not None
            return f"{slot.label} pid {pid} -> {slot.process.proc.pid} on port {slot.port}"

    def _watch(self) -> None:
        """A process that exits on its own is a finding; like Kubernetes, restart it."""
        while not self._stop.wait(0.2):
            for slot in itertools.chain.from_iterable(self.slots.values()):
                if not slot.lock.acquire(blocking=False):
                    continue  # a fault is being injected on it
                try:
                    process = slot.process
                    if process is None or process.proc.poll() is None or self._stop.is_set():
                        continue
                    tail = "".join(process.output[-15:])
                    message = (
                        f"{slot.label} (pid {process.proc.pid}) exited by itself with status "
                        f"{process.proc.returncode}; last output:\n{tail}"
                    )
                    log.warning("%s", message)
                    with self._lock:
                        self.unexpected.append(message)
                    try:
                        self._launch(slot)
                    except Exception as err:
                        with self._lock:
                            self.unexpected.append(f"{slot.label} could not be restarted: {err}")
                finally:
                    slot.lock.release()

    def summariser_pids(self) -> dict[int, Slot]:
        return {
            s.process.proc.pid: s
            for s in self.slots["summariser"]
            if s.process is not None and s.process.proc.poll() is None
        }

    def dead_slots(self) -> list[str]:
        return [
            s.label
            for s in itertools.chain.from_iterable(self.slots.values())
            if s.process is None or s.process.proc.poll() is not None
        ]

    def stop(self) -> None:
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.join(10)
        processes = [
            s for s in itertools.chain.from_iterable(self.slots.values()) if s.process is not None
        ]
        for slot in processes:
            assert slot.process is not None
            if slot.frozen:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(slot.process.proc.pid, signal.SIGCONT)
            if slot.process.proc.poll() is None:
                slot.process.proc.send_signal(signal.SIGTERM)
        for slot in processes:
            assert slot.process is not None
            try:
                slot.process.proc.wait(15)
            except subprocess.TimeoutExpired:
                slot.process.kill()

    def write_logs(self, directory: Path) -> dict[str, str]:
        """Every process's output (killed generations too) into ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        logs: dict[str, str] = {}
        for slot in itertools.chain.from_iterable(self.slots.values()):
            for generation, process in enumerate(slot.generations):
                name = f"{slot.label}.{generation}"
                logs[name] = process.log()
                (directory / f"{name}.log").write_text(logs[name])
        return logs
