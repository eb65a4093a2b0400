"""Tracing cost: AddMessages and Recall with tracing on and off, in the same run.

Starts an embedded PostgreSQL, a Scheduler and a Summariser (tracing off) to make a dataset
of ``--threads`` summarised threads, then two Ingest and two Recall processes on the same
database: one with tracing off (``OTEL_TRACES_EXPORTER=none``, the default), one exporting
OTLP over gRPC (batched, as in production) to a receiver in this process that answers and
drops what it gets. Tracing on means everything a traced service does: the gRPC server
span, the SQLAlchemy query spans, the GenAI memory span, the batch export.

One client calls each process in turn for ``--seconds`` per measurement, ``--repeats``
rounds, the order of off/on rotating each round; it prints median calls/s, p50 latency, the
server's CPU per call, and the medians of the per-round ratios on/off (time per call, CPU
per call: the steadier figure on a loaded machine). Usage::

    python -m bench.speed.tracing_cost [--seconds 2] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from episodic.testing.database import test_server
from episodic.testing.processes import ServiceProcess, start_service
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from episodic.v1 import recall_service_pb2 as rpb
from episodic.v1 import recall_service_pb2_grpc as rg
from episodic.v1 import summariser_service_pb2 as spb
from episodic.v1 import summariser_service_pb2_grpc as sg

DATASET = "tracing-bench"
TOPICS = ["budget", "offsite", "car", "invoice", "holiday", "hiring", "launch", "database"]


class Sink(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans = 0

    def Export(self, request: Any, context: Any) -> Any:
        self.spans += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        return trace_service_pb2.ExportTraceServiceResponse()


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (from /proc: less sensitive to a loaded
    machine than latency)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:13]) / os.sysconf("SC_CLK_TCK")


def measure(call: Callable[[], None], seconds: float, pid: int) -> tuple[float, float, float]:
    """Calls/s, p50 latency (ms) and the server's CPU ms per call of ``call`` run back to
    back for ``seconds``."""
    latencies = []
    cpu = process_cpu(pid)
    end = time.perf_counter() + seconds
    while (now := time.perf_counter()) < end:
        call()
        latencies.append(time.perf_counter() - now)
    cpu_ms = (process_cpu(pid) - cpu) * 1000 / len(latencies)
    return len(latencies) / seconds, statistics.median(latencies) * 1000, cpu_ms


def fill_dataset(ingest: ServiceProcess, summariser: ServiceProcess, threads: int) -> int:
    """Writes ``threads`` short threads of :data:`DATASET` through ``ingest``, ends them, and
    has ``summariser`` complete their episodes: the dataset the benchmarks recall from.
    Returns how many episodes were completed."""
    stub = ig.IngestServiceStub(ingest.channel())
    for i in range(threads):
        topic = TOPICS[i % len(TOPICS)]
        thread = stub.CreateThread(ipb.CreateThreadRequest(dataset=DATASET)).thread
        stub.AddMessages(
            ipb.AddMessagesRequest(
                thread_id=thread.thread_id,
                messages=[
                    ipb.NewMessage(
                        role=e.ROLE_USER,
                        content=f"We talked about the {topic} today, item {i}.",
                    ),
                    ipb.NewMessage(role=e.ROLE_ASSISTANT, content=f"Noted the {topic} details."),
                ],
            )
        )
        stub.EndThread(ipb.EndThreadRequest(thread_id=thread.thread_id))
    done = sg.SummariserServiceStub(summariser.channel()).ProcessPending(
        spb.ProcessPendingRequest(), timeout=300
    )
    return int(done.completed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=40, help="summarised threads to recall")
    args = parser.parse_args()

    sink = Sink()
    receiver = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(sink, receiver)
    port = receiver.add_insecure_port("127.0.0.1:0")
    receiver.start()
    quiet = {"EPISODIC_LOG_LEVEL": "ERROR", "EPISODIC_DB_POOL_SIZE": "10"}
    off = {**quiet, "OTEL_TRACES_EXPORTER": "none"}
    on = {
        **quiet,
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_TRACES_INSECURE": "true",
    }
    procs: list[ServiceProcess] = []
    with tempfile.TemporaryDirectory(prefix="tracing-bench-") as tmp, test_server(Path(tmp)) as dbs:
        url = dbs.create()
        try:
            scheduler = start_service("scheduler", url, off)
            procs.append(scheduler)
            summariser = start_service("summariser", url, off)
            procs.append(summariser)
            with_scheduler = {"EPISODIC_SCHEDULER_ADDRESS": scheduler.address}
            ingests = {
                "off": start_service("ingest", url, {**off, **with_scheduler}),
                "on": start_service("ingest", url, {**on, **with_scheduler}),
            }
            recalls = {
                "off": start_service("recall", url, off),
                "on": start_service("recall", url, on),
            }
            procs += [*ingests.values(), *recalls.values()]

            # The dataset to recall from.
            completed = fill_dataset(ingests["off"], summariser, args.threads)
            print(f"dataset: {completed} episodes")

            calls: dict[tuple[str, str], Callable[[], None]] = {}
            pids = {
                **{("AddMessages", m): p.proc.pid for m, p in ingests.items()},
                **{("Recall", m): p.proc.pid for m, p in recalls.items()},
            }
            for mode in ("off", "on"):
                ingest = ig.IngestServiceStub(ingests[mode].channel())
                thread_id = ingest.CreateThread(
                    ipb.CreateThreadRequest(dataset=DATASET)
                ).thread.thread_id
                request = ipb.AddMessagesRequest(
                    thread_id=thread_id,
                    messages=[ipb.NewMessage(role=e.ROLE_USER, content="one more message " * 8)],
                )
                calls[("AddMessages", mode)] = lambda s=ingest, r=request: s.AddMessages(r)  # type: ignore[misc]
                recall = rg.RecallServiceStub(recalls[mode].channel())
                query = rpb.RecallRequest(
                    dataset=DATASET,
                    query="what about the budget",
                    include=[rpb.RECALL_INCLUDE_EPISODES],
                    context_episodes=5,
                )
                calls[("Recall", mode)] = lambda s=recall, q=query: s.Recall(q)  # type: ignore[misc]

            results: dict[tuple[str, str], list[tuple[float, float, float]]] = {
                k: [] for k in calls
            }
            ratios: dict[str, list[float]] = {"AddMessages": [], "Recall": []}
            cpu_ratios: dict[str, list[float]] = {"AddMessages": [], "Recall": []}
            for rpc in ("AddMessages", "Recall"):
                for mode in ("off", "on"):
                    measure(calls[(rpc, mode)], 0.5, pids[(rpc, mode)])  # warm-up
                for r in range(args.repeats):
                    order = ("off", "on") if r % 2 == 0 else ("on", "off")
                    got = {
                        mode: measure(calls[(rpc, mode)], args.seconds, pids[(rpc, mode)])
                        for mode in order
                    }
                    for mode, value in got.items():
                        results[(rpc, mode)].append(value)
                    ratios[rpc].append(got["off"][0] / got["on"][0])  # time per call, on/off
                    if got["off"][2] > 0:
                        cpu_ratios[rpc].append(got["on"][2] / got["off"][2])

            print(f"spans received: {sink.spans}")
            print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")
            print(f"{'rpc':<12} {'tracing':<8} {'calls/s':>8} {'p50 ms':>8} {'cpu ms':>8}")
            for (rpc, mode), values in results.items():
                rate = statistics.median(v[0] for v in values)
                p50 = statistics.median(v[1] for v in values)
                cpu = statistics.median(v[2] for v in values)
                print(f"{rpc:<12} {mode:<8} {rate:8.1f} {p50:8.2f} {cpu:8.2f}")
            for rpc, values in ratios.items():
                print(
                    f"{rpc}: time per call, tracing on / off = {statistics.median(values):.2f} "
                    f"(rounds: {', '.join(f'{v:.2f}' for v in values)}); server CPU per call "
                    f"on / off = {statistics.median(cpu_ratios[rpc] or [float('nan')]):.2f}"
                )
        finally:
            for proc in reversed(procs):
                proc.terminate()
            receiver.stop(grace=None)


if __name__ == "__main__":
    main()
