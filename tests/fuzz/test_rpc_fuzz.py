"""Hostile clients against every service, run as real processes.

Every RPC of every service found in the descriptors (``episodic.testing.fuzz``; a new RPC
or service is fuzzed without touching this file) gets hypothesis-generated requests and
byte-level mutations of valid requests. Each call must:

- answer with a status other than INTERNAL, UNKNOWN or DATA_LOSS (bad input is
  INVALID_ARGUMENT), within its deadline, and from a live service (not UNAVAILABLE);
- when it answers OK, answer a response that parses as the declared output type;
- when it answers anything but OK, leave every table of the database as it was (row counts
  and content checksums of every table in ``public``, discovered from the catalog);
- leave every process running under the PID it started with (checked after every call;
  each process's readiness must answer SERVING after every RPC).

Every ``episodic.services.<name>`` process runs once for the module against one database
seeded with a dataset, threads with messages, a completed and a failed episode; each RPC
goes to the process whose reflection lists its service. Ingest's background notices to the
Scheduler go through a relay in this process, so after each Ingest call the test waits (on
a condition, never a sleep) until every notice has landed before the next snapshot.

Default run: small and reproducible (fixed hypothesis seed per RPC, seeded mutations).
``EPISODIC_FUZZ_EXAMPLES=200`` runs 200 generated requests and 400 mutations per RPC;
``EPISODIC_FUZZ_SEED=<n>`` explores other inputs. ``pytest -s`` prints a per-RPC table of
calls and status codes at the end.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import random
import re
import threading
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import grpc
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, Phase, given, seed, settings
from sqlalchemy import Engine

from episodic.store import episodes as episode_store
from episodic.store.db import make_engine
from episodic.testing.database import TestDatabases
from episodic.testing.fuzz import (
    MUTATORS,
    CallResult,
    Rpc,
    Seeds,
    call_raw,
    describe,
    discover_rpcs,
    fingerprint_changes,
    messages,
    mutations,
    plausible_request,
    served_services,
    store_fingerprint,
)
from episodic.testing.invariants import check_invariants
from episodic.testing.processes import (
    ServiceProcess,
    queued_episode_id,
    start_service,
    wait_serving,
    wait_until,
)
from episodic.v1 import episode_pb2 as epb
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from episodic.v1 import recall_service_pb2 as rpb
from episodic.v1 import recall_service_pb2_grpc as rg
from episodic.v1 import summariser_service_pb2 as spb
from episodic.v1 import summariser_service_pb2_grpc as sg

_SCALE = int(os.environ.get("EPISODIC_FUZZ_EXAMPLES") or 0)
GENERATED = _SCALE or 16  # hypothesis examples per RPC
MUTATED = max(2 * GENERATED, len(MUTATORS))  # byte mutations per RPC: every kind at least once
SEED = int(os.environ.get("EPISODIC_FUZZ_SEED") or 0)
CALL_TIMEOUT = 30.0  # seconds; a call that needs longer is reported as a hang

FORBIDDEN = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS}
# A live service answering one request never gives these: UNAVAILABLE means the process or
# its database connection went away, DEADLINE_EXCEEDED (30 s) a hang.
NO_ANSWER = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}

# RPCs not fuzzed at all, with the reason. Empty: every RPC is fuzzed. RunSweep and
# ProcessPending change state on OK (timers fire, episodes complete) for any `as_of` or
# `max_episodes`, which is legitimate and does not disturb the checks (only non-OK calls
# must leave the store alone), so they stay in.
EXCLUDED: dict[str, str] = {}
# RPCs whose rejection may legitimately come after a committed side effect, with the
# reason. Empty: none found; every non-OK answer must leave every table unchanged.
SIDE_EFFECTS_ON_REJECTION: dict[str, str] = {}

RPCS = discover_rpcs()
DATASET = "fuzz_seed"
FENCE_DATASET = "fuzz_fence"  # threads created only to flush Ingest's notices


def service_processes() -> list[str]:
    """Every ``episodic.services.<name>`` package that runs as a process (has __main__)."""
    package = importlib.import_module("episodic.services")
    return sorted(
        info.name
        for info in pkgutil.iter_modules(package.__path__)
        if info.ispkg and importlib.util.find_spec(f"episodic.services.{info.name}.__main__")
    )


def health_name(process: str) -> str:
    """The health-check name a process reports readiness under (its own service)."""
    return f"episodic.v1.{process.capitalize()}Service"


# ---------------------------------------------------------------------------------------
# The summary collector
# ---------------------------------------------------------------------------------------


@dataclass
class Violation:
    rpc: str
    problem: str
    code: str
    details: str
    source: str
    input: str


@dataclass
class RpcStats:
    sources: Counter[str] = field(default_factory=Counter)
    codes: Counter[str] = field(default_factory=Counter)
    generated_ok: int = 0  # generated requests answered OK: how deep the strategies reach
    violations: list[Violation] = field(default_factory=list)


@dataclass
class FuzzReport:
    stats: dict[str, RpcStats] = field(default_factory=dict)

    def for_rpc(self, rpc: Rpc) -> RpcStats:
        return self.stats.setdefault(rpc.name, RpcStats())

    def render(self) -> str:
        if not self.stats:
            return ""
        lines = [
            "",
            "RPC fuzz summary (calls: generated (of which OK) / mutated / base; violating "
            "calls; status codes seen)",
            f"{'RPC':40} {'calls':>5} {'gen':>4} {'ok':>4} {'mut':>4} {'base':>4} {'bad':>4}  codes",
        ]
        total = 0
        for name, s in self.stats.items():
            calls = sum(s.codes.values())
            total += calls
            codes = " ".join(f"{c}×{n}" for c, n in sorted(s.codes.items()))
            lines.append(
                f"{name:40} {calls:5} {s.sources['generated']:4} {s.generated_ok:4} "
                f"{s.sources['mutated']:4} {s.sources['base']:4} {len(s.violations):4}  {codes}"
            )
        lines.append(f"{'total':40} {total:5}")
        failures = [v for s in self.stats.values() for v in s.violations]
        if failures:
            lines.append(f"\n{len(failures)} violating calls; distinct failures:")
            lines.extend(_grouped(failures))
        return "\n".join(lines)


def _normalise(details: str) -> str:
    details = re.sub(
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", details
    )
    return details[:160]


def _grouped(violations: list[Violation]) -> list[str]:
    groups: dict[tuple[str, str, str, str, str], list[Violation]] = {}
    for v in violations:
        groups.setdefault((v.rpc, v.problem, v.code, _normalise(v.details), v.source), []).append(v)
    lines = []
    for (rpc, problem, code, details, source), items in groups.items():
        lines.append(f"  [{len(items)}×] {rpc}: {problem}: {code} {details!r} from {source}")
        for v in items[:2]:
            lines.append(f"         e.g. {v.input}")
    return lines


@pytest.fixture(scope="session")
def fuzz_report() -> Iterator[FuzzReport]:
    report = FuzzReport()
    yield report
    print(report.render())  # shown with `pytest -s`


# ---------------------------------------------------------------------------------------
# The suite under test
# ---------------------------------------------------------------------------------------


class Relay(grpc.GenericRpcHandler):
    """Forwards Ingest's calls to the Scheduler unchanged and records each request once it
    was answered, so the test can wait until a given notice has landed."""

    def __init__(self) -> None:
        self._server = grpc.server(futures.ThreadPoolExecutor(8, thread_name_prefix="relay"))
        self._server.add_generic_rpc_handlers((self,))
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._upstream: grpc.Channel | None = None
        self._cv = threading.Condition()
        self._answered: list[bytes] = []
        self._server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def connect(self, address: str) -> None:
        self._upstream = grpc.insecure_channel(address)

    def stop(self) -> None:
        self._server.stop(0).wait()
        if self._upstream is not None:
            self._upstream.close()

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        method = handler_call_details.method

        def forward(request: bytes, context: grpc.ServicerContext) -> bytes:
            try:
                if self._upstream is None:
                    context.abort(grpc.StatusCode.UNAVAILABLE, "relay not connected yet")
                call = self._upstream.unary_unary(method)  # type: ignore[union-attr]
                metadata = tuple(
                    (k, v)
                    for k, v in context.invocation_metadata()
                    if not k.startswith((":", "grpc-")) and k != "user-agent"
                )
                try:
                    return call(request, timeout=context.time_remaining(), metadata=metadata)
                except grpc.RpcError as err:
                    context.abort(err.code(), err.details() or "")
            finally:
                with self._cv:
                    self._answered.append(request)
                    self._cv.notify_all()

        return grpc.unary_unary_rpc_method_handler(forward)

    def wait_answered(self, needle: bytes, timeout: float) -> None:
        """Blocks until a request containing ``needle`` has been answered upstream."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cv:
            while True:
                if any(needle in r for r in self._answered[seen:]):
                    return
                seen = len(self._answered)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"Ingest's notice {needle!r} never reached the relay")
                self._cv.wait(remaining)


