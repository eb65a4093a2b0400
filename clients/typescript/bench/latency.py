"""The Python SDK's side of bench/latency.mjs: the same workload (one summarised episode,
then N sequential Recall and AddMessages calls after a warm-up) against a running suite.

    .venv/bin/python clients/typescript/bench/latency.py [--n 500] [--warmup 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
import uuid

from episodic.client import EpisodicClient


def stats(samples: tuple[list[float], float]) -> dict[str, float]:
    s = sorted(samples[0])

    def pct(p: float) -> float:  # nearest rank, as latency.mjs computes it
        return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]

    return {
        "n": len(s),
        "p50": pct(50),
        "p99": pct(99),
        "mean": sum(s) / len(s),
        "min": s[0],
        "max": s[-1],
        "cpu_ms_per_call": samples[1],
    }


def timed(n: int, fn) -> tuple[list[float], float]:  # type: ignore[no-untyped-def]
    """Latencies in ms, and the client's own CPU time per call (all its threads)."""
    out = []
    cpu0 = time.process_time()
    for i in range(n):
        t0 = time.perf_counter_ns()
        fn(i)
        out.append((time.perf_counter_ns() - t0) / 1e6)
    return out, (time.process_time() - cpu0) * 1000 / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with EpisodicClient() as memory:
        memory.wait_ready()
        dataset = f"bench_py_{uuid.uuid4().hex[:8]}"
        thread = memory.start_thread(dataset, label="bench")
        memory.add_messages(
            thread.thread_id,
            [
                ("user", "I need a family car under $30k, SUVs feel too big."),
                ("assistant", "The Toyota Corolla Hybrid fits city commuting and your budget."),
            ],
        )
        memory.end_thread(thread.thread_id)
        memory.wait_for_episode(thread.thread_id, timeout=120)
        writes = memory.start_thread(dataset, label="bench-writes")

        def recall(_i: int) -> object:
            return memory.recall(dataset, "car recommendations")

        def add(i: int) -> object:
            return memory.add_messages(writes.thread_id, [("user", f"benchmark message {i}")])

        timed(args.warmup, recall)
        timed(args.warmup, add)
        result = {
            "client": f"python ({platform.python_version()}, grpcio)",
            "recall": stats(timed(args.n, recall)),
            "add_messages": stats(timed(args.n, add)),
        }
    if args.json:
        print(json.dumps(result))
        return
    print(result["client"])
    for name, s in (("Recall", result["recall"]), ("AddMessages", result["add_messages"])):
        print(
            f"  {name:<12} n={s['n']}  p50 {s['p50']:.2f} ms  p99 {s['p99']:.2f} ms  "
            f"mean {s['mean']:.2f}  min {s['min']:.2f}  max {s['max']:.2f}  "
            f"client CPU {s['cpu_ms_per_call']:.3f} ms/call"
        )


if __name__ == "__main__":
    main()
