"""The entity canon on LoCoMo: how many spellings collapse into how many entities.

Every LoCoMo session is summarised by the offline extractive summariser (MiniLM, as the
Summariser runs by default) and stored as one episode of its conversation's dataset, with
its entities filed in the canon exactly as the Summariser does (``record_mentions`` in the
episode's transaction; encryption on). Then it prints, per conversation, the distinct
entity spellings the episodes carry and the canonical entities they became; a random
sample of alias groups (entities with more than one spelling) to check by eye; how many
episodes an entity filter reaches spelled exactly versus through the canon; and what the
canon costs on the write and the filtered read, against the statements it sits beside, in
the same run.

    .venv/bin/python -m bench.entity_canon [--limit N] [--sample 30] [--seed 13]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections import defaultdict
from datetime import timedelta


def _ms(values: list[float]) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)
    p50 = ordered[len(ordered) // 2]
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="at most N sessions")
    parser.add_argument("--sample", type=int, default=30, help="alias groups to print")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--reads", type=int, default=3, help="rounds of filtered reads")
    args = parser.parse_args()

    from bench.summariser_quality import DEFAULT_PATH, load_sessions
    from episodic.providers import ExtractiveSummariser, MiniLMEmbedder, SummaryRequest
    from episodic.providers.entities import normalise_entities
    from episodic.store import entities
    from episodic.store.db import make_engine
    from episodic.store.recall_queries import RecallFilters, rank_episodes
    from episodic.testing.database import scratch_database
    from episodic.testing.keys import test_vault
    from tests.recall.factory import make_episode

    print(f"{os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.2f}")
    sessions = load_sessions(DEFAULT_PATH)[: args.limit]
    embedder = MiniLMEmbedder(threads=1)
    summariser = ExtractiveSummariser(embedder)
    extracted = []
    started = time.perf_counter()
    for s in sessions:
        result = summariser.summarise(
            SummaryRequest(s.messages, window_start_sequence=s.messages[0].sequence)
        )
        extracted.append((s, normalise_entities(result.entities)))
    print(
        f"{len(sessions)} LoCoMo sessions summarised (extractive) in "
        f"{time.perf_counter() - started:.0f} s"
    )

    vault = test_vault()
    with scratch_database() as url:
        engine = make_engine(url, pool_size=2)
        insert_s: list[float] = []
        canon_s: list[float] = []
        spellings_of: dict[str, set[str]] = defaultdict(set)
        for s, spellings in extracted:
            dataset = f"locomo-{s.conversation}"
            spellings_of[dataset].update(spellings)
            with engine.begin() as conn:
                t0 = time.perf_counter()
                make_episode(
                    conn,
                    dataset,
                    [m.content for m in s.messages],
                    ended_at=s.messages[-1].created_at + timedelta(seconds=1),
                    entities=spellings,
                    index=False,
                    summary="",
                )
                t1 = time.perf_counter()
                entities.record_mentions(conn, vault.for_write(conn, dataset), spellings)
                t2 = time.perf_counter()
            insert_s.append(t1 - t0)
            canon_s.append(t2 - t1)

        print("\nper conversation: distinct entity spellings on episodes -> canonical entities")
        groups = []
        total_spellings = total_entities = 0
        for dataset in sorted(spellings_of):
            with engine.connect() as conn:
                key = vault.for_read(conn, dataset)
                found, _ = entities.list_entities(conn, key, after=None, limit=100_000)
            total_spellings += len(spellings_of[dataset])
            total_entities += len(found)
            merged = [e for e in found if len(e.aliases) > 1]
            groups.extend((dataset, e) for e in merged)
            print(
                f"  {dataset:16} {len(spellings_of[dataset]):4} -> {len(found):4} "
                f"({len(merged)} entities with several spellings)"
            )
        print(
            f"  {'all':16} {total_spellings:4} -> {total_entities:4} "
            f"({100 * (1 - total_entities / max(total_spellings, 1)):.1f}% fewer)"
        )

        rng = random.Random(args.seed)
        print(f"\n{min(args.sample, len(groups))} random alias groups (of {len(groups)}):")
        for dataset, e in sorted(rng.sample(groups, min(args.sample, len(groups))), key=str):
            aliases = ", ".join(f"{a!r}×{n}" for a, n in e.aliases)
            print(f"  {dataset:16} {e.name!r}: {aliases}")

        # Entity filters: every alias of an entity with several spellings, exact vs canon.
        exact_found = canon_found = 0
        exact_s: list[float] = []
        canon_read_s: list[float] = []
        for _ in range(args.reads):
            exact_found = canon_found = 0
            for dataset, e in groups:
                with engine.connect() as conn:
                    key = vault.for_read(conn, dataset)
                    for alias, _ in e.aliases:
                        plain = RecallFilters(entities=[alias])
                        ranking = {
                            "query": None,
                            "query_vector": None,
                            "similarity_weight": 0.7,
                            "recency_weight": 0.3,
                            "limit": 100,
                        }
                        t0 = time.perf_counter()
                        rows, _ = rank_episodes(conn, key=key, filters=plain, **ranking)
                        t1 = time.perf_counter()
                        resolved = entities.resolve_filters(conn, key, plain)
                        canon_rows, _ = rank_episodes(conn, key=key, filters=resolved, **ranking)
                        t2 = time.perf_counter()
                        exact_s.append(t1 - t0)
                        canon_read_s.append(t2 - t1)
                        exact_found += len(rows)
                        canon_found += len(canon_rows)
        aliases_n = sum(len(e.aliases) for _, e in groups)
        print(
            f"\nentity filter by each of the {aliases_n} aliases of those {len(groups)} "
            f"entities: {exact_found} episodes spelled exactly, {canon_found} through the canon "
            f"({canon_found / max(exact_found, 1):.2f}x; mean {exact_found / max(aliases_n, 1):.2f}"
            f" -> {canon_found / max(aliases_n, 1):.2f} per filter)"
        )
        print(
            f"cost, same run: write {_ms(canon_s)} to file an episode's entities vs "
            f"{_ms(insert_s)} to insert the episode and its messages "
            f"({statistics.median(canon_s) / statistics.median(insert_s):.2f}x); "
            f"filtered read {_ms(canon_read_s or [0.0])} through the canon vs {_ms(exact_s)} exact "
            f"({statistics.median(canon_read_s) / statistics.median(exact_s or [1.0]):.2f}x)"
        )
        engine.dispose()
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
