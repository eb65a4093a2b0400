"""Per-call cost of this tree against another checkout, in the same run: AddMessages,
ListEpisodes and Recall through an Ingest and a Recall process of each tree on one store.

For a change on the path every call takes (the door, the guard, the servicers): the two
trees' processes are called in turn for ``--seconds`` per measurement, ``--repeats`` rounds,
the order rotating each round, and it prints median calls/s, p50 latency, the server's CPU
per call, and the medians of the per-round ratios this / before (time per call, CPU per
call: the steadier figure on a loaded machine). Usage::

    git worktree add /tmp/before main
    python -m bench.speed.tree_cost --before-tree /tmp/before [--seconds 2] [--repeats 7]

``--this-tree DIR`` runs the "this" side from another checkout too (two older commits
compared with this bench). The other tree runs with this tree's interpreter and packages, its own ``shared/`` and
``services/`` first on the path (so it must not need other packages than this one's).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.speed.tracing_cost import DATASET, fill_dataset, measure
from episodic.testing.database import test_server
from episodic.testing.processes import ServiceProcess, start_service
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from episodic.v1 import recall_service_pb2 as rpb
from episodic.v1 import recall_service_pb2_grpc as rg

RPCS = ("AddMessages", "ListEpisodes", "Recall")


def interpreter_for(tree: Path, scratch: Path, name: str = "before") -> str:
    """A python that imports ``episodic`` (and its services) from ``tree``: this venv's
    interpreter with the tree's ``shared/`` on the path and its ``services/`` as the
    package's services (they live outside ``shared/`` in a checkout)."""
    site = scratch / f"{name}-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        f"import episodic.services\nepisodic.services.__path__[:] = [{str(tree / 'services')!r}]\n"
    )
    wrapper = scratch / f"{name}-python"
    python = Path(sys.executable)
    wrapper.write_text(
        f'#!/bin/sh\nexport PYTHONPATH={tree / "shared"}:{site}\nexec {python} "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before-tree", required=True, metavar="DIR")
    parser.add_argument("--this-tree", metavar="DIR", help="default: this checkout")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=40, help="summarised threads to recall")
    args = parser.parse_args()
    quiet = {"EPISODIC_LOG_LEVEL": "ERROR", "EPISODIC_DB_POOL_SIZE": "10"}
    procs: list[ServiceProcess] = []
    with tempfile.TemporaryDirectory(prefix="tree-cost-") as tmp, test_server(Path(tmp)) as dbs:
        url = dbs.create()
        before = interpreter_for(Path(args.before_tree).resolve(), Path(tmp))
        this = (
            interpreter_for(Path(args.this_tree).resolve(), Path(tmp), "this")
            if args.this_tree
            else None
        )
        try:
            scheduler = start_service("scheduler", url, quiet)
            summariser = start_service("summariser", url, quiet)
            procs += [scheduler, summariser]
            env = {**quiet, "EPISODIC_SCHEDULER_ADDRESS": scheduler.address}
            ingests = {
                "before": start_service("ingest", url, env, python=before),
                "this": start_service("ingest", url, env, python=this),
            }
            recalls = {
                "before": start_service("recall", url, quiet, python=before),
                "this": start_service("recall", url, quiet, python=this),
            }
            procs += [*ingests.values(), *recalls.values()]
            completed = fill_dataset(ingests["this"], summariser, args.threads)
            print(f"dataset: {completed} episodes")

            calls: dict[tuple[str, str], Callable[[], object]] = {}
            pids: dict[tuple[str, str], int] = {}
            for tree in ("before", "this"):
                ingest = ig.IngestServiceStub(ingests[tree].channel())
                thread_id = ingest.CreateThread(
                    ipb.CreateThreadRequest(dataset=DATASET)
                ).thread.thread_id
                add = ipb.AddMessagesRequest(
                    thread_id=thread_id,
                    messages=[ipb.NewMessage(role=e.ROLE_USER, content="one more message " * 8)],
                )
                recall = rg.RecallServiceStub(recalls[tree].channel())
                listing = rpb.ListEpisodesRequest(dataset=DATASET, page_size=10)
                query = rpb.RecallRequest(
                    dataset=DATASET,
                    query="what about the budget",
                    include=[rpb.RECALL_INCLUDE_EPISODES],
                    context_episodes=5,
                )
                calls[("AddMessages", tree)] = lambda s=ingest, r=add: s.AddMessages(r)  # type: ignore[misc]
                calls[("ListEpisodes", tree)] = lambda s=recall, r=listing: s.ListEpisodes(r)  # type: ignore[misc]
                calls[("Recall", tree)] = lambda s=recall, r=query: s.Recall(r)  # type: ignore[misc]
                pids[("AddMessages", tree)] = ingests[tree].proc.pid
                pids[("ListEpisodes", tree)] = recalls[tree].proc.pid
                pids[("Recall", tree)] = recalls[tree].proc.pid

            results: dict[tuple[str, str], list[tuple[float, float, float]]] = {
                k: [] for k in calls
            }
            ratios: dict[str, list[float]] = {rpc: [] for rpc in RPCS}
            cpu_ratios: dict[str, list[float]] = {rpc: [] for rpc in RPCS}
            for rpc in RPCS:
                for tree in ("before", "this"):
                    measure(calls[(rpc, tree)], 0.5, pids[(rpc, tree)])  # type: ignore[arg-type]
                for r in range(args.repeats):
                    order = ("before", "this") if r % 2 == 0 else ("this", "before")
                    got = {
                        tree: measure(calls[(rpc, tree)], args.seconds, pids[(rpc, tree)])  # type: ignore[arg-type]
                        for tree in order
                    }
                    for tree, value in got.items():
                        results[(rpc, tree)].append(value)
                    ratios[rpc].append(got["before"][0] / got["this"][0])
                    if got["before"][2] > 0:
                        cpu_ratios[rpc].append(got["this"][2] / got["before"][2])
            print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")
            print(f"{'rpc':<13} {'tree':<7} {'calls/s':>8} {'p50 ms':>8} {'cpu ms':>8}")
            for (rpc, tree), values in results.items():
                rate = statistics.median(v[0] for v in values)
                p50 = statistics.median(v[1] for v in values)
                cpu = statistics.median(v[2] for v in values)
                print(f"{rpc:<13} {tree:<7} {rate:8.1f} {p50:8.2f} {cpu:8.2f}")
            for rpc in RPCS:
                print(
                    f"{rpc}: time per call, this / before = "
                    f"{statistics.median(ratios[rpc]):.2f} (rounds: "
                    f"{', '.join(f'{v:.2f}' for v in ratios[rpc])}); server CPU per call "
                    f"this / before = {statistics.median(cpu_ratios[rpc] or [float('nan')]):.2f}"
                )
        finally:
            for proc in reversed(procs):
                proc.terminate()


if __name__ == "__main__":
    main()
