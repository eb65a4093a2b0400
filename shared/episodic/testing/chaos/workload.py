"""The load of a chaos run: writers that create threads, append messages and end threads
through the SDK like an application would, readers that read meanwhile, and the run's API
keys (minted before the load, then probed: a key is required and held to its datasets)."""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable
from typing import ClassVar

from episodic.access import Role
from episodic.sdk.client import AlreadyExistsError, EpisodicClient, EpisodicRpcError, NewMessage
from episodic.store import keys as api_keys
from episodic.testing.chaos.client_side import Ack, PlannedThread, sha256
from episodic.testing.chaos.config import RETRYABLE
from episodic.testing.chaos.state import RunState

log = logging.getLogger(__name__)

_VOCABULARY = (
    "pricing roadmap Atlas invoice budget deadline launch migration tier contract "
    "Berlin Lisbon Kyoto café naïve résumé data model index replica outage backup"
)
_WORDS = _VOCABULARY.split()  # non-ASCII on purpose: content is compared by hash


def _content(rnd: random.Random, key: str, role: str) -> str:
    words = rnd.sample(_WORDS, 4)
    n = rnd.randint(1, 999)
    if role == "user":
        return (
            f"We agreed on the {words[0]} {words[1]} at ${n} for project {words[2]}. "
            f"I prefer {words[3]} ({key})."
        )
    return f"Noted: {words[0]} and {words[1]} come to {n} for {words[2]}; {words[3]} next ({key})."


