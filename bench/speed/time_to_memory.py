"""Time to memory: from ``EndThread`` returning to the episode being recallable, under a
steady load of threads ending, with the offline defaults.

    .venv/bin/python -m bench.speed.time_to_memory [--rate 1] [--seconds 60] [--before DIR]
        [--idle N]

What it does:

1. Starts PostgreSQL (embedded, in a temporary directory) and the Scheduler, the Summariser
   and Ingest as processes with the production defaults that matter here: MiniLM embedder,
   extractive summariser, 1 s poll intervals (the Summariser is woken by NOTIFY), one
   replica each, encryption at rest on.
2. Writes one thread per LoCoMo session (the messages, ~21 per session, are written before
   the clock starts: the figure is about ending a conversation, not writing it).
3. Ends ``--rate`` threads per second for ``--seconds`` on an open-loop schedule (a slow
   pipeline does not slow the load down), and records when each ``EndThread`` returned.
4. A poller reads, every 10 ms, which of those threads has a completed episode: the
   summary, its embedding and the lexical document are written in the completion
   transaction, so a committed completed episode is what Recall ranks. Time to memory =
   first seen - EndThread returned (the poll adds up to ~10 ms). The thread's chunk index
   is written right after the completion (``episodes.chunks_pending`` marks the gap, see
   episodic.store.recall_index); the time until it is there too is printed as "+ chunks"
   (an older checkout writes them with the completion: the same figure).

Time to *full-quality* memory is the "+ chunks" figure: until the chunk index is stored,
Recall ranks the episode by its summary only (LoCoMo asked right after COMPLETED: R@1 .702;
30 s later .737), and a Recall answer says so (``RecalledEpisodes.chunks_pending``).
``--idle N`` first ends N threads one at a time, each after the previous one's chunks are
stored (nothing else in flight: the idle figures), then runs the open-loop load on the
others (the loaded figures); both are printed side by side, with full quality over memory
as a ratio, so a chunk index starved behind new episodes shows as a loaded ratio far above
the idle one.

``--before DIR`` runs the same load on the services of another checkout (its ``.venv``,
e.g. a ``git worktree`` of main) in the same run, first, on fresh threads of the same
sessions, and prints both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psycopg

from bench.harness import locomo
from episodic.sdk.client import EpisodicClient, NewMessage
from episodic.testing.database import scratch_database
from episodic.testing.processes import start_service


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def pct(values: list[float], p: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def run(url: str, args: argparse.Namespace, variant: str, python: str | None) -> dict[str, Any]:
    env = {
        "EPISODIC_EMBEDDING_PROVIDER": "minilm",
        "EPISODIC_SCHEDULER_POLL_INTERVAL": "1",
        "EPISODIC_SUMMARISER_POLL_INTERVAL": "1",
        "EPISODIC_LOG_LEVEL": "WARNING",
        "EPISODIC_ENCRYPTION": "auto",
    }
    sessions = [s for c in locomo.load() for s in c.sessions]
    idle = args.idle
    n = idle + int(args.rate * args.seconds)
    with ExitStack() as stack:
        procs: dict[str, Any] = {}
        spans = Path(args.spans) / f"{variant}.jsonl" if args.spans else None
        if spans:
            spans.parent.mkdir(parents=True, exist_ok=True)
        if variant == "this":
            env = {**env, **dict(item.split("=", 1) for item in args.this_env)}
        for svc in ("scheduler", "summariser", "ingest"):
            extra = dict(env)
            if svc == "summariser" and spans:
                extra["EPISODIC_TRACE_FILE"] = str(spans)
            if svc == "ingest":
                extra["EPISODIC_SCHEDULER_ADDRESS"] = procs["scheduler"].address
            procs[svc] = start_service(svc, url, extra, timeout=180, python=python)
            stack.callback(procs[svc].terminate)
        client = EpisodicClient(
            ingest=procs["ingest"].address, scheduler=procs["scheduler"].address, timeout=60
        )
        stack.callback(client.close)

        threads: list[str] = []
        for i in range(n):
            session = sessions[i % len(sessions)]
            thread = client.start_thread(f"ttm-{variant}", label=session.thread_id)
            client.add_messages(
                thread.thread_id,
                [
                    NewMessage(
                        role=m.role,
                        content=m.content,
                        metadata={"name": m.name} if m.name else {},
                        created_at=m.ts,
                    )
                    for m in session.messages
                ],
            )
            threads.append(thread.thread_id)

        ended: dict[str, float] = {}
        ended_wall: dict[str, float] = {}  # the same instant on the clock the database uses
        seen: dict[str, float] = {}
        indexed: dict[str, float] = {}  # completed and its chunks stored
        done = threading.Event()

        def poll() -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                while not done.is_set():
                    rows = conn.execute(
                        "SELECT thread_id::text, bool_and(NOT chunks_pending) FROM episodes "
                        "WHERE dataset = %s AND status = 'completed' GROUP BY thread_id",
                        (f"ttm-{variant}",),
                    ).fetchall()
                    now = time.monotonic()
                    for thread_id, chunks_done in rows:
                        seen.setdefault(thread_id, now)
                        if chunks_done:
                            indexed.setdefault(thread_id, now)
                    if len(indexed) >= n:
                        return
                    time.sleep(0.01)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        idle_load_before = loadavg()
        for thread_id in threads[:idle]:  # one at a time: nothing else in flight
            client.end_thread(thread_id)
            ended[thread_id] = time.monotonic()
            ended_wall[thread_id] = time.time()
            deadline = ended[thread_id] + 120
            while thread_id not in indexed:
                if time.monotonic() > deadline or not poller.is_alive():
                    raise AssertionError(f"{variant}: an idle episode was not indexed in 120 s")
                time.sleep(0.01)  # a measurement's poll with a deadline
        idle_load_after = loadavg()
        load_before = loadavg()
        start = time.monotonic()
        for i, thread_id in enumerate(threads[idle:]):
            due = start + i / args.rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # the open-loop schedule, not a wait for background work
            client.end_thread(thread_id)
            ended[thread_id] = time.monotonic()
            ended_wall[thread_id] = time.time()
        poller.join(timeout=args.seconds + 300)
        done.set()
        missing = [t for t in threads if t not in indexed]
        if missing:
            raise AssertionError(f"{variant}: {len(missing)} of {n} episodes never indexed")
        loaded = threads[idle:]
        parts = breakdown(url, f"ttm-{variant}", {t: ended_wall[t] for t in loaded}, spans)
        result = {
            **{f"part {name}": value for name, value in parts.items()},
            **figures(loaded, ended, seen, indexed),
            "load_before": load_before,
            "load_after": loadavg(),
        }
        if idle:
            result["idle"] = {
                **figures(threads[:idle], ended, seen, indexed),
                "load_before": idle_load_before,
                "load_after": idle_load_after,
            }
        return result


def figures(
    threads: list[str],
    ended: dict[str, float],
    seen: dict[str, float],
    indexed: dict[str, float],
) -> dict[str, Any]:
    """Time to memory (completed) and to full-quality memory (its chunks stored too), ms."""
    latencies = sorted((seen[t] - ended[t]) * 1000 for t in threads)
    with_chunks = sorted((indexed[t] - ended[t]) * 1000 for t in threads)
    return {
        "n": len(threads),
        "p50": pct(latencies, 50),
        "p90": pct(latencies, 90),
        "p99": pct(latencies, 99),
        "max": latencies[-1],
        "chunks_p50": pct(with_chunks, 50),
        "chunks_p90": pct(with_chunks, 90),
        "chunks_p99": pct(with_chunks, 99),
        "chunks_max": with_chunks[-1],
    }


#: The hops of one episode's time to memory. From the episode row (the database's clock,
#: the machine's: the bench runs on it) and the EndThread's return; with ``--spans``, also
#: from the Summariser's spans (``EPISODIC_TRACE_FILE``): when the worker took the episode
#: up and what each step of its work cost.
PARTS = (
    ("opened", "EndThread returned -> episode opened (negative: opened inside the call)"),
    ("started", "EndThread returned -> the worker starts on it (claim, read; --spans)"),
    ("behind_chunks", "  of which the worker was embedding other episodes' chunks (--spans)"),
    ("llm.summarise", "  extractive summary (its sentences embedded) (--spans)"),
    ("embed.summary", "  the summary's own vector (--spans)"),
    ("index.document", "  lexical document (--spans)"),
    ("store", "  the completion transaction and the rest (--spans)"),
    ("completed", "EndThread returned -> completed (committed)"),
)


def breakdown(
    url: str, dataset: str, ended_wall: dict[str, float], spans: Path | None
) -> dict[str, tuple[float, float]]:
    """p50/p99 of each hop of :data:`PARTS` over the run's threads, in ms."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT episode_id::text, thread_id::text, extract(epoch FROM created_at), "
            "extract(epoch FROM completed_at) FROM episodes "
            "WHERE dataset = %s AND status = 'completed'",
            (dataset,),
        ).fetchall()
    work = _episode_spans(spans) if spans else {}
    chunk_runs = work.pop("index.chunks", {}).get("runs", []) if work else []
    hops: dict[str, list[float]] = {name: [] for name, _ in PARTS}
    for episode_id, thread_id, opened, completed in rows:
        if thread_id not in ended_wall:  # another phase's thread
            continue
        end = ended_wall[thread_id]
        hops["opened"].append((float(opened) - end) * 1000)
        hops["completed"].append((float(completed) - end) * 1000)
        steps = work.get(episode_id)
        if not steps:
            continue
        start = steps["start"]
        hops["started"].append((start - end) * 1000)
        behind = sum(max(0.0, min(b, start) - max(a, end)) for a, b in chunk_runs)
        hops["behind_chunks"].append(behind * 1000)
        inner = 0.0
        for name in ("llm.summarise", "embed.summary", "index.document"):
            hops[name].append(steps.get(name, 0.0) * 1000)
            inner += steps.get(name, 0.0)
        hops["store"].append((steps["end"] - start - inner) * 1000)
    return {
        name: (pct(sorted(v), 50), pct(sorted(v), 99)) if v else (float("nan"),) * 2
        for name, v in hops.items()
    }


