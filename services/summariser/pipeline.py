"""Turns pending episodes into completed ones, then drives their semantic status.

Every transition is one state-guarded statement on the database clock:

- claim:    pending (due) -> processing, in a CTE with FOR UPDATE SKIP LOCKED, writing
            claimant and claim time in the same statement;
- complete: processing (claimed by me) -> completed, in one transaction that also archives
            every other completed episode of the thread. If a *newer* window of the same
            thread completed first (out-of-order finish), this episode goes straight to
            archived: a thread's one current episode is always its latest window;
- failure:  lifecycle.record_failure (pending again with backoff, or failed for good);
- release:  on shutdown, my processing claims go back to pending without counting a retry.

The slow part (LLM + embedding) runs outside any transaction, so a slow provider holds no
locks; the completion re-checks the claim and gives up quietly if the claim was lost (for
example reclaimed as orphaned by the Scheduler).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from opentelemetry import trace
from sqlalchemy import Connection, Engine, RowMapping, text

from episodic.providers.embedding import Embedder
from episodic.providers.entities import normalise_entities
from episodic.providers.llm import ChatMessage, Summariser, SummaryRequest
from episodic.store import lifecycle
from episodic.store.recall_index import prepare_episode_index, write_episode_index
from episodic.telemetry import link_from

from .semantic import SemanticExtractor, WindowMessage

log = logging.getLogger(__name__)
tracer = trace.get_tracer("episodic.summariser")

MAX_ERROR_CHARS = 2000


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass
class PassResult:
    completed: int = 0
    failed: int = 0
    semantic_processed: int = 0


# ---- claims ------------------------------------------------------------------------------


def claim_pending(
    conn: Connection, worker: str, limit: int, now: datetime | None = None
) -> list[RowMapping]:
    return list(
        conn.execute(
            text(
                """
                WITH due AS (
                    SELECT episode_id FROM episodes
                    WHERE status = 'pending'
                      AND next_attempt_at <= coalesce(CAST(:now AS timestamptz), now())
                    ORDER BY next_attempt_at, created_at
                    LIMIT :limit
                    FOR UPDATE SKIP LOCKED
                )
                UPDATE episodes e
                SET status = 'processing', claimed_by = :worker,
                    claimed_at = coalesce(CAST(:now AS timestamptz), now()),
                    updated_at = coalesce(CAST(:now AS timestamptz), now())
                FROM due WHERE e.episode_id = due.episode_id AND e.status = 'pending'
                RETURNING e.*
                """
            ),
            {"worker": worker, "limit": limit, "now": now},
        ).mappings()
    )


def claim_semantic(
    conn: Connection, worker: str, limit: int, now: datetime | None = None
) -> list[RowMapping]:
    """Semantic extraction only starts once summarisation succeeded (completed_at is set;
    an episode superseded right at completion is archived but did complete)."""
    return list(
        conn.execute(
            text(
                """
                WITH due AS (
                    SELECT episode_id FROM episodes
                    WHERE semantic_status = 'pending' AND completed_at IS NOT NULL
                      AND status IN ('completed', 'archived')
                    ORDER BY completed_at
                    LIMIT :limit
                    FOR UPDATE SKIP LOCKED
                )
                UPDATE episodes e
                SET semantic_status = 'processing', semantic_claimed_by = :worker,
                    semantic_claimed_at = coalesce(CAST(:now AS timestamptz), now()),
                    updated_at = coalesce(CAST(:now AS timestamptz), now())
                FROM due WHERE e.episode_id = due.episode_id AND e.semantic_status = 'pending'
                RETURNING e.*
                """
            ),
            {"worker": worker, "limit": limit, "now": now},
        ).mappings()
    )


def release_claims(conn: Connection, worker: str) -> int:
    """Hands this worker's claims back (graceful shutdown): no retry is counted."""
    a = conn.execute(
        text(
            "UPDATE episodes SET status = 'pending', claimed_by = NULL, claimed_at = NULL, "
            "next_attempt_at = now(), updated_at = now() "
            "WHERE status = 'processing' AND claimed_by = :w"
        ),
        {"w": worker},
    ).rowcount
    b = conn.execute(
        text(
            "UPDATE episodes SET semantic_status = 'pending', semantic_claimed_by = NULL, "
            "semantic_claimed_at = NULL, updated_at = now() "
            "WHERE semantic_status = 'processing' AND semantic_claimed_by = :w"
        ),
        {"w": worker},
    ).rowcount
    if a or b:
        conn.execute(text("SELECT pg_notify('episodic_episodes', 'released')"))
    return a + b


# ---- reading -----------------------------------------------------------------------------


