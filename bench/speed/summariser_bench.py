"""Summariser benchmark: episodes summarised per second with the offline defaults, split into
summarise / embed / database time.

Starts its own embedded PostgreSQL (episodic/testing/database.py), migrates it, writes N threads
with real conversations (one LoCoMo session per thread, from ``../shared/bench/locomo10.json``,
sessions taken round-robin over the ten conversations; synthetic chat if the file is absent),
opens one episode per thread (``episodes.open_episode``), and drains them with
``episodic.services.summariser.pipeline.Pipeline`` built as the service builds it, from default
settings: ``make_embedder(EmbeddingSettings(), bulk=True)`` (MiniLM int8 ONNX; intra-op threads
``EPISODIC_EMBEDDING_THREADS``, automatic by default: the process's share of the cores),
``make_summariser(LLMSettings())`` (extractive), ``KeyLearningFacts``, claim batch
``SummariserSettings().summariser_batch_size``. Workers call ``run_once`` in a loop, as the
service's worker does once woken, until nothing is left.

Per episode it splits the time (wrappers around the summariser and the embedder):

- summarise: ``summariser.summarise`` (the extractive summariser embeds the thread's
  sentences with the same MiniLM model: shown as "of which sentence embedding");
- embed: the pipeline's model time: the summary + key learnings, and the chunk index
  (embedded after the completions, in slices that yield to due episodes: shared equally
  among the episodes of the pass that embedded it, or among all episodes when a pass
  that completed none embedded it);
- database: everything else in the worker — the claim, loading the thread, the completion
  transaction and the semantic pass (window load, fact rules, facts insert, status) — with a
  pass's claim and semantic time shared equally among the episodes it completed.

Run once with 1 worker and once with 2 (two Pipelines with their own worker ids in two
threads of this process: the model is shared, the sentence caches are not, like two
replicas), each on fresh threads and a fresh summariser (empty sentence cache). Not part of
pytest:

    .venv/bin/python -m bench.speed.summariser_bench [--threads 100] [--workers 1,2]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from bench.harness.locomo_json import LOCOMO, Turn, locomo_sessions
from episodic.config import (
    EmbeddingSettings,
    IngestSettings,
    LLMSettings,
    RecoverySettings,
    SummariserSettings,
)
from episodic.providers import (
    CachedEmbedder,
    Embedder,
    SpanDocument,
    Summariser,
    SummaryRequest,
    SummaryResult,
    make_embedder,
    make_summariser,
)
from episodic.providers.embedding import INT8_PRODUCTS
from episodic.providers.factory import late_chunks
from episodic.services.ingest import domain as ingest
from episodic.services.summariser.pipeline import PassResult, Pipeline
from episodic.services.summariser.semantic import KeyLearningFacts
from episodic.store import episodes
from episodic.store.db import make_engine
from episodic.testing.database import test_server
from episodic.testing.keys import test_vault

# ---- conversations -------------------------------------------------------------------------


def synthetic_sessions(n: int) -> list[list[Turn]]:
    """Fallback when LoCoMo is absent: 20-turn chats with varied facts."""
    cities = ["Lisbon", "Oslo", "Kyoto", "Austin", "Nairobi", "Lima", "Porto", "Seoul"]
    start = datetime(2024, 3, 1, 9, tzinfo=UTC)
    out = []
    for s in range(n):
        city = cities[s % len(cities)]
        turns = []
        for i in range(10):
            turns.append(
                Turn(
                    "user",
                    "Sam",
                    f"I'm planning a trip to {city} in week {i + 1}. My budget is "
                    f"${900 + 37 * s + i} and I prefer trains over flights. Can you help?",
                    start + timedelta(days=s, seconds=60 * i),
                )
            )
            turns.append(
                Turn(
                    "assistant",
                    "Assistant",
                    f"Sure. The train to {city} takes about {3 + i % 5} hours; I found a "
                    f"hotel near the station for ${80 + i * 3} a night. Shall I book it?",
                    start + timedelta(days=s, seconds=60 * i + 30),
                )
            )
        out.append(turns)
    return out


# ---- instrumentation -----------------------------------------------------------------------


@dataclass
class Clock:
    """One worker's phase timers for the episode in hand."""

    summarise: float = 0.0
    sentence_embed: float = 0.0
    embed: float = 0.0
    texts: int = 0
    in_summarise: bool = False

    def reset(self) -> None:
        self.summarise = self.sentence_embed = self.embed = 0.0
        self.texts = 0


