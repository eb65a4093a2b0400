"""Import rate: ``episodic import`` of the ten LoCoMo conversations next to the bare ingest
rate of the same suite, in the same run.

Starts an embedded PostgreSQL (a scratch database) and the four services as real processes
(the providers of ``episodic up`` unless ``--embedder`` says otherwise), then measures, for
``--repeats`` rounds (the order alternates each round, so background load falls on both):

- **bare**: the SDK's ``add_messages`` in batches of 100, the same 5,882 messages (with
  their timestamps; the SDK adds idempotency keys) into one thread per conversation — 10
  CreateThread and 63 AddMessages calls, no EndThread;
- **import**: ``episodic import locomo10.jsonl --json`` as a subprocess — one thread per
  session: 272 CreateThread, 272 AddMessages (22 messages a session on average) and 272
  EndThread calls, each of which queues an episode that the summariser starts on while the
  import runs. The rate is the importer's own (messages acknowledged / seconds from the
  first call to the last); ``wall`` adds the process start and reading the file.

Round 1 imports into the conversations' own datasets (``conv-26`` …), later rounds into
``--dataset locomo-rN``. Then, once each: the import with ``--workers 4``, and a re-run
of round 1's import — everything is stored, so it measures the resume path (one
CreateThread → ALREADY_EXISTS, one GetThread and one ListMessages per thread, nothing
written, no EndThread). Finally it waits until the summariser has drained the queue (every
import queued 272 episodes) and prints one ``recall`` replayed ``as_of`` a moment of 2023:
episodes carry the sessions' own times.

Not part of pytest:

    .venv/bin/python -m bench.speed.import_rate [--repeats 3] [--embedder minilm|hashing]
        [--no-summariser]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import REPO as REPO_ROOT
from episodic.ops.backfill import read_plan
from episodic.render import render_episodes
from episodic.sdk.client import EpisodicClient, NewMessage
from episodic.testing.database import scratch_database
from episodic.testing.processes import ServiceProcess, start_service

LOCOMO = Path(
    os.environ.get("EPISODIC_LOCOMO_PATH")
    or REPO_ROOT.parent / "shared" / "bench" / "locomo10.jsonl"
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def bare(client: EpisodicClient, source: Path, prefix: str, batch: int = 100) -> dict[str, float]:
    """One thread per conversation, AddMessages in batches of ``batch``: the floor the
    import is compared with."""
    with source.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    work: list[tuple[str, list[NewMessage]]] = []
    for row in rows:
        messages = [
            NewMessage(
                role=m["role"],
                content=m["content"],
                metadata={"name": m["name"]} if m.get("name") else {},
                created_at=datetime.fromisoformat(m["ts"].replace("Z", "+00:00")),
            )
            for t in row["threads"]
            for m in t["messages"]
        ]
        work.append((f"{prefix}-{row['conversation_id']}", messages))
    count = sum(len(m) for _, m in work)
    started = time.perf_counter()
    for dataset, messages in work:
        thread = client.create_thread(dataset, label="bare")
        for i in range(0, len(messages), batch):
            client.add_messages(thread.thread_id, messages[i : i + batch])
    seconds = time.perf_counter() - started
    return {"messages": count, "seconds": seconds, "rate": count / seconds}


def run_import(env: dict[str, str], source: Path, *extra: str) -> dict[str, Any]:
    """``episodic import`` as a user runs it; its JSON summary plus the wall time."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "episodic.cli", "import", str(source), "--json", *extra],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"episodic import failed:\n{done.stderr}")
    summary: dict[str, Any] = json.loads(done.stdout)
    summary["wall"] = wall
    summary["final_line"] = done.stderr.strip()
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--embedder", default="minilm", help="summariser's embedder (minilm)")
    parser.add_argument(
        "--no-summariser",
        action="store_true",
        help="run without the summariser (ingest alone; episodes stay pending)",
    )
    parser.add_argument("--wait", type=float, default=600, help="seconds to wait for episodes")
    args = parser.parse_args(argv)
    if not LOCOMO.is_file():
        log(f"LoCoMo not found at {LOCOMO}; set EPISODIC_LOCOMO_PATH")
        return 2
    plan = read_plan(LOCOMO.open(encoding="utf-8"))
    log(
        f"{LOCOMO.name}: {plan.message_count} messages, {len(plan.threads)} threads, "
        f"{len(plan.datasets)} datasets; {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
    )
    env_common = {
        "EPISODIC_DB_POOL_SIZE": "10",
        "EPISODIC_LOG_LEVEL": "WARNING",
        "EPISODIC_EMBEDDING_PROVIDER": args.embedder,
        "EPISODIC_SCHEDULER_POLL_INTERVAL": "1",
        "EPISODIC_SUMMARISER_POLL_INTERVAL": "1",
    }
    bare_runs: list[dict[str, float]] = []
    import_runs: list[dict[str, Any]] = []
    procs: list[ServiceProcess] = []
    with scratch_database(prefix="import-rate-") as url:
        try:
            scheduler = start_service("scheduler", url, env_common, timeout=120)
            procs.append(scheduler)
            wired = {**env_common, "EPISODIC_SCHEDULER_ADDRESS": scheduler.address}
            ingest = start_service("ingest", url, wired, timeout=120)
            procs.append(ingest)
            summariser: ServiceProcess | None = None
            if not args.no_summariser:
                summariser = start_service("summariser", url, wired, timeout=180)
                procs.append(summariser)
            recall = start_service("recall", url, wired, timeout=180)
            procs.append(recall)
            env = {
                "EPISODIC_INGEST_ADDRESS": ingest.address,
                "EPISODIC_RECALL_ADDRESS": recall.address,
                "EPISODIC_SCHEDULER_ADDRESS": scheduler.address,
            }
            with EpisodicClient(ingest=ingest.address, recall=recall.address) as client:
                for r in range(args.repeats):
                    extra = () if r == 0 else ("--dataset", f"locomo-r{r + 1}")
                    steps = ["bare", "import"] if r % 2 == 0 else ["import", "bare"]
                    for step in steps:
                        if step == "bare":
                            result = bare(client, LOCOMO, f"bare-r{r + 1}")
                            bare_runs.append(result)
                            log(f"round {r + 1} bare:   {result['rate']:,.0f} msg/s")
                        else:
                            summary = run_import(env, LOCOMO, *extra)
                            import_runs.append(summary)
                            log(f"round {r + 1} import: {summary['final_line']}")
                four = run_import(env, LOCOMO, "--dataset", "locomo-w4", "--workers", "4")
                log(f"import --workers 4: {four['final_line']}")
                rerun = run_import(env, LOCOMO)
                log(f"re-run (all stored): {rerun['final_line']}")

                # Every import queued its episodes (272 each); wait for the queue to drain.
                drained: float | None = None
                completed = 0
                if summariser is not None:
                    started = time.monotonic()
                    with EpisodicClient(summariser=summariser.address) as admin:
                        while time.monotonic() < started + args.wait:
                            counts = admin.pipeline_status(check_providers=False).status_counts
                            completed = counts.get("completed", 0) + counts.get("archived", 0)
                            if not counts.get("pending") and not counts.get("processing"):
                                drained = time.monotonic() - started
                                break
                            time.sleep(1)
                as_of = datetime(2023, 6, 1, tzinfo=UTC)
                replay = client.recall(
                    "conv-26", "LGBTQ support group", limit=2, as_of=as_of
                ).episodes
        finally:
            for proc in reversed(procs):
                proc.terminate()

    def med(values: list[float]) -> float:
        return statistics.median(values)

    bare_rate = med([b["rate"] for b in bare_runs])
    import_rate = med([float(i["messages_per_second"]) for i in import_runs])
    wall_rate = med([plan.message_count / float(i["wall"]) for i in import_runs])
    print(f"\n## Import rate ({plan.message_count} LoCoMo messages, {len(plan.threads)} threads)")
    print(
        f"\nmedians of {args.repeats} rounds; summariser: "
        f"{'off' if args.no_summariser else args.embedder}\n"
    )
    print("| method | msg/s | vs bare |")
    print("|---|---|---|")
    print(f"| bare AddMessages loop, batches of 100 | {bare_rate:,.0f} | 1.00 |")
    print(
        f"| episodic import (importer clock) | {import_rate:,.0f} | {import_rate / bare_rate:.2f} |"
    )
    print(
        f"| episodic import (wall, incl. start and parse) | {wall_rate:,.0f} | "
        f"{wall_rate / bare_rate:.2f} |"
    )
    w4 = float(four["messages_per_second"])
    print(f"| episodic import --workers 4 | {w4:,.0f} | {w4 / bare_rate:.2f} |")
    again = float(rerun["messages_per_second"])
    print(f"| re-run, everything stored (resume path) | {again:,.0f} | {again / bare_rate:.2f} |")
    print(f"\nfirst import's final line: {import_runs[0]['final_line']}")
    print(f"re-run's final line: {rerun['final_line']}")
    if drained is not None:
        print(
            f"\nthe episode queue ({completed:,} episodes from all the imports above) drained "
            f"{drained:.0f} s after the last import"
        )
    elif not args.no_summariser:
        print(
            f"\nthe episode queue had not drained {args.wait:.0f} s after the last import "
            f"({completed:,} episodes summarised by then)"
        )
    if replay:
        print(f"\nrecall('conv-26', 'LGBTQ support group', as_of={as_of:%Y-%m-%d}):\n")
        print(render_episodes(replay, now=as_of))
    return 0


if __name__ == "__main__":
    sys.exit(main())