@dataclass
class Suite:
    processes: dict[str, ServiceProcess]
    pids: dict[str, int]
    channels: dict[str, grpc.Channel]
    engine: Engine
    relay: Relay
    serves: dict[str, str]  # fully qualified service -> the process serving it (reflection)
    seeds: Seeds = field(default_factory=Seeds)

    def process_of(self, rpc: Rpc) -> str:
        if rpc.service not in self.serves:
            raise AssertionError(
                f"no process serves {rpc.service} (reflection of {sorted(self.processes)}); "
                "a new service needs a process under episodic.services"
            )
        return self.serves[rpc.service]

    def channel_for(self, rpc: Rpc) -> grpc.Channel:
        return self.channels[self.process_of(rpc)]

    def channel_of(self, service: str) -> grpc.Channel:
        """The channel to the process serving ``service`` (e.g. "IngestService")."""
        return self.channels[self.serves[f"episodic.v1.{service}"]]

    def dead(self) -> list[str]:
        """Processes that exited. Nothing here restarts a process, so a crash-and-restart
        shows as an exit of the PID started (recorded in ``pids``)."""
        out = []
        for name, service in self.processes.items():
            code = service.proc.poll()
            if code is not None:
                out.append(f"{name} (pid {self.pids[name]}) exited with {code}")
        return out

    def serving(self) -> None:
        """Every process answers its readiness check SERVING (within 30 s)."""
        for name, service in self.processes.items():
            wait_serving(service.address, timeout=30, service=health_name(name))

    def settle(self) -> None:
        """Ingest sends its Scheduler notices from one background thread, oldest first: once
        a fresh thread's "started" notice was answered, every earlier notice has been too."""
        stub = ig.IngestServiceStub(self.channel_of("IngestService"))
        fence = stub.CreateThread(ipb.CreateThreadRequest(dataset=FENCE_DATASET), timeout=10)
        self.relay.wait_answered(fence.thread.thread_id.encode(), timeout=30)


