"""The services' metrics: every instrument, its unit and its labels, defined once.

Code records where the thing happens (Ingest's servicer, the Scheduler's sweeper, the
Summariser's pipeline, the providers' HTTP calls, the recall and lifecycle SQL) through the
functions below; which exporters read them — the Prometheus ``/metrics`` port, OTLP — is
set up once per service process by :func:`episodic.telemetry.setup_metrics`. Until then
every instrument is the OpenTelemetry API's proxy, which records nothing (tests, the CLI).

Labels never identify a user: no dataset names, no thread, episode or message ids — only
small fixed sets (status codes, roles, triggers, outcomes, the provider names of the
settings). That keeps the number of series bounded and the metrics free of personal data.

:data:`SPECS` lists every metric with its Prometheus name; the README's table, the
Grafana dashboard and the alert rules in ``k8s/monitoring/`` use only those names (a test
checks the PromQL against them).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from opentelemetry import metrics as otel_metrics
from opentelemetry.metrics import CallbackOptions, Observation

from episodic import genai, loops

if TYPE_CHECKING:
    from episodic.store.status import PipelineStatus

log = logging.getLogger(__name__)

Kind = Literal["counter", "histogram", "gauge"]

#: Latency buckets in seconds (OpenTelemetry's advice for rpc.server.call.duration).
SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
#: Slow work (LLM calls, embedding batches, timer lag): up to minutes.
SLOW_SECONDS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
#: Counts of episodes (recall candidates and results).
COUNT_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


@dataclass(frozen=True)
class MetricSpec:
    """One metric: its OpenTelemetry name, kind, unit and labels (attribute keys), and
    the service processes that record it ("every" for all four)."""

    name: str
    kind: Kind
    unit: str
    description: str
    labels: tuple[str, ...] = ()
    service: str = "every"

    @property
    def prometheus_name(self) -> str:
        """The family name the Prometheus exporter gives it: dots become underscores, the
        unit is appended (``s`` → ``_seconds``; ``{episode}``-style annotations add
        nothing) and counters end in ``_total``."""
        name = self.name.replace(".", "_")
        unit = "seconds" if self.unit == "s" else ""
        if unit and not name.endswith("_" + unit):
            name += "_" + unit
        return name + "_total" if self.kind == "counter" else name

    @property
    def prometheus_series(self) -> tuple[str, ...]:
        """The sample names a scrape shows for it."""
        base = self.prometheus_name
        if self.kind == "histogram":
            return (f"{base}_bucket", f"{base}_sum", f"{base}_count")
        return (base,)

    @property
    def prometheus_labels(self) -> tuple[str, ...]:
        return tuple(label.replace(".", "_") for label in self.labels)


def _spec(
    name: str,
    kind: Kind,
    unit: str,
    description: str,
    labels: tuple[str, ...] = (),
    service: str = "every",
) -> MetricSpec:
    spec = MetricSpec(name, kind, unit, description, labels, service)
    SPECS.append(spec)
    return spec


SPECS: list[MetricSpec] = []

# -- every service ------------------------------------------------------------------------
RPC_DURATION = _spec(
    "rpc.server.call.duration",
    "histogram",
    "s",
    "Duration of incoming RPCs (health checks and reflection excluded), by method and "
    "status code (OpenTelemetry RPC semantic conventions).",
    ("rpc.system.name", "rpc.method", "rpc.response.status_code"),
)
LOOP_PASS_AGE = _spec(
    "episodic.loop.pass.age",
    "gauge",
    "s",
    "How long each background loop's current pass has run (0 between passes), by loop "
    "(scheduler.timers, scheduler.reclaim, scheduler.maintenance, summariser.worker). "
    "Above EPISODIC_LOOP_STALL_AFTER the loop is stalled (see episodic.loops).",
    ("loop",),
    "scheduler, summariser",
)
# -- Ingest -------------------------------------------------------------------------------
MESSAGES_INGESTED = _spec(
    "episodic.messages.ingested",
    "counter",
    "{message}",
    "Messages stored by AddMessages (durable), by role.",
    ("role",),
    "ingest",
)
MESSAGES_DEDUPLICATED = _spec(
    "episodic.messages.deduplicated",
    "counter",
    "{message}",
    "Messages AddMessages answered from an earlier call with the same idempotency key "
    "(client retries), not stored again.",
    (),
    "ingest",
)
# -- Scheduler ----------------------------------------------------------------------------
TIMERS_FIRED = _spec(
    "episodic.scheduler.timers.fired",
    "counter",
    "{timer}",
    "Timers fired, by trigger; outcome episode (an episode was opened) or empty (nothing "
    "left to capture).",
    ("trigger", "outcome"),
    "scheduler",
)
TIMER_LAG = _spec(
    "episodic.scheduler.timer.lag",
    "histogram",
    "s",
    "Fire lag: how long after its deadline a timer was claimed to fire (database clock).",
    ("trigger",),
    "scheduler",
)
CLAIMS_RECLAIMED = _spec(
    "episodic.scheduler.claims.reclaimed",
    "counter",
    "{claim}",
    "Claims of lost workers returned by the reclaim sweep: timer, episode (back to pending "
    "or failed) or extraction.",
    ("kind",),
    "scheduler",
)
PIPELINE_EPISODES = _spec(
    "episodic.pipeline.episodes",
    "gauge",
    "{episode}",
    "Episodes by status, all datasets (computed by the Scheduler at scrape time).",
    ("status",),
    "scheduler",
)
PIPELINE_EXTRACTIONS = _spec(
    "episodic.pipeline.extractions",
    "gauge",
    "{episode}",
    "Episodes by semantic extraction status, all datasets.",
    ("status",),
    "scheduler",
)
PIPELINE_OLDEST_AGE = _spec(
    "episodic.pipeline.oldest.age",
    "gauge",
    "s",
    "Age of the oldest due pending episode (since it became due) and of the oldest "
    "processing claim; 0 when there is none. Growing: the pipeline is stuck.",
    ("status",),
    "scheduler",
)
PIPELINE_TIMERS = _spec(
    "episodic.pipeline.timers",
    "gauge",
    "{timer}",
    "Idle timers: due (deadline passed, not fired yet) or waiting.",
    ("state",),
    "scheduler",
)
PIPELINE_OLDEST_DUE_TIMER = _spec(
    "episodic.pipeline.oldest_due_timer.age",
    "gauge",
    "s",
    "How far past its deadline the most overdue timer is; 0 when none is due.",
    (),
    "scheduler",
)
PIPELINE_THREADS = _spec(
    "episodic.pipeline.threads",
    "gauge",
    "{thread}",
    "Threads with messages no episode covers yet (uncaptured), and those of them with no "
    "timer a minute after their last message (without_timer: a lost notice the catch-up "
    "sweep has not repaired yet).",
    ("state",),
    "scheduler",
)
# -- Summariser ---------------------------------------------------------------------------
EPISODES_PROCESSED = _spec(
    "episodic.summariser.episodes",
    "counter",
    "{episode}",
    "Episodes the Summariser finished working on, by outcome: completed, retried (failed, "
    "pending again after a backoff), failed (retries used up) or lost (its claim was "
    "reclaimed or the thread erased meanwhile).",
    ("outcome",),
    "summariser",
)
CHUNK_INDEXES_ABANDONED = _spec(
    "episodic.summariser.chunk_indexes.abandoned",
    "counter",
    "{episode}",
    "Completed episodes whose deferred chunk index was given up after its attempts were "
    "used up (each take ended without storing it: a worker killed or failing). The episode "
    "stays recallable by its summary; its error says so.",
    (),
    "summariser",
)
SUMMARISE_DURATION = _spec(
    "episodic.summariser.summarise.duration",
    "histogram",
    "s",
    "Time to summarise one episode, by summariser provider and outcome (ok, error).",
    ("provider", "outcome"),
    "summariser",
)
# The GenAI client metrics (OpenTelemetry GenAI semantic conventions; names in
# episodic.genai): every model call, the Summariser's and Recall's query embeddings.
_GENAI_LABELS = (
    genai.OPERATION_NAME,
    genai.PROVIDER_NAME,
    genai.REQUEST_MODEL,
    genai.RESPONSE_MODEL,
    genai.SERVER_ADDRESS,
    genai.SERVER_PORT,
)
GENAI_TOKEN_USAGE = _spec(
    genai.TOKEN_USAGE_METRIC,
    "histogram",
    "{token}",
    "Input and output tokens a model call used, as its provider reported them.",
    (*_GENAI_LABELS, genai.TOKEN_TYPE),
    "summariser, recall",
)
GENAI_OPERATION_DURATION = _spec(
    genai.OPERATION_DURATION_METRIC,
    "histogram",
    "s",
    "Duration of one model call (chat, embeddings), retries included.",
    (*_GENAI_LABELS, genai.ERROR_TYPE),
    "summariser, recall",
)
EMBED_DURATION = _spec(
    "episodic.summariser.embed.duration",
    "histogram",
    "s",
    "Time to embed one episode's summary (target summary) or its thread's new message "
    "chunks for Recall (target chunks), by embedding provider and outcome.",
    ("provider", "target", "outcome"),
    "summariser",
)
EXTRACTIONS = _spec(
    "episodic.summariser.extractions",
    "counter",
    "{episode}",
    "Semantic extractions finished, by outcome: completed, skipped, failed.",
    ("outcome",),
    "summariser",
)
PROVIDER_RETRIES = _spec(
    "episodic.provider.retries",
    "counter",
    "{retry}",
    "Retried calls to an LLM or embeddings endpoint, by provider and reason (http_429, "
    "http_5xx, timeout, connection).",
    ("provider", "reason"),
    "summariser, recall",
)
PROVIDER_ERRORS = _spec(
    "episodic.provider.errors",
    "counter",
    "{error}",
    "Calls to an LLM or embeddings endpoint that failed for good (after their retries), by "
    "provider and reason (http_429, http_5xx, http_4xx, timeout, connection, "
    "invalid_response).",
    ("provider", "reason"),
    "summariser, recall",
)
# -- Recall -------------------------------------------------------------------------------
RECALL_CANDIDATES = _spec(
    "episodic.recall.candidates",
    "histogram",
    "{episode}",
    "Per ranking: the dataset's current episodes the ranking chose from (completed, as of "
    "the request's as_of; its time, thread, entity and event-type filters narrow them "
    "further).",
    (),
    "recall",
)
RECALL_RESULTS = _spec(
    "episodic.recall.results",
    "histogram",
    "{episode}",
    "Per ranking: episodes returned.",
    (),
    "recall",
)
RECALL_ABSTAINED = _spec(
    "episodic.recall.abstained",
    "counter",
    "{request}",
    "Recalls answered with no episode because the thresholds (min_relevance, min_match, "
    "abstain's) left out every one there was: the dataset held nothing that fits.",
    (),
    "recall",
)
RECALL_STATISTICS = _spec(
    "episodic.recall.statistics",
    "counter",
    "{request}",
    "Recalls of a large dataset (the approximate path) with a query and no filter, by where "
    "BM25's statistics came from: kept (what the Scheduler keeps of the dataset) or counted "
    "(over every holder of each query word: the dataset has none kept yet, e.g. just after "
    "it grew past the threshold or a thread of it was erased).",
    ("source",),
    "recall",
)
RECALL_NEAREST_WALKS = _spec(
    "episodic.recall.nearest_walks",
    "counter",
    "{request}",
    "Recalls of a large dataset (the approximate path) with a query vector, by which HNSW "
    "indexes their nearest walks read: own (the dataset's own, which the Scheduler builds "
    "above EPISODIC_NEAREST_INDEX_ABOVE) or shared (its partition's: the dataset is below "
    "that size, or its own are missing or being built).",
    ("index",),
    "recall",
)
LEASES_LOST = _spec(
    "episodic.scheduler.leases.lost",
    "counter",
    "{lease}",
    "Singleton sweeps whose lease another replica took while they ran: this replica did not "
    "renew it within EPISODIC_LEASE_TTL (frozen, or cut off from the database), so two "
    "replicas ran that sweep at once for a while.",
    ("lease",),
    "scheduler",
)
NEAREST_INDEX_CHANGES = _spec(
    "episodic.nearest_index.changes",
    "counter",
    "{index}",
    "Large datasets' own nearest indexes the maintenance built, dropped (the dataset fell "
    "below half of EPISODIC_NEAREST_INDEX_ABOVE, or is gone) or dropped as invalid (a build "
    "that did not finish, built again on the next pass).",
    ("change",),
    "scheduler",
)
# -- Lifecycle and erasure ----------------------------------------------------------------
LIFECYCLE_THREADS = _spec(
    "episodic.lifecycle.threads",
    "counter",
    "{thread}",
    "Threads the lifecycle sweep purged (retention) or compacted.",
    ("action",),
    "scheduler",
)
ERASURES = _spec(
    "episodic.erasures",
    "counter",
    "{erasure}",
    "Erasures finished (DeleteDataset, DeleteThread, or a stalled one resumed), by scope.",
    ("scope",),
    "ingest, scheduler",
)
ERASED_ROWS = _spec(
    "episodic.erasure.rows",
    "counter",
    "{row}",
    "Rows deleted by erasures and retention purges, by scope (dataset, thread, retention) "
    "and table.",
    ("scope", "table"),
    "ingest, scheduler",
)

#: Series the Prometheus endpoint adds by itself: prometheus_client's process and Python
#: collectors, and the OpenTelemetry resource as target_info.
EXTRA_PROMETHEUS_NAMES = (
    "target_info",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
    "python_gc_collections_total",
    "python_gc_objects_collected_total",
    "python_gc_objects_uncollectable_total",
    "python_info",
)


def prometheus_names() -> set[str]:
    """Every sample name a service's /metrics can show (family and sample names)."""
    names = set(EXTRA_PROMETHEUS_NAMES)
    for spec in SPECS:
        names.add(spec.prometheus_name)
        names.update(spec.prometheus_series)
    return names


