"""Driving the suite for the quality benchmarks: LoCoMo written through the SDK and summarised
by the services, a question asked of Recall over gRPC, and rankings fused (RRF).
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any

from bench.harness import locomo
from bench.harness.report import log


def start_suite(
    stack: ExitStack,
    url: str,
    env: dict[str, str],
    *,
    start_timeout: float,
    call_timeout: float,
) -> tuple[dict[str, Any], Any]:
    """The four services on the database at ``url``, each with ``env`` (Ingest also told
    the Scheduler's address), and an ``EpisodicClient`` of them: the processes by name and
    the client, stopped and closed when ``stack`` closes."""
    from episodic.sdk.client import EpisodicClient
    from episodic.testing.processes import start_service

    procs: dict[str, Any] = {}
    for svc in ("scheduler", "summariser", "recall", "ingest"):
        extra = dict(env)
        if svc == "ingest":
            extra["EPISODIC_SCHEDULER_ADDRESS"] = procs["scheduler"].address
        procs[svc] = start_service(svc, url, extra, timeout=start_timeout)
        stack.callback(procs[svc].terminate)
    client = EpisodicClient(
        ingest=procs["ingest"].address,
        recall=procs["recall"].address,
        scheduler=procs["scheduler"].address,
        summariser=procs["summariser"].address,
        timeout=call_timeout,
    )
    stack.callback(client.close)
    return procs, client


def rrf(*rankings: list[str], k: int = 60) -> list[str]:
    score: dict[str, float] = {}
    for ranked in rankings:
        for rank, item in enumerate(ranked):
            score[item] = score.get(item, 0.0) + 1.0 / (k + rank + 1)
    return sorted(score, key=lambda i: -score[i])


def ingest_and_summarise(
    client: Any, engine: Any, conversations: list[locomo.Conversation], *, ingest: bool = True
) -> None:
    """Writes every LoCoMo session as one ended thread of its conversation's dataset, through
    the SDK, and drives the Scheduler and Summariser until every episode is completed."""
    from episodic.sdk.client import NewMessage

    # -- ingest through the pipeline (``ingest=False``: resume summarising what is there)
    started = time.monotonic()
    for conv in conversations if ingest else []:
        for session in conv.sessions:
            thread = client.start_thread(conv.dataset, label=session.thread_id)
            client.add_messages(
                thread.thread_id,
                [
                    NewMessage(
                        role=m.role,
                        content=m.content,
                        metadata={"name": m.name} if m.name else {},
                        created_at=m.ts,
                    )
                    for m in session.messages
                ],
            )
            client.end_thread(thread.thread_id)
    log(f"ingested in {time.monotonic() - started:.1f}s")
    expected = sum(len(c.sessions) for c in conversations)
    started = time.monotonic()
    with engine.connect() as conn:
        pending = conn.exec_driver_sql(
            "SELECT count(*) FROM episodes WHERE status = 'pending'"
        ).scalar_one()
    if pending < expected:
        client.run_sweep()  # explicit ends the Scheduler missed are caught up here
    while True:
        client.process_pending(50, timeout=900)
        with engine.connect() as conn:
            done = conn.exec_driver_sql(
                "SELECT count(*) FROM episodes WHERE status = 'completed'"
            ).scalar_one()
            failed = conn.exec_driver_sql(
                "SELECT count(*) FROM episodes WHERE status = 'failed'"
            ).scalar_one()
        log(f"  episodes completed {done}/{expected} (failed {failed})")
        if done + failed >= expected:
            break
    log(f"summarised in {time.monotonic() - started:.1f}s")


def _recall(
    stub: Any, dataset: str, question: str, asked_at: Any, literal: bool, **options: float
) -> tuple[list[str], float]:
    """Thread labels best first, and the call's milliseconds."""
    from episodic.v1 import recall_service_pb2 as rpb

    request = rpb.RecallRequest(
        dataset=dataset,
        query=question,
        include=[rpb.RECALL_INCLUDE_EPISODES],
        context_episodes=10,
        literal_query=literal,
        **options,
    )
    request.as_of.FromDatetime(asked_at)
    started = time.perf_counter()
    answer = stub.Recall(request, timeout=60)
    ms = (time.perf_counter() - started) * 1000
    return [e.episode.thread_label for e in answer.episodes.episodes], ms
