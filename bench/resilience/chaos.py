"""Chaos run: replicas of every service under SIGKILLs, PostgreSQL restarts, a network cut
between Ingest and the Scheduler and a frozen summariser, while writers append through the
SDK; afterwards nothing acknowledged may be lost or changed (see
``episodic.testing.chaos``). Prints the figures as a table and exits 1 on any problem.

The services run as users run them: encryption at rest required and API keys required,
every writer and reader calling with a key of its own (``--no-encryption`` and
``--no-auth`` run the older, open setup: text in the clear, development mode on loopback).

    .venv/bin/python -m bench.resilience.chaos --messages 100000 --replicas 3 --datasets 50 \\
        --threads 500 --seconds 300 --encryption --auth

Not part of pytest (``tests/chaos`` runs a short version with one fault of each kind).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

from episodic.testing.chaos import ChaosConfig, run_chaos


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--replicas", type=int, default=3, help="of each service")
    parser.add_argument("--datasets", type=int, default=20)
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=120, help="planned length of the load")
    parser.add_argument("--writers", type=int, default=12)
    parser.add_argument("--readers", type=int, default=3)
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs per kind of service")
    parser.add_argument("--pg-fast", type=int, default=1, help="pg_ctl restart -m fast")
    parser.add_argument("--pg-immediate", type=int, default=1, help="pg_ctl restart -m immediate")
    parser.add_argument(
        "--pg-down",
        type=float,
        default=0.0,
        help="seconds the database stays down (stop, wait, start instead of restart)",
    )
    parser.add_argument("--cuts", type=int, default=1, help="Ingest-Scheduler network cuts")
    parser.add_argument("--cut-seconds", type=float, default=5.0)
    parser.add_argument("--cut-mode", choices=("blackhole", "refuse"), default="blackhole")
    parser.add_argument("--freezes", type=int, default=1, help="summariser SIGSTOPs")
    parser.add_argument("--reclaim-after", type=float, default=3.0)
    parser.add_argument("--auto-episode-interval", type=float, default=2.0)
    parser.add_argument("--settle-timeout", type=float, default=600.0)
    parser.add_argument(
        "--encryption",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="encryption at rest required (a master keyring; every stored value checked "
        "sealed at the end); --no-encryption: text stored in the clear",
    )
    parser.add_argument(
        "--auth",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="API keys required (EPISODIC_AUTH=required): writers, readers and the operator "
        "each call with their own key; --no-auth: development mode on loopback, no keys",
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--workdir", type=Path, default=None, help="keep logs here")
    parser.add_argument(
        "--keep-db", action="store_true", help="keep the database files in the workdir"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)

    config = ChaosConfig(
        messages=args.messages,
        threads=args.threads,
        datasets=args.datasets,
        replicas=args.replicas,
        writers=args.writers,
        readers=args.readers,
        seconds=args.seconds,
        max_batch=args.max_batch,
        kills_per_service=args.kills,
        pg_fast_restarts=args.pg_fast,
        pg_immediate_restarts=args.pg_immediate,
        pg_down_seconds=args.pg_down,
        network_cuts=args.cuts,
        cut_seconds=args.cut_seconds,
        cut_mode=args.cut_mode,
        freezes=args.freezes,
        reclaim_after=args.reclaim_after,
        auto_episode_interval=args.auto_episode_interval,
        settle_timeout=args.settle_timeout,
        encryption=args.encryption,
        auth=args.auth,
        seed=args.seed,
        workdir=args.workdir,
        keep_database=args.keep_db,
        log_level=args.log_level,
        progress=None if args.quiet else lambda line: print(f"# {line}", flush=True),
    )
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    # The machine's load while the run goes on (a shared machine): the 1-minute load
    # average every 5 s, reported as its range.
    loads: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while True:
            loads.append(os.getloadavg()[0])
            if done.wait(5.0):
                return

    sampler = threading.Thread(target=sample, name="load-sampler", daemon=True)
    sampler.start()
    try:
        result = run_chaos(config)
    finally:
        done.set()
        sampler.join(10)
    load = f"{min(loads):.1f}–{max(loads):.1f}" if loads else "?"
    print(
        f"chaos run of {started}, load average (1 min, sampled every 5 s) {load}, "
        f"{os.getloadavg()[0]:.2f} at the end"
    )
    print(result.report())
    if args.json is not None:
        figures = {name.strip(): value for name, value in result.figures()}
        args.json.write_text(
            json.dumps(
                {
                    "started": started,
                    "load_average": {"min": min(loads), "max": max(loads)} if loads else None,
                    "figures": figures,
                    "faults": [asdict(f) for f in result.faults],
                    "codes": result.codes,
                    "problems": result.problems,
                },
                indent=2,
            )
        )
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