def _episode_spans(path: Path) -> dict[str, Any]:
    """Per episode id: its ``summarise episode`` span's start and end (Unix seconds) and the
    duration of each child step; under ``index.chunks``, every chunk-index span."""
    spans = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by_id = {s["span_id"]: s for s in spans}
    episodes: dict[str, Any] = {"index.chunks": {"runs": []}}
    for s in spans:
        if s["name"] == "summarise episode":
            episodes.setdefault(s["attributes"]["episodic.episode_id"], {}).update(
                start=s["start_time_unix_nano"] / 1e9, end=s["end_time_unix_nano"] / 1e9
            )
        elif s["name"] in ("index.chunks", "embed.chunks"):  # embed.chunks: its slices
            episodes["index.chunks"]["runs"].append(
                (s["start_time_unix_nano"] / 1e9, s["end_time_unix_nano"] / 1e9)
            )
    for s in spans:
        parent = by_id.get(s.get("parent_span_id") or "")
        if parent and parent["name"] == "summarise episode" and s["name"] in PART_NAMES:
            steps = episodes[parent["attributes"]["episodic.episode_id"]]
            steps[s["name"]] = (
                steps.get(s["name"], 0.0)
                + (s["end_time_unix_nano"] - s["start_time_unix_nano"]) / 1e9
            )
    return episodes


