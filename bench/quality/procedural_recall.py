"""Procedural recall (issue 39): do the procedures the suite learns from an agent's past
conversations hand back the right actions for a task it has not seen?

    .venv/bin/python -m bench.quality.procedural_recall [--limit 250] [--unseen 50] [--seed 7]
        [--failures 0.25] [--throughput 20] [--rounds 2] [--in-process]

Data: tau-bench's retail tasks (``../shared/bench/tau_retail``, MIT) made into agent
conversations with tool calls by ``bench/quality/tau_conversations.py`` (deterministic for
``--seed``): tasks shuffled, ``--unseen`` held out as queries (each phrased as the user's
opening request, its own wording), the others written as one agent's history — a share
``--failures`` of them as failed or partly successful conversations (a write missing,
misordered, a wrong write tool, no write at all), the rest as successes.

What it does, against an embedded PostgreSQL and the four services as processes with the
offline defaults of ``episodic up`` (MiniLM embedder, extractive summariser, encryption at
rest):

1. Writes the history through Ingest (CreateThread, AddMessages with the tool calls,
   EndThread, and RecordOutcome — before the messages for half the threads, after EndThread
   for the others), then waits (with a deadline) until every episode's extraction is done
   and ListProcedures stops changing.
2. Asks Recall, for every unseen task, with ``include=[RECALL_INCLUDE_PROCEDURES]`` and the
   user's request as the query; scores whether the top procedure's write steps (the tools
   of its steps with ``writes`` set, in order) are exactly the task's gold write actions
   (names, in order), and whether one of the top 3 is.
3. Beside it, what plain episodic memory would hand back: the nearest successful history
   conversation by BM25 (Okapi, k1 1.2, b 0.75, computed in this script) over its user
   turns, and its write calls; and an oracle: the share of unseen tasks whose gold sequence
   is exactly that of some learned procedure (a perfect choice among what was learned).
4. Extraction's cost: Summariser throughput (episodes/s, EndThread of N threads at once, the
   Summariser idle before, to every episode's summary, extraction and chunk index done) on ``--throughput`` history conversations with their
   tool calls against the same conversations flattened into plain text (calls and results
   written into assistant turns), each in a fresh dataset, in ``--rounds`` ABBA rounds.
5. Recall latency over the unseen queries: episodes only (the default include),
   procedures only, and both, interleaved per query; p50/p95 and ratios.

The default (250 tasks: 200 conversations of history, 50 unseen) took 12 minutes at load
5–8 on the shared 2-core machine, most of it the Summariser on the history;
``--limit 500 --unseen 100 --throughput 40`` (all tasks) 21 minutes. ``--in-process`` computes the same extraction, merge and ranking in this process with
the suite's functions, without services (seconds: for iterating on the rules).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import grpc
import psycopg

from bench.quality.tau_conversations import DevSet, build, flatten
from episodic.testing.database import scratch_database
from episodic.testing.processes import start_service
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from episodic.v1 import recall_service_pb2 as rpb
from episodic.v1 import recall_service_pb2_grpc as rg

ROLES = {"user": e.ROLE_USER, "assistant": e.ROLE_ASSISTANT, "tool": e.ROLE_TOOL}
OUTCOMES = {
    "success": e.OUTCOME_SUCCESS,
    "failure": e.OUTCOME_FAILURE,
    "partial": e.OUTCOME_PARTIAL,
}
HISTORY = "agent-history"


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def pct(values: list[float], p: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def new_messages(messages: list[dict[str, Any]]) -> list[ipb.NewMessage]:
    out = []
    for m in messages:
        calls = [
            e.ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
            for c in m.get("tool_calls") or ()
        ]
        out.append(
            ipb.NewMessage(
                role=ROLES[m["role"]],
                content=m.get("content") or "",
                tool_calls=calls,
                tool_call_id=m.get("tool_call_id", ""),
                name=m.get("name", "") if m["role"] == "tool" else "",
            )
        )
    return out


def write_thread(
    ingest: ig.IngestServiceStub,
    dataset: str,
    messages: list[dict[str, Any]],
    outcome: str | None,
    *,
    outcome_first: bool,
    end: bool = True,
) -> str:
    t = ingest.CreateThread(ipb.CreateThreadRequest(dataset=dataset), timeout=30).thread
    if outcome and outcome_first:
        ingest.RecordOutcome(
            ipb.RecordOutcomeRequest(thread_id=t.thread_id, outcome=OUTCOMES[outcome]), timeout=30
        )
    ingest.AddMessages(
        ipb.AddMessagesRequest(thread_id=t.thread_id, messages=new_messages(messages)), timeout=60
    )
    if end:
        ingest.EndThread(ipb.EndThreadRequest(thread_id=t.thread_id), timeout=30)
    if outcome and not outcome_first:
        ingest.RecordOutcome(
            ipb.RecordOutcomeRequest(thread_id=t.thread_id, outcome=OUTCOMES[outcome]), timeout=30
        )
    return t.thread_id


def extraction_done(url: str, dataset: str | None) -> tuple[int, int]:
    """(episodes whose work is all done — summary, extraction, chunk index — , episodes)
    of the dataset (of every dataset when None)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'completed' AND semantic_status IN "
            "('completed', 'skipped', 'failed') AND NOT chunks_pending), count(*) "
            "FROM episodes WHERE %s::text IS NULL OR dataset = %s",
            (dataset, dataset),
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def wait_extracted(url: str, dataset: str | None, n: int | None, timeout: float) -> float:
    """Waits until the dataset's ``n`` episodes (every episode: None) are done; returns
    when (monotonic)."""
    deadline = time.monotonic() + timeout
    while True:
        done, total = extraction_done(url, dataset)
        if done >= (total if n is None else n):
            return time.monotonic()
        if time.monotonic() > deadline:
            raise AssertionError(f"{dataset}: {done} of {n} episodes extracted after {timeout}s")
        time.sleep(0.05)