# --------------------------------------------------------------------------- instruments

_meter = otel_metrics.get_meter("episodic")


def _histogram(spec: MetricSpec, buckets: Sequence[float]) -> otel_metrics.Histogram:
    return _meter.create_histogram(
        spec.name,
        unit=spec.unit,
        description=spec.description,
        explicit_bucket_boundaries_advisory=buckets,
    )


def _counter(spec: MetricSpec) -> otel_metrics.Counter:
    return _meter.create_counter(spec.name, unit=spec.unit, description=spec.description)


class _Tally:
    """A counter kept in Python and handed to OpenTelemetry only when a reader collects
    (a scrape, an OTLP export), as an observable counter of the same name, unit and
    labels: the same series, exported the same way (a monotonic cumulative sum, ``_total``
    in Prometheus). For counters bumped on every call of a hot RPC: a synchronous
    counter's ``add`` builds and looks up the attribute set in every reader's storage
    per call (60–270 µs of a one-message AddMessages with the Prometheus reader, README
    "AddMessages, fifth pass"); this is a dictionary update under a lock. A label value
    appears once it was counted, as with a synchronous counter."""

    def __init__(self, spec: MetricSpec) -> None:
        self._label = spec.labels[0] if spec.labels else None
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        _meter.create_observable_counter(
            spec.name, callbacks=[self._observe], unit=spec.unit, description=spec.description
        )

    def add(self, n: int, label: str = "") -> None:
        with self._lock:
            self._counts[label] = self._counts.get(label, 0) + n

    def _observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            counts = list(self._counts.items())
        if self._label is None:
            return [Observation(n) for _, n in counts]
        return [Observation(n, {self._label: label}) for label, n in counts]


