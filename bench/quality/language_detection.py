"""How well the dataset language detector tells a text's language, against py3langid:
every session (a thread's messages joined) and every single message of the hand-written
French, Spanish and German set and of LoCoMo (English), with the time each takes.

    .venv/bin/python -m bench.quality.language_detection [--py3langid]

CLD2 is what the Summariser runs (``episodic.store.languages.detect_language`` takes its
answer only on enough letters and a reliable, dominant language; this prints CLD2's raw
first language, to compare detectors). ``--py3langid`` also measures py3langid (``pip
install py3langid``; not a dependency).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pycld2

from bench.harness import DATA
from bench.harness import locomo as locomo_bench

MULTILINGUAL = DATA / "multilingual.jsonl"


def samples(locomo: Path) -> list[tuple[str, str, str]]:
    """(gold language, text, "session" | "message")."""
    out = []
    for path, language in ((MULTILINGUAL, None), (locomo, "en")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            gold = language or row["language"]
            for thread in row["threads"]:
                texts = [m["content"] for m in thread["messages"]]
                out.append((gold, "\n".join(texts), "session"))
                out.extend((gold, t, "message") for t in texts)
    return out


def cld2(text: str) -> str:
    return str(pycld2.detect(text, isPlainText=True)[2][0][1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path, default=locomo_bench.DEFAULT_PATH)
    parser.add_argument("--py3langid", action="store_true")
    args = parser.parse_args()
    data = samples(args.locomo)
    detectors: dict[str, Callable[[str], str]] = {"CLD2 (pycld2)": cld2}
    if args.py3langid:
        import py3langid

        detectors["py3langid"] = lambda text: str(py3langid.classify(text)[0])
    chars = sum(len(t) for _, t, _ in data)
    print("| detector | sessions right (other / en) | messages right (other / en) | time |")
    print("|---|---|---|---|")
    for name, detect in detectors.items():
        right: Counter[tuple[str, bool]] = Counter()
        total: Counter[tuple[str, bool]] = Counter()
        started = time.perf_counter()
        for gold, text, kind in data:
            key = (kind, gold == "en")
            total[key] += 1
            right[key] += detect(text) == gold
        elapsed = time.perf_counter() - started
        cells = []
        for kind in ("session", "message"):
            parts = [f"{right[(kind, en)]}/{total[(kind, en)]}" for en in (False, True)]
            cells.append(" · ".join(parts))
        print(f"| {name} | {cells[0]} | {cells[1]} | {elapsed:.2f} s for {chars:,} chars |")


if __name__ == "__main__":
    main()