@pytest.fixture(scope="module")
def suite(databases: TestDatabases) -> Iterator[Suite]:
    """Every service process (started in parallel) against a fresh database, seeded; which
    process serves which service comes from their reflection. Stopped at the end."""
    url = databases.create()
    engine = make_engine(url, pool_size=2)
    relay = Relay()
    names = service_processes()
    env = {
        "EPISODIC_SCHEDULER_ADDRESS": relay.address,  # whoever calls the Scheduler
        # Ingest sends each notice at once: the test waits for them after every Ingest call
        # (`Suite.settle`), and the default 100 ms linger was most of an Ingest RPC's time.
        "EPISODIC_SCHEDULER_NOTIFY_LINGER": "0",
    }
    started: dict[str, ServiceProcess] = {}
    channels: dict[str, grpc.Channel] = {}
    try:
        with futures.ThreadPoolExecutor(len(names)) as pool:
            pending = {n: pool.submit(start_service, n, url, env) for n in names}
            errors = []
            for name, future in pending.items():
                try:
                    started[name] = future.result()
                except Exception as err:  # keep the others to stop them
                    errors.append(f"{name}: {err}")
            assert not errors, "services did not start:\n" + "\n".join(errors)
        channels = {name: service.channel() for name, service in started.items()}
        serves = {s: name for name, ch in channels.items() for s in served_services(ch)}
        relay.connect(started[serves["episodic.v1.SchedulerService"]].address)
        suite = Suite(
            processes=started,
            pids={name: service.proc.pid for name, service in started.items()},
            channels=channels,
            engine=engine,
            relay=relay,
            serves=serves,
        )
        suite.seeds = _seed_data(suite)
        yield suite
    finally:
        for channel in channels.values():
            channel.close()
        for service in started.values():
            service.terminate()
        relay.stop()
        engine.dispose()
        databases.drop(url)