_rpc_duration = _histogram(RPC_DURATION, SECONDS_BUCKETS)
_messages_ingested = _Tally(MESSAGES_INGESTED)
_messages_deduplicated = _Tally(MESSAGES_DEDUPLICATED)
_timers_fired = _counter(TIMERS_FIRED)
_timer_lag = _histogram(TIMER_LAG, SLOW_SECONDS_BUCKETS)
_claims_reclaimed = _counter(CLAIMS_RECLAIMED)
_episodes_processed = _counter(EPISODES_PROCESSED)
_chunk_indexes_abandoned = _counter(CHUNK_INDEXES_ABANDONED)
_summarise_duration = _histogram(SUMMARISE_DURATION, SLOW_SECONDS_BUCKETS)
_genai_tokens = _histogram(GENAI_TOKEN_USAGE, genai.TOKEN_BUCKETS)
_genai_duration = _histogram(GENAI_OPERATION_DURATION, genai.DURATION_BUCKETS)
_embed_duration = _histogram(EMBED_DURATION, SLOW_SECONDS_BUCKETS)
_extractions = _counter(EXTRACTIONS)
_provider_retries = _counter(PROVIDER_RETRIES)
_provider_errors = _counter(PROVIDER_ERRORS)
_recall_candidates = _histogram(RECALL_CANDIDATES, COUNT_BUCKETS)
_recall_results = _histogram(RECALL_RESULTS, COUNT_BUCKETS)
_recall_abstained = _counter(RECALL_ABSTAINED)
_recall_statistics = _counter(RECALL_STATISTICS)
_recall_nearest_walks = _counter(RECALL_NEAREST_WALKS)
_nearest_index_changes = _counter(NEAREST_INDEX_CHANGES)
_leases_lost = _counter(LEASES_LOST)
_lifecycle_threads = _counter(LIFECYCLE_THREADS)
_erasures = _counter(ERASURES)
_erased_rows = _counter(ERASED_ROWS)


