"""What one tenant's work costs another's episodes (issue 49): a victim dataset's two-message
episode, timed from its EndThread to COMPLETED, before and while another dataset makes the
Summariser work hard, through the running suite (Ingest, Scheduler, Recall, one Summariser).

Attacks:

- ``giant``: one thread of ``--messages`` messages of ``--message-bytes`` bytes (the issue:
  133,000 messages, ~530 MB, took the Summariser to 6.9 GB and a crash loop), then
  EndThread. The defences: an episode's window is capped (episodes.MAX_WINDOW_MESSAGES,
  MAX_WINDOW_BYTES: the stretch becomes consecutive episodes), a summary reads its window
  and a bounded context (reading.SUMMARY_CONTEXT_CHARS), the chunk pass reads only what
  no chunk covers, and claims take turns across datasets.
- ``backlog``: ``--threads`` threads of two messages each, all ended at once.

Printed: the victim's time to memory before, during and after (once the attacker's last
episode completed), the attacker's episodes and the time until its last one completed, the
Summariser's peak and final resident memory (VmHWM, VmRSS), and the health checks of the
four services that failed or took over a second while the attack ran. The embedder is the hashing one (offline, fast), so the figures are the
suite's own work, not a model's.

With ``--summarisers N`` the episodes are shared by N Summariser replicas (claims take
turns across datasets on each, and replicas skip each other's claims); the memory printed
is the highest peak among them.

    python -m bench.resilience.work_attacks [--attack giant|backlog|all] [--messages 133000]
        [--message-bytes 4000] [--threads 5000] [--summarisers 1]
"""

from __future__ import annotations

import argparse
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from episodic.sdk.client import EpisodicClient
from episodic.serving.server import GRPC_SERVICES
from episodic.testing.database import scratch_database
from episodic.testing.processes import ServiceProcess, start_service

BATCH_BYTES = 2 * 1024 * 1024  # per AddMessages call, well under the 8 MB request limit
BATCH_MESSAGES = 1000  # and at most EPISODIC_MAX_BATCH_MESSAGES


def _memory_mb(proc: ServiceProcess) -> tuple[float, float]:
    """(peak, current) resident memory of a service process in MB (Linux)."""
    values = {}
    with open(f"/proc/{proc.proc.pid}/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                values[key] = int(rest.split()[0]) / 1024
    return values.get("VmHWM", float("nan")), values.get("VmRSS", float("nan"))


def _watch_health(
    services: list[ServiceProcess], stop: threading.Event, misses: list[int], checks: list[int]
) -> None:
    """Asks every service's readiness (its own health name, as the Kubernetes probes do)
    twice a second until ``stop``; a check that fails, says NOT_SERVING or takes over a
    second is a miss."""
    channels = [s.channel() for s in services]
    probes = [
        (health_pb2_grpc.HealthStub(c), GRPC_SERVICES[s.name])
        for c, s in zip(channels, services, strict=True)
    ]
    try:
        while not stop.is_set():
            for stub, name in probes:
                checks[0] += 1
                try:
                    answer = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=1)
                    if answer.status != health_pb2.HealthCheckResponse.SERVING:
                        misses[0] += 1
                except grpc.RpcError:
                    misses[0] += 1
            stop.wait(0.5)
    finally:
        for channel in channels:
            channel.close()


def _victim(client: EpisodicClient, n: int) -> float:
    """Seconds from the victim's EndThread to its episode COMPLETED."""
    thread = client.start_thread("victim", f"pricing {n}")
    client.add_messages(
        thread.thread_id,
        [("user", "Shall we make the Pro tier $29?"), ("assistant", "Yes: $29 a month.")],
    )
    started = time.perf_counter()
    client.end_thread(thread.thread_id)
    episode = client.wait_for_episode(thread.thread_id, timeout=1800)
    assert episode.status == "completed", episode
    return time.perf_counter() - started