def _seed_data(suite: Suite) -> Seeds:
    """A dataset with three threads: A has a completed episode, an event and one uncaptured
    message, B a failed episode, C messages and an idle timer; real page tokens for each
    list."""
    ingest = ig.IngestServiceStub(suite.channel_of("IngestService"))
    recall = rg.RecallServiceStub(suite.channel_of("RecallService"))
    summariser = sg.SummariserServiceStub(suite.channel_of("SummariserService"))
    user, assistant = epb.ROLE_USER, epb.ROLE_ASSISTANT

    def thread(label: str, *turns: tuple[int, str, str]) -> str:
        meta = ipb.CreateThreadRequest(dataset=DATASET, label=label)
        meta.metadata.update({"source": "fuzz-seed"})
        thread_id = ingest.CreateThread(meta, timeout=10).thread.thread_id
        say(thread_id, *turns)
        return thread_id

    def say(thread_id: str, *turns: tuple[int, str, str]) -> None:
        batch = [ipb.NewMessage(role=r, content=c, idempotency_key=k) for r, c, k in turns]
        ingest.AddMessages(ipb.AddMessagesRequest(thread_id=thread_id, messages=batch), timeout=10)

    contents = [
        "We agreed on the Pro tier at $29 for project Atlas.",
        "Noted: the Pro tier, $29 a month, for project Atlas.",
        "I prefer annual billing for project Atlas.",
    ]
    a = thread("pricing", (user, contents[0], "seed-1"), (assistant, contents[1], ""))
    say(a, (user, contents[2], "seed-2"))
    b = thread("offices", (user, "The Berlin office opens in March.", "seed-3"))

    # B's episode fails for good, through the store's own transitions.
    ended = ingest.EndThread(ipb.EndThreadRequest(thread_id=b), timeout=10)
    assert ended.episode_queued, "EndThread queued no episode for B"
    failed = queued_episode_id(recall, DATASET, b, ended, end_sequence=1)
    with suite.engine.begin() as conn:
        claimed = episode_store.claim_pending(conn, worker="fuzz-seed", limit=10)
        assert [str(r["episode_id"]) for r in claimed] == [failed]
        status = episode_store.record_failure(
            conn,
            uuid.UUID(failed),
            "fuzz-seed",
            "seeded failure",
            max_retries=0,
            backoff=timedelta(0),
            dataset=DATASET,
        )
        assert status == "failed"

    # A's episode completes through the Summariser.
    ended = ingest.EndThread(ipb.EndThreadRequest(thread_id=a), timeout=10)
    assert ended.episode_queued, "EndThread queued no episode for A"
    completed = queued_episode_id(recall, DATASET, a, ended, end_sequence=3)

    def is_completed() -> bool:
        summariser.ProcessPending(spb.ProcessPendingRequest(max_episodes=10), timeout=30)
        got = recall.GetEpisode(rpb.GetEpisodeRequest(episode_id=completed), timeout=10)
        return got.episode.status == epb.EPISODE_STATUS_COMPLETED

    wait_until(is_completed, timeout=60, message="the seeded episode completed")
    episode = recall.GetEpisode(rpb.GetEpisodeRequest(episode_id=completed), timeout=10).episode

    # An event, listed under its id as episodes are: the by-id RPCs take it too.
    event = ingest.RecordEvent(
        ipb.RecordEventRequest(
            dataset=DATASET, actor="agent", event_type="decision", summary="Chose Pro", thread_id=a
        ),
        timeout=10,
    ).event.episode_id
    say(a, (user, "Let us revisit the Atlas budget next week.", ""))  # uncaptured
    c = thread("errands", (user, "Remind me about the dentist on Friday.", ""))
    suite.settle()

    pages = [
        ingest.ListMessages(ipb.ListMessagesRequest(thread_id=a, page_size=1), timeout=10),
        ingest.ListThreads(ipb.ListThreadsRequest(dataset=DATASET, page_size=1), timeout=10),
        recall.ListEpisodes(rpb.ListEpisodesRequest(dataset=DATASET, page_size=1), timeout=10),
    ]
    tokens = [page.next_page_token for page in pages]
    assert all(tokens), tokens
    return Seeds(
        core={
            "dataset": [DATASET],
            "thread_id": [a, c, b],
            "episode_id": [completed, failed, event],
            "content": contents,
            "query": ["what did we decide about pricing?", *episode.key_learnings],
        },
        extra={
            "page_token": tokens,
            "entities": list(episode.entities) or ["project:atlas"],
            "event_type": [episode.event_type or "decision"],
            "idempotency_key": ["seed-1", "seed-2"],
            "label": ["pricing"],
        },
    )