def load_summary_request(conn: Connection, episode: RowMapping) -> SummaryRequest:
    """The whole un-compacted thread up to the window's end, plus the previous summary."""
    rows = conn.execute(
        text(
            "SELECT sequence, role, content, created_at, metadata FROM messages "
            "WHERE thread_id = :t AND sequence <= :end ORDER BY sequence"
        ),
        {"t": episode["thread_id"], "end": episode["end_sequence"]},
    ).mappings()
    messages = [
        ChatMessage(
            r["sequence"], r["role"], r["content"], r["created_at"], _speaker(r["metadata"])
        )
        for r in rows
    ]
    previous = conn.execute(
        text(
            "SELECT summary FROM episodes WHERE thread_id = :t AND end_sequence < :start "
            "AND completed_at IS NOT NULL ORDER BY end_sequence DESC LIMIT 1"
        ),
        {"t": episode["thread_id"], "start": episode["start_sequence"]},
    ).scalar()
    label = conn.execute(
        text("SELECT label FROM threads WHERE thread_id = :t"), {"t": episode["thread_id"]}
    ).scalar()
    return SummaryRequest(
        messages=messages,
        window_start_sequence=episode["start_sequence"],
        previous_summary=previous or None,
        thread_label=label or "",
    )


def _speaker(metadata: Any) -> str | None:
    if isinstance(metadata, str):
        metadata = json.loads(metadata)
    if isinstance(metadata, dict):
        for key in ("name", "speaker"):
            value = metadata.get(key)
            if isinstance(value, str) and value.strip():
                return value
    return None


def load_window(conn: Connection, episode: RowMapping) -> list[WindowMessage]:
    """Only the episode's own window: semantic extraction never re-reads older messages."""
    rows = conn.execute(
        text(
            "SELECT sequence, role, content, created_at FROM messages WHERE thread_id = :t "
            "AND sequence BETWEEN :start AND :end ORDER BY sequence"
        ),
        {
            "t": episode["thread_id"],
            "start": episode["start_sequence"],
            "end": episode["end_sequence"],
        },
    ).mappings()
    return [WindowMessage(r["sequence"], r["role"], r["content"], r["created_at"]) for r in rows]


# ---- completion --------------------------------------------------------------------------


def complete(
    conn: Connection,
    episode: RowMapping,
    worker: str,
    *,
    summary: str,
    key_learnings: list[str],
    entities: list[str],
    event_type: str,
    actor: str,
    embedding: list[float],
) -> str | None:
    """Writes the result and keeps one current episode per thread. Returns the new status
    ('completed', or 'archived' when a newer window already completed), or None when the
    claim was lost and nothing was written."""
    # Serialise completions of one thread (brief: the slow work is already done).
    conn.execute(
        text("SELECT 1 FROM threads WHERE thread_id = :t FOR UPDATE"),
        {"t": episode["thread_id"]},
    )
    # Still ours? Checked (and locked) before touching any other row: a lost claim must
    # not archive the thread's current episode.
    mine = conn.execute(
        text(
            "SELECT 1 FROM episodes WHERE episode_id = :id AND status = 'processing' "
            "AND claimed_by = :worker FOR UPDATE"
        ),
        {"id": episode["episode_id"], "worker": worker},
    ).first()
    if mine is None:
        return None
    newer = conn.execute(
        text(
            "SELECT 1 FROM episodes WHERE thread_id = :t AND status = 'completed' "
            "AND end_sequence > :end LIMIT 1"
        ),
        {"t": episode["thread_id"], "end": episode["end_sequence"]},
    ).first()
    final_status = "archived" if newer else "completed"
    if final_status == "completed":
        conn.execute(
            text(
                "UPDATE episodes SET status = 'archived', updated_at = now() "
                "WHERE thread_id = :t AND status = 'completed' AND episode_id <> :id"
            ),
            {"t": episode["thread_id"], "id": episode["episode_id"]},
        )
    row = conn.execute(
        text(
            """
            UPDATE episodes SET status = :status, summary = :summary,
                key_learnings = CAST(:learnings AS jsonb), entities = CAST(:entities AS text[]),
                event_type = :event_type, actor = :actor, embedding = CAST(:embedding AS vector),
                error = NULL, claimed_by = NULL, claimed_at = NULL,
                completed_at = now(), updated_at = now()
            WHERE episode_id = :id AND status = 'processing' AND claimed_by = :worker
            RETURNING episode_id
            """
        ),
        {
            "status": final_status,
            "summary": summary,
            "learnings": json.dumps(key_learnings),
            "entities": entities,
            "event_type": event_type,
            "actor": actor,
            "embedding": "[" + ",".join(f"{x:.7g}" for x in embedding) + "]",
            "id": episode["episode_id"],
            "worker": worker,
        },
    ).first()
    if row is None:
        return None
    conn.execute(text("SELECT pg_notify('episodic_semantic', :id)"), {"id": str(row[0])})
    return final_status


def finish_semantic(
    conn: Connection, episode_id: Any, worker: str, status: str, error: str | None = None
) -> bool:
    return (
        conn.execute(
            text(
                "UPDATE episodes SET semantic_status = :status, semantic_error = :error, "
                "semantic_claimed_by = NULL, semantic_claimed_at = NULL, updated_at = now() "
                "WHERE episode_id = :id AND semantic_status = 'processing' "
                "AND semantic_claimed_by = :worker"
            ),
            {"status": status, "error": error, "id": episode_id, "worker": worker},
        ).rowcount
        == 1
    )


# ---- the pipeline ------------------------------------------------------------------------