# --------------------------------------------------------------------------- recording


def rpc_finished(method: str, code: str, seconds: float) -> None:
    """One RPC handled: ``method`` as gRPC names it (``/pkg.Service/Method``), ``code``
    the status code's name (``OK``, ``NOT_FOUND``, …)."""
    _rpc_duration.record(
        seconds,
        {
            "rpc.system.name": "grpc",
            "rpc.method": method.lstrip("/"),
            "rpc.response.status_code": code,
        },
    )


def messages_ingested(roles: Iterable[str]) -> None:
    """Messages stored (their roles); call after the transaction committed."""
    counts: dict[str, int] = {}
    for role in roles:
        counts[role] = counts.get(role, 0) + 1
    for role, n in counts.items():
        _messages_ingested.add(n, role)


def messages_deduplicated(count: int) -> None:
    if count:
        _messages_deduplicated.add(count)


def timer_fired(trigger: str, *, opened_episode: bool, lag_seconds: float) -> None:
    _timers_fired.add(1, {"trigger": trigger, "outcome": "episode" if opened_episode else "empty"})
    _timer_lag.record(max(lag_seconds, 0.0), {"trigger": trigger})


def claims_reclaimed(kind: Literal["timer", "episode", "extraction"], count: int) -> None:
    if count:
        _claims_reclaimed.add(count, {"kind": kind})


