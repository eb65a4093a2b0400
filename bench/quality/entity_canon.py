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

    .venv/bin/python -m bench.quality.entity_canon [--source summariser|mentions] [--cache FILE]
        [--limit N] [--sample 30] [--seed 13]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path


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
    parser.add_argument(
        "--source",
        choices=("summariser", "mentions"),
        default="summariser",
        help="summariser: the entities the extractive summariser stores per episode (what "
        "the canon gets); mentions: every entity the extractor finds in a session, before "
        "the summariser folds and caps them (more spellings)",
    )
    parser.add_argument("--cache", help="JSON file keeping the summariser's entities between runs")
    args = parser.parse_args()

    from bench.harness.locomo_json import DEFAULT_PATH, load_sessions
    from episodic.providers import ExtractiveSummariser, MiniLMEmbedder, SummaryRequest
    from episodic.providers.entities import normalise_entities
    from episodic.providers.extractive import extract_entities
    from episodic.store import entities
    from episodic.store.db import make_engine
    from episodic.store.recall_queries import RecallFilters, rank_episodes
    from episodic.testing.database import scratch_database
    from episodic.testing.keys import test_vault
    from tests.recall.factory import make_episode

    print(f"{os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.2f}")
    sessions = load_sessions(DEFAULT_PATH)[: args.limit]
    extracted = []
    started = time.perf_counter()
    cache = Path(args.cache) if args.cache else None
    if args.source == "mentions":
        for s in sessions:
            names = sorted({m.name for m in s.messages if m.name})
            found = extract_entities([m.content for m in s.messages], names)
            extracted.append((s, normalise_entities(found)))
        print(f"{len(sessions)} LoCoMo sessions: every entity the extractor finds")
    elif cache is not None and cache.exists():
        stored = json.loads(cache.read_text())
        extracted = [(s, stored[s.key]) for s in sessions]
        print(f"{len(sessions)} LoCoMo sessions: the summariser's entities from {cache}")
    else:
        summariser = ExtractiveSummariser(MiniLMEmbedder(threads=1))
        for s in sessions:
            result = summariser.summarise(
                SummaryRequest(s.messages, window_start_sequence=s.messages[0].sequence)
            )
            extracted.append((s, normalise_entities(result.entities)))
        print(
            f"{len(sessions)} LoCoMo sessions summarised (extractive) in "
            f"{time.perf_counter() - started:.0f} s"
        )
        if cache is not None:
            cache.write_text(json.dumps({s.key: e for s, e in extracted}))

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
        ranking = {
            "query": None,
            "query_vector": None,
            "similarity_weight": 0.7,
            "recency_weight": 0.3,
            "limit": 100,
        }

        def filtered(conn, key, alias, canon):  # type: ignore[no-untyped-def]
            plain = RecallFilters(entities=[alias])
            filters = entities.resolve_filters(conn, key, plain) if canon else plain
            rows, _ = rank_episodes(conn, key=key, filters=filters, **ranking)
            return len(rows)

        exact_found = canon_found = 0
        for dataset, e in groups:
            with engine.connect() as conn:
                key = vault.for_read(conn, dataset)
                for alias, _ in e.aliases:
                    exact_found += filtered(conn, key, alias, False)
                    canon_found += filtered(conn, key, alias, True)
        aliases_n = sum(len(e.aliases) for _, e in groups)
        print(
            f"\nentity filter by each of the {aliases_n} aliases of those {len(groups)} "
            f"entities: {exact_found} episodes spelled exactly, {canon_found} through the canon "
            f"({canon_found / max(exact_found, 1):.2f}x; mean {exact_found / max(aliases_n, 1):.2f}"
            f" -> {canon_found / max(aliases_n, 1):.2f} per filter)"
        )

        # What resolution costs a filtered read: every entity name of every conversation,
        # exact and through the canon, alternating which goes first.
        exact_s: list[float] = []
        canon_read_s: list[float] = []
        names = [(d, sp) for d in sorted(spellings_of) for sp in sorted(spellings_of[d])]
        for round_ in range(args.reads):
            for i, (dataset, spelling) in enumerate(names):
                with engine.connect() as conn:
                    key = vault.for_read(conn, dataset)
                    for canon in (False, True) if (i + round_) % 2 else (True, False):
                        t0 = time.perf_counter()
                        filtered(conn, key, spelling, canon)
                        (canon_read_s if canon else exact_s).append(time.perf_counter() - t0)
        read_cost = (
            f"filtered read {_ms(canon_read_s)} through the canon vs {_ms(exact_s)} exact "
            f"({statistics.median(canon_read_s) / statistics.median(exact_s):.2f}x)"
            if exact_s
            else "no entity with several spellings, so no filtered reads to compare"
        )
        print(
            f"cost, same run: write {_ms(canon_s)} to file an episode's entities vs "
            f"{_ms(insert_s)} to insert the episode and its messages "
            f"({statistics.median(canon_s) / statistics.median(insert_s):.2f}x); {read_cost}"
        )
        engine.dispose()
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