class Pipeline:
    """One worker's view: claim, summarise, embed, complete; then semantic extraction."""

    def __init__(
        self,
        engine: Engine,
        summariser: Summariser,
        embedder: Embedder,
        extractor: SemanticExtractor | None,
        *,
        max_retries: int,
        retry_backoff: timedelta,
        worker: str | None = None,
        index_for_recall: bool = True,
    ) -> None:
        self.engine = engine
        self.summariser = summariser
        self.embedder = embedder
        self.extractor = extractor
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.worker = worker or worker_id()
        # Recall searches what the thread said (chunk embeddings + a lexical document),
        # written in the completion transaction; see episodic.store.recall_index.
        self.index_for_recall = index_for_recall

    def run_once(self, limit: int, now: datetime | None = None) -> PassResult:
        result = PassResult()
        with self.engine.begin() as conn:
            claimed = claim_pending(conn, self.worker, limit, now)
        for episode in claimed:
            status = self.process(episode)
            if status in ("completed", "archived"):
                result.completed += 1
            elif status is not None:
                result.failed += 1
        result.semantic_processed = self.run_semantic(limit, now)
        return result

    def process(self, episode: RowMapping) -> str | None:
        """Summarises one claimed episode; returns its new status (None if the claim was lost)."""
        links = link_from(_carrier(episode.get("trace_context")))
        with tracer.start_as_current_span(
            "summarise episode",
            links=links,
            attributes={
                "episodic.episode_id": str(episode["episode_id"]),
                "episodic.thread_id": str(episode["thread_id"]),
                "episodic.window": f"{episode['start_sequence']}-{episode['end_sequence']}",
            },
        ) as span:
            try:
                with self.engine.connect() as conn:
                    request = load_summary_request(conn, episode)
                with tracer.start_as_current_span("llm.summarise"):
                    result = self.summariser.summarise(request)
                with tracer.start_as_current_span("embed.summary"):
                    vector = self.embedder.embed(
                        [_embedding_text(result.summary, result.key_learnings)]
                    )[0]
                prepared = None
                if self.index_for_recall:
                    # The slow part (embedding new chunks) runs outside any transaction.
                    with (
                        tracer.start_as_current_span("index.prepare"),
                        self.engine.connect() as conn,
                    ):
                        prepared = prepare_episode_index(conn, episode["episode_id"], self.embedder)
                with self.engine.begin() as conn:
                    status = complete(
                        conn,
                        episode,
                        self.worker,
                        summary=result.summary,
                        key_learnings=result.key_learnings,
                        entities=normalise_entities(result.entities),
                        event_type=result.event_type,
                        actor=result.actor,
                        embedding=[float(x) for x in vector],
                    )
                    if status is not None and prepared is not None:
                        write_episode_index(conn, prepared)
                if status is None:
                    log.warning(
                        "claim on episode %s was lost; result dropped", episode["episode_id"]
                    )
                span.set_attribute("episodic.status", status or "lost")
                return status
            except Exception as err:  # any provider or data problem: count it, retry later
                span.record_exception(err)
                message = f"{type(err).__name__}: {err}"[:MAX_ERROR_CHARS]
                log.warning("episode %s failed: %s", episode["episode_id"], message)
                with self.engine.begin() as conn:
                    status = lifecycle.record_failure(
                        conn,
                        episode["episode_id"],
                        self.worker,
                        message,
                        max_retries=self.max_retries,
                        backoff=self.retry_backoff,
                    )
                span.set_attribute("episodic.status", status or "lost")
                return status

    def run_semantic(self, limit: int, now: datetime | None = None) -> int:
        with self.engine.begin() as conn:
            claimed = claim_semantic(conn, self.worker, limit, now)
        for episode in claimed:
            self.process_semantic(episode)
        return len(claimed)

    def process_semantic(self, episode: RowMapping) -> str | None:
        with tracer.start_as_current_span(
            "semantic extraction", attributes={"episodic.episode_id": str(episode["episode_id"])}
        ):
            if self.extractor is None:
                with self.engine.begin() as conn:
                    finish_semantic(conn, episode["episode_id"], self.worker, "skipped")
                return "skipped"
            try:
                with self.engine.connect() as conn:
                    window = load_window(conn, episode)
                with self.engine.begin() as conn:
                    stored = self.extractor.extract(conn, episode, window)
                    status = "completed" if stored else "skipped"
                    finish_semantic(conn, episode["episode_id"], self.worker, status)
                return status
            except Exception as err:
                log.warning("semantic extraction of %s failed: %s", episode["episode_id"], err)
                with self.engine.begin() as conn:
                    finish_semantic(
                        conn,
                        episode["episode_id"],
                        self.worker,
                        "failed",
                        f"{type(err).__name__}: {err}"[:MAX_ERROR_CHARS],
                    )
                return "failed"

    def release(self) -> int:
        with self.engine.begin() as conn:
            return release_claims(conn, self.worker)


def _embedding_text(summary: str, key_learnings: list[str]) -> str:
    return summary if not key_learnings else summary + "\n" + "\n".join(key_learnings)


def _carrier(value: Any) -> dict[str, str] | None:
    """The trace context of the trigger that created the episode, stored on the row."""
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else None
