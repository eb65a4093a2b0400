"""How long moving a store to another embedding model takes (``episodic reindex
--reembed``): the product's re-embedding (services/summariser/reembed.py) over a kept
recall-lab database, with the model of this environment's settings.

    cp -a /tmp/rank-lab /tmp/reembed-copy        # it rewrites every vector: use a copy
    EPISODIC_EMBEDDING_PROVIDER=e5 python -m bench.scale.reembed_bench --data-dir /tmp/reembed-copy --score

``--compare-with OTHER_COPY`` then compares every stored vector with an untouched copy
(re-embedding with the model that made them must give the same vectors).

Prints what was re-embedded, the wall time and this process's CPU time, and the CPU the
model ran on. ``--score``: then LoCoMo through a Recall service of the new model on the
copy (the recall lab's ``confirm``; its ``min_relevance`` columns use the relevance curve
fitted for MiniLM, so only the "without" column compares across models).
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="a COPY of a recall-lab data dir")
    parser.add_argument(
        "--score", action="store_true", help="then score LoCoMo through Recall (the new model)"
    )
    parser.add_argument(
        "--compare-with",
        help="another copy of the same lab store: compare every stored vector with it after",
    )
    parser.add_argument(
        "--skip-reembed", action="store_true", help="re-embed nothing (compare or score as is)"
    )
    args = parser.parse_args(argv)

    from bench.harness import locomo
    from bench.harness.lab_store import _database, _keep_keyring, confirm
    from bench.harness.locomo import halves
    from episodic.config import get_settings

    data_dir = Path(args.data_dir)
    _keep_keyring(data_dir)
    settings = get_settings()
    recall_env = {
        k: v
        for k, v in os.environ.items()
        if k.startswith("EPISODIC_EMBEDDING_") or k == "EPISODIC_CHUNK_VECTORS"
    }
    with ExitStack() as stack:
        url = _database(data_dir, stack)
        if not args.skip_reembed:
            _reembed(url, settings)
        if args.compare_with:
            other = Path(args.compare_with)
            _keep_keyring(other)
            _compare(url, _database(other, stack))
        if args.score:
            conversations = locomo.load()
            confirm(url, conversations, halves(conversations), env=recall_env)
    return 0


def _compare(url: str, other_url: str) -> None:
    """Prints, for episode and chunk vectors, how the two stores' vectors of each key
    compare (the same keys are required): the lowest and mean cosine, the largest
    absolute difference."""
    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    def vectors(dsn: str) -> tuple[dict[Any, Any], dict[Any, Any]]:
        with psycopg.connect(dsn.replace("postgresql+psycopg", "postgresql")) as conn:
            register_vector(conn)
            episodes = {
                r[0]: r[1].to_numpy()
                for r in conn.execute(
                    "SELECT episode_id, embedding FROM episodes WHERE embedding IS NOT NULL"
                )
            }
            chunks = {
                (r[0], r[1], r[2]): r[3].to_numpy()
                for r in conn.execute(
                    "SELECT thread_id, start_sequence, start_offset, embedding FROM message_chunks"
                )
            }
        return episodes, chunks

    mine, theirs = vectors(url), vectors(other_url)
    for name, a, b in (("episodes", mine[0], theirs[0]), ("chunks", mine[1], theirs[1])):
        if a.keys() != b.keys():
            print(f"{name}: the stores hold different keys ({len(a)} vs {len(b)})")
            continue
        cosines = np.array(
            [float(a[k] @ b[k] / (np.linalg.norm(a[k]) * np.linalg.norm(b[k]))) for k in a]
        )
        diff = max(float(np.max(np.abs(a[k] - b[k]))) for k in a)
        print(
            f"{name}: {len(a)} vectors, cosine min {cosines.min():.6f} "
            f"mean {cosines.mean():.6f}, max |diff| {diff:.2e}"
        )


def _reembed(url: str, settings: Any) -> None:
    """Re-embeds the store at ``url`` with the configured model; prints what and how long."""
    from episodic.providers import make_embedder
    from episodic.providers.embedding import INT8_PRODUCTS
    from episodic.providers.factory import late_chunks
    from episodic.services.summariser.reembed import reembed
    from episodic.store.db import make_engine
    from episodic.testing.keys import test_vault

    engine = make_engine(url, pool_size=2)
    embedder = make_embedder(settings.embedding, 384, bulk=True)
    embedder.embed(["warm up"])  # the model's load is not the re-embedding
    minilm = embedder.name.startswith("minilm")  # the int8 kernel note is MiniLM's
    print(f"model: {embedder.name}" + (f"; {INT8_PRODUCTS.description}" if minilm else ""))
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    done = reembed(
        engine,
        embedder,
        test_vault(),
        late=late_chunks(settings.embedding, embedder),
        progress=lambda line: print(f"  {line}", flush=True),
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    used = (after.ru_utime - cpu.ru_utime) + (after.ru_stime - cpu.ru_stime)
    engine.dispose()
    print(
        f"re-embedded {done.threads} threads: {done.episodes} episode, {done.chunks} chunk and "
        f"{done.events} event vectors (from {done.previous} to {done.model})"
    )
    vectors = max(1, done.episodes + done.chunks + done.events)
    print(
        f"wall {wall:.1f} s, CPU {used:.1f} s ({wall / max(1, done.threads) * 1000:.0f} ms a "
        f"thread, {wall / vectors * 1000:.2f} ms a vector)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
