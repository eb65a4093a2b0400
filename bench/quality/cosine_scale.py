"""Where an embedder's cosines sit: the calibration points of ``store/relevance.py``
(``CosineScale``), measured on LoCoMo's development half.

    .venv/bin/python -m bench.quality.cosine_scale [--embedders minilm,e5]

For each question of the development half (conversations at even positions of
locomo10.jsonl, as ``bench.quality.recall_lab`` splits them) it embeds the question as Recall does
(``embed_query``) and every session's chunks as the index does (``recall_index.make_chunks``,
``embed``), and reads the ranking's cosine of a session — its best chunk's — for

- each of the question's gold sessions (**answer**: what a session that answers it gets),
- each of the first ``--strangers`` sessions of the next conversation in the file
  (**chance**: a stranger's session, one that cannot answer it — the foreign pairs the
  lab's abstention uses),

every ``--every``-th question of the first ``--conversations`` of each half (a sample:
e5 embeds ~8× slower than MiniLM).

It prints the median of each, per embedder, on both halves (the held-out half only as a
check): the two points the ranking maps an embedder's cosines by onto MiniLM's scale, the
one the learned fusion's weights were fitted on.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np

from bench.harness import locomo
from bench.harness.locomo import halves
from episodic.providers import Embedder


def session_vectors(embedder: Embedder, session: locomo.Session) -> np.ndarray:
    """The session's chunks' vectors, as the index cuts and embeds them."""
    from episodic.store.recall_index import make_chunks

    chunks = make_chunks([(i, m.text) for i, m in enumerate(session.messages)])
    return np.asarray(embedder.embed([c.text for c in chunks]), dtype=np.float32)


def measure(
    embedder_name: str,
    conversations: list[locomo.Conversation],
    every: int,
    strangers: int,
    per_half: int,
    only: str | None,
) -> dict[str, dict[str, Any]]:
    from episodic.config import EmbeddingSettings
    from episodic.providers import make_embedder

    settings = EmbeddingSettings.model_validate(
        {"embedding_provider": embedder_name, "embedding_threads": 2}
    )
    embedder = make_embedder(settings, 384)
    sessions = {s.thread_id: s for c in conversations for s in c.sessions}
    vectors: dict[str, np.ndarray] = {}

    def best(thread: str, v: np.ndarray) -> float | None:
        if thread not in vectors:
            vectors[thread] = session_vectors(embedder, sessions[thread])
        return float(np.max(vectors[thread] @ v)) if len(vectors[thread]) else None

    out: dict[str, dict[str, Any]] = {}
    for half, ids in halves(conversations).items():
        if only and half != only:
            continue
        answer: list[float] = []
        chance: list[float] = []
        taken = 0
        for i, conv in enumerate(conversations):
            if conv.conversation_id not in ids or taken == per_half:
                continue
            taken += 1
            foreign = conversations[(i + 1) % len(conversations)]
            for q in conv.questions[::every]:
                v = np.asarray(embedder.embed_query(q.question), dtype=np.float32)
                got = [best(t, v) for t in q.evidence_threads if t in sessions]
                answer.extend(x for x in got if x is not None)
                got = [best(s.thread_id, v) for s in foreign.sessions[:strangers]]
                chance.extend(x for x in got if x is not None)
        out[half] = {
            "answer": float(np.median(answer)),
            "chance": float(np.median(chance)),
            "pairs": (len(answer), len(chance)),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedders", default="minilm,e5")
    parser.add_argument("--every", type=int, default=4, help="every N-th question")
    parser.add_argument(
        "--strangers", type=int, default=8, help="the first N sessions of the next conversation"
    )
    parser.add_argument(
        "--conversations", type=int, default=5, help="the first N conversations of each half"
    )
    parser.add_argument("--half", choices=("dev", "held-out"), help="one half only")
    args = parser.parse_args(argv)
    conversations = locomo.load()
    print(
        "| embedder | half | chance (median best cosine of a stranger's session) | "
        "answer (median best cosine of a gold session) | pairs (gold, chance) |"
    )
    print("|---|---|---|---|---|")
    for name in args.embedders.split(","):
        for half, r in measure(
            name, conversations, args.every, args.strangers, args.conversations, args.half
        ).items():
            print(
                f"| {name} | {half} | {r['chance']:.3f} | {r['answer']:.3f} | "
                f"{r['pairs'][0]}, {r['pairs'][1]} |"
            )
    print(f"\nload average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