def list_procedures(recall: rg.RecallServiceStub, dataset: str) -> list[e.Procedure]:
    out: list[e.Procedure] = []
    token = ""
    while True:
        page = recall.ListProcedures(
            rpb.ListProceduresRequest(dataset=dataset, page_size=100, page_token=token), timeout=30
        )
        out += page.procedures
        token = page.next_page_token
        if not token:
            return out


def writes_of(procedure: e.Procedure) -> tuple[str, ...]:
    return tuple(s.tool for s in procedure.steps if s.writes)


# ---- the baseline: BM25 over the user turns of successful conversations ----------------------

_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25:
    def __init__(self, documents: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(tokens(d)) for d in documents]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = statistics.fmean(self.lengths) if self.docs else 0.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
        self.k1, self.b = k1, b

    def top(self, query: str, k: int) -> list[int]:
        q = set(tokens(query))
        scores = []
        for i, d in enumerate(self.docs):
            s = 0.0
            norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
            for w in q:
                f = d.get(w)
                if f:
                    s += self.idf[w] * f * (self.k1 + 1) / (f + norm)
            scores.append((s, -i))
        return [-i for _, i in sorted(scores, reverse=True)[:k]]


# ---- the run ---------------------------------------------------------------------------------


def span_times(path: Path, datasets: dict[str, str]) -> dict[str, dict[str, list[float]]]:
    """Per dataset, the ms of each episode's ``summarise episode`` and ``semantic
    extraction`` spans (the Summariser's ``EPISODIC_TRACE_FILE``)."""
    out: dict[str, dict[str, list[float]]] = {}
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        s = json.loads(line)
        if s["name"] not in ("summarise episode", "semantic extraction"):
            continue
        dataset = datasets.get(s.get("attributes", {}).get("episodic.episode_id", ""))
        if dataset is None:
            continue
        ms = (s["end_time_unix_nano"] - s["start_time_unix_nano"]) / 1e6
        out.setdefault(re.sub(r"-\d+$", "", dataset), {}).setdefault(s["name"], []).append(ms)
    return out


