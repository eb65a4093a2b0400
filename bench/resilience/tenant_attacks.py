"""What one hostile caller costs another tenant at the door (issue 49): a victim key
measures its Recall latency before, during and after an attack on the same Recall replica,
with the door's defences on and off in the same run (this machine is noisy: compare the
columns of one run, not runs).

Attacks (from ::1, the victim and the health checks from 127.0.0.1: per-address limits see
two clients; each attacker runs in a process of its own, as it would on its own machine, so
its client threads do not slow the victim's client):

- ``bogus-keys``: threads calling Recall with random API keys as fast as they can. Each
  unknown key costs a database lookup, and used to take a slot of the one key cache,
  pushing the victim's key out (EPISODIC_RATE_LIMIT_UNAUTHENTICATED and the separate
  caches are the defence).
- ``flood``: one valid key with many calls in flight, each a long query (the costliest
  Recall there is: 8,000 characters of dates). The per-key rate limit does not bind: a
  replica serves fewer calls per second than it allows (the defences: the key's calls in
  flight, a query worth more of them the longer it is, EPISODIC_MAX_CALLS_IN_FLIGHT_PER_KEY;
  its handler time, EPISODIC_HANDLER_SECONDS_PER_KEY; and refusals made before the request
  is read).
- ``stalled``: no key at all; each attacking thread keeps 8 calls open that send their
  headers and never their request (a new one as soon as one ends). Under grpcio's threaded
  server 16 of them took a replica down (the issue: health and every call timed out). The
  asyncio door (episodic.serving.transport) holds no thread for them; its defences are the request
  timeout and the cap of open calls per peer (EPISODIC_REQUEST_BODY_TIMEOUT,
  EPISODIC_MAX_CALLS_PER_PEER), which bound what they cost in memory.

For each: the victim's p50 / p99 (ms) before, during, after, the ratio during/before,
whether the health check answered within a second every time during the attack, and the
Recall process's resident memory at the end of the attack.

    python -m bench.resilience.tenant_attacks [--attack bogus-keys|flood|stalled|all] [--seconds 10]
        [--attackers 32] [--attacker-nice 19]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from episodic.access import Role
from episodic.sdk.client import EpisodicClient
from episodic.store import keys
from episodic.store.db import make_engine
from episodic.testing.database import scratch_database
from episodic.testing.processes import start_service

#: The door's defences off: what the suite did before issue 49.
UNDEFENDED = {
    "EPISODIC_RATE_LIMIT_UNAUTHENTICATED": "0",
    "EPISODIC_MAX_CALLS_IN_FLIGHT_PER_KEY": "0",
    "EPISODIC_HANDLER_SECONDS_PER_KEY": "0",
    "EPISODIC_REQUEST_BODY_TIMEOUT": "0",
    "EPISODIC_MAX_CALLS_PER_PEER": "0",
}
#: Stalled calls each attacking thread keeps open.
STALLED_PER_THREAD = 8
ATTACKS = ("bogus-keys", "flood", "stalled")
#: The stalled-calls attacker: threads keeping calls open that send their headers and
#: never their request (a new one as soon as one ends); a line per call ended.
STALLED_SCRIPT = """
import grpc, threading
def never():
    threading.Event().wait()
    yield b""
def attack():
    with grpc.insecure_channel("{address}") as channel:
        call = channel.stream_unary("/episodic.v1.RecallService/Recall")
        while True:
            pending = [call.future(never(), timeout=120) for _ in range({per})]
            for future in pending:
                try:
                    future.result()
                except Exception:
                    pass
                print(1, flush=True)
threads = [threading.Thread(target=attack) for _ in range({threads})]
for t in threads:
    t.start()
"""


def _rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` in MB (Linux)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


LONG_QUERY = " ".join(f"2026-{m:02d}-{d:02d}" for m in range(1, 13) for d in range(1, 29))[:8000]


def _p(values: list[float], q: int) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def _victim(client: EpisodicClient, seconds: float) -> list[float]:
    out: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        start = time.perf_counter()
        client.recall("victim", "what did we decide about pricing")
        out.append((time.perf_counter() - start) * 1000)
    return out


def _health_ok(address: str, stop: threading.Event, misses: list[int]) -> None:
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while not stop.is_set():
            try:
                stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
            except grpc.RpcError:
                misses[0] += 1
            stop.wait(0.1)


#: The flood and bogus-keys attackers, as a process of their own (an attacker is not in the
#: victim's process: 32 busy client threads there would slow the victim's own client, its
#: interpreter lock, and charge that to the server); a line per 100 calls made.
FLOOD_SCRIPT = """
import secrets, threading, time, contextlib, grpc
from episodic.sdk.client import EpisodicClient
LONG_QUERY = {long_query!r}
lock = threading.Lock()
made = [0]
def count():
    with lock:
        made[0] += 1
        if made[0] % 100 == 0:
            print(1, flush=True)
def flood():
    client = EpisodicClient(recall="{address}", api_key="{key}", timeout=30,
                            rate_limit_retries=0)
    while True:
        try:
            client.recall("attacker", LONG_QUERY)
        except Exception:  # RESOURCE_EXHAUSTED: a hostile client ignores the retry hint
            time.sleep(0.01)
        count()
def bogus():
    with grpc.insecure_channel("{address}") as channel:
        call = channel.unary_unary("/episodic.v1.RecallService/Recall")
        while True:
            token = "ek_" + secrets.token_hex(5) + "_" + secrets.token_urlsafe(16)
            with contextlib.suppress(grpc.RpcError):
                call(b"", metadata=(("authorization", "Bearer " + token),), timeout=5)
            count()