class TimedEmbedder:
    """Times every embed call: inside summarise (sentences) or the pipeline's own."""

    def __init__(self, inner: Embedder, clock: Clock) -> None:
        self.inner = inner
        self.clock = clock
        self.dimension = inner.dimension
        self.name = inner.name

    def embed(self, texts: list[str]) -> np.ndarray:
        t0 = time.perf_counter()
        out = self.inner.embed(texts)
        dt = time.perf_counter() - t0
        if self.clock.in_summarise:
            self.clock.sentence_embed += dt
            self.clock.texts += len(texts)
        else:
            self.clock.embed += dt
        return out

    def embed_spans(self, documents: list[SpanDocument]) -> list[np.ndarray]:
        """Late chunking's model time (EPISODIC_CHUNK_VECTORS=late): the pipeline's own."""
        t0 = time.perf_counter()
        out = self.inner.embed_spans(documents)  # type: ignore[attr-defined]
        self.clock.embed += time.perf_counter() - t0
        return list(out)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def check(self) -> None:
        self.inner.check()


class TimedSummariser:
    def __init__(self, inner: Summariser, clock: Clock) -> None:
        self.inner = inner
        self.clock = clock
        self.name = getattr(inner, "name", type(inner).__name__)

    def summarise(self, request: SummaryRequest) -> SummaryResult:
        self.clock.in_summarise = True
        t0 = time.perf_counter()
        try:
            return self.inner.summarise(request)
        finally:
            self.clock.summarise += time.perf_counter() - t0
            self.clock.in_summarise = False

    def check(self) -> None:
        self.inner.check()  # type: ignore[attr-defined]


@dataclass
class EpisodeTime:
    total: float  # process() + its share of the pass's claim and semantic work
    summarise: float
    sentence_embed: float
    embed: float
    texts: int

    @property
    def database(self) -> float:
        return self.total - self.summarise - self.embed


class TimedPipeline(Pipeline):
    """Records per-episode phase times; a pass's claim + semantic time is shared out."""

    def __init__(self, *args: Any, clock: Clock, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clock = clock
        self.episodes: list[EpisodeTime] = []
        self._pass: list[EpisodeTime] = []
        self._orphan = 0.0  # work in passes that completed nothing (semantic, chunks)
        self._orphan_embed = 0.0  # of which chunk-index model time

    def settle(self) -> None:
        """Shares out semantic time of passes that completed no episode of their own."""
        for e in self.episodes:
            e.total += self._orphan / len(self.episodes)
            e.embed += self._orphan_embed / len(self.episodes)
        self._orphan = self._orphan_embed = 0.0

    def process(self, episode, loaded=None, deferred=None):  # type: ignore[no-untyped-def]
        self.clock.reset()
        t0 = time.perf_counter()
        status = super().process(episode, loaded, deferred)
        c = self.clock
        self._pass.append(
            EpisodeTime(time.perf_counter() - t0, c.summarise, c.sentence_embed, c.embed, c.texts)
        )
        return status

    def index_backlog(self, **kw):  # type: ignore[no-untyped-def]
        # The chunk index's model time (its slices, and the write's call, which finds them
        # cached); a pass that yielded carries the slices it embedded to the next.
        self.clock.reset()
        done = super().index_backlog(**kw)
        self._batch_embed += self.clock.embed
        return done

    def run_once(self, limit: int, now: datetime | None = None) -> PassResult:
        self._pass = []
        self._batch_embed = 0.0
        t0 = time.perf_counter()
        result = super().run_once(limit, now)
        overhead = time.perf_counter() - t0 - sum(e.total for e in self._pass)
        for e in self._pass:
            e.total += overhead / len(self._pass)
            e.embed += self._batch_embed / len(self._pass)
        if not self._pass:  # the chunk index of earlier passes, or semantic work only
            self._orphan += overhead
            self._orphan_embed += self._batch_embed
        self.episodes += self._pass
        return result


# ---- the run -------------------------------------------------------------------------------


@dataclass
class RunResult:
    workers: int
    episodes: int
    seconds: float
    times: list[EpisodeTime] = field(default_factory=list)
    messages: int = 0
    facts: int = 0
    per_worker: list[int] = field(default_factory=list)


#: Encrypted at rest, as `episodic up` runs (a per-run keyring in a temporary directory).
VAULT = test_vault()


def load_threads(engine, sessions: list[list[Turn]], dataset: str) -> int:  # type: ignore[no-untyped-def]
    """One thread per session, one AddMessages transaction each, then one open episode each.
    Returns the number of messages written."""
    settings = IngestSettings()
    written = 0
    for turns in sessions:
        with engine.begin() as conn:
            thread = ingest.create_thread(
                conn,
                VAULT,
                dataset=dataset,
                thread_id=uuid.uuid4(),
                label="",
                metadata_json="{}",
            )
            ingest.add_messages(
                conn,
                VAULT,
                thread["thread_id"],
                [
                    ingest.NewMessage(t.role, t.text, {"speaker": t.speaker}, created_at=t.at)
                    for t in turns
                ],
                settings,
            )
            written += len(turns)
        with engine.begin() as conn:
            opened = episodes.open_episode(
                conn, thread["thread_id"], "explicit", dataset=thread["dataset"]
            )
            assert opened is not None
    return written


def build_pipeline(engine, worker: str) -> TimedPipeline:  # type: ignore[no-untyped-def]
    """As services/summariser/__main__.py builds it, from default settings (on_complete:
    the service passes the recall-index hook, which is None today)."""
    clock = Clock()
    # One cache for the summary and the index, as the service builds it.
    settings = EmbeddingSettings()
    model = make_embedder(settings, 384, bulk=True)
    embedder = CachedEmbedder(TimedEmbedder(model, clock))
    summariser = TimedSummariser(make_summariser(LLMSettings(), embedder), clock)  # type: ignore[arg-type]
    retries = RecoverySettings()
    return TimedPipeline(
        engine,
        summariser,  # type: ignore[arg-type]
        embedder,  # type: ignore[arg-type]
        KeyLearningFacts(),
        vault=VAULT,
        max_retries=retries.max_retries,
        retry_backoff=retries.retry_backoff,
        worker=worker,
        clock=clock,
        chunk_vectors="late" if late_chunks(settings, model) else "separate",
    )


def run(engine, url: str, sessions: list[list[Turn]], workers: int, batch: int) -> RunResult:  # type: ignore[no-untyped-def]
    dataset = f"bench-w{workers}"
    messages = load_threads(engine, sessions, dataset)
    pipelines = [build_pipeline(engine, f"bench-{workers}-{i}") for i in range(workers)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(workers + 1)

    def drain(p: TimedPipeline) -> None:
        barrier.wait()
        try:
            while True:
                r = p.run_once(batch)
                if not r.did_work:  # as the service's worker drains
                    return
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=drain, args=(p,)) for p in pipelines]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    if errors:
        raise errors[0]
    for p in pipelines:
        if p.episodes:
            p.settle()

    with psycopg.connect(url) as conn:
        done, semantic = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'completed'), "
            "count(*) FILTER (WHERE semantic_status IN ('completed', 'skipped')) "
            "FROM episodes WHERE dataset = %s",
            (dataset,),
        ).fetchone()  # type: ignore[misc]
        facts = conn.execute("SELECT count(*) FROM facts WHERE dataset = %s", (dataset,)).fetchone()
    if done != len(sessions) or semantic != len(sessions):
        raise AssertionError(f"{done} completed, {semantic} semantic of {len(sessions)}")
    return RunResult(
        workers=workers,
        episodes=len(sessions),
        seconds=seconds,
        times=[e for p in pipelines for e in p.episodes],
        messages=messages,
        facts=int(facts[0]),  # type: ignore[index]
        per_worker=[len(p.episodes) for p in pipelines],
    )