def _giant(client: EpisodicClient, messages: int, size: int) -> str:
    thread = client.start_thread("attacker", "one very long thread")
    per_call = max(1, min(BATCH_MESSAGES, BATCH_BYTES // size))
    body = ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]
    written = 0
    while written < messages:
        n = min(per_call, messages - written)
        client.add_messages(
            thread.thread_id, [("user", f"{written + i} {body}") for i in range(n)], timeout=120
        )
        written += n
    client.end_thread(thread.thread_id)
    return thread.thread_id


def _backlog(client: EpisodicClient, threads: int) -> list[str]:
    def one(i: int) -> str:
        thread = client.start_thread("attacker", f"small {i}")
        client.add_messages(thread.thread_id, [("user", f"hello {i}"), ("assistant", "hi")])
        return thread.thread_id

    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(one, range(threads)))
        list(pool.map(client.end_thread, ids))
    return ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attack", choices=["giant", "backlog", "all"], default="all")
    parser.add_argument("--messages", type=int, default=133_000)
    parser.add_argument("--message-bytes", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=5000)
    parser.add_argument("--summarisers", type=int, default=1, help="Summariser replicas")
    args = parser.parse_args(argv)
    attacks = ["giant", "backlog"] if args.attack == "all" else [args.attack]

    rows = []
    # The services' own loops, as deployed (the test harness turns them off by default).
    env = {
        "EPISODIC_EMBEDDING_PROVIDER": "hashing",
        "EPISODIC_SUMMARISER_POLL_INTERVAL": "1",
        "EPISODIC_SCHEDULER_POLL_INTERVAL": "1",
    }
    for attack in attacks:
        with scratch_database(prefix="episodic-work-bench-") as url:
            scheduler = start_service("scheduler", url, env)
            # Ingest tells this Scheduler of EndThreads (not whatever listens on its
            # default port).
            ingest = start_service(
                "ingest", url, {**env, "EPISODIC_SCHEDULER_ADDRESS": scheduler.address}
            )
            recall = start_service("recall", url, env)
            services = [ingest, scheduler, recall]
            summarisers = [start_service("summariser", url, env) for _ in range(args.summarisers)]
            client = EpisodicClient(
                ingest=ingest.address,
                scheduler=scheduler.address,
                recall=recall.address,
                timeout=120,
            )
            before = [_victim(client, n) for n in range(3)]
            stop, misses, checks = threading.Event(), [0], [0]
            watcher = threading.Thread(
                target=_watch_health,
                args=([*services, *summarisers], stop, misses, checks),
                daemon=True,
            )
            watcher.start()
            started = time.perf_counter()
            if attack == "giant":
                ids = [_giant(client, args.messages, args.message_bytes)]
                what = f"{args.messages:,} messages of {args.message_bytes:,} B in one thread"
            else:
                ids = _backlog(client, args.threads)
                what = f"{args.threads:,} threads of 2 messages"
            what += f", {args.summarisers} Summariser(s)"
            written = time.perf_counter() - started
            during = _victim(client, 0)
            for thread_id in ids:
                client.wait_for_episode(thread_id, timeout=3600)
            drained = time.perf_counter() - started
            stop.set()
            watcher.join()
            after = _victim(client, 9)
            episodes = sum(1 for _ in client.iter_episodes("attacker"))  # its windows
            peak, current = max(_memory_mb(s) for s in summarisers)
            rows.append(
                (
                    attack,
                    what,
                    min(before),
                    during,
                    after,
                    written,
                    drained,
                    episodes,
                    peak,
                    current,
                    f"{misses[0]} of {checks[0]}",
                )
            )
            client.close()
            for service in (*summarisers, *services):
                service.terminate()

    print(
        "\n| attack | what | victim before / during / after (s) | attack written in (s) | "
        "attack summarised by (s) | attacker episodes | Summariser peak / now MB | "
        "health misses |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for attack, what, first, during, last, written, drained, episodes, peak, now, h in rows:
        print(
            f"| {attack} | {what} | {first:.2f} / {during:.2f} / {last:.2f} | {written:.0f} | "
            f"{drained:.0f} | {episodes} | {peak:.0f} / {now:.0f} | {h} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
