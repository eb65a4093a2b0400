"""Semantic extraction: the step that turns an episode's window into durable knowledge.

This is the extension point. A `SemanticExtractor` receives the episode row and ONLY the
messages of its window (never earlier windows, so successive episodes never re-judge the
same lines — seed 000, "Sequence windows") and stores what it extracts inside the
transaction it is given. It returns how many items it stored; 0 means "nothing to extract"
and the episode's semantic_status becomes `skipped`.

The built-in `KeyLearningFacts` stores fact statements the user made about themselves
(preferences, plans, decisions, constraints, numbers and dates; see
:mod:`episodic.providers.statements`) in the `facts` table, each with provenance: the
episode and the message sequence it came from.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple, Protocol

from sqlalchemy import Connection, RowMapping, text

from episodic.crypto import DatasetKey
from episodic.providers.statements import is_fact_statement, split_sentences


class WindowMessage(NamedTuple):
    sequence: int
    role: str
    content: str
    created_at: datetime


class SemanticExtractor(Protocol):
    name: str

    def extract(
        self,
        conn: Connection,
        episode: RowMapping,
        window: list[WindowMessage],
        key: DatasetKey,
    ) -> int:
        """Stores what the window reveals (user text sealed with the dataset's ``key``);
        returns how many items were stored."""
        ...


MAX_FACT_CHARS = 300


def fact_sentences(content: str) -> list[str]:
    """Sentences of one message that state a fact about the speaker (the same notion as
    the extractive summariser's key learnings: :func:`is_fact_statement`)."""
    sentences = (sentence.strip() for sentence in split_sentences(content))
    return [s[:MAX_FACT_CHARS] for s in sentences if is_fact_statement(s)]


class KeyLearningFacts:
    """Facts the user states about themselves, with provenance to episode and message."""

    name = "key-learning-facts"

    def __init__(self, roles: tuple[str, ...] = ("user",)) -> None:
        self.roles = roles

    def extract(
        self,
        conn: Connection,
        episode: RowMapping,
        window: list[WindowMessage],
        key: DatasetKey,
    ) -> int:
        rows: list[tuple[bytes, str, int, Any]] = []
        for msg in window:
            if msg.role not in self.roles:
                continue
            for statement in fact_sentences(msg.content):
                rows.append(
                    (
                        key.seal(statement, "facts.statement"),
                        key.token(statement),
                        msg.sequence,
                        msg.created_at,
                    )
                )
        if not rows:
            return 0
        statements, tokens, sequences, stated = (list(column) for column in zip(*rows, strict=True))
        # One statement for every fact, not an executemany: psycopg pipelines those, and
        # PostgreSQL does not arm idle_in_transaction_session_timeout again after such a
        # batch, so a worker frozen right after it would hold the episode's row for ever.
        # Idempotent: a re-run after a crash stores nothing twice.
        conn.execute(
            text(
                "INSERT INTO facts (episode_id, thread_id, dataset, statement, statement_token, "
                "source_sequence, stated_at) "
                "SELECT :episode_id, :thread_id, :dataset, f.statement, f.token, f.seq, f.at "
                "FROM unnest(CAST(:statements AS bytea[]), CAST(:tokens AS text[]), "
                "CAST(:sequences AS bigint[]), CAST(:stated AS timestamptz[])) "
                "AS f(statement, token, seq, at) "
                "ON CONFLICT (dataset, episode_id, source_sequence, statement_token) DO NOTHING"
            ),
            {
                "episode_id": episode["episode_id"],
                "thread_id": episode["thread_id"],
                "dataset": episode["dataset"],
                "statements": statements,
                "tokens": tokens,
                "sequences": sequences,
                "stated": stated,
            },
        )
        return len(rows)
