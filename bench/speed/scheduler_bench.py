"""Scheduler benchmark: timers fired per second with 1 and 3 replicas, and fire lag.

Starts its own embedded PostgreSQL in a temporary directory, migrates it, and for each
replica count runs real Scheduler processes (``python -m episodic.services.scheduler``, background
loop on, production poll interval unless told otherwise) against two workloads:

- burst (``--bursts`` times, the median reported): N threads with 2 messages each and
  timers all due at the same instant T0; fired/s = timers fired per second from the first
  firing transaction's start to the last one's (the last ones' timers not counted: their
  work falls after the span); "from due" = N / (last episode created_at - T0), which also
  counts the loop's wake-up (up to one poll interval, at a random phase: the noisy part);
  lag = created_at - fire_at (queueing included: the last timer waits for the N-1 before
  it);
- steady: M timers due at evenly spread instants over S seconds (below capacity); lag is
  then the scheduling latency itself.

Both times come from the database clock (episodes.created_at is the firing transaction's
now(); fire_at is recorded beside the timer before it is deleted). Not part of pytest:

    .venv/bin/python -m bench.speed.scheduler_bench [--timers 2000] [--steady 600] [--seconds 6]
        [--before /path/to/older/checkout]

``--before DIR`` also runs the Scheduler of another checkout (its ``.venv``, e.g. a
``git worktree`` of main) on the same database in the same run, alternating with this one,
and prints this checkout's burst rate as a ratio of that one's.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import psycopg

from episodic.ops.runtime import EmbeddedPostgres
from episodic.store import migrate
from episodic.testing.database import with_database
from episodic.testing.processes import ServiceProcess, start_service


def setup_database(admin_url: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS scheduler_bench WITH (FORCE)")
        conn.execute("CREATE DATABASE scheduler_bench")
    url = with_database(admin_url, "scheduler_bench")
    migrate.upgrade(url, 384)
    with psycopg.connect(url, autocommit=True) as conn:
        # Remembers each timer's fire_at (the timer row is deleted when it fires).
        conn.execute(
            "CREATE TABLE bench_timers (thread_id uuid PRIMARY KEY, fire_at timestamptz NOT NULL)"
        )
    return url


def reset(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE threads, leases, bench_timers CASCADE")


def load_timers(url: str, n: int, first_due_in: float, spread: float) -> None:
    """n threads (2 messages each) with timers due from now + first_due_in, evenly spread
    over ``spread`` seconds (0: all at the same instant)."""
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO bench_timers (thread_id, fire_at) "
            "SELECT gen_random_uuid(), now() + make_interval(secs => %s + %s * i / %s) "
            "FROM generate_series(0, %s - 1) i",
            (first_due_in, spread, max(n, 1), n),
        )
        conn.execute(
            "INSERT INTO datasets (dataset) SELECT 'd' || g FROM generate_series(0, 100) g "
            "ON CONFLICT DO NOTHING"
        )
        conn.execute(
            "INSERT INTO threads (thread_id, dataset, last_sequence, last_message_at) "
            "SELECT thread_id, 'd' || (random() * 100)::int, 2, now() FROM bench_timers"
        )
        conn.execute(  # stored in the clear (0x00 || UTF-8): the Scheduler never reads it
            "INSERT INTO messages (dataset, thread_id, sequence, role, content, created_at) "
            "SELECT t.dataset, b.thread_id, s, 'user', '\\x0068656c6c6f'::bytea, now() "
            "FROM bench_timers b JOIN threads t USING (thread_id), generate_series(1, 2) s"
        )
        conn.execute(
            "INSERT INTO scheduled_episodes (thread_id, dataset, fire_at) "
            "SELECT b.thread_id, t.dataset, b.fire_at FROM bench_timers b "
            "JOIN threads t USING (thread_id)"
        )
        conn.commit()


def wait_fired(url: str, n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            done = conn.execute("SELECT count(*) FROM episodes").fetchone()[0]  # type: ignore[index]
            if done >= n:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {done}/{n} timers fired in {timeout}s")
            time.sleep(0.05)


def measure(url: str) -> tuple[float, float, list[float]]:
    """(fired/s from the due instant, fired/s while firing, lags in ms).

    From the due instant: N / (last episode's created_at - fire_at), which includes how
    long the loop slept before it looked (up to one poll interval, at a random phase: the
    noisy part). While firing: the timers of every transaction but the last started ones
    over the time from the first transaction's start to the last one's (created_at is the
    firing transaction's start), i.e. the rate once the loop is at work."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT extract(epoch FROM e.created_at - b.fire_at) * 1000, "
            "extract(epoch FROM e.created_at - min(b.fire_at) OVER ()), "
            "extract(epoch FROM e.created_at - min(e.created_at) OVER ()) "
            "FROM episodes e JOIN bench_timers b USING (thread_id)"
        ).fetchall()
    from_due = max(float(r[1]) for r in rows)
    since_first = sorted(float(r[2]) for r in rows)
    # The transactions that started last (those within 50 ms of the last start: the
    # chunks fired side by side) did their work after the span ends: not counted.
    cut = since_first[-1] - 0.05
    counted = sum(1 for t in since_first if t < cut)
    firing = counted / cut if cut > 0 else float("nan")
    return len(rows) / from_due, firing, sorted(float(r[0]) for r in rows)


def pct(values: list[float], p: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]


def run(
    url: str, replicas: int, env: dict[str, str], args: argparse.Namespace, python: str | None
) -> dict:  # type: ignore[type-arg]
    results: dict[str, float | str] = {"replicas": replicas}
    procs: list[ServiceProcess] = []
    try:
        procs = [start_service("scheduler", url, env, python=python) for _ in range(replicas)]

        bursts = []
        for _ in range(args.bursts):
            reset(url)
            load_timers(url, args.timers, first_due_in=1.0, spread=0.0)
            wait_fired(url, args.timers, timeout=300)
            bursts.append(measure(url))
        # The median burst by rate (its lags come with it).
        _, firing, lags = sorted(bursts, key=lambda b: b[1])[len(bursts) // 2]
        results.update(
            burst_rate=firing,
            burst_from_due=statistics.median(b[0] for b in bursts),
            burst_p50=pct(lags, 50),
            burst_p99=pct(lags, 99),
            burst_rates=" ".join(f"{b[1]:.0f} ({b[0]:.0f} from due)" for b in bursts),
        )

        reset(url)
        load_timers(url, args.steady, first_due_in=1.0, spread=args.seconds)
        wait_fired(url, args.steady, timeout=args.seconds + 120)
        _, _, lags = measure(url)
        results.update(steady_p50=pct(lags, 50), steady_p99=pct(lags, 99))
    finally:
        for proc in procs:
            proc.terminate()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timers", type=int, default=2000, help="timers in the burst")
    parser.add_argument(
        "--bursts", type=int, default=3, help="bursts per variant (the median is reported)"
    )
    parser.add_argument("--steady", type=int, default=600, help="timers in the steady run")
    parser.add_argument("--seconds", type=float, default=6.0, help="steady run length")
    parser.add_argument("--replicas", default="1,3", help="replica counts to run")
    parser.add_argument("--poll", default="1", help="EPISODIC_SCHEDULER_POLL_INTERVAL (s)")
    parser.add_argument(
        "--batch", help="EPISODIC_CLAIM_BATCH_SIZE (default: the service's own default)"
    )
    parser.add_argument(
        "--before", type=Path, help="an older checkout (with .venv) to run in the same run"
    )
    args = parser.parse_args()
    variants: list[tuple[str, str | None]] = [("this", None)]
    if args.before:
        variants = [("before", str(args.before / ".venv" / "bin" / "python")), ("this", None)]

    env = {"EPISODIC_SCHEDULER_POLL_INTERVAL": args.poll, "EPISODIC_LOG_LEVEL": "WARNING"}
    if args.batch:
        env["EPISODIC_CLAIM_BATCH_SIZE"] = args.batch
    with tempfile.TemporaryDirectory(prefix="scheduler-bench-") as tmp:
        pg = EmbeddedPostgres(Path(tmp) / "pgdata")
        admin = pg.start()
        try:
            url = setup_database(admin)
            load_before = loadavg()
            rows = [
                {"variant": name, **run(url, int(r), env, args, python)}
                for r in args.replicas.split(",")
                for name, python in variants
            ]
            load_after = loadavg()
        finally:
            pg.stop()

    print(
        f"\nScheduler: {args.timers}-timer burst, {args.steady} timers over {args.seconds:g} s "
        f"steady; poll {args.poll} s, claim batch {args.batch or 'default'}; embedded PostgreSQL "
        "(synchronous_commit on)\n"
    )
    header = (
        f"{'variant':>7} | {'replicas':>8} | {'burst fired/s':>13} | {'from due':>8} | "
        f"{'burst lag p50':>13} | "
        f"{'burst lag p99':>13} | {'steady lag p50':>14} | {'steady lag p99':>14}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['variant']:>7} | {r['replicas']:>8} | {r['burst_rate']:>13.0f} | "
            f"{r['burst_from_due']:>8.0f} | {r['burst_p50']:>10.0f} ms | "
            f"{r['burst_p99']:>10.0f} ms | {r['steady_p50']:>11.1f} ms | "
            f"{r['steady_p99']:>11.1f} ms"
        )
    if args.before:
        for replicas in args.replicas.split(","):
            by = {r["variant"]: r for r in rows if r["replicas"] == int(replicas)}
            print(
                f"{replicas} replica(s): burst fired/s this/before = "
                f"{by['this']['burst_rate'] / by['before']['burst_rate']:.2f}x"
            )
    for r in rows:
        print(f"{r['variant']} x{r['replicas']}: fired/s in each burst {r['burst_rates']}")
    print(
        "burst fired/s: median of the bursts; timers fired per second once firing started (the last transactions "
        "excluded, see measure()); from due: over the time since the timers fell due, which "
        "includes the loop's wake-up (up to one poll interval)"
    )
    print(f"load average: {load_before} -> {load_after}")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    main()
