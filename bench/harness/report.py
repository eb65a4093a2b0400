"""Printing what a benchmark measured: progress on stderr, percentiles of latencies, the
latency table.
"""

from __future__ import annotations

import statistics
import sys


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(p: float) -> float:
        return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]

    return {
        "p50": pick(0.50),
        "p95": pick(0.95),
        "p99": pick(0.99),
        "mean": statistics.fmean(ordered),
    }


def print_latency_table(stats: dict[str, dict[str, float]]) -> None:
    """One row per path of :func:`percentiles` (seconds), in ms, as a Markdown table."""
    print("| path | p50 | p95 | p99 | mean |")
    print("|---|---|---|---|---|")
    for key, s in stats.items():
        print(
            f"| {key} | {1000 * s['p50']:.2f} | {1000 * s['p95']:.2f} | "
            f"{1000 * s['p99']:.2f} | {1000 * s['mean']:.2f} |"
        )
    print()
