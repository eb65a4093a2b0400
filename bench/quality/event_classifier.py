"""Precision and recall of the turn classifier against hand-labelled LoCoMo turns.

``bench/data/event_labels.jsonl`` (838 turns of 10 conversations, 128 labelled events; see
bench/data/README.md) is split by conversation: the heuristic's rules were written while
looking at the **dev** part only (conv-26, conv-30, conv-41, conv-42, conv-43 and conv-44,
whose labelled events were read too); the **held-out** part (conv-47, conv-48, conv-49,
conv-50: never read while writing the rules) measures it. Each session
is classified as a thread would be: turns in order, the session's earlier turns as
context.

Reported per half: detection (is it an event, whatever the type) P/R/F1, and per event
type P/R/F1 (a turn counts for a type when both the label and the verdict have it).

    .venv/bin/python -m bench.quality.event_classifier                       # the heuristic
    .venv/bin/python -m bench.quality.event_classifier --classifier openai \\
        --base-url http://localhost:11434/v1 --model llama3.2          # an LLM endpoint

No timing here, so the machine's load does not matter; it is printed anyway.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import defaultdict
from pathlib import Path

from bench.harness import DATA
from episodic.providers.turn_classifier import (
    CLASSIFIER_EVENT_TYPES,
    HeuristicClassifier,
    OpenAITurnClassifier,
    Turn,
    TurnClassifier,
)

LABELS = DATA / "event_labels.jsonl"
DEV = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44")


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def predict(classifier: TurnClassifier, rows: list[dict]) -> dict[str, str | None]:
    """dia_id → predicted type (None: not an event), one session at a time."""
    sessions: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for row in rows:
        sessions[(row["conversation_id"], row["session"])].append(row)
    out: dict[str, str | None] = {}
    for (conv, _), turns in sessions.items():
        as_turns = [
            Turn(sequence=i + 1, role="user", content=r["text"], speaker=r["speaker"])
            for i, r in enumerate(turns)
        ]
        verdicts = {v.sequence: v.event_type for v in classifier.classify(as_turns, [])}
        for i, r in enumerate(turns):
            out[f"{conv}/{r['dia_id']}"] = verdicts.get(i + 1)
    return out


def prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def report(name: str, rows: list[dict], predicted: dict[str, str | None]) -> None:
    gold = {f"{r['conversation_id']}/{r['dia_id']}": r["event_type"] for r in rows}
    tp = sum(1 for k, g in gold.items() if g and predicted[k])
    fp = sum(1 for k, g in gold.items() if not g and predicted[k])
    fn = sum(1 for k, g in gold.items() if g and not predicted[k])
    p, r, f = prf(tp, fp, fn)
    events = sum(1 for g in gold.values() if g)
    print(f"\n{name}: {len(gold)} turns, {events} labelled events")
    print("| type | labelled | predicted | P | R | F1 |")
    print("|---|---|---|---|---|---|")
    print(f"| any event | {events} | {tp + fp} | {p:.2f} | {r:.2f} | {f:.2f} |")
    for kind in CLASSIFIER_EVENT_TYPES:
        labelled = sum(1 for g in gold.values() if g == kind)
        said = sum(1 for k in gold if predicted[k] == kind)
        if not labelled and not said:
            continue
        ktp = sum(1 for k, g in gold.items() if g == kind and predicted[k] == kind)
        kp, kr, kf = prf(ktp, said - ktp, labelled - ktp)
        print(f"| {kind} | {labelled} | {said} | {kp:.2f} | {kr:.2f} | {kf:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--classifier", choices=("heuristic", "openai"), default="heuristic")
    parser.add_argument("--base-url", default="http://localhost:11434/v1")
    parser.add_argument("--model", default="llama3.2")
    parser.add_argument("--labels", type=Path, default=LABELS)
    args = parser.parse_args()
    classifier: TurnClassifier
    if args.classifier == "openai":
        classifier = OpenAITurnClassifier(
            base_url=args.base_url, model=args.model, api_key=os.environ.get("OPENAI_API_KEY")
        )
    else:
        classifier = HeuristicClassifier()
    print(f"load average: {os.getloadavg()[0]:.2f} (no timings are reported)")
    print(f"classifier: {classifier.name}; labels: {args.labels}")
    rows = load(args.labels)
    predicted = predict(classifier, rows)
    dev = [r for r in rows if r["conversation_id"] in DEV]
    held_out = [r for r in rows if r["conversation_id"] not in DEV]
    report("dev part (rules written against it)", dev, predicted)
    report("held-out part", held_out, predicted)
    report("all", rows, predicted)


if __name__ == "__main__":
    main()
