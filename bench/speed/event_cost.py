"""What events cost, through the real Ingest and Recall services, in one run (alternating
rounds; this machine is shared and noisy: compare the columns, not runs):

- **Recall with events vs without** (``exclude_events``): the same questions over LoCoMo
  episodes plus the labelled LoCoMo event turns recorded as events — the price of the
  second candidate query and the merge.
- **RecordEvent vs AddMessages** (one message): the write path's cost of an event (a
  lexical document built with the row) next to a plain turn.
- **Embedding one event with the minilm model** in-process, the work RecordEvent would add
  if it embedded synchronously (it does not: the Summariser does it afterwards).

    python -m bench.speed.event_cost [--conversations 3] [--calls 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

from bench.harness import REPO


def _timed(call: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=3, help="LoCoMo conversations")
    parser.add_argument("--calls", type=int, default=200, help="calls per variant and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", help="admin URL of a PostgreSQL with pgvector")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))

    from bench.harness import locomo
    from episodic.config import EmbeddingSettings
    from episodic.providers import make_embedder
    from episodic.sdk.client import EpisodicClient
    from episodic.store.db import make_engine
    from episodic.testing.database import scratch_database
    from episodic.testing.processes import start_service
    from tests.recall.factory import make_episode

    print(f"load average at start: {os.getloadavg()}")
    conversations = locomo.load(limit=args.conversations)
    labelled = [
        json.loads(line)
        for line in (REPO / "bench" / "data" / "event_labels.jsonl").read_text().splitlines()
        if line.strip()
    ]
    dataset = "events-bench"
    with scratch_database(args.database_url, "episodic-events-") as url:
        engine = make_engine(url, pool_size=2)
        episodes = 0
        with engine.begin() as conn:
            for conv in conversations:
                for session in conv.sessions:
                    make_episode(
                        conn,
                        dataset,
                        [m.text for m in session.messages],
                        ended_at=session.messages[-1].ts,
                        label=session.thread_id,
                    )
                    episodes += 1
        engine.dispose()
        env = {"EPISODIC_EMBEDDING_PROVIDER": "hashing", "EPISODIC_LOG_LEVEL": "WARNING"}
        ingest = start_service("ingest", url, env)
        recall = start_service("recall", url, env)
        questions = [q.question for c in conversations for q in c.questions]
        spread = [s.messages[-1].ts for c in conversations for s in c.sessions]
        try:
            with EpisodicClient(ingest=ingest.address, recall=recall.address) as client:
                events = [r for r in labelled if r["is_event"]]
                for i, row in enumerate(events):
                    client.record_event(
                        dataset,
                        f"{row['speaker']}: {row['text']}",
                        event_type=row["event_type"],
                        actor=row["speaker"],
                        occurred_at=spread[i % len(spread)],
                    )
                thread = client.create_thread("events-bench-writes").thread_id
                asked = itertools.cycle(questions)
                counter = itertools.count()
                calls = {
                    "Recall (top 10)": {
                        "with events": lambda: client.recall(dataset, next(asked), limit=10),
                        "without": lambda: client.recall(
                            dataset, next(asked), limit=10, exclude_events=True
                        ),
                    },
                    "write one": {
                        "RecordEvent": lambda: client.record_event(
                            "events-bench-writes",
                            f"Decided on plan {next(counter)} for project Atlas",
                            event_type="decision",
                        ),
                        "AddMessages": lambda: client.add_messages(
                            thread, [("user", f"Decided on plan {next(counter)} for Atlas")]
                        ),
                    },
                }
                for per_variant in calls.values():  # warm up
                    for call in per_variant.values():
                        _timed(call, 20)
                results: dict[tuple[str, str], list[float]] = {}
                for r in range(args.rounds):
                    for name, per_variant in calls.items():
                        order = list(per_variant) if r % 2 == 0 else list(reversed(per_variant))
                        for variant in order:
                            results.setdefault((name, variant), []).extend(
                                _timed(per_variant[variant], args.calls)
                            )
        finally:
            ingest.terminate()
            recall.terminate()
    embedder = make_embedder(EmbeddingSettings(embedding_provider="minilm"), 384)
    text = "Caroline: I went to a LGBTQ support group yesterday and it was so powerful."
    embedder.embed([text])
    embed_ms = _timed(lambda: embedder.embed([text]), 200)

    print(
        f"\nevents, per call through the services: {episodes} LoCoMo episodes and "
        f"{len(events)} events in one dataset, {args.rounds} rounds x {args.calls} calls, "
        f"alternating; load average at end: {os.getloadavg()}\n"
    )
    print(f"{'call':<18}{'variant':<14}{'p50':>10}{'p99':>10}")
    for name, per_variant in calls.items():
        for variant in per_variant:
            values = results[(name, variant)]
            print(
                f"{name:<18}{variant:<14}{statistics.median(values):>8.2f}ms"
                f"{_p(values, 0.99):>8.2f}ms"
            )
        a, b = (results[(name, v)] for v in per_variant)
        print(
            f"{'':<18}{'ratio':<14}{statistics.median(a) / statistics.median(b):>10.2f}"
            f"{_p(a, 0.99) / _p(b, 0.99):>10.2f}"
        )
    record_p50 = statistics.median(results[("write one", "RecordEvent")])
    print(
        f"\nminilm embedding of one event in-process: p50 {statistics.median(embed_ms):.2f} ms "
        f"(p99 {_p(embed_ms, 0.99):.2f} ms) = {statistics.median(embed_ms) / record_p50:.2f}x "
        "a RecordEvent call's p50"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