def run(url: str, dev: DevSet, args: argparse.Namespace, spans: Path) -> dict[str, Any]:
    env = {
        "EPISODIC_EMBEDDING_PROVIDER": "minilm",
        "EPISODIC_SCHEDULER_POLL_INTERVAL": "1",
        "EPISODIC_SUMMARISER_POLL_INTERVAL": "1",
        "EPISODIC_LOG_LEVEL": "WARNING",
        "EPISODIC_ENCRYPTION": "auto",
    }
    out: dict[str, Any] = {}
    with ExitStack() as stack:
        procs: dict[str, Any] = {}
        for svc in ("scheduler", "summariser", "ingest", "recall"):
            extra = dict(env)
            if svc == "ingest":
                extra["EPISODIC_SCHEDULER_ADDRESS"] = procs["scheduler"].address
            if svc == "summariser":
                extra["EPISODIC_TRACE_FILE"] = str(spans)
            procs[svc] = start_service(svc, url, extra, timeout=180)
            stack.callback(procs[svc].terminate)
        ichan: grpc.Channel = procs["ingest"].channel()
        rchan: grpc.Channel = procs["recall"].channel()
        stack.callback(ichan.close)
        stack.callback(rchan.close)
        ingest = ig.IngestServiceStub(ichan)
        recall = rg.RecallServiceStub(rchan)
        # Warm the Recall's model (its first query loads it).
        recall.Recall(rpb.RecallRequest(dataset=HISTORY, query="warm up"), timeout=120)

        # 1. The history.
        print(f"writing {len(dev.history)} conversations ...", file=sys.stderr, flush=True)
        out["load_history"] = loadavg()
        t0 = time.monotonic()
        for i, c in enumerate(dev.history):
            write_thread(ingest, HISTORY, c.messages, c.outcome, outcome_first=i % 2 == 0)
        written = time.monotonic()
        wait_extracted(url, HISTORY, len(dev.history), args.settle_timeout)
        extracted = time.monotonic()
        previous = None
        deadline = time.monotonic() + args.settle_timeout
        while True:  # until ListProcedures stops changing
            procedures = list_procedures(recall, HISTORY)
            state = sorted(
                (p.procedure_id, p.success_count, p.failure_count, p.partial_count)
                for p in procedures
            )
            if state == previous:
                break
            if time.monotonic() > deadline:
                raise AssertionError("procedures did not settle")
            previous = state
            time.sleep(1.0)
        out["history_write_s"] = written - t0
        out["history_extract_s"] = extracted - t0
        out["procedures"] = procedures
        print(
            f"history: written in {written - t0:.1f} s, extracted {extracted - t0:.1f} s after "
            f"the first write; {len(procedures)} procedures",
            file=sys.stderr,
            flush=True,
        )

        # 2. Procedural recall of the unseen tasks.
        answers = []
        for _task, query in dev.unseen:
            r = recall.Recall(
                rpb.RecallRequest(
                    dataset=HISTORY,
                    query=query,
                    include=[rpb.RECALL_INCLUDE_PROCEDURES],
                    context_procedures=3,
                ),
                timeout=60,
            )
            answers.append(
                [(writes_of(p.procedure), p.relevance, p.procedure.goal) for p in r.procedures]
            )
        out["answers"] = answers

        # 5. Recall latency, interleaved per query (rotating which variant goes first).
        variants = {
            "episodes": [rpb.RECALL_INCLUDE_EPISODES],
            "procedures": [rpb.RECALL_INCLUDE_PROCEDURES],
            "both": [rpb.RECALL_INCLUDE_EPISODES, rpb.RECALL_INCLUDE_PROCEDURES],
        }
        latency: dict[str, list[float]] = {v: [] for v in variants}
        out["load_latency"] = loadavg()
        names = list(variants)
        for r_ in range(args.latency_rounds):
            for qi, (_, query) in enumerate(dev.unseen):
                k = (qi + r_) % len(names)
                for name in names[k:] + names[:k]:
                    t = time.perf_counter()
                    recall.Recall(
                        rpb.RecallRequest(dataset=HISTORY, query=query, include=variants[name]),
                        timeout=60,
                    )
                    latency[name].append((time.perf_counter() - t) * 1000)
        out["latency"] = latency
        out["load_latency_after"] = loadavg()

        # 4. Extraction's cost: the same conversations with tool calls and flattened.
        sample = [c for c in dev.history[: args.throughput]]
        rates: dict[str, list[float]] = {"tools": [], "flat": []}
        order = []
        for r_ in range(args.rounds):
            order += ["tools", "flat"] if r_ % 2 == 0 else ["flat", "tools"]
        out["load_throughput"] = loadavg()
        for i, kind in enumerate(order):
            dataset = f"throughput-{kind}-{i}"
            threads = []
            for c in sample:
                messages = c.messages if kind == "tools" else flatten(c.messages)
                threads.append(
                    write_thread(
                        ingest,
                        dataset,
                        messages,
                        c.outcome if kind == "tools" else None,
                        outcome_first=True,
                        end=False,
                    )
                )
            wait_extracted(url, None, None, args.settle_timeout)  # the summariser idle
            t0 = time.monotonic()
            for thread_id in threads:
                ingest.EndThread(ipb.EndThreadRequest(thread_id=thread_id), timeout=30)
            done = wait_extracted(url, dataset, len(sample), args.settle_timeout)
            rates[kind].append(len(sample) / (done - t0))
            print(f"throughput {kind}: {rates[kind][-1]:.2f} episodes/s", file=sys.stderr)
        out["rates"] = rates
        out["load_throughput_after"] = loadavg()
    with psycopg.connect(url, autocommit=True) as conn:
        datasets = {
            str(episode): dataset
            for episode, dataset in conn.execute("SELECT episode_id, dataset FROM episodes")
        }
    out["spans"] = span_times(spans, datasets)
    return out