def chunk_indexes_abandoned(count: int) -> None:
    if count:
        _chunk_indexes_abandoned.add(count)


def episode_processed(status: str | None) -> None:
    """The Summariser is done with an episode: ``status`` is what the episode became
    (completed, archived, pending, failed) or None when its claim was lost."""
    outcome = {
        "completed": "completed",
        "archived": "completed",  # completed, but a newer episode of the thread was first
        "pending": "retried",
        "failed": "failed",
    }.get(status or "", "lost")
    _episodes_processed.add(1, {"outcome": outcome})


@contextmanager
def _timed(histogram: otel_metrics.Histogram, attributes: dict[str, str]) -> Iterator[None]:
    started = time.perf_counter()
    outcome = "error"
    try:
        yield
        outcome = "ok"
    finally:
        histogram.record(time.perf_counter() - started, {**attributes, "outcome": outcome})


def genai_tokens(tokens: int, attributes: Mapping[str, str | int]) -> None:
    """One model call's input or output tokens (``gen_ai.token.type`` says which)."""
    _genai_tokens.record(tokens, attributes)


def genai_call_finished(seconds: float, attributes: Mapping[str, str | int]) -> None:
    """One model call's duration (``error.type`` when it failed)."""
    _genai_duration.record(seconds, attributes)