def pct(values: list[float], p: int) -> float:
    return float(np.percentile(np.array(values), p))


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run_before(checkout: Path, threads: int, batch: int, path: Path) -> float:
    """Runs the older checkout's own summariser_bench (1 worker) and reads its episodes/s."""
    import subprocess

    grouped = (checkout / "bench" / "speed" / "summariser_bench.py").exists()  # bench/README.md
    out = subprocess.run(
        [
            str(checkout / ".venv" / "bin" / "python"),
            *(
                ["-m", "bench.speed.summariser_bench"]
                if grouped
                else [str(checkout / "bench" / "summariser_bench.py")]
            ),
            "--workers",
            "1",
            "--threads",
            str(threads),
            "--batch",
            str(batch),
            "--path",
            str(path.resolve()),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=checkout if grouped else None,  # -m finds the older checkout's bench package
    ).stdout
    print(out, file=sys.stderr)
    match = re.search(r"^\s*1 \|\s*([\d.]+) \|", out, re.MULTILINE)
    if match is None:
        raise RuntimeError("no 1-worker row in the older checkout's output")
    return float(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=100, help="threads (= episodes) per run")
    parser.add_argument("--workers", default="1,2", help="worker counts to run")
    parser.add_argument("--path", type=Path, default=LOCOMO, help="LoCoMo locomo10.json")
    parser.add_argument(
        "--batch",
        type=int,
        default=SummariserSettings().summariser_batch_size,
        help="episodes claimed per pass (default: the service's default)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="an older checkout (with .venv): its summariser_bench runs first, 1 worker",
    )
    parser.add_argument(
        "--no-chunk-overlap",
        action="store_true",
        help="this checkout's chunk index without overlapping chunks (recall_index."
        "CHUNK_OVERLAP off); the model's arithmetic is EPISODIC_EMBEDDING_COMPUTE",
    )
    args = parser.parse_args()
    if args.no_chunk_overlap:
        from episodic.store import message_chunks

        message_chunks.CHUNK_OVERLAP = False  # read there (recall_index re-exports it)

    before_rate = None
    if args.before:
        before_rate = run_before(args.before, args.threads, args.batch, args.path)

    if args.path.is_file():
        pool = locomo_sessions(args.path)
        source = f"LoCoMo sessions ({args.path.name})"
    else:
        pool = synthetic_sessions(args.threads)
        source = "synthetic chats (LoCoMo not found)"
    if args.threads > len(pool):
        print(f"note: only {len(pool)} sessions; reusing them", file=sys.stderr)
    sessions = [pool[i % len(pool)] for i in range(args.threads)]

    probe = make_embedder(EmbeddingSettings(), 384, bulk=True)
    t0 = time.perf_counter()
    probe.check()  # loads the model once per process; every run below uses it warm
    cold = time.perf_counter() - t0
    summariser_name = make_summariser(LLMSettings(), probe).name  # type: ignore[attr-defined]

    results: list[tuple[RunResult, str, str]] = []
    with (
        tempfile.TemporaryDirectory(prefix="summariser-bench-") as tmp,
        test_server(Path(tmp)) as dbs,
    ):
        url = dbs.create()
        engine = make_engine(url, pool_size=10, application_name="summariser-bench")
        try:
            for workers in (int(w) for w in args.workers.split(",")):
                before = loadavg()
                result = run(engine, url, sessions, workers, args.batch)
                results.append((result, before, loadavg()))
                print(f"{workers} worker(s) done", file=sys.stderr, flush=True)
        finally:
            engine.dispose()

    print(
        f"\nSummariser pipeline, offline defaults: embedder {probe.name} "
        f"(EPISODIC_EMBEDDING_COMPUTE={EmbeddingSettings().embedding_compute}, "
        f"{getattr(probe, 'threads', '-')} model threads: EPISODIC_EMBEDDING_THREADS, chunks "
        f"{'not ' if args.no_chunk_overlap else ''}overlapping, their vectors "
        f"{EmbeddingSettings().chunk_vectors}: EPISODIC_CHUNK_VECTORS, sentences compared by "
        f"{LLMSettings().summary_sentence_vectors}: EPISODIC_SUMMARY_SENTENCE_VECTORS) "
        f"(model load {cold:.1f} s, excluded), summariser {summariser_name}, KeyLearningFacts; "
        f"claim batch {args.batch}; {args.threads} episodes of {source}, "
        f"{results[0][0].messages / args.threads:.1f} messages each; embedded PostgreSQL; "
        f"{INT8_PRODUCTS.description}.\n"
        "ms per episode (mean); total = summarise + embed + database; p50/p95 of total.\n"
    )
    header = (
        f"{'workers':>7} | {'episodes/s':>10} | {'summarise':>9} | {'(sent. emb.)':>12} | "
        f"{'embed':>6} | {'database':>8} | {'total p50':>9} | {'total p95':>9} | "
        f"{'split':>9} | loadavg before -> after"
    )
    print(header)
    print("-" * len(header))
    for r, before, after in results:
        t = r.times

        def mean(attr: str, t: list[EpisodeTime] = t) -> float:
            return statistics.fmean(getattr(e, attr) for e in t) * 1000

        totals = [e.total * 1000 for e in t]
        print(
            f"{r.workers:>7} | {r.episodes / r.seconds:>10.2f} | {mean('summarise'):>9.1f} | "
            f"{mean('sentence_embed'):>12.1f} | {mean('embed'):>6.1f} | "
            f"{mean('database'):>8.1f} | {pct(totals, 50):>9.1f} | {pct(totals, 95):>9.1f} | "
            f"{'/'.join(str(n) for n in r.per_worker):>9} | {before} -> {after}"
        )
    if before_rate is not None:
        this_rate = next(r.episodes / r.seconds for r, _, _ in results if r.workers == 1)
        print(
            f"\n1 worker, this checkout / {args.before}: {this_rate:.2f} / {before_rate:.2f} "
            f"episodes/s = {this_rate / before_rate:.2f}x (run back to back in this command)"
        )
    r0 = results[0][0]
    print(
        f"\nPer episode: {statistics.fmean(e.texts for e in r0.times):.0f} sentences embedded "
        f"by the summariser (1 worker run); {r0.facts} facts stored over {r0.episodes} "
        "episodes. split: episodes completed by each worker. Every episode was checked "
        "completed with semantic extraction done."
    )


if __name__ == "__main__":
    main()
