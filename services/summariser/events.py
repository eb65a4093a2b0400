"""The Summariser's event work, after the write path has committed:

- **Embedding** events recorded without a vector (RecordEvent stores words and time; the
  model lives here), :func:`episodic.store.events.embed_pending`.
- **The turn classifier** (EPISODIC_EVENT_CLASSIFIER, off by default): reads each thread's
  turns past ``threads.classified_sequence``, asks the classifier
  (:mod:`episodic.providers.turn_classifier`) which are events, and records those (source
  ``classifier``, pointing at the turn) while advancing the thread's mark, in one
  transaction. AddMessages never waits for it: a turn is durable when its write commits,
  and a crash before this transaction commits leaves the mark where it was, so the turns
  are read again (one event per turn at most: a unique index). The slow call runs outside
  any transaction; the mark only moves from where it was read (two workers never both
  record a turn, and a thread's writers are not held up).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, text

from episodic.config import LLMSettings, SummariserSettings
from episodic.providers._http import RetryPolicy
from episodic.providers.dataset_embedders import DatasetEmbedders
from episodic.providers.turn_classifier import (
    HeuristicClassifier,
    OpenAITurnClassifier,
    Turn,
    TurnClassifier,
)
from episodic.providers.types import Embedder, speaker_from_metadata
from episodic.store import events
from episodic.store.distribution import across_datasets
from episodic.store.vault import DatasetErasing, Vault

log = logging.getLogger(__name__)

#: Turns before the unread ones given as context (what is known, what a retry repeats).
CONTEXT_TURNS = 6
#: Threads one classifier pass reads at most.
THREADS_PER_PASS = 20


def make_turn_classifier(summariser: SummariserSettings, llm: LLMSettings) -> TurnClassifier | None:
    """The configured classifier (None: off)."""
    if summariser.event_classifier == "heuristic":
        return HeuristicClassifier()
    if summariser.event_classifier == "openai":
        return OpenAITurnClassifier(
            base_url=llm.llm_base_url,
            model=llm.llm_model,
            api_key=llm.llm_api_key.get_secret_value() or None,
            timeout=llm.llm_timeout.total_seconds(),
            retry=RetryPolicy(max_retries=llm.llm_max_retries),
            temperature=llm.llm_temperature,
        )
    return None


@dataclass
class EventPass:
    embedded: int = 0
    turns_classified: int = 0
    events_recorded: int = 0


def _turn(row: Any) -> Turn:
    metadata = row["metadata"] or {}
    return Turn(
        sequence=row["sequence"],
        role=row["role"],
        content=row["content"],
        speaker=speaker_from_metadata(metadata),
        tool_call=row["role"] == "tool"
        or (
            isinstance(metadata, dict)
            and bool(metadata.get("tool_calls") or metadata.get("tool_call"))
        ),
    )


class EventWork:
    """One worker's event work; :meth:`run_once` does a pass of both halves."""

    def __init__(
        self,
        engine: Engine,
        vault: Vault,
        embedder: Embedder | DatasetEmbedders,
        classifier: TurnClassifier | None,
        *,
        batch_turns: int = 200,
    ) -> None:
        self.engine = engine
        self.vault = vault
        self.embedder = embedder  # each dataset's events in its model (a DatasetEmbedders)
        self.classifier = classifier
        self.batch_turns = batch_turns

    def run_once(self) -> EventPass:
        result = EventPass()
        if self.classifier is not None:
            self.classify_pending(result)
        # After classifying: the events it just recorded get their vectors in this pass.
        result.embedded = events.embed_pending(self.engine, self.vault, self.embedder)
        return result

    def classify_pending(self, result: EventPass) -> None:
        assert self.classifier is not None
        with self.engine.connect() as conn:
            threads = conn.execute(
                text(
                    across_datasets("the turn classifier finds unread turns of every dataset")
                    + "SELECT thread_id, dataset, classified_sequence, last_sequence FROM threads "
                    "WHERE last_sequence > classified_sequence "
                    "ORDER BY last_message_at LIMIT :n"
                ),
                {"n": THREADS_PER_PASS},
            ).all()
        for thread_id, dataset, read_to, last in threads:
            upto = min(last, read_to + self.batch_turns)
            try:
                self._classify_thread(thread_id, dataset, read_to, upto, result)
            except DatasetErasing:
                continue  # its threads are going; nothing to record

    def _classify_thread(
        self, thread_id: uuid.UUID, dataset: str, read_to: int, upto: int, result: EventPass
    ) -> None:
        assert self.classifier is not None
        with self.engine.connect() as conn:
            rows = (
                conn.execute(
                    text(
                        "SELECT sequence, role, content, metadata, created_at FROM messages "
                        "WHERE dataset = :d AND thread_id = :t "
                        "AND sequence > :from AND sequence <= :upto ORDER BY sequence"
                    ),
                    {
                        "d": dataset,
                        "t": thread_id,
                        "from": max(read_to - CONTEXT_TURNS, 0),
                        "upto": upto,
                    },
                )
                .mappings()
                .all()
            )
            opened = self.vault.open_rows(conn, dataset, list(rows), "messages")
        earlier = [_turn(r) for r in opened if r["sequence"] <= read_to]
        unread = [r for r in opened if r["sequence"] > read_to]
        verdicts = self.classifier.classify([_turn(r) for r in unread], earlier)
        created = {r["sequence"]: r["created_at"] for r in unread}
        with self.engine.begin() as conn:
            moved = conn.execute(
                text(
                    "UPDATE threads SET classified_sequence = :upto "
                    "WHERE dataset = :d AND thread_id = :t AND classified_sequence = :from"
                ),
                {"upto": upto, "d": dataset, "t": thread_id, "from": read_to},
            ).rowcount
            if not moved:  # another worker read these turns first (or the thread is gone)
                return
            for verdict in verdicts:
                _, stored = events.record_event(
                    conn,
                    self.vault,
                    events.NewEvent(
                        dataset=dataset,
                        actor=verdict.actor,
                        event_type=verdict.event_type,
                        summary=verdict.summary,
                        entities=verdict.entities,
                        occurred_at=created.get(verdict.sequence),
                        thread_id=thread_id,
                        source="classifier",
                        source_sequence=verdict.sequence,
                    ),
                )
                result.events_recorded += int(stored)
        result.turns_classified += len(unread)
