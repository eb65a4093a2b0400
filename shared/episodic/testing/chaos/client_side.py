"""The client side of a chaos run: the status codes clients saw (:class:`Tally`), their
SDK clients (:class:`Clients`), the pace of the writes (:class:`Pacer`), the threads the
writers plan (:class:`PlannedThread`) and what the clients were told (:class:`Ledger` of
:class:`Ack`)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass

from episodic.sdk.client import EpisodicClient


class Tally:
    """Status codes clients saw, per RPC; for a code no client should see, also where and
    when (the first few times and the last), so a failed run says which replica and which
    fault to look at."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.codes: dict[str, Counter[str]] = defaultdict(Counter)
        self.sightings: dict[tuple[str, str], list[str]] = defaultdict(list)

    def record(self, rpc: str, code: str, where: str = "") -> None:
        with self._lock:
            self.codes[rpc][code] += 1
            if where:
                seen = self.sightings[(rpc, code)]
                seen[3:] = [where]  # the first three, then the latest

    def where(self, rpc: str, code: str) -> str:
        with self._lock:
            seen = self.sightings.get((rpc, code), [])
            return f"{', '.join(seen[:3])}{f' ... last {seen[3]}' if len(seen) > 3 else ''}"

    def snapshot(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {rpc: dict(c.most_common()) for rpc, c in sorted(self.codes.items())}


class Clients:
    """SDK clients by (owner, service, address): each writer and reader has its own client
    (its own channel) per replica it talks to, like separate applications would, with the
    owner's API key when the run requires keys (``keys``: owner -> key; an owner without
    one calls without a key)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.keys: dict[str, str] = {}
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, str, str], EpisodicClient] = {}

    def get(self, owner: str, service: str, address: str) -> EpisodicClient:
        key = (owner, service, address)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                addresses = {service: address}  # the other services are never called
                client = EpisodicClient(
                    ingest=addresses.get("ingest"),
                    recall=addresses.get("recall"),
                    scheduler=addresses.get("scheduler"),
                    summariser=addresses.get("summariser"),
                    timeout=self.timeout,
                    # "": no key, whatever EPISODIC_API_KEY the harness's process has.
                    api_key=self.keys.get(owner, ""),
                )
                self._clients[key] = client
            return client

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()


class Pacer:
    """Spreads the writes evenly over the planned seconds (shared by all writers)."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / max(rate, 1e-6)
        self._next = time.monotonic()
        self._lock = threading.Lock()

    def take(self, n: int, stop: threading.Event) -> None:
        with self._lock:
            now = time.monotonic()
            at = max(self._next, now)
            self._next = at + n * self.interval
        stop.wait(max(0.0, at - now))


@dataclass
class PlannedThread:
    index: int
    thread_id: str
    dataset: str
    writer: int
    created: bool = False
    broken: bool = False
    next_message: int = 0
    burst: int = 0
    last_sequence: int = 0


@dataclass(frozen=True)
class Ack:
    thread_id: str
    sequence: int
    key: str
    sha256: str
    role: str


class Ledger:
    """What clients were told: every acknowledged message (by idempotency key), batches
    given up, and inconsistencies between receipts."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: dict[str, Ack] = {}
        self.abandoned: dict[str, str] = {}  # key -> why
        self.problems: list[str] = []
        self.replayed = 0
        self.add_calls_ok = 0
        self.end_ok = 0
        self.end_without_episode_id = 0
        self.created: list[PlannedThread] = []
        self.checkpoints: list[tuple[str, int]] = []  # (thread, last acked sequence) at EndThread

    def count(self) -> int:
        with self.lock:
            return len(self.acked)

    def problem(self, message: str) -> None:
        with self.lock:
            self.problems.append(message)

    def ack(self, thread: PlannedThread, acks: list[Ack], replayed: int) -> None:
        with self.lock:
            self.add_calls_ok += 1
            self.replayed += replayed
            for ack in acks:
                before = self.acked.get(ack.key)
                if before is not None and before != ack:
                    self.problems.append(
                        f"receipts disagree for key {ack.key}: sequence {before.sequence} "
                        f"then {ack.sequence}"
                    )
                self.acked[ack.key] = ack


def sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()