class Workload(RunState):
    """The writers, the readers and the keys they call with."""

    # -- writers

    def _create(self, w: int, thread: PlannedThread) -> bool:
        deadline = time.monotonic() + self.cfg.batch_deadline
        answer, code, attempts = self.call(
            "CreateThread",
            "ingest",
            w,
            lambda c: c.create_thread(
                thread.dataset, label=f"chaos {thread.index}", thread_id=thread.thread_id
            ),
            deadline=deadline,
            owner=f"writer-{w}",
            allow=frozenset({"ALREADY_EXISTS"}),
        )
        if code == "ALREADY_EXISTS" and isinstance(answer, AlreadyExistsError):
            # Only a retry may find it: an earlier attempt committed, its answer was lost.
            if attempts == 1:
                self.ledger.problem(
                    f"CreateThread {thread.thread_id}: ALREADY_EXISTS on a first attempt"
                )
            got, code, _ = self.call(
                "GetThread",
                "ingest",
                w,
                lambda c: c.get_thread(thread.thread_id),
                deadline=deadline,
                owner=f"writer-{w}",
            )
            if code == "OK" and got.dataset != thread.dataset:
                self.ledger.problem(
                    f"thread {thread.thread_id} exists in dataset {got.dataset}, "
                    f"not {thread.dataset}"
                )
        if code != "OK":
            self.ledger.problem(f"CreateThread {thread.thread_id} gave up with {code}: {answer}")
            thread.broken = True
            return False
        thread.created = True
        with self.ledger.lock:
            self.ledger.created.append(thread)
        return True

    def _add(self, w: int, thread: PlannedThread, rnd: random.Random, n: int) -> None:
        batch: list[NewMessage] = []
        for _ in range(n):
            i = thread.next_message
            thread.next_message += 1
            key = f"chaos:{self.run_id}:w{w}:t{thread.index}:{i}"
            role = "user" if i % 2 == 0 else "assistant"
            batch.append(NewMessage(role, _content(rnd, key, role), idempotency_key=key))
        deadline = time.monotonic() + self.cfg.batch_deadline
        answer, code, _ = self.call(
            "AddMessages",
            "ingest",
            w,
            lambda c: c.add_messages(thread.thread_id, batch),
            deadline=deadline,
            owner=f"writer-{w}",
        )
        if code != "OK":
            why = f"{code}: {answer}"
            with self.ledger.lock:
                for m in batch:
                    assert m.idempotency_key is not None
                    self.ledger.abandoned[m.idempotency_key] = why
            self.ledger.problem(
                f"AddMessages to {thread.thread_id} gave up ({len(batch)} messages) with {why}"
            )
            return
        receipts = answer.receipts
        if len(receipts) != len(batch):
            self.ledger.problem(
                f"AddMessages to {thread.thread_id}: {len(receipts)} receipts for "
                f"{len(batch)} messages"
            )
            return
        acks: list[Ack] = []
        for m, r in zip(batch, receipts, strict=True):
            assert m.idempotency_key is not None
            if r.idempotency_key != m.idempotency_key:
                self.ledger.problem(
                    f"AddMessages to {thread.thread_id}: receipt for key {r.idempotency_key!r} "
                    f"answers message {m.idempotency_key!r}"
                )
            acks.append(
                Ack(thread.thread_id, r.sequence, m.idempotency_key, sha256(m.content), m.role)
            )
        sequences = [a.sequence for a in acks]
        if sequences != list(range(sequences[0], sequences[0] + len(sequences))):
            self.ledger.problem(
                f"AddMessages to {thread.thread_id}: sequences {sequences} of one batch are "
                "not consecutive"
            )
        if sequences[0] <= thread.last_sequence:
            self.ledger.problem(
                f"AddMessages to {thread.thread_id}: batch got sequences from {sequences[0]} "
                f"but an earlier batch of this writer already had {thread.last_sequence}"
            )
        thread.last_sequence = max(thread.last_sequence, sequences[-1])
        self.ledger.ack(thread, acks, replayed=sum(1 for r in receipts if not r.stored))

    def _end(self, w: int, thread: PlannedThread) -> None:
        deadline = time.monotonic() + self.cfg.batch_deadline
        answer, code, _ = self.call(
            "EndThread",
            "ingest",
            w,
            lambda c: c.end_thread(thread.thread_id),
            deadline=deadline,
            owner=f"writer-{w}",
        )
        if code != "OK":
            self.ledger.problem(f"EndThread {thread.thread_id} gave up with {code}: {answer}")
            return
        with self.ledger.lock:
            self.ledger.end_ok += 1
            if answer.episode_queued and not answer.episode_id:
                self.ledger.end_without_episode_id += 1
            if thread.last_sequence:
                self.ledger.checkpoints.append((thread.thread_id, thread.last_sequence))

    def writer(self, w: int) -> None:
        rnd = random.Random(self.seed * 7919 + w)
        mine = [t for t in self.plan if t.writer == w]
        fresh = list(mine)
        active: list[PlannedThread] = []
        # Bursts a little shorter than messages/threads, so every thread gets created.
        avg = max(1, self.cfg.messages * 4 // (5 * max(1, self.cfg.threads)))
        try:
            while not self.stop_writers.is_set():
                while len(active) < min(self.cfg.active_threads, len(mine)):
                    if fresh:
                        t = fresh.pop(0)
                        if not self._create(w, t):
                            continue
                    else:
                        choices = [x for x in mine if x.created and x not in active]
                        if not choices:
                            break
                        t = rnd.choice(choices)
                    t.burst = rnd.randint(max(1, avg // 2), max(1, avg * 3 // 2))
                    active.append(t)
                if not active:
                    self.stop_writers.wait(0.1)
                    continue
                t = rnd.choice(active)
                n = min(rnd.randint(1, self.cfg.max_batch), t.burst)
                self.pacer.take(n, self.stop_writers)
                if self.stop_writers.is_set():
                    break
                self._add(w, t, rnd, n)
                t.burst -= n
                if t.burst <= 0:
                    if rnd.random() < self.cfg.end_probability:
                        self._end(w, t)
                    active.remove(t)
                elif rnd.random() < self.cfg.checkpoint_probability:
                    self._end(w, t)
        except Exception as err:  # a bug in the harness or the SDK: loud, not silent
            log.exception("writer %d crashed", w)
            self.ledger.problem(f"writer {w} crashed: {err!r}")

    # -- readers

    _READS: ClassVar[dict[str, tuple[str, str, Callable[[EpisodicClient, str], object]]]] = {
        "recall": (
            "Recall",
            "recall",
            lambda c, ds: c.recall(ds, "what did we agree on pricing?"),
        ),
        "list_episodes": (
            "ListEpisodes",
            "recall",
            lambda c, ds: c.list_episodes(ds, page_size=20),
        ),
        "get_thread": ("GetThread", "ingest", lambda c, tid: c.get_thread(tid)),
        "status": (
            "GetPipelineStatus",
            "summariser",
            lambda c, _: c.pipeline_status(check_providers=False),
        ),
    }

    def _read(self, r: int, op: str, home: int, arg: str) -> None:
        rpc, service, fn = self._READS[op]
        deadline = time.monotonic() + self.cfg.rpc_timeout * 2
        # The pipeline's status is an operator's read (an admin's key); the others the
        # application's (a reader's key).
        owner = f"operator-{r}" if op == "status" else f"reader-{r}"
        self.call(rpc, service, home, lambda c: fn(c, arg), deadline=deadline, owner=owner)

    def reader(self, r: int) -> None:
        """Reads like an application while the faults happen: Recall, episode lists,
        threads and the pipeline status, each through a random replica."""
        rnd = random.Random(self.seed * 104729 + r)
        datasets = sorted({t.dataset for t in self.plan})
        try:
            while not self.stop_readers.wait(0.1):
                op = rnd.choice(sorted(self._READS))
                arg = rnd.choice(datasets)
                if op == "get_thread":
                    with self.ledger.lock:
                        if not self.ledger.created:
                            continue
                        arg = rnd.choice(self.ledger.created).thread_id
                self._read(r, op, rnd.randrange(self.cfg.replicas), arg)
        except Exception as err:
            log.exception("reader %d crashed", r)
            self.ledger.problem(f"reader {r} crashed: {err!r}")

    # -- keys (auth)

    def mint_keys(self) -> str:
        """The run's API keys, minted in its database like ``episodic keys create`` does:
        per writer a writer key for exactly the datasets of its threads, per reader a reader
        key for the run's datasets, one operator key (admin, every dataset) for the
        pipeline's status and the harness's own calls. Returns the services' key (role
        service), which Ingest sends to the Scheduler."""
        assert self.engine is not None
        datasets = sorted({t.dataset for t in self.plan})
        minted: Counter[str] = Counter()
        keys = self.clients.keys
        with self.engine.begin() as conn:

            def mint(role: Role, scopes: list[str], name: str) -> str:
                minted[role.label] += 1
                return api_keys.create_key(
                    conn, role=role, datasets=scopes, name=name, created_by="chaos"
                ).secret

            service = mint(Role.SERVICE, ["*"], "chaos services")
            operator = mint(Role.ADMIN, ["*"], "chaos operator")
            keys["harness"] = operator
            for w in range(self.cfg.writers):
                mine = sorted({t.dataset for t in self.plan if t.writer == w}) or datasets[:1]
                keys[f"writer-{w}"] = mint(Role.WRITER, mine, f"chaos writer {w}")
            for r in range(self.cfg.readers):
                keys[f"reader-{r}"] = mint(Role.READER, datasets, f"chaos reader {r}")
                keys[f"operator-{r}"] = operator
        self.result.api_keys = dict(minted)
        return service

    def probe_auth(self) -> None:
        """Before the load, that keys are required and held to what they allow: a call
        without a key is refused (UNAUTHENTICATED), a writer's key on a dataset it does not
        name and a reader's key writing are refused (PERMISSION_DENIED). A retryable
        answer is asked again (bounded); any other answer is a problem."""
        assert self.cluster is not None
        writer = self.clients.keys["writer-0"]
        reader = self.clients.keys["reader-0"]
        own = next(t.dataset for t in self.plan if t.writer == 0)
        elsewhere = f"chaos-{self.run_id}-elsewhere"  # in no key's scope but the operator's
        recall = self.cluster.address("recall", 0)
        ingest = self.cluster.address("ingest", 0)
        probes: list[tuple[str, str, str | None, Callable[[EpisodicClient], object], str]] = [
            ("no key", "recall", "", lambda c: c.recall(own, "pricing"), "UNAUTHENTICATED"),
            (
                "writer's key, another dataset",
                "recall",
                writer,
                lambda c: c.recall(elsewhere, "pricing"),
                "PERMISSION_DENIED",
            ),
            (
                "reader's key, CreateThread",
                "ingest",
                reader,
                lambda c: c.create_thread(own, label="probe"),
                "PERMISSION_DENIED",
            ),
        ]
        seen: list[str] = []
        for what, service, key, fn, want in probes:
            address = recall if service == "recall" else ingest
            deadline = time.monotonic() + 60
            with EpisodicClient(
                recall=address if service == "recall" else None,
                ingest=address if service == "ingest" else None,
                api_key=key,
                timeout=self.cfg.rpc_timeout,
            ) as client:
                while True:
                    try:
                        fn(client)
                        code = "OK"
                    except EpisodicRpcError as err:
                        code = err.code.name
                    if code not in RETRYABLE or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)  # polling, bounded by deadline
            seen.append(f"{what}: {code}")
            if code != want:
                self.ledger.problem(f"auth probe, {what}: answered {code}, not {want}")
        self.result.auth_probe = "; ".join(seen)