def in_process(dev: DevSet, args: argparse.Namespace) -> dict[str, Any]:
    """The same extraction, merge and ranking computed in this process with the suite's own
    functions (``episodic.procedural``; the ranking as ``store.procedures.recall_procedures``
    orders): no services, no database, seconds — for iterating on the rules. The figures
    to report are the suite's (the default run)."""

    from episodic import procedural
    from episodic.config import EmbeddingSettings
    from episodic.procedural import WindowTurn
    from episodic.providers import make_embedder
    from episodic.tool_calls import ToolCall

    embedder = make_embedder(EmbeddingSettings(embedding_provider="minilm"), 384, bulk=True)
    candidates = []
    for i, c in enumerate(dev.history):
        turns = [
            WindowTurn(
                sequence=n,
                role=m["role"],
                content=m.get("content") or "",
                tool_calls=tuple(
                    ToolCall(t["id"], t["function"]["name"], t["function"]["arguments"])
                    for t in m.get("tool_calls") or ()
                ),
                tool_call_id=m.get("tool_call_id"),
                name=m.get("name"),
            )
            for n, m in enumerate(c.messages, 1)
        ]
        cand = procedural.extract(turns, episode_id=f"e{i}", thread_id=f"t{i}")
        if cand is None:
            continue
        candidates.append(cand)
    vectors = embedder.embed([c.goal for c in candidates])
    by_episode = {f"e{i}": c for i, c in enumerate(dev.history)}
    candidates = [
        procedural.Candidate(
            **{
                **{f: getattr(c, f) for f in c.__dataclass_fields__},
                "outcome": by_episode[c.episode_id].outcome,
                "embedding": v,
                "created_at": f"{int(c.episode_id[1:]):06d}",
            }
        )
        for c, v in zip(candidates, vectors, strict=True)
    ]
    drafts = procedural.merge(candidates)
    shown = [d for d in drafts if len(d.failure) <= len(d.success)]
    answers = []
    queries = embedder.embed([q for _, q in dev.unseen])
    for q in queries:
        ranked = procedural.rank(
            neighbours=args.neighbours,
            procedures=[
                (
                    d.signature,
                    len(d.success),
                    [procedural._cosine(q, c.embedding) for c in d.success],
                )
                for d in shown
            ],
        )
        top = {d.signature: d for d in shown}
        answers.append(
            [
                (tuple(s.tool for s in top[sig].steps if s.writes), score, top[sig].goal)
                for sig, score in ranked[:3]
            ]
        )

    class P:  # the shape of a listed procedure that report() reads
        def __init__(self, d: Any) -> None:
            self.steps = d.steps
            self.success_count, self.failure_count = len(d.success), len(d.failure)
            self.partial_count = len(d.partial)

    return {"procedures": [P(d) for d in drafts], "answers": answers}


