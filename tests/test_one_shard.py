"""Every statement the services send on a dataset table reaches one partition of it (one
shard on Citus), unless it says why it must scan across datasets.

The four services run in this process (real gRPC servers over the test's database) and a
client walks a realistic flow through them; a listener on every SQLAlchemy engine records
each statement with its parameters. Each statement on a dataset table is then EXPLAINed
with those parameters: when the plan names more than one partition of a table, the
statement must carry the marker ``/* across datasets: <reason> */``
(:data:`episodic.store.distribution.ACROSS_DATASETS`). Nothing is chosen by hand: a
statement added tomorrow on any path of the flow is checked the same way.

On the Citus tier (``make test-citus``) the same flow runs on a coordinator and two
workers, and a plan's reach is its Citus ``Task Count`` (the shards it is sent to): a
statement Citus refuses fails the test, and an unmarked one must go to one shard."""

from __future__ import annotations

import contextvars
import io
import itertools
import os
import re
import socket
import traceback
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import psycopg
import pytest
from pgvector.psycopg import register_vector

from episodic.config import LLMSettings, RecoverySettings, Settings
from episodic.ops.export import export_dataset
from episodic.sdk.client import EpisodicClient
from episodic.serving.guard import Guard
from episodic.serving.server import GRPC_SERVICES, build_server
from episodic.store.db import make_engine
from episodic.store.distribution import ACROSS_DATASETS, GLOBAL_TABLES
from episodic.store.raw_statement import observing_statements
from episodic.testing.keys import keyring_file
from episodic.testing.processes import TEST_ENV

EXPLAINABLE = re.compile(r"^\s*(?:/\*.*?\*/\s*)*(SELECT|INSERT|UPDATE|DELETE|WITH)\b", re.I | re.S)


@dataclass(frozen=True)
class Sent:
    """One statement as a service sent it."""

    step: str  # the step of the flow under way
    rpc: str  # the RPC being served ("" outside any call, e.g. a hook)
    call: int  # which call of it (one number per call served)
    statement: str
    parameters: Any
    origin: str  # file:line of our code that sent it


