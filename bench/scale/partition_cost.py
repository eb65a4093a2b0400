"""What hash partitioning by dataset (revision 0010) costs Recall's SQL, in one run.

    .venv/bin/python -m bench.scale.partition_cost [--episodes 20000] [--datasets 200] [--queries 1000]

Fills a database at head (partitioned, 8 partitions) with bench.speed.recall_speed's synthetic
store, clones it (CREATE DATABASE … TEMPLATE) and migrates the clone down to 0009 (the
plain tables, same rows). Then runs Recall's ranking statement (query + vector, exactly as
the service sends it) for the same random datasets and 3-word queries on both, interleaved
in a shuffled order, after an untimed read of each dataset on both; prints p50/p95/p99
and the partitioned/plain ratios, and the load average.

Then what the routing lookup of a request that names an episode by id (GetEpisode,
RetryEpisode, DeleteEpisode) costs: for random episodes, interleaved, on the partitioned
database (``--by-id`` reads of each variant):

* ``lookup+routed``: the lookup by id (every partition, through the routing index), then
  the read naming the dataset (one partition) — what the services do;
* ``lookup+by-id``: the lookup, then the read by id alone (every partition again) — what
  they did before every statement named its dataset;
* ``routed``: the read naming the dataset alone (a request that carried its dataset);

and as the bare baseline the read by id alone on the plain clone (one table, one index).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

import psycopg
from pgvector.psycopg import register_vector

from bench.harness import REPO
from bench.harness.recall_sql import psycopg_sql, query_term_params
from bench.harness.report import log, percentiles
from bench.harness.stores import build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20_000)
    parser.add_argument("--datasets", type=int, default=200)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--by-id", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from episodic.providers import HashingEmbedder
    from episodic.store import migrate
    from episodic.store.episodes import VISIBLE_COLUMNS, episode_columns
    from episodic.store.recall_queries import recall_statement, threshold_params, unfiltered_params
    from episodic.testing.database import scratch_database, with_database

    rng = random.Random(args.seed)
    print(f"load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with scratch_database(None, "episodic-partition-") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            build(conn, args.episodes, args.datasets, 384)
        name = url.partition("?")[0].rsplit("/", 1)[1]
        plain_url = with_database(url, name + "_plain")
        with psycopg.connect(with_database(url, "postgres"), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}_plain" TEMPLATE "{name}"')
        log("migrating the clone down to 0009 (plain tables) …")
        migrate.downgrade(plain_url, 384, "0009")
        with psycopg.connect(plain_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
            kinds = conn.execute("SELECT count(*) FROM pg_class WHERE relkind = 'p'").fetchone()
            assert kinds == (0,), "the clone still has partitioned tables"

        statement = psycopg_sql(recall_statement(with_query=True, with_vector=True))
        hasher = HashingEmbedder(384)
        vocab = [f"w{i}" for i in range(1, 5001)]
        work = []
        for _ in range(args.queries):
            words = [vocab[int(5000 * rng.random() ** 3)] for _ in range(3)]
            query = " ".join(words)
            work.append(
                {
                    "dataset": f"ds-{rng.randrange(args.datasets):04d}",
                    "query": query,
                    "qvec": hasher.embed_query(query),
                    **unfiltered_params(),
                    "ws": 0.7,
                    "wr": 0.3,
                    "limit": 3,
                    **threshold_params(0.0, 0.0, None),
                }
            )
        conns = {
            "partitioned": psycopg.connect(url, autocommit=True),
            "plain": psycopg.connect(plain_url, autocommit=True),
        }
        for conn in conns.values():
            register_vector(conn)
        times: dict[str, list[float]] = {k: [] for k in conns}
        log(f"measuring {len(work)} queries per layout …")
        for params in work:
            # The query's terms as Recall reads them (lexemes, word forms, weights, word
            # pairs), untimed: the statement binds them all.
            params.update(
                query_term_params(
                    conns["partitioned"], str(params["dataset"]), str(params["query"])
                )
            )
            for conn in conns.values():  # untimed: the dataset's pages in shared buffers
                conn.execute(statement, params).fetchall()
            order = list(conns.items())
            rng.shuffle(order)
            for key, conn in order:
                started = time.perf_counter()
                conn.execute(statement, params).fetchall()
                times[key].append(time.perf_counter() - started)
        for conn in conns.values():
            conn.close()
        stats = {k: percentiles(v) for k, v in times.items()}
        print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(
            f"Recall's SQL, {args.episodes} episodes over {args.datasets} datasets, "
            f"{args.queries} queries per layout:"
        )
        for key, s in stats.items():
            print(
                f"  {key:12s} p50 {s['p50'] * 1000:7.2f} ms  p95 {s['p95'] * 1000:7.2f} ms  "
                f"p99 {s['p99'] * 1000:7.2f} ms"
            )
        for p in ("p50", "p99"):
            print(f"  partitioned/plain at {p}: {stats['partitioned'][p] / stats['plain'][p]:.2f}x")
        by_id(url, plain_url, args.by_id, rng, episode_columns, VISIBLE_COLUMNS)
    return 0


def by_id(  # type: ignore[no-untyped-def]
    url: str, plain_url: str, n: int, rng: random.Random, episode_columns, visible_columns
) -> None:
    """The routing lookup's cost for a request naming an episode by id (see the module
    docstring)."""
    # the episodes' half of episodic.store.owners.require_record's statement.
    lookup = "SELECT dataset FROM episodes WHERE episode_id = %(id)s"
    # episodic.store.episodes.get_episode's, naming the dataset (now) or not (before).
    routed = psycopg_sql(
        f"SELECT {episode_columns('episodes', ':dataset')} FROM episodes "
        "WHERE dataset = :dataset AND episode_id = :id"
    )
    unrouted = (
        f"SELECT {', '.join('episodes.' + c for c in visible_columns)}, "
        "(SELECT label FROM threads t WHERE t.thread_id = episodes.thread_id) AS thread_label "
        "FROM episodes WHERE episode_id = %(id)s"
    )
    part = psycopg.connect(url, autocommit=True)
    plain = psycopg.connect(plain_url, autocommit=True)
    picked = part.execute(
        "SELECT episode_id, dataset FROM episodes ORDER BY random() LIMIT %s", (n,)
    ).fetchall()

    def lookup_then(read: str):  # type: ignore[no-untyped-def]
        def run(episode_id, dataset):  # type: ignore[no-untyped-def]
            found = part.execute(lookup, {"id": episode_id}).fetchone()
            assert found == (dataset,)
            part.execute(read, {"id": episode_id, "dataset": found[0]}).fetchall()

        return run

    variants = {
        "lookup+routed": lookup_then(routed),
        "lookup+by-id": lookup_then(unrouted),
        "routed": lambda e, d: part.execute(routed, {"id": e, "dataset": d}).fetchall(),
        "plain by-id": lambda e, d: plain.execute(unrouted, {"id": e, "dataset": d}).fetchall(),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    log(f"measuring {len(picked)} reads by id per variant …")
    for episode_id, dataset in picked:
        for run in variants.values():  # untimed: the rows and index pages in shared buffers
            run(episode_id, dataset)
        order = list(variants.items())
        rng.shuffle(order)
        for key, run in order:
            started = time.perf_counter()
            run(episode_id, dataset)
            times[key].append(time.perf_counter() - started)
    part.close()
    plain.close()
    stats = {k: percentiles(v) for k, v in times.items()}
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"An episode read by id, {len(picked)} reads per variant (8 partitions):")
    for key, s in stats.items():
        print(
            f"  {key:14s} p50 {s['p50'] * 1000:7.3f} ms  p99 {s['p99'] * 1000:7.3f} ms  "
            f"(p50 {s['p50'] / stats['plain by-id']['p50']:.2f}x the plain read)"
        )


if __name__ == "__main__":
    raise SystemExit(main())