def report(dev: DevSet, out: dict[str, Any], args: argparse.Namespace) -> None:
    procedures: list[e.Procedure] = out["procedures"]
    learned = {writes_of(p) for p in procedures}
    successes = [c for c in dev.history if c.outcome == "success"]
    bm25 = BM25(
        [" ".join(m["content"] for m in c.messages if m["role"] == "user") for c in successes]
    )

    rows: dict[str, dict[str, list[bool]]] = {}

    def score(method: str, group: str, hit: bool) -> None:
        for g in (group, "all"):
            rows.setdefault(method, {}).setdefault(g, []).append(hit)

    misses: list[str] = []
    for (task, query), answer in zip(dev.unseen, out["answers"], strict=True):
        gold = task.gold
        group = "1 write" if len(gold) == 1 else "2+ writes"
        top = [w for w, _, _ in answer]
        score("procedural recall, top 1", group, bool(top) and top[0] == gold)
        score("procedural recall, top 3", group, gold in top[:3])
        nearest = bm25.top(query, 3)
        score("BM25 nearest conversation, top 1", group, successes[nearest[0]].writes == gold)
        score(
            "BM25 nearest conversation, top 3",
            group,
            any(successes[i].writes == gold for i in nearest),
        )
        score("oracle: some learned procedure", group, gold in learned)
        if top and top[0] != gold and gold in learned and len(misses) < args.show_misses:
            misses.append(
                f"  gold {'>'.join(gold)}\n    query: {query}\n    top:   {'>'.join(top[0])} "
                f"({answer[0][1]:.2f}) goal: {answer[0][2][:160]}"
            )

    n_groups = Counter("1 write" if len(t.gold) == 1 else "2+ writes" for t, _ in dev.unseen)
    kinds = Counter(c.kind for c in dev.history)
    print(
        f"\nProcedural recall on tau-bench retail (seed {args.seed}): {len(dev.history)} history "
        f"conversations ({', '.join(f'{v} {k}' for k, v in kinds.most_common())}), "
        f"{len(dev.unseen)} unseen tasks ({n_groups['1 write']} with one write, "
        f"{n_groups['2+ writes']} with several). Embedder MiniLM (the default), offline "
        "extractor ('rules')."
    )
    support = Counter(min(p.success_count, 5) for p in procedures)
    print(
        f"Learned: {len(procedures)} procedures; successes per procedure "
        + ", ".join(f"{'5+' if k == 5 else k}: {v}" for k, v in sorted(support.items()))
        + f"; failures counted {sum(p.failure_count for p in procedures)} of "
        f"{sum(1 for c in dev.history if c.outcome == 'failure')} written, partials "
        f"{sum(p.partial_count for p in procedures)} of "
        f"{sum(1 for c in dev.history if c.outcome == 'partial')}.\n"
    )
    header = f"{'exact write actions':<36} | {'all':>13} | {'1 write':>13} | {'2+ writes':>13}"
    print(header)
    print("-" * len(header))
    for method, groups in rows.items():
        cells = []
        for g in ("all", "1 write", "2+ writes"):
            hits = groups.get(g, [])
            cells.append(f"{sum(hits) / len(hits):6.1%} ({sum(hits):>3})" if hits else f"{'-':>13}")
        print(f"{method:<36} | " + " | ".join(f"{c:>13}" for c in cells))

    if "latency" not in out:
        _misses(misses)
        return
    lat = out["latency"]
    base = pct(lat["episodes"], 50)
    print(
        f"\nRecall latency over the {len(dev.unseen)} unseen queries x {args.latency_rounds} "
        f"rounds, interleaved (loadavg {out['load_latency']} -> {out['load_latency_after']}):"
    )
    print(f"{'include':<22} | {'p50 ms':>7} | {'p95 ms':>7} | {'p50 / episodes':>14}")
    for name, label in (
        ("episodes", "episodes (default)"),
        ("procedures", "procedures only"),
        ("both", "episodes + procedures"),
    ):
        p50 = pct(lat[name], 50)
        print(f"{label:<22} | {p50:7.1f} | {pct(lat[name], 95):7.1f} | {p50 / base:13.2f}x")

    rates = out["rates"]
    tools, flat = statistics.median(rates["tools"]), statistics.median(rates["flat"])
    print(
        f"\nSummariser throughput, {args.throughput} conversations ended at once, to every "
        f"episode's summary, extraction and chunk index done, median of {args.rounds} (ABBA; loadavg "
        f"{out['load_throughput']} -> {out['load_throughput_after']}):\n"
        f"  with tool calls {tools:.2f} episodes/s ({1000 / tools:.0f} ms each), flattened "
        f"into text {flat:.2f} episodes/s ({1000 / flat:.0f} ms each): with/without = "
        f"{tools / flat:.2f}x (runs: {', '.join(f'{r:.2f}' for r in rates['tools'])} / "
        f"{', '.join(f'{r:.2f}' for r in rates['flat'])})"
    )
    spans = out.get("spans") or {}
    if spans:
        print(
            "Per episode, from the Summariser's spans (ms, mean / p50): summary = 'summarise "
            "episode', extraction = 'semantic extraction' (the procedure candidate: window "
            "read, rules, the goal's vector, the dataset's procedures recomputed)"
        )
        for key, label in (
            (HISTORY, "history (tool calls)"),
            ("throughput-tools", "throughput, tool calls"),
            ("throughput-flat", "throughput, flattened"),
        ):
            times = spans.get(key, {})
            cells = []
            for name in ("summarise episode", "semantic extraction"):
                v = times.get(name, [])
                cells.append(
                    f"{statistics.fmean(v):7.1f} / {pct(v, 50):7.1f}" if v else f"{'-':>17}"
                )
            print(f"  {label:<24} summary {cells[0]}   extraction {cells[1]}")
    print(
        f"History: {len(dev.history)} conversations written in {out['history_write_s']:.0f} s, "
        f"all extracted {out['history_extract_s']:.0f} s after the first write "
        f"(loadavg at start {out['load_history']})."
    )
    _misses(misses)


