"""LoCoMo loader shared by the benchmarks.

Reads ``../shared/bench/locomo10.jsonl`` (beside the repository; override with
``EPISODIC_LOCOMO_PATH``): ten long conversations between two people, each a series of
dated sessions, plus questions whose evidence names the sessions that answer them.

Conventions used by every benchmark (so the baselines and the pipeline see the same text):

- one thread per session (``conv-26/session_3``), in the conversation's own dataset;
- a message's text is ``"<speaker>: <content>"`` (the content already carries shared-image
  captions as ``[shares image: …]``), with the session's timestamp as ``created_at``;
- a question is asked at ``asked_at`` (the start of the conversation's last session, when
  every session already happened) and its gold sessions are ``evidence_threads``;
- adversarial questions (no answer in the conversation) and questions without evidence are
  left out, as in ``research/retrieval-baselines.md``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from bench.harness import REPO as REPO_ROOT

DEFAULT_PATH = REPO_ROOT.parent / "shared" / "bench" / "locomo10.jsonl"
#: Question categories reported, in this order.
CATEGORIES = ("multi-hop", "open-domain", "single-hop", "temporal")


@dataclass(frozen=True)
class Message:
    """One turn of a session."""

    role: str  # "user" or "assistant" (LoCoMo's two speakers)
    name: str  # the speaker's name, e.g. "Caroline"
    content: str
    ts: datetime

    @property
    def text(self) -> str:
        """The text every method indexes: the speaker's name, a colon, the content."""
        return f"{self.name}: {self.content}" if self.name else self.content


@dataclass(frozen=True)
class Session:
    """One session of a conversation; becomes one thread."""

    thread_id: str  # "conv-26/session_3": the benchmark's key, stored as the thread label
    started_at: datetime
    messages: tuple[Message, ...]

    @property
    def text(self) -> str:
        """The raw session text: one message per line."""
        return "\n".join(m.text for m in self.messages)


@dataclass(frozen=True)
class Question:
    """A question with the sessions that hold its answer."""

    qid: str
    question: str
    asked_at: datetime
    category: str
    evidence_threads: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo conversation: sessions in time order and its questions."""

    conversation_id: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def dataset(self) -> str:
        """Dataset name used when ingesting (valid for the services' dataset pattern)."""
        return f"locomo-{self.conversation_id}"


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def load(path: str | Path | None = None, limit: int | None = None) -> list[Conversation]:
    """Loads the conversations (the first ``limit`` of them when given)."""
    source = Path(path or os.environ.get("EPISODIC_LOCOMO_PATH") or DEFAULT_PATH)
    if not source.is_file():
        raise FileNotFoundError(
            f"LoCoMo not found at {source}; set EPISODIC_LOCOMO_PATH to locomo10.jsonl"
        )
    out: list[Conversation] = []
    with source.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            row = json.loads(line)
            sessions = tuple(
                Session(
                    thread_id=t["thread_id"],
                    started_at=_time(t["started_at"]),
                    messages=tuple(
                        Message(
                            role=m["role"],
                            name=m.get("name") or "",
                            content=m["content"],
                            ts=_time(m["ts"]),
                        )
                        for m in t["messages"]
                    ),
                )
                for t in row["threads"]
                if t["messages"]
            )
            questions = tuple(
                Question(
                    qid=q["qid"],
                    question=q["question"],
                    asked_at=_time(q["asked_at"]),
                    category=q["category"],
                    evidence_threads=tuple(q["evidence_threads"]),
                )
                for q in row["questions"]
                if q["category"] in CATEGORIES and q["evidence_threads"]
            )
            out.append(Conversation(row["conversation_id"], sessions, questions))
            if limit is not None and len(out) >= limit:
                break
    return out


@dataclass
class Scores:
    """Session-level recall_any@k and MRR, overall and per category."""

    ks: tuple[int, ...] = (1, 3, 5, 10)

    def __post_init__(self) -> None:
        self._rows: list[tuple[str, int | None]] = []  # (category, rank of first gold)

    def add(self, category: str, ranking: list[str], gold: tuple[str, ...]) -> None:
        """Records one question: ``ranking`` is thread ids best first."""
        rank = next((i + 1 for i, t in enumerate(ranking) if t in gold), None)
        self._rows.append((category, rank))

    def _summary(self, ranks: list[int | None]) -> dict[str, float]:
        n = len(ranks) or 1
        out = {f"R@{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in self.ks}
        out["MRR"] = sum(1.0 / r for r in ranks if r is not None) / n
        out["n"] = len(ranks)
        return out

    def overall(self) -> dict[str, float]:
        """Metrics over every question."""
        return self._summary([r for _, r in self._rows])

    def by_category(self) -> dict[str, dict[str, float]]:
        """Metrics per question category."""
        cats = sorted({c for c, _ in self._rows}, key=lambda c: (c not in CATEGORIES, c))
        return {c: self._summary([r for cc, r in self._rows if cc == c]) for c in cats}


def table(rows: dict[str, Scores], ks: tuple[int, ...] = (1, 3, 5, 10)) -> str:
    """A Markdown table: one row per method (overall), then R@5 and MRR per category."""
    head = "| method | " + " | ".join(f"R@{k}" for k in ks) + " | MRR | n |"
    lines = [head, "|" + "---|" * (len(ks) + 3)]
    for name, scores in rows.items():
        o = scores.overall()
        cells = " | ".join(f"{o[f'R@{k}']:.3f}" for k in ks)
        lines.append(f"| {name} | {cells} | {o['MRR']:.3f} | {int(o['n'])} |")
    cats = [c for c in CATEGORIES]
    lines += ["", "| method | " + " | ".join(f"{c} R@5 / MRR" for c in cats) + " |"]
    lines.append("|" + "---|" * (len(cats) + 1))
    for name, scores in rows.items():
        by = scores.by_category()
        cells = " | ".join(
            f"{by[c]['R@5']:.3f} / {by[c]['MRR']:.3f}" if c in by else "-" for c in cats
        )
        lines.append(f"| {name} | {cells} |")
    return "\n".join(lines)


def halves(conversations: list[Conversation]) -> dict[str, set[str]]:
    """The fixed split: even positions in the file develop, odd positions are held out."""
    ids = [c.conversation_id for c in conversations]
    return {"dev": set(ids[0::2]), "held-out": set(ids[1::2])}


def adversarial_questions(path: Path | None = None) -> dict[str, list[Question]]:
    """LoCoMo's category 5 (questions about things never said), which locomo.load skips."""
    source = Path(path or os.environ.get("EPISODIC_LOCOMO_PATH") or DEFAULT_PATH)
    out: dict[str, list[Question]] = {}
    for line in source.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        out[row["conversation_id"]] = [
            Question(
                qid=q["qid"],
                question=q["question"],
                asked_at=_time(q["asked_at"]),
                category="adversarial",
                evidence_threads=(),
            )
            for q in row["questions"]
            if q["category"] == "adversarial"
        ]
    return out