# ---------------------------------------------------------------------------------------
# Fuzzing one RPC
# ---------------------------------------------------------------------------------------


class ServicesDied(AssertionError):
    pass


@dataclass
class RpcFuzzer:
    rpc: Rpc
    suite: Suite
    stats: RpcStats

    def call(self, data: bytes, source: str, what: Callable[[], str]) -> CallResult:
        """One call with every check; violations are collected, not raised, so one run
        reports every distinct failure (a dead service stops the run at once)."""
        suite = self.suite
        before = store_fingerprint(suite.engine)
        result = call_raw(suite.channel_for(self.rpc), self.rpc.path, data, timeout=CALL_TIMEOUT)
        kind = "base" if source == "base" else ("generated" if source == "generated" else "mutated")
        self.stats.sources[kind] += 1
        self.stats.codes[result.code.name] += 1
        self.stats.generated_ok += kind == "generated" and result.ok
        problems: list[tuple[str, str]] = []
        if result.code in FORBIDDEN:
            problems.append(("forbidden status", result.details))
        elif result.code in NO_ANSWER:
            problems.append(("no answer from a live service", result.details))
        if result.ok:
            try:
                self.rpc.parse_response(result.response or b"")
            except Exception as err:
                problems.append(("unparseable OK response", repr(err)))
        else:
            changes = fingerprint_changes(before, store_fingerprint(suite.engine))
            if changes and self.rpc.name not in SIDE_EFFECTS_ON_REJECTION:
                problems.append(("stored by a rejected call", "; ".join(changes)))
        dead = suite.dead()
        if not dead and suite.process_of(self.rpc) == suite.serves["episodic.v1.IngestService"]:
            suite.settle()
        if dead:
            problems.append(("service crashed", "; ".join(dead)))
        for problem, details in problems:
            self.stats.violations.append(
                Violation(self.rpc.name, problem, result.code.name, details, source, what())
            )
        if dead:
            tails = [
                f"----- last lines of {name} -----\n" + "".join(service.output[-40:])
                for name, service in suite.processes.items()
                if service.proc.poll() is not None
            ]
            raise ServicesDied("\n".join([self.report(), *tails]))
        return result

    def report(self) -> str:
        lines = [f"{self.rpc.name}: {len(self.stats.violations)} violating calls"]
        lines.extend(_grouped(self.stats.violations))
        errors = _server_errors(
            self.suite.processes[self.suite.process_of(self.rpc)].log(), self.rpc.path
        )
        if errors:
            lines.append("  server-side exceptions logged for this RPC:")
            lines.extend(f"    [{n}×] {e}" for e, n in errors.most_common())
        return "\n".join(lines)


def _server_errors(log: str, path: str) -> Counter[str]:
    """What the service logged for each unhandled error in ``path``: the exception (on the
    marker line, or the last line of a standard traceback) and the innermost frame."""
    found: Counter[str] = Counter()
    marker = f"unhandled error in {path}"
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if marker not in line:
            continue
        error = line.split(marker, 1)[1].lstrip(": ").strip()
        frame = ""
        for follow in lines[i + 1 :]:
            if re.match(r"\d{4}-\d\d-\d\d", follow):  # the next log record
                break
            stripped = follow.strip()
            if stripped.startswith("File ") and ("site-packages" not in stripped or not frame):
                frame = stripped  # the innermost frame of our own code
            elif follow and not follow.startswith((" ", "Traceback", "During", "The above")):
                error = follow.strip()
        found[f"{error or '(no message)'} at {frame or '(no frame)'}"[:400]] += 1
    return found


