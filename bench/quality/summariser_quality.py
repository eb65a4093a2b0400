"""How fast and how good the offline extractive summariser is, on LoCoMo sessions.

Runs :class:`~episodic.providers.ExtractiveSummariser` with the MiniLM embedder over the
sessions of ``../shared/bench/locomo10.json`` (LoCoMo: long dated conversations between two
people, with a reference summary written for every session) and prints:

- time per episode (mean, p50, p95) with the model already loaded, plus the cold load;
- mean summary length, key learnings and entities per episode, the event types;
- agreement with LoCoMo's reference session summaries, against the "first N characters"
  baseline of the same length: ROUGE-1 F1 (word overlap) and the MiniLM cosine;
- three example episodes, next to the reference summary.

Modes: ``session`` summarises each session as its own thread (window = the session);
``rolling`` replays each conversation as one thread with one episode per session, where the
summariser reads the whole thread so far, as the Summariser service does.

    .venv/bin/python -m bench.quality.summariser_quality --limit 40
    .venv/bin/python -m bench.quality.summariser_quality --mode rolling --limit 60
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections import Counter
from pathlib import Path

import numpy as np

from bench.harness.locomo_json import DEFAULT_PATH, Session, load_sessions
from episodic.providers import (
    ChatMessage,
    ExtractiveSummariser,
    MiniLMEmbedder,
    SummaryRequest,
    SummaryResult,
)


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def rouge1_f1(candidate: str, reference: str) -> float:
    """Unigram-overlap F1 (ROUGE-1), lowercased, no stemming."""
    c, r = Counter(_tokens(candidate)), Counter(_tokens(reference))
    overlap = sum((c & r).values())
    if not overlap:
        return 0.0
    precision, recall = overlap / sum(c.values()), overlap / sum(r.values())
    return 2 * precision * recall / (precision + recall)


def lead_baseline(session: Session, length: int) -> str:
    """The first ``length`` characters of the session transcript ("Name: text" lines)."""
    transcript = " ".join(f"{m.name}: {m.content}" for m in session.messages)
    return transcript[:length]


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--limit", type=int, default=None, help="summarise at most N sessions")
    parser.add_argument("--mode", choices=("session", "rolling"), default="session")
    parser.add_argument("--max-chars", type=int, default=800, help="summary budget")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime threads")
    parser.add_argument("--examples", type=int, default=3)
    args = parser.parse_args()

    sessions = load_sessions(args.path)
    total_sessions = len(sessions)
    if args.limit is not None:
        sessions = sessions[: args.limit]

    embedder = MiniLMEmbedder(threads=args.threads)
    started = time.perf_counter()
    embedder.check()
    cold = time.perf_counter() - started
    summariser = ExtractiveSummariser(embedder, max_summary_chars=args.max_chars)

    threads: dict[str, list[ChatMessage]] = {}
    results: list[tuple[Session, SummaryResult, float]] = []
    previous: dict[str, str] = {}
    for session in sessions:
        if args.mode == "rolling":
            thread = threads.setdefault(session.conversation, [])
            thread.extend(session.messages)
            messages = list(thread)
        else:
            messages = session.messages
        request = SummaryRequest(
            messages,
            window_start_sequence=session.messages[0].sequence,
            previous_summary=previous.get(session.conversation),
            thread_label=session.key,
        )
        t0 = time.perf_counter()
        result = summariser.summarise(request)
        results.append((session, result, time.perf_counter() - t0))
        previous[session.conversation] = result.summary

    seconds = [r[2] for r in results]
    lengths = [len(r[1].summary) for r in results]
    with_ref = [(s, r) for s, r, _ in results if s.reference]
    ours_rouge = [rouge1_f1(r.summary, s.reference) for s, r in with_ref]
    lead_rouge = [rouge1_f1(lead_baseline(s, len(r.summary)), s.reference) for s, r in with_ref]
    ours_vec = embedder.embed([r.summary for _, r in with_ref])
    lead_vec = embedder.embed([lead_baseline(s, len(r.summary)) for s, r in with_ref])
    ref_vec = embedder.embed([s.reference for s, _ in with_ref])
    ours_cos = (ours_vec * ref_vec).sum(axis=1)
    lead_cos = (lead_vec * ref_vec).sum(axis=1)

    print(
        f"LoCoMo: {len(results)} of {total_sessions} sessions, mode={args.mode}, "
        f"budget={args.max_chars} chars, onnxruntime threads={args.threads}"
    )
    print(
        f"messages per episode window: mean {statistics.mean(len(s.messages) for s, _, _ in results):.1f}"
    )
    print(f"model cold load + first embed: {cold:.2f} s")
    print(
        f"seconds per episode: mean {statistics.mean(seconds):.3f}  "
        f"p50 {_percentile(seconds, 50):.3f}  p95 {_percentile(seconds, 95):.3f}  "
        f"max {max(seconds):.3f}"
    )
    print(f"summary length (chars): mean {statistics.mean(lengths):.0f}  max {max(lengths)}")
    print(
        "per episode: key learnings "
        f"{statistics.mean(len(r.key_learnings) for _, r, _ in results):.1f}, entities "
        f"{statistics.mean(len(r.entities) for _, r, _ in results):.1f}"
    )
    events = Counter(r.event_type for _, r, _ in results)
    actors = Counter(r.actor for _, r, _ in results)
    print(f"event types: {dict(events.most_common())}  actors: {dict(actors.most_common())}")
    if with_ref:
        print(
            f"vs LoCoMo reference summaries ({len(with_ref)} sessions), same length:\n"
            f"  ROUGE-1 F1   extractive {statistics.mean(ours_rouge):.3f}   "
            f"first-N-chars {statistics.mean(lead_rouge):.3f}\n"
            f"  MiniLM cos   extractive {float(ours_cos.mean()):.3f}   "
            f"first-N-chars {float(lead_cos.mean()):.3f}"
        )

    if args.examples and results:
        step = max(1, len(results) // args.examples)
        for session, result, took in results[::step][: args.examples]:
            print("\n" + "=" * 100)
            print(
                f"{session.key}: {len(session.messages)} messages, {took:.2f} s, "
                f"event={result.event_type} actor={result.actor}"
            )
            print(f"\nSUMMARY ({len(result.summary)} chars):\n{result.summary}")
            print("\nKEY LEARNINGS:")
            for learning in result.key_learnings:
                print(f"  - {learning}")
            print(f"\nENTITIES: {result.entities}")
            if session.reference:
                print(f"\nLOCOMO REFERENCE SUMMARY:\n{session.reference}")


if __name__ == "__main__":
    main()
