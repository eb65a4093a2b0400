"""What one Recall call sends to the database, in-process: statements per call and the time
spent in each, on a store built by bench/scale/recall_scale.py (or any store of ``ds-NNNNN``
datasets).

    .venv/bin/python -m bench.speed.recall_profile --url URL [--queries 300] [--datasets 10000]

The Recall servicer runs in this process on an engine configured as the service's (the
hashing embedder, the test keyring); a listener on the engine records every statement.
Each dataset's pages are read first by a second servicer with caches of its own, so the
measured call finds the pages warm (as bench/scale/recall_scale.py's untimed first read does)
but its own caches cold: a dataset this process has not seen. Run it with an older
checkout's interpreter, from this one (``DIR/.venv/bin/python -m bench.speed.recall_profile``: the
servicer is DIR's, this script is this checkout's) to
count main's statements the same way.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the store (e.g. recall_scale's)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--datasets", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)

    from episodic.testing.processes import TEST_ENV

    os.environ.update(TEST_ENV)  # the settings the benches' services run with
    from sqlalchemy import event

    from episodic import access
    from episodic.config import EmbeddingSettings, PrivacySettings, Settings
    from episodic.providers import make_embedder
    from episodic.services.recall.__main__ import engine_options
    from episodic.services.recall.servicer import RecallServicer
    from episodic.store.db import make_engine
    from episodic.store.vault import make_vault
    from episodic.testing.keys import keyring_file
    from episodic.v1 import recall_service_pb2 as pb

    settings = Settings()
    engine = make_engine(args.url, pool_size=2, **engine_options(settings))

    def servicer() -> RecallServicer:
        return RecallServicer(
            engine,
            settings.recall,
            make_embedder(EmbeddingSettings(embedding_provider="hashing"), 384),
            make_vault(PrivacySettings(master_key_file=keyring_file())),
        )

    measured, warm = servicer(), servicer()
    sent: collections.Counter[str] = collections.Counter()
    spent: collections.Counter[str] = collections.Counter()
    counting = [False]

    @event.listens_for(engine, "before_cursor_execute")
    def started(conn, cursor, statement, params, context, many):  # type: ignore[no-untyped-def]
        context._profile_started = time.perf_counter()

    @event.listens_for(engine, "after_cursor_execute")
    def finished(conn, cursor, statement, params, context, many):  # type: ignore[no-untyped-def]
        if counting[0]:
            name = " ".join(statement.split())[:100]
            sent[name] += 1
            spent[name] += time.perf_counter() - context._profile_started

    class NoDeadline:
        def time_remaining(self) -> None:
            return None

    rng = random.Random(args.seed)
    vocab = [f"w{i}" for i in range(1, 5001)]

    def request() -> pb.RecallRequest:
        return pb.RecallRequest(
            dataset=f"ds-{rng.randrange(args.datasets):05d}",
            query=" ".join(vocab[int(5000 * rng.random() ** 3)] for _ in range(3)),
            include=[pb.RECALL_INCLUDE_EPISODES],
        )

    took: list[float] = []
    with access.running_as(access.ANONYMOUS):
        for _ in range(20):
            measured.Recall(request(), NoDeadline())  # type: ignore[arg-type]
        for _ in range(args.queries):
            r = request()
            warm.Recall(r, NoDeadline())  # type: ignore[arg-type]
            counting[0] = True
            t = time.perf_counter()
            measured.Recall(r, NoDeadline())  # type: ignore[arg-type]
            took.append(time.perf_counter() - t)
            counting[0] = False
    n = args.queries
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{n} calls in-process: p50 {1000 * statistics.median(took):.2f} ms, "
        f"mean {1000 * statistics.fmean(took):.2f} ms; "
        f"{sum(sent.values()) / n:.2f} statements per call:"
    )
    for name, count in sent.most_common():
        print(f"  {count / n:5.2f} per call, {1000 * spent[name] / n:6.2f} ms per call: {name}")
    print(f"  database total {1000 * sum(spent.values()) / n:.2f} ms per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
