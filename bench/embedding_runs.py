"""MiniLM model runs: the runs the embedder makes now (sorted by token count, at most
``run_tokens`` padded tokens each) against the earlier ones (32 texts sorted by characters,
padded to the longest), on the texts the Summariser embeds for LoCoMo sessions (their
sentences and their chunk index): the same vectors? how many CPU seconds each?

    .venv/bin/python -m bench.embedding_runs [--sessions 30]

Prints the cosine between the two vectors of every text (1.0: the same vectors) and the CPU
seconds of each (process time: less sensitive than wall time to a shared machine's load),
with the load average. Not part of pytest.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from bench.summariser_bench import LOCOMO, locomo_sessions
from episodic.providers.embedding import MiniLMEmbedder, normalise_rows
from episodic.providers.extractive import ExtractiveSummariser
from episodic.providers.types import ChatMessage, SummaryRequest
from episodic.store.recall_index import make_chunks


def summariser_texts(sessions: int) -> list[str]:
    """The chunk texts and summary candidate sentences of the first LoCoMo sessions."""
    summariser = ExtractiveSummariser(MiniLMEmbedder())
    texts: list[str] = []
    for session in locomo_sessions(LOCOMO)[:sessions]:
        texts += [
            c.text
            for c in make_chunks([(i + 1, f"{t.speaker}: {t.text}") for i, t in enumerate(session)])
        ]
        request = SummaryRequest(
            messages=[
                ChatMessage(i + 1, t.role, t.text, t.at, t.speaker) for i, t in enumerate(session)
            ],
            window_start_sequence=1,
            previous_summary=None,
            thread_label="",
        )
        texts += [c.text for c in summariser._candidates(request)]
    return list(dict.fromkeys(texts))


def earlier_runs(embedder: MiniLMEmbedder, texts: list[str]) -> np.ndarray:
    """The runs as the embedder made them before: 32 texts sorted by characters, padded to
    the longest token count of the run."""
    model = embedder._model()
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.empty((len(texts), embedder.dimension), dtype=np.float32)
    for start in range(0, len(order), 32):
        idx = order[start : start + 32]
        out[idx] = embedder._run(
            model, [e.ids for e in model.tokenizer.encode_batch([texts[i] for i in idx])]
        )
    return normalise_rows(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=30, help="LoCoMo sessions to read")
    args = parser.parse_args()
    texts = summariser_texts(args.sessions)
    embedder = MiniLMEmbedder()
    embedder.check()  # loads the model
    earlier_runs(embedder, texts[:64])  # warm both paths
    embedder.embed(texts[:64])
    load = os.getloadavg()[0]
    t0 = time.process_time()
    before = earlier_runs(embedder, texts)
    t1 = time.process_time()
    now = embedder.embed(texts)
    t2 = time.process_time()
    cosine = (before * now).sum(axis=1)
    print(
        f"{len(texts)} texts of {args.sessions} LoCoMo sessions (sentences and chunks); "
        f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}\n"
        f"cosine earlier/now: min {cosine.min():.5f}, mean {cosine.mean():.5f}\n"
        f"CPU seconds: earlier runs {t1 - t0:.2f}, runs now {t2 - t1:.2f}: "
        f"{(t1 - t0) / (t2 - t1):.2f}x fewer"
    )


if __name__ == "__main__":
    main()
