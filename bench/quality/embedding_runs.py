"""MiniLM model runs: the runs the embedder makes now (sorted by token count, at most
``run_tokens`` padded tokens each) against the earlier ones (32 texts sorted by characters,
padded to the longest), on the texts the Summariser embeds for LoCoMo sessions (their
sentences and their chunk index): the same vectors? how many CPU seconds each?

    .venv/bin/python -m bench.quality.embedding_runs [--sessions 30]
    .venv/bin/python -m bench.quality.embedding_runs --arithmetic [--rounds 3]

``--arithmetic`` compares the model's float32 products (the graph as shipped) with int8 ones
(``EPISODIC_EMBEDDING_COMPUTE=int8``) on the same texts and runs, rounds interleaved.

Prints the cosine between the two vectors of every text (1.0: the same vectors) and the CPU
seconds of each (process time: less sensitive than wall time to a shared machine's load),
with the load average. Not part of pytest.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from bench.harness.locomo_json import LOCOMO, locomo_sessions
from episodic.providers.embedding import INT8_PRODUCTS, MiniLMEmbedder, normalise_rows
from episodic.providers.extractive import ExtractiveSummariser
from episodic.providers.types import ChatMessage, SummaryRequest
from episodic.store.recall_index import make_chunks


def summariser_texts(sessions: int) -> list[str]:
    """The chunk texts and summary candidate sentences of the first LoCoMo sessions."""
    summariser = ExtractiveSummariser(MiniLMEmbedder(compute="float"))
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


def arithmetic(texts: list[str], rounds: int) -> None:
    """float32 against int8 products: cosine of every text's two vectors, CPU seconds."""
    as_float, as_int8 = MiniLMEmbedder(compute="float"), MiniLMEmbedder(compute="int8")
    first = as_float.embed(texts)
    cosine = (first * as_int8.embed(texts)).sum(axis=1)
    alone = np.stack([as_int8.embed([t])[0] for t in texts[:100]])
    batched = as_int8.embed(texts[:100])
    load = os.getloadavg()[0]
    seconds = {"float": 0.0, "int8": 0.0}
    for _ in range(rounds):
        for name, embedder in (("float", as_float), ("int8", as_int8)):
            t0 = time.process_time()
            embedder.embed(texts)
            seconds[name] += time.process_time() - t0
    print(
        f"{INT8_PRODUCTS.description}\n"
        f"{len(texts)} texts (sentences and chunks), {rounds} rounds interleaved; load "
        f"average {load:.1f} -> {os.getloadavg()[0]:.1f}\n"
        f"cosine float/int8: min {cosine.min():.4f}, 1st percentile "
        f"{np.percentile(cosine, 1):.4f}, mean {cosine.mean():.5f}; int8 alone/in a run: min "
        f"{(alone * batched).sum(axis=1).min():.6f}\n"
        f"CPU seconds: float {seconds['float']:.2f}, int8 {seconds['int8']:.2f}: "
        f"{seconds['float'] / seconds['int8']:.2f}x fewer"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=30, help="LoCoMo sessions to read")
    parser.add_argument("--arithmetic", action="store_true", help="float32 vs int8 products")
    parser.add_argument("--rounds", type=int, default=3, help="--arithmetic: rounds")
    args = parser.parse_args()
    texts = summariser_texts(args.sessions)
    if args.arithmetic:
        arithmetic(texts, args.rounds)
        return
    embedder = MiniLMEmbedder(compute="float")  # the runs' shapes, not the arithmetic
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