def summarising(provider: str) -> AbstractContextManager[None]:
    """``with metrics.summarising(summariser.name): …`` times one summary."""
    return _timed(_summarise_duration, {"provider": provider})


def embedding(provider: str, target: Literal["summary", "chunks"]) -> AbstractContextManager[None]:
    """``with metrics.embedding(embedder.name, "summary"): …`` times one embedding step."""
    return _timed(_embed_duration, {"provider": provider, "target": target})


def extraction_finished(outcome: str) -> None:
    _extractions.add(1, {"outcome": outcome})


def provider_retry(provider: str, reason: str) -> None:
    _provider_retries.add(1, {"provider": provider, "reason": reason})


def provider_error(provider: str, reason: str) -> None:
    _provider_errors.add(1, {"provider": provider, "reason": reason})


def recall_ranked(candidates: int, results: int) -> None:
    _recall_candidates.record(candidates)
    _recall_results.record(results)


def recall_abstained() -> None:
    _recall_abstained.add(1)


def recall_statistics(*, kept: bool) -> None:
    """An approximate recall's BM25 statistics were the dataset's kept ones, or counted."""
    _recall_statistics.add(1, {"source": "kept" if kept else "counted"})


def recall_nearest_walks(*, own: bool) -> None:
    """An approximate recall's nearest walks read the dataset's own indexes, or shared."""
    _recall_nearest_walks.add(1, {"index": "own" if own else "shared"})


def lease_lost(lease: str) -> None:
    _leases_lost.add(1, {"lease": lease})


def nearest_index_changed(change: Literal["built", "dropped", "invalid dropped"]) -> None:
    _nearest_index_changes.add(1, {"change": change})


def lifecycle_threads(action: Literal["purged", "compacted"], count: int) -> None:
    if count:
        _lifecycle_threads.add(count, {"action": action})


def erasure_finished(scope: str, rows: Mapping[str, int], *, counted: bool = True) -> None:
    """An erasure (``counted``) or a retention purge finished with ``rows`` per table."""
    if counted:
        _erasures.add(1, {"scope": scope})
    for table, n in rows.items():
        if n:
            _erased_rows.add(n, {"scope": scope, "table": table})


# --------------------------------------------------------------------------- pipeline