PART_NAMES = {name for name, _ in PARTS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1.0, help="threads ended per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the load")
    parser.add_argument("--before", type=Path, help="an older checkout (with .venv) to run too")
    parser.add_argument(
        "--idle",
        type=int,
        default=0,
        metavar="N",
        help="first end N threads one at a time, each once the previous one's chunks are "
        "stored: time to memory and to full quality with nothing else in flight",
    )
    parser.add_argument(
        "--this-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="environment for this checkout's services only (e.g. EPISODIC_EMBEDDING_THREADS=2"
        "; with --before of this same checkout, a setting against the default in one run)",
    )
    parser.add_argument(
        "--spans",
        type=Path,
        help="a directory: the Summariser writes its spans there and the hops of each "
        "episode's work are printed (costs the worker a little)",
    )
    args = parser.parse_args()
    variants: list[tuple[str, str | None]] = [("this", None)]
    if args.before:
        variants.insert(0, ("before", str(args.before / ".venv" / "bin" / "python")))
    results = {}
    with scratch_database(None, "time-to-memory-") as url:
        for name, python in variants:
            results[name] = run(url, args, name, python)
            print(f"{name} done", file=sys.stderr, flush=True)
    print(
        f"\nTime to memory (EndThread returned -> episode completed; + chunks: and its chunk "
        "index stored), "
        f"{args.rate:g} threads ending/s for {args.seconds:g} s, LoCoMo sessions; offline "
        "defaults (MiniLM, extractive), 1 replica each, encryption on.\n"
    )
    header = (
        f"{'variant':>7} | {'threads':>7} | {'p50 ms':>7} | {'p90 ms':>7} | {'p99 ms':>7} | "
        f"{'max ms':>7} | {'+ chunks p50':>12} | {'p99':>6} | loadavg before -> after"
    )
    print(header)
    print("-" * len(header))
    for name, r in results.items():
        print(
            f"{name:>7} | {r['n']:>7} | {r['p50']:>7.0f} | {r['p90']:>7.0f} | {r['p99']:>7.0f} | "
            f"{r['max']:>7.0f} | {r['chunks_p50']:>12.0f} | {r['chunks_p99']:>6.0f} | "
            f"{r['load_before']} -> {r['load_after']}"
        )
    if args.idle:
        print(
            f"\nTime to memory beside time to full-quality memory (its chunks stored), ms: idle "
            f"({args.idle} threads ended one at a time) and loaded ({args.rate:g}/s); full / "
            "memory is the ratio of the two at p50 and p99.\n"
        )
        header = (
            f"{'variant':>7} | {'phase':>6} | {'n':>4} | {'memory p50':>10} | {'p90':>6} | "
            f"{'p99':>6} | {'full p50':>8} | {'p90':>6} | {'p99':>6} | {'max':>6} | "
            f"{'full/mem p50':>12} | {'p99':>5} | loadavg"
        )
        print(header)
        print("-" * len(header))
        for name, r in results.items():
            for phase, f in (("idle", r["idle"]), ("loaded", r)):
                print(
                    f"{name:>7} | {phase:>6} | {f['n']:>4} | {f['p50']:>10.0f} | "
                    f"{f['p90']:>6.0f} | {f['p99']:>6.0f} | {f['chunks_p50']:>8.0f} | "
                    f"{f['chunks_p90']:>6.0f} | {f['chunks_p99']:>6.0f} | "
                    f"{f['chunks_max']:>6.0f} | {f['chunks_p50'] / f['p50']:>12.2f} | "
                    f"{f['chunks_p99'] / f['p99']:>5.2f} | {f['load_before']} -> "
                    f"{f['load_after']}"
                )
    print("\nWhere the time goes (p50 / p99 ms of each hop; --spans for the worker's steps):")
    for name, label in PARTS:
        cells = "   ".join(
            f"{v}: {r[f'part {name}'][0]:.0f} / {r[f'part {name}'][1]:.0f}"
            for v, r in results.items()
        )
        print(f"  {label}: {cells}")


if __name__ == "__main__":
    main()