def _misses(misses: list[str]) -> None:
    if misses:
        print("\nSome top-1 misses whose gold was learned:")
        print("\n".join(misses))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--unseen", type=int, default=50, help="tasks held out as queries")
    parser.add_argument("--failures", type=float, default=0.25, help="share of failed history")
    parser.add_argument(
        "--limit", type=int, default=250, help="use this many tasks (after shuffling; 500: all)"
    )
    parser.add_argument("--throughput", type=int, default=20, help="conversations per run")
    parser.add_argument("--rounds", type=int, default=2, help="throughput runs of each kind")
    parser.add_argument("--latency-rounds", type=int, default=2)
    parser.add_argument("--settle-timeout", type=float, default=900)
    parser.add_argument("--show-misses", type=int, default=8)
    parser.add_argument("--admin-url", help="a PostgreSQL admin URL instead of an embedded one")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="the rules and ranking in this process, no services (seconds; for iterating)",
    )
    parser.add_argument(
        "--neighbours", type=int, help="with --in-process: procedural.RANK_NEIGHBOURS to try"
    )
    parser.add_argument("--dump", type=Path, help="write the dev set as JSONL here and exit")
    args = parser.parse_args()
    dev = build(seed=args.seed, unseen=args.unseen, failures=args.failures, limit=args.limit)
    if args.dump:
        with args.dump.open("w") as f:
            for c in dev.history:
                f.write(json.dumps(c.__dict__) + "\n")
        return
    if args.in_process:
        report(dev, in_process(dev, args), args)
        return
    with (
        scratch_database(args.admin_url, prefix="procedural-bench-") as url,
        tempfile.TemporaryDirectory(prefix="procedural-spans-") as tmp,
    ):
        out = run(url, dev, args, Path(tmp) / "summariser-spans.jsonl")
    report(dev, out, args)


if __name__ == "__main__":
    main()
