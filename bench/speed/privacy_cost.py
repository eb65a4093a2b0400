"""What encryption at rest costs per call: AddMessages and Recall through the real Ingest and
Recall services, on two datasets of one database holding the same LoCoMo text — one sealed
with its data key, one stored in the clear — measured in the same run, alternating rounds
(this machine is noisy: compare the two columns, not runs).

Sealed, AddMessages pays an AES-GCM seal of content and metadata per message (and reads the
dataset's key id with the thread lock it takes anyway); Recall pays one more round trip
(the query's lexemes from PostgreSQL, blinded in Python) and opening the returned episodes.

    python -m bench.speed.privacy_cost [--conversations 3] [--calls 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.harness import REPO


def _timed(call: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _recaller(client: Any, dataset: str, questions: list[str]) -> Callable[[], object]:
    asked = itertools.cycle(questions)
    return lambda: client.recall(dataset, next(asked), limit=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=3, help="LoCoMo conversations")
    parser.add_argument("--calls", type=int, default=300, help="calls per method and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", help="admin URL of a PostgreSQL with pgvector")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))

    from bench.harness import locomo
    from episodic.sdk.client import EpisodicClient, NewMessage
    from episodic.store.db import make_engine
    from episodic.testing.database import scratch_database
    from episodic.testing.keys import test_vault
    from episodic.testing.processes import start_service
    from tests.recall.factory import make_episode

    conversations = locomo.load(limit=args.conversations)
    modes = {"sealed": "privacy-sealed", "clear": "privacy-clear"}
    with scratch_database(args.database_url, "episodic-privacy-") as url:
        engine = make_engine(url, pool_size=2)
        episodes = 0
        with engine.begin() as conn:
            test_vault(encrypt=True).for_write(conn, modes["sealed"])
            test_vault(encrypt=False).for_write(conn, modes["clear"])
            for dataset in modes.values():
                for conv in conversations:
                    for session in conv.sessions:
                        make_episode(
                            conn,
                            dataset,
                            [m.text for m in session.messages],
                            ended_at=session.messages[-1].ts,
                            label=session.thread_id,
                        )
                        episodes += 1
        engine.dispose()
        env = {"EPISODIC_EMBEDDING_PROVIDER": "hashing", "EPISODIC_LOG_LEVEL": "WARNING"}
        ingest = start_service("ingest", url, env)
        recall = start_service("recall", url, env)
        questions = [q.question for c in conversations for q in c.questions]
        text = [m for c in conversations for s in c.sessions for m in s.messages][:10]
        batch = [NewMessage(m.role, m.content, metadata={"name": m.name}) for m in text]
        try:
            with EpisodicClient(ingest=ingest.address, recall=recall.address) as client:
                threads = {
                    mode: client.create_thread(dataset, label="bench").thread_id
                    for mode, dataset in modes.items()
                }
                calls = {
                    "AddMessages (10 msgs)": {
                        mode: (lambda t=threads[mode]: client.add_messages(t, batch))
                        for mode in modes
                    },
                    "Recall (top 10)": {
                        mode: _recaller(client, dataset, questions)
                        for mode, dataset in modes.items()
                    },
                }
                # Warm up (keys unwrapped, connections open).
                for per_mode in calls.values():
                    for call in per_mode.values():
                        _timed(call, 20)
                results: dict[tuple[str, str], list[float]] = {}
                for _ in range(args.rounds):
                    for name, per_mode in calls.items():
                        for mode in ("sealed", "clear") if _ % 2 == 0 else ("clear", "sealed"):
                            results.setdefault((name, mode), []).extend(
                                _timed(per_mode[mode], args.calls)
                            )
        finally:
            ingest.terminate()
            recall.terminate()
    print(
        f"\nencryption at rest, per call through the services: {episodes // 2} LoCoMo "
        f"episodes per dataset, {args.rounds} rounds x {args.calls} calls, alternating\n"
    )
    print(
        f"{'call':<24}{'sealed p50':>12}{'clear p50':>12}{'ratio':>8}{'sealed/s':>10}{'clear/s':>9}"
    )
    for name in calls:
        sealed, clear = results[(name, "sealed")], results[(name, "clear")]
        p_s, p_c = statistics.median(sealed), statistics.median(clear)
        print(
            f"{name:<24}{p_s:>10.2f}ms{p_c:>10.2f}ms{p_s / p_c:>8.2f}"
            f"{1000 * len(sealed) / sum(sealed):>10.0f}{1000 * len(clear) / sum(clear):>9.0f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
