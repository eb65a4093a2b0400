"""What authentication costs per call: Recall and AddMessages through the SDK against
Ingest and Recall run twice on one database — with API keys required and without — in the
same run, alternating rounds (this machine is noisy: compare the two columns, not runs).

With keys, a replica looks a key up once per EPISODIC_AUTH_CACHE_TTL (5 s) and checks the
role, scope and rate limit on every call; the per-call cost is that check plus the extra
metadata on the wire. ``--cache-ttl 0`` shows the price of a database lookup per call.

    python -m bench.speed.auth_cost [--calls 500] [--rounds 3] [--cache-ttl 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from episodic.access import Role
from episodic.sdk.client import EpisodicClient
from episodic.store import keys
from episodic.store.db import make_engine
from episodic.testing.database import scratch_database
from episodic.testing.processes import start_service


def _timed(call: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=500, help="calls per round and RPC")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cache-ttl", type=float, default=5.0)
    args = parser.parse_args(argv)

    with scratch_database(prefix="episodic-auth-bench-") as url:
        engine = make_engine(url, pool_size=1)
        with engine.begin() as conn:
            key = keys.create_key(conn, role=Role.WRITER, datasets=["bench"]).secret
        engine.dispose()
        env_open = {"EPISODIC_AUTH": "disabled", "EPISODIC_RATE_LIMIT_REQUESTS": "0"}
        env_keys = {
            "EPISODIC_AUTH": "required",
            "EPISODIC_AUTH_CACHE_TTL": str(args.cache_ttl),
            "EPISODIC_RATE_LIMIT_REQUESTS": "0",  # limits off: measure the check, not a wait
        }
        suites = {}
        for name, env in (("without keys", env_open), ("with keys", env_keys)):
            ingest = start_service("ingest", url, env)
            recall = start_service("recall", url, env)
            client = EpisodicClient(
                ingest=ingest.address,
                recall=recall.address,
                api_key=key if env is env_keys else None,
                timeout=30,
            )
            thread = client.start_thread("bench", "auth")
            client.add_messages(thread.thread_id, [("user", "warm up the pool")])
            client.recall("bench", "warm up")
            suites[name] = (client, thread.thread_id, [ingest, recall])

        samples: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for name, (client, thread_id, _) in suites.items():
                samples.setdefault((name, "Recall"), []).extend(
                    _timed(lambda c=client: c.recall("bench", "pricing decision"), args.calls)
                )
                samples.setdefault((name, "AddMessages"), []).extend(
                    _timed(
                        lambda c=client, t=thread_id: c.add_messages(
                            t, [("user", "one more message about the pricing decision")]
                        ),
                        args.calls,
                    )
                )
        for client, _, processes in suites.values():
            client.close()
            for process in processes:
                process.terminate()

    print(
        f"\nauthentication cost: {args.rounds} alternating rounds x {args.calls} calls, "
        f"key cache {args.cache_ttl:g} s, sequential calls through the SDK"
    )
    print("| RPC | without keys p50 / p99 ms | with keys p50 / p99 ms | ratio p50 |")
    print("|---|---|---|---|")
    for rpc in ("Recall", "AddMessages"):
        off, on = samples[("without keys", rpc)], samples[("with keys", rpc)]
        print(
            f"| {rpc} | {statistics.median(off):.2f} / {_p(off, 99):.2f} | "
            f"{statistics.median(on):.2f} / {_p(on, 99):.2f} | "
            f"{statistics.median(on) / statistics.median(off):.2f}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