def _rpc_seed(rpc: Rpc) -> int:
    return zlib.crc32(f"{rpc.path}:{SEED}".encode())


def test_every_rpc_is_served_and_fuzzable(suite: Suite) -> None:
    """Discovery found the four services, some process serves every discovered service,
    every RPC is unary (the raw caller sends one request), and every exclusion names an
    existing RPC."""
    names = {r.name for r in RPCS}
    services = {r.service for r in RPCS}
    assert services >= {
        f"episodic.v1.{n}Service" for n in ("Ingest", "Scheduler", "Summariser", "Recall")
    }
    unserved = sorted(services - set(suite.serves))
    assert not unserved, f"no process serves {unserved}"
    streaming = [r.name for r in RPCS if not r.unary]
    assert not streaming, f"streaming RPCs need a streaming fuzzer: {streaming}"
    assert set(EXCLUDED) <= names and set(SIDE_EFFECTS_ON_REJECTION) <= names


# Mutations that must never parse: if protobuf accepted one, the fuzzer would quietly stop
# probing the server's handling of malformed bytes.
ALWAYS_MALFORMED = ("invalid_utf8", "truncated_length_prefix", "huge_length_prefix")


@pytest.mark.parametrize("rpc", RPCS, ids=lambda r: r.name)
def test_malformed_mutations_really_are_malformed(rpc: Rpc) -> None:
    """The mutations meant to be unparsable are, for protobuf itself (no server needed)."""
    cls = rpc.request_class()
    bases = [
        plausible_request(rpc.input_type, full=True).SerializeToString(),
        plausible_request(rpc.input_type).SerializeToString(),
    ]
    checked = 0
    for n in range(10):
        rng = random.Random(n)
        for mutation in mutations(rpc.input_type, bases, 30, rng, kinds=ALWAYS_MALFORMED):
            with pytest.raises(DecodeError):
                cls.FromString(mutation.data)
                pytest.fail(f"parsed: {mutation.describe()}")
            checked += 1
        deep = mutations(rpc.input_type, bases, 5, rng, kinds=["deep_struct"])
        for mutation in (m for m in deep if "levels of objects" in m.detail):
            with pytest.raises(DecodeError):  # past protobuf's nesting limit of 100
                cls.FromString(mutation.data)
                pytest.fail(f"parsed: {mutation.describe()}")
    assert checked >= 100


@pytest.mark.parametrize("rpc", RPCS, ids=lambda r: r.name)
def test_rpc_survives_hostile_requests(rpc: Rpc, suite: Suite, fuzz_report: FuzzReport) -> None:
    if rpc.name in EXCLUDED:
        pytest.skip(EXCLUDED[rpc.name])
    assert not suite.dead(), suite.dead()
    stats = fuzz_report.for_rpc(rpc)
    fuzzer = RpcFuzzer(rpc, suite, stats)

    bases = [
        plausible_request(rpc.input_type, suite.seeds),
        plausible_request(rpc.input_type, suite.seeds, full=True),
    ]
    for base in bases:
        fuzzer.call(base.SerializeToString(), "base", lambda b=base: describe(b))

    @settings(
        max_examples=GENERATED,
        deadline=None,
        database=None,
        derandomize=False,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.filter_too_much,
        ],
    )
    @seed(_rpc_seed(rpc))
    @given(request=messages(rpc.input_type, suite.seeds))
    def generated(request: Any) -> None:
        fuzzer.call(request.SerializeToString(), "generated", lambda: describe(request))

    generated()

    rng = random.Random(_rpc_seed(rpc))
    valid = [b.SerializeToString() for b in bases]
    for mutation in mutations(rpc.input_type, valid, MUTATED, rng):
        fuzzer.call(mutation.data, f"mutation:{mutation.kind}", mutation.describe)

    suite.serving()
    assert not stats.violations, fuzzer.report()


def test_services_survived_and_tables_are_consistent(suite: Suite) -> None:
    """After all of it: the processes started (same PIDs), SERVING, and the store's
    invariants hold."""
    assert not suite.dead(), suite.dead()
    suite.serving()
    check_invariants(suite.engine)