threads = [threading.Thread(target={work}) for _ in range({threads})]
for t in threads:
    t.start()
"""


#: The attacker's process runs at the lowest CPU priority: on a deployment it is on another
#: machine, and its own client work must not be what the victim measures (this machine has
#: two cores for the server, the database, the victim and the attacker). ``--attacker-nice
#: 0`` measures it at the same priority.
NICE: list[str] = ["nice", "-n", "19"]


def _attack(kind: str, address: str, key: str, n: int, stop: threading.Event) -> list[int]:
    """Starts attack ``kind`` in a process of its own (see :data:`FLOOD_SCRIPT`,
    :data:`STALLED_SCRIPT`) until ``stop``; returns its running count of calls made."""
    calls = [0]
    if kind == "stalled":
        # A gRPC client process whose request iterators block holds its own threads too.
        script, per_line = (
            STALLED_SCRIPT.format(address=address, threads=n, per=STALLED_PER_THREAD),
            1,
        )
    else:
        work = "bogus" if kind == "bogus-keys" else "flood"
        script = FLOOD_SCRIPT.format(
            address=address, key=key, threads=n, work=work, long_query=LONG_QUERY
        )
        per_line = 100
    proc = subprocess.Popen(
        [*NICE, sys.executable, "-c", script], stdout=subprocess.PIPE, text=True
    )

    def count() -> None:
        assert proc.stdout is not None
        for _ in proc.stdout:
            calls[0] += per_line

    def end() -> None:
        stop.wait()
        proc.kill()
        proc.wait()

    threading.Thread(target=count, daemon=True).start()
    threading.Thread(target=end, daemon=True).start()
    return calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attack", choices=[*ATTACKS, "all"], default="all")
    parser.add_argument("--seconds", type=float, default=10.0, help="each phase")
    parser.add_argument("--attackers", type=int, default=32, help="attacking threads")
    parser.add_argument(
        "--attacker-nice", type=int, default=19, help="the attacking process's nice value"
    )
    args = parser.parse_args(argv)
    attacks = list(ATTACKS) if args.attack == "all" else [args.attack]
    NICE[:] = ["nice", "-n", str(args.attacker_nice)] if args.attacker_nice else []

    rows = []
    with scratch_database(prefix="episodic-attack-bench-") as url:
        engine = make_engine(url, pool_size=1)
        with engine.begin() as conn:
            victim_key = keys.create_key(conn, role=Role.WRITER, datasets=["victim"]).secret
            attacker_key = keys.create_key(conn, role=Role.WRITER, datasets=["attacker"]).secret
        engine.dispose()
        base = {"EPISODIC_AUTH": "required", "EPISODIC_EMBEDDING_PROVIDER": "hashing"}
        ingest = start_service("ingest", url, base)
        for dataset, key in (("victim", victim_key), ("attacker", attacker_key)):
            with EpisodicClient(ingest=ingest.address, api_key=key, timeout=30) as writer:
                thread = writer.start_thread(dataset, "pricing")
                writer.add_messages(
                    thread.thread_id,
                    [("user", f"We decided the Pro tier costs ${n} a month.") for n in range(20)],
                )
        ingest.terminate()
        for defended in (False, True):
            env = base if defended else {**base, **UNDEFENDED}
            # Listening on both loopbacks: the attackers come from ::1, the victim and the
            # health checks from 127.0.0.1 (other client addresses, as on a network).
            recall = start_service("recall", url, {**env, "EPISODIC_BIND_HOST": "::"})
            attack_address = f"[::1]:{recall.port}"
            victim = EpisodicClient(recall=recall.address, api_key=victim_key, timeout=60)
            _victim(victim, 1.0)  # warm up
            for kind in attacks:
                before = _victim(victim, args.seconds)
                stop, misses = threading.Event(), [0]
                calls = _attack(kind, attack_address, attacker_key, args.attackers, stop)
                health = threading.Thread(
                    target=_health_ok, args=(recall.address, stop, misses), daemon=True
                )
                health.start()
                during = _victim(victim, args.seconds)
                memory = _rss_mb(recall.proc.pid)
                stop.set()
                health.join()
                time.sleep(1.0)  # the attack's calls in flight end
                after = _victim(victim, args.seconds)
                rows.append((kind, defended, before, during, after, misses[0], calls[0], memory))
            victim.close()
            recall.terminate()

    print(
        f"\none Recall replica, {args.attackers} attacking threads, {args.seconds:g} s per "
        "phase; the victim's sequential Recalls through the SDK (ms)"
    )
    print(
        "| attack | defences | before p50 / p99 | during p50 / p99 | after p50 / p99 | "
        "during/before p50 / p99 | health misses | attacker calls | Recall RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, defended, before, during, after, missed, calls, memory in rows:
        print(
            f"| {kind} | {'on' if defended else 'off'} | "
            f"{statistics.median(before):.1f} / {_p(before, 99):.1f} | "
            f"{statistics.median(during):.1f} / {_p(during, 99):.1f} | "
            f"{statistics.median(after):.1f} / {_p(after, 99):.1f} | "
            f"{statistics.median(during) / statistics.median(before):.2f}x / "
            f"{_p(during, 99) / _p(before, 99):.2f}x | {missed} | {calls} | {memory:.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