class Calls(grpc.aio.ServerInterceptor):
    """Numbers every call the servers serve and remembers, in the call's context (which its
    handler thread runs in), which call is under way: the statements it sends are then
    counted per call."""

    def __init__(self) -> None:
        self.current: contextvars.ContextVar[tuple[str, int]] = contextvars.ContextVar(
            "call", default=("", 0)
        )
        self.numbers = itertools.count(1)

    async def intercept_service(self, continuation, details):  # type: ignore[no-untyped-def]
        handler = await continuation(details)
        if handler is None or handler.stream_unary is None:
            return handler  # health, reflection
        rpc, inner = details.method.rsplit("/", 1)[-1], handler.stream_unary

        async def serve(requests, context):  # type: ignore[no-untyped-def]
            token = self.current.set((rpc, next(self.numbers)))
            try:
                return await inner(requests, context)
            finally:
                self.current.reset(token)

        return grpc.stream_unary_rpc_method_handler(
            serve,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


@dataclass
class Recorder:
    """Every statement any engine of this process sends, in order."""

    calls: Calls
    step: str = "setup"
    sent: list[Sent] = field(default_factory=list)

    def __call__(self, statement: str, parameters: Any, driver: Any) -> None:
        rpc, call = self.calls.current.get()
        self.sent.append(
            Sent(
                self.step,
                rpc,
                call,
                statement,
                parameters,
                _origin(),
            )
        )


def _origin() -> str:
    """file:line of the innermost frame of our code that sent the statement."""
    for frame in reversed(traceback.extract_stack()):
        if _OURS.search(frame.filename) and "/testing/" not in frame.filename:
            return f"{_OURS.split(frame.filename)[-1]}:{frame.lineno}"
    return "?"


_OURS = re.compile(r"/(?:shared/episodic|services|tools)/")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Deployment:
    client: EpisodicClient
    failing: EpisodicClient  # its Summariser cannot reach its LLM: episodes fail
    recorder: Recorder

    def step(self, name: str) -> None:
        self.recorder.step = name


@pytest.fixture
def deployment(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployment]:
    from episodic.services.ingest.__main__ import build as build_ingest
    from episodic.services.recall.__main__ import build as build_recall
    from episodic.services.recall.__main__ import engine_options as recall_engine_options
    from episodic.services.scheduler.__main__ import build as build_scheduler
    from episodic.services.summariser.__main__ import build as build_summariser

    port, failing_port = _free_port(), _free_port()
    for name, value in TEST_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("EPISODIC_DATABASE_URL", db_url)
    monkeypatch.setenv("EPISODIC_MASTER_KEY_FILE", str(keyring_file()))
    monkeypatch.setenv("EPISODIC_SCHEDULER_ADDRESS", f"127.0.0.1:{port}")
    monkeypatch.setenv("EPISODIC_EVENT_CLASSIFIER", "heuristic")
    settings = Settings()
    failing_settings = Settings()
    failing_settings.llm = LLMSettings(
        llm_provider="openai", llm_base_url="http://127.0.0.1:1/v1", llm_max_retries=0
    )
    failing_settings.recovery = RecoverySettings(max_retries=0)

    calls = Calls()
    recorder = Recorder(calls)
    # Every statement of every engine, through SQLAlchemy or sent on the pool's psycopg
    # connection without it (the routed AddMessages: episodic.store.raw_statement).
    observing = observing_statements(recorder)
    observing.__enter__()
    engines = [
        make_engine(settings.database.sqlalchemy_url(), pool_size=5),
        make_engine(
            settings.database.sqlalchemy_url(), pool_size=5, **recall_engine_options(settings)
        ),
    ]
    engine, recall_engine = engines
    services = [
        build_ingest(settings, engine),
        build_scheduler(settings, engine),
        build_summariser(settings, engine),
        build_recall(settings, recall_engine),
    ]
    failing = build_summariser(failing_settings, engine)
    runtimes = []
    names = [*GRPC_SERVICES.values(), "episodic.v1.AdminService"]
    try:
        for at, parts in ((port, services), (failing_port, [failing])):
            runtime = build_server(
                name=f"episodic-all-{at}",
                register=lambda server, parts=parts: [part.register(server) for part in parts],
                service_names=names,
                host="127.0.0.1",
                port=at,
                workers=8,
                engine=None,
                shutdown_grace=1,
                # Development mode (no keys), as `episodic up` on loopback runs.
                guard=Guard(engine, names, required=False),
                interceptors=[calls],
            )
            runtime.start()
            runtimes.append(runtime)
        address = f"127.0.0.1:{port}"
        client = EpisodicClient(address, address, address, address, timeout=30)
        failing_client = EpisodicClient(
            address, address, address, f"127.0.0.1:{failing_port}", timeout=30
        )
        yield Deployment(client, failing_client, recorder)
        client.close()
        failing_client.close()
    finally:
        for runtime in runtimes:
            runtime.stop(0)
            runtime.loop.stop()
        for service in [*services, failing]:
            for hook in service.on_shutdown:
                hook()
        observing.__exit__(None, None, None)
        for each in engines:
            each.dispose()


def _walk(d: Deployment) -> None:
    """A day in the life of two datasets, through every RPC family that touches their data."""
    c = d.client
    old = datetime.now(UTC) - timedelta(days=3)

    d.step("CreateThread")
    cars = c.create_thread("ds-cars", label="cars", metadata={"user": "ada"})
    trip = c.create_thread("ds-trips", label="trip")
    d.step("AddMessages")
    c.add_messages(
        cars.thread_id,
        [
            ("user", "I need a compact family car under $30k for city commuting with Atlas."),
            ("assistant", "The Toyota Corolla Hybrid fits: efficient and affordable."),
            ("user", "I decided to test drive the Corolla Hybrid on Saturday."),
        ],
    )
    c.add_messages(
        trip.thread_id,
        [
            {"role": "user", "content": "Plan a hiking trip to the Dolomites.", "created_at": old},
            {"role": "assistant", "content": "Try the Alta Via 1.", "created_at": old},
        ],
    )
    # The next batch without idempotency keys takes the thread's remembered route: one
    # statement, sent on the pool's psycopg connection (episodic.store.raw_statement).
    c.auto_idempotency_keys = False
    try:
        c.add_messages(cars.thread_id, [("user", "Does the hybrid come in blue?")])
    finally:
        c.auto_idempotency_keys = True
    # With the SDK's keys (its default), the same route: one statement that also checks the
    # keys are new (services/ingest/statements.py, ``keyed``).
    c.add_messages(cars.thread_id, [("user", "Or in red?")])
    d.step("GetThread")
    c.get_thread(cars.thread_id)
    d.step("ListMessages")
    c.list_messages(cars.thread_id)
    d.step("ListThreads")
    c.list_threads("ds-cars")
    d.step("RecordEvent")
    c.record_event(
        "ds-cars", "Chose the Corolla Hybrid", event_type="decision", entities=["Corolla"],
        thread_id=cars.thread_id,
    )  # fmt: skip
    d.step("RecordActivity")
    c.record_activity(cars.thread_id)
    d.step("RecordThreadStarted")
    c.record_thread_started(trip.thread_id)
    d.step("EndThread")
    ended = c.end_thread(cars.thread_id)
    assert ended.episode_queued
    d.step("RunSweep")
    c.run_sweep(as_of=datetime.now(UTC) + timedelta(days=1))  # the trip's idle timer fires
    d.step("ProcessPending")
    assert c.process_pending() >= 2
    # EndThread names the episode when the Scheduler answered in time (a loaded machine
    # may not); else the thread's episode, found before the step is recorded.
    episode_id = ended.episode_id or c.wait_for_episode(cars.thread_id).episode_id
    d.step("GetEpisode")
    c.get_episode(episode_id)
    d.step("Recall")
    c.recall("ds-cars", "which car will I test drive?", limit=5)
    c.recall(
        "ds-cars", "car", thread_ids=[cars.thread_id], entities=["Corolla"], since=old,
        until=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip
    c.recall("ds-cars", "decision", event_type="decision")
    d.step("SearchEpisodes")
    c.search_episodes("ds-trips", "hiking")
    d.step("ListEpisodes")
    c.list_episodes("ds-cars")
    c.list_episodes("ds-cars", thread_id=cars.thread_id, status="completed")
    d.step("Entities")
    entities = c.list_entities("ds-cars").items
    if entities:
        c.entity_timeline("ds-cars", entities[0].entity_id)
    d.step("Export")
    export_dataset(c, "ds-cars", io.StringIO())  # type: ignore[arg-type]
    d.step("PipelineStatus")
    c.pipeline_status("ds-cars", check_providers=False)

    # A summarisation that fails, then is retried and completes; a manual episode deleted.
    d.step("AddMessages")
    c.add_messages(cars.thread_id, [("user", "The test drive went well, I bought it.")])
    d.step("RequestEpisode")
    requested = c.request_episode(cars.thread_id)
    assert requested is not None
    d.step("ProcessPending (failing)")
    d.failing.process_pending()
    d.step("RetryEpisode")
    assert c.get_episode(requested.episode_id).status == "failed"
    c.retry_episode(requested.episode_id)
    d.step("ProcessPending")
    c.process_pending()
    d.step("DeleteEpisode")
    c.delete_episode(requested.episode_id)

    # Policies, then the lifecycle sweep a year on (compaction, retention), erasure.
    d.step("Policies")
    c.set_dataset_policy("ds-trips", retention_days=30)
    c.set_dataset_policy("ds-cars", compact_after_days=7)
    c.get_dataset_policy("ds-cars")
    d.step("ListDatasets")
    c.list_datasets()
    d.step("RunSweep (lifecycle)")
    c.run_sweep(as_of=datetime.now(UTC) + timedelta(days=365))
    d.step("DeleteThread")
    doomed = c.create_thread("ds-cars", label="doomed")
    c.add_messages(doomed.thread_id, [("user", "forget me")])
    c.delete_thread(doomed.thread_id)
    d.step("DeleteDataset")
    c.delete_dataset("ds-trips")


pytestmark = pytest.mark.citus

#: A Citus plan's reach: how many shard tasks its distributed scan (or a subplan's) runs.
TASK_COUNT = re.compile(r"Task Count: (\d+)")


@dataclass
class Reach:
    sent: Sent
    partitions: dict[str, set[str]]  # table -> its partitions in the plan
    tasks: int | None = None  # on Citus: the plan's largest Task Count
    plan: str = ""

    @property
    def widest(self) -> int:
        partitions = max((len(p) for p in self.partitions.values()), default=0)
        return max(partitions, self.tasks or 0)

    @property
    def touched(self) -> int:
        if self.tasks is not None:
            return self.tasks
        return sum(len(p) for p in self.partitions.values())

    @property
    def marked(self) -> bool:
        return ACROSS_DATASETS in self.sent.statement


def _reaches(db_url: str, sent: list[Sent]) -> list[Reach]:
    """Each statement sent on a dataset table, with the partitions its plan names."""
    with psycopg.connect(db_url, autocommit=True) as db:
        register_vector(db)  # the services bind numpy arrays as vectors
        tables = [
            name
            for (name,) in db.execute(
                "SELECT relname FROM pg_class WHERE relkind = 'p' "
                "AND relnamespace = 'public'::regnamespace"
            )
        ]
        assert tables and not set(tables) & set(GLOBAL_TABLES)
        mentions = re.compile(r"\b(?:" + "|".join(tables) + r")\b")
        partition_of = {t: re.compile(rf"\b{t}_p\d+\b") for t in tables}
        out = []
        for each in sent:
            if not (EXPLAINABLE.match(each.statement) and mentions.search(each.statement)):
                continue
            try:
                plan = "\n".join(
                    r[0] for r in db.execute("EXPLAIN " + each.statement, each.parameters)
                )
            except psycopg.Error as err:
                raise AssertionError(f"{_short(each.statement)}: {err}") from err
            found = {t: set(p.findall(plan)) for t, p in partition_of.items()}
            tasks = [int(n) for n in TASK_COUNT.findall(plan)]
            out.append(
                Reach(
                    each, {t: p for t, p in found.items() if p}, max(tasks) if tasks else None, plan
                )
            )
        return out


#: RPCs that name a thread or an episode by id only: one routing lookup, then one dataset.
ID_ONLY = {"AddMessages", "EndThread", "GetThread", "ListMessages", "GetEpisode",
           "RetryEpisode", "DeleteEpisode", "RecordActivity", "RecordThreadStarted",
           "RequestEpisode", "DeleteThread"}  # fmt: skip


def test_every_statement_on_a_dataset_table_reaches_one_partition(
    deployment: Deployment, db_url: str
) -> None:
    _walk(deployment)
    reaches = _reaches(db_url, deployment.recorder.sent)
    _print_partitions_per_call(reaches)
    # The flow reached what it names (an RPC that sent nothing proves nothing).
    served = {r.sent.rpc for r in reaches}
    assert ID_ONLY | {"ProcessPending", "Recall", "RunSweep", "DeleteDataset", "ListEpisodes",
                      "ListEntities", "EntityTimeline", "SetDatasetPolicy", "RecordEvent",
                      "SearchEpisodes", "ListDatasets"} <= served, served  # fmt: skip
    if os.environ.get("EPISODIC_TEST_CITUS"):
        # Every distributed plan says its tasks, so the check below reads shards, not
        # nothing. Without a Task Count: catalogue reads and function calls that only name
        # a table, and INSERT ... SELECT FROM unnest(...), which Citus pulls to the
        # coordinator and copies to the shard of the dataset the statement names.
        unrouted = [
            _short(r.sent.statement)
            for r in reaches
            if r.tasks is None and "Citus" in r.plan and "Citus INSERT ... SELECT" not in r.plan
        ]
        assert not unrouted, "Citus plans without a Task Count:\n" + "\n".join(unrouted)
        # A statement Citus splits into subplans sends their intermediate results on to
        # other workers: each piece has Task Count 1, yet one worker down stops it for every
        # dataset (AddMessages' one statement and the episode opening's did:
        # tests/test_citus_worker_kill.py). Only statements marked as crossing datasets may.
        split = sorted(
            {
                (r.sent.rpc or r.sent.step, _short(r.sent.statement))
                for r in reaches
                if "Distributed Subplan" in r.plan and not r.marked
            }
        )
        assert not split, "statements Citus splits into subplans:\n" + "\n".join(
            f"[{rpc}] {sql}" for rpc, sql in split
        )
        routed = sum(r.tasks is not None for r in reaches)
        print(f"\n{routed} of {len(reaches)} statements on dataset tables have a Citus plan")
        assert routed >= len(reaches) // 2, f"only {routed} of {len(reaches)} plans were Citus's"
    offenders = sorted(
        {
            (r.sent.origin, r.sent.rpc or r.sent.step, _short(r.sent.statement), r.widest)
            for r in reaches
            if r.widest > 1 and not r.marked
        }
    )
    assert not offenders, "statements that reach several partitions without saying why:\n" + (
        "\n".join(f"{at} [{rpc}] ({n} partitions) {sql}" for at, rpc, sql, n in offenders)
    )
    # A thread's second AddMessages is its remembered route: ONE statement, sent on the
    # pool's psycopg connection without SQLAlchemy (on Citus two, in a transaction: below).
    # It must be seen (and checked) too.
    routed = [
        r for r in reaches if r.sent.rpc == "AddMessages" and "%(key_id)s" in r.sent.statement
    ]
    assert routed, "the routed AddMessages statement was not observed"
    assert any("m.idempotency_key" in r.sent.statement for r in routed), (
        "the routed AddMessages statement with idempotency keys was not observed"
    )
    # On Citus two, each routed to one shard (checked above): the counter's bump, then the
    # rows — its one statement elsewhere became subplans reaching every worker
    # (services/ingest/statements.py, TwoSteps).
    per_call = Counter(r.sent.call for r in reaches if r.sent.rpc == "AddMessages")
    statements = 2 if os.environ.get("EPISODIC_TEST_CITUS") else 1
    bad = {r.sent.call for r in routed if per_call[r.sent.call] != statements}
    assert not bad, "\n".join(
        f"{r.sent.call}: {_short(r.sent.statement)}" for r in reaches if r.sent.call in bad
    )
    # An id-only call looks its dataset up once, then names it: no second search.
    lookups = Counter((r.sent.rpc, r.sent.call) for r in reaches if r.marked)
    repeated = {k: n for k, n in lookups.items() if k[0] in ID_ONLY and n > 1}
    assert not repeated, f"id-only calls that searched every dataset more than once: {repeated}"


def _short(statement: str) -> str:
    return " ".join(statement.split())[:200]


def _print_partitions_per_call(reaches: list[Reach]) -> None:
    """Per RPC: calls, and per call the statements on dataset tables, the partitions their
    plans reach, and how many of those the cross-dataset statements reach (the README's
    figures; shown with -s)."""
    per_rpc: dict[str, list[Reach]] = defaultdict(list)
    for r in reaches:
        per_rpc[r.sent.rpc or f"({r.sent.step}, no call)"].append(r)
    print("\nrpc | calls | statements/call | partitions/call | of which across datasets")
    for rpc, rs in sorted(per_rpc.items()):
        calls = len({r.sent.call for r in rs}) or 1
        touched = sum(r.touched for r in rs)
        marked = sum(r.touched for r in rs if r.marked)
        print(
            f"{rpc} | {calls} | {len(rs) / calls:.1f} | {touched / calls:.1f} | "
            f"{marked / calls:.1f}"
        )


def test_a_large_datasets_kept_statistics_and_ranking_reach_one_shard(db_url: str) -> None:
    """A large dataset's path, which the flow above does not take (its datasets are small):
    counting its kept statistics (the Scheduler's maintenance) and the approximate ranking
    that reads them reach its shard alone, as every other statement on its data does."""
    from episodic.services.recall import domain
    from episodic.store import kept_statistics
    from episodic.store.nearest_walks import WALK_STATEMENTS, NearestWalks
    from episodic.store.recall_queries import Approximation, RecallFilters
    from episodic.testing.keys import test_vault
    from tests.recall.factory import EMBEDDER, make_episode

    engine = make_engine(db_url, pool_size=2)
    walks = NearestWalks(engine)  # the HNSW walks beside the postings, as Recall's service
    sent: list[Sent] = []

    def record(statement: str, parameters: Any, driver: Any) -> None:
        sent.append(Sent("large dataset", "", 0, statement, parameters, _origin()))

    try:
        with engine.begin() as conn:
            for dataset in ("ds-large", "ds-other"):
                for i in range(6):
                    make_episode(conn, dataset, [f"the invoice {i} for the zebra", "paid late"])
        with observing_statements(record):
            assert kept_statistics.refresh(engine, "ds-large") is not None
            with engine.connect() as conn:
                request = domain.RecallQuery(
                    dataset="ds-large",
                    query="zebra invoice",
                    include_episodes=True,
                    limit=3,
                    similarity_weight=0.7,
                    recency_weight=0.3,
                    filters=RecallFilters(),
                )
                sizes = domain.DatasetSizes(1, Approximation(walks=walks))
                vector = EMBEDDER.embed_query(request.query)
                answer = domain.recall(conn, test_vault(), request, vector, sizes)
                # Filtered, the statistics are counted by the statement and the walks run
                # inside it: the forms that join the walked or densest chunks' threads.
                since = datetime.now(UTC) - timedelta(days=365)
                filtered = replace(request, filters=RecallFilters(since=since))
                narrowed = domain.recall(conn, test_vault(), filtered, vector, sizes)
        assert answer.rows and narrowed.rows
    finally:
        walks.close()
        engine.dispose()
    reaches = _reaches(db_url, sent)
    read_kept = [r for r in reaches if "kept_term_statistics t" in r.sent.statement]
    wrote_kept = [r for r in reaches if "INSERT INTO kept_" in r.sent.statement]
    assert read_kept and len(wrote_kept) == 2, "the kept statistics were not written and read"
    walked = [r for r in reaches if r.sent.statement in WALK_STATEMENTS.values()]
    assert len(walked) == 2, "the HNSW walks were not sent"
    inside = [
        r for r in reaches if "ORDER BY m.embedding <=>" in r.sent.statement and r not in walked
    ]
    assert inside, "the filtered request's walks did not run inside its ranking statement"
    wide = [(r.widest, _short(r.sent.statement)) for r in reaches if r.widest > 1]
    assert not wide, f"statements of one dataset that reach several partitions: {wide}"
    if os.environ.get("EPISODIC_TEST_CITUS"):
        split = [_short(r.sent.statement) for r in reaches if "Distributed Subplan" in r.plan]
        assert not split, f"statements Citus splits into subplans: {split}"