class PipelineGauges:
    """The pipeline's state as observable gauges, read from the database by ``read`` (a
    :class:`~episodic.store.status.PipelineStatus` over all datasets) when a scrape or an
    OTLP export asks, at most once per ``ttl`` seconds: several scrapers, and the gauges of
    one scrape, share one query. A failed read is logged and cached too, so a database
    outage is not hammered; the gauges are then absent until the next successful read."""

    def __init__(
        self,
        read: Callable[[], PipelineStatus],
        ttl: float,
        statuses: Sequence[str],
        semantic_statuses: Sequence[str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self._ttl = ttl
        self._statuses = tuple(statuses)
        self._semantic_statuses = tuple(semantic_statuses)
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: PipelineStatus | None = None
        self._read_at: float | None = None
        self.reads = 0

    def snapshot(self) -> PipelineStatus | None:
        with self._lock:
            now = self._clock()
            if self._read_at is not None and now - self._read_at < self._ttl:
                return self._cached
            self.reads += 1
            try:
                self._cached = self._read()
            except Exception as err:
                from episodic.errors import describe_error

                log.warning("pipeline gauges: cannot read the status: %s", describe_error(err))
                self._cached = None
            self._read_at = self._clock()
            return self._cached

    # One callback per gauge; each takes the shared snapshot.
    def _episodes(self, _options: CallbackOptions) -> Iterable[Observation]:
        status = self.snapshot()
        if status is None:
            return []
        counts = status.status_counts
        names = dict.fromkeys([*self._statuses, *counts])
        return [Observation(counts.get(name, 0), {"status": name}) for name in names]

    def _extractions(self, _options: CallbackOptions) -> Iterable[Observation]:
        status = self.snapshot()
        if status is None:
            return []
        counts = status.semantic_status_counts
        names = dict.fromkeys([*self._semantic_statuses, *counts])
        return [Observation(counts.get(name, 0), {"status": name}) for name in names]

    def _oldest(self, _options: CallbackOptions) -> Iterable[Observation]:
        status = self.snapshot()
        if status is None:
            return []
        return [
            Observation(_seconds(status.oldest_pending_age), {"status": "pending"}),
            Observation(_seconds(status.oldest_processing_age), {"status": "processing"}),
        ]

    def _timers(self, _options: CallbackOptions) -> Iterable[Observation]:
        status = self.snapshot()
        if status is None:
            return []
        return [
            Observation(status.timers_due, {"state": "due"}),
            Observation(status.timers_waiting, {"state": "waiting"}),
        ]

    def _oldest_due_timer(self, _options: CallbackOptions) -> Iterable[Observation]:
        status = self.snapshot()
        if status is None:
            return []
        return [Observation(_seconds(status.oldest_due_timer_age))]

    def _threads(self, _options: CallbackOptions) -> Iterable[Observation]:
        status = self.snapshot()
        if status is None:
            return []
        return [
            Observation(status.threads_uncaptured, {"state": "uncaptured"}),
            Observation(status.threads_without_timer, {"state": "without_timer"}),
        ]


def _seconds(age: object) -> float:
    seconds = getattr(age, "total_seconds", None)
    return max(float(seconds()), 0.0) if seconds is not None else 0.0


_pipeline_lock = threading.Lock()
_pipeline: PipelineGauges | None = None
_loops_observed = False


def _loop_ages(_options: CallbackOptions) -> Iterable[Observation]:
    return [Observation(w.pass_age(), {"loop": w.name}) for w in loops.watches()]


def observe_loops() -> None:
    """Registers the loop gauge (once per process), fed by :mod:`episodic.loops`."""
    global _loops_observed
    with _pipeline_lock:
        if _loops_observed:
            return
        _meter.create_observable_gauge(
            LOOP_PASS_AGE.name,
            callbacks=[_loop_ages],
            unit=LOOP_PASS_AGE.unit,
            description=LOOP_PASS_AGE.description,
        )
        _loops_observed = True


def observe_pipeline(
    read: Callable[[], PipelineStatus],
    ttl: float,
    statuses: Sequence[str],
    semantic_statuses: Sequence[str],
) -> PipelineGauges:
    """Registers the pipeline gauges, fed by ``read`` (once per process: one service
    exports them, so dashboards do not add up copies)."""
    global _pipeline
    with _pipeline_lock:
        if _pipeline is not None:
            raise RuntimeError("the pipeline gauges are already registered in this process")
        gauges = PipelineGauges(read, ttl, statuses, semantic_statuses)
        for spec, callback in (
            (PIPELINE_EPISODES, gauges._episodes),
            (PIPELINE_EXTRACTIONS, gauges._extractions),
            (PIPELINE_OLDEST_AGE, gauges._oldest),
            (PIPELINE_TIMERS, gauges._timers),
            (PIPELINE_OLDEST_DUE_TIMER, gauges._oldest_due_timer),
            (PIPELINE_THREADS, gauges._threads),
        ):
            _meter.create_observable_gauge(
                spec.name, callbacks=[callback], unit=spec.unit, description=spec.description
            )
        _pipeline = gauges
        return gauges
