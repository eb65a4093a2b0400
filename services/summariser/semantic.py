"""Semantic extraction: the step that turns an episode's window into durable knowledge.

This is the extension point. A `SemanticExtractor` receives the episode row and ONLY the
messages of its window (never earlier windows, so successive episodes never re-judge the
same lines — seed 000, "Sequence windows") and stores what it extracts inside the
transaction it is given. It returns how many items it stored; 0 means "nothing to extract"
and the episode's semantic_status becomes `skipped`.

The built-in `KeyLearningFacts` stores fact statements the user made about themselves
(preferences, plans, decisions, constraints, numbers and dates) in the `facts` table, each
with provenance: the episode and the message sequence it came from.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from sqlalchemy import Connection, RowMapping, text

from episodic.providers.extractive import split_sentences


class WindowMessage(NamedTuple):
    sequence: int
    role: str
    content: str
    created_at: datetime


class SemanticExtractor(Protocol):
    name: str

    def extract(self, conn: Connection, episode: RowMapping, window: list[WindowMessage]) -> int:
        """Stores what the window reveals; returns how many items were stored."""
        ...


# First-person statements that carry a fact: preferences, plans, decisions, possessions,
# constraints. Questions and small talk are left out.
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|my|we|we're|we've|our)\b", re.I)
_FACT_SIGNAL = re.compile(
    r"\b(prefer|like|love|hate|dislike|want|need|plan|planning|going to|will|decided|decide|"
    r"chose|choose|picked|booked|bought|agreed|agree|work|working|live|living|moved|have|has|"
    r"own|started|finished|allergic|budget|deadline|can't|cannot|don't|never|always|usually)\b",
    re.I,
)
_NUMBER_OR_DATE = re.compile(
    r"\d|\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"january|february|march|april|may|june|july|august|september|"
    r"october|november|december|tomorrow|yesterday|next week)\b",
    re.I,
)
MAX_FACT_CHARS = 300


def fact_sentences(content: str) -> list[str]:
    """Sentences of one message that state a fact about the speaker."""
    out = []
    for sentence in split_sentences(content):
        s = sentence.strip()
        if len(s) < 12 or s.endswith("?"):
            continue
        if _FIRST_PERSON.search(s) and (_FACT_SIGNAL.search(s) or _NUMBER_OR_DATE.search(s)):
            out.append(s[:MAX_FACT_CHARS])
    return out


class KeyLearningFacts:
    """Facts the user states about themselves, with provenance to episode and message."""

    name = "key-learning-facts"

    def __init__(self, roles: tuple[str, ...] = ("user",)) -> None:
        self.roles = roles

    def extract(self, conn: Connection, episode: RowMapping, window: list[WindowMessage]) -> int:
        rows: list[dict[str, Any]] = []
        for msg in window:
            if msg.role not in self.roles:
                continue
            for statement in fact_sentences(msg.content):
                rows.append(
                    {
                        "episode_id": episode["episode_id"],
                        "thread_id": episode["thread_id"],
                        "dataset": episode["dataset"],
                        "statement": statement,
                        "source_sequence": msg.sequence,
                        "stated_at": msg.created_at,
                    }
                )
        if not rows:
            return 0
        # Idempotent: a re-run after a crash stores nothing twice.
        conn.execute(
            text(
                "INSERT INTO facts (episode_id, thread_id, dataset, statement, source_sequence, "
                "stated_at) VALUES (:episode_id, :thread_id, :dataset, :statement, "
                ":source_sequence, :stated_at) "
                "ON CONFLICT (episode_id, source_sequence, statement) DO NOTHING"
            ),
            rows,
        )
        return len(rows)
