"""What the Summariser reads of an episode's thread: the window and the older messages
that fit in :data:`SUMMARY_CONTEXT_CHARS` (read a page at a time) for the summary, the
window alone for semantic extraction, and the recall index's input out of what it has in
hand.

Split out of :mod:`.pipeline` (issue 42): the reads are bounded for memory's sake (issue
49) and change apart from the pass's orchestration; :mod:`.pipeline` re-exports them.
:data:`SUMMARY_CONTEXT_CHARS` and :data:`CONTEXT_PAGE` are read here: a test that changes
them sets them on this module.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, RowMapping, text

from episodic.providers.types import ChatMessage, SummaryRequest, speaker_from_metadata
from episodic.store.recall_index import MAX_INDEXED_CHARS, IndexInput
from episodic.store.vault import Vault
from episodic.tool_calls import rendered_content

from .semantic import WindowMessage

__all__ = [
    "CONTEXT_PAGE",
    "SUMMARY_CONTEXT_CHARS",
    "index_input",
    "indexed_messages",
    "load_summary_request",
    "load_window",
]

#: The older messages of a thread a summary reads besides its window: the newest that fit in
#: this many characters — what the lexical document keeps of a thread anyway
#: (recall_index.MAX_INDEXED_CHARS), and more than an LLM is sent
#: (EPISODIC_LLM_MAX_INPUT_CHARS). With the window's cap (episodes.MAX_WINDOW_MESSAGES,
#: MAX_WINDOW_BYTES) it bounds what summarising one episode holds in memory, however long
#: its thread (issue 49: 133,000 messages read whole took 6.9 GB).
SUMMARY_CONTEXT_CHARS = MAX_INDEXED_CHARS
#: Older messages are read newest first, this many per statement, until the budget is met.
CONTEXT_PAGE = 500


def _chat_messages(rows: list[Any]) -> list[ChatMessage]:
    return [
        ChatMessage(
            r["sequence"],
            r["role"],
            # Tool calls and results are part of what happened (episodic.tool_calls).
            rendered_content(r["content"], r.get("tools")),
            r["created_at"],
            speaker_from_metadata(r["metadata"]),
        )
        for r in rows
    ]


def load_summary_request(conn: Connection, vault: Vault, episode: RowMapping) -> SummaryRequest:
    """The episode's window, the newest older messages of the thread that fit in
    :data:`SUMMARY_CONTEXT_CHARS` (read a page at a time, so a long thread is never read
    whole), and the previous summary."""
    dataset = episode["dataset"]
    columns = "SELECT sequence, role, content, created_at, metadata, tools FROM messages "
    window = conn.execute(
        text(
            columns + "WHERE dataset = :d AND thread_id = :t "
            "AND sequence BETWEEN :start AND :end ORDER BY sequence"
        ),
        {
            "d": dataset,
            "t": episode["thread_id"],
            "start": episode["start_sequence"],
            "end": episode["end_sequence"],
        },
    ).mappings()
    messages = _chat_messages(vault.open_rows(conn, dataset, list(window), "messages"))
    context: list[ChatMessage] = []
    budget, before = SUMMARY_CONTEXT_CHARS, episode["start_sequence"]
    while budget > 0:
        page = conn.execute(
            text(
                columns + "WHERE dataset = :d AND thread_id = :t AND sequence < :before "
                "ORDER BY sequence DESC LIMIT :n"
            ),
            {"d": dataset, "t": episode["thread_id"], "before": before, "n": CONTEXT_PAGE},
        ).mappings()
        older = _chat_messages(vault.open_rows(conn, dataset, list(page), "messages"))
        for message in older:
            if budget <= 0:
                break
            context.append(message)
            budget -= len(message.content)
        if len(older) < CONTEXT_PAGE:
            break
        before = older[-1].sequence
    messages = [*reversed(context), *messages]
    previous = (
        conn.execute(
            text(
                "SELECT summary FROM episodes WHERE dataset = :d AND thread_id = :t "
                "AND end_sequence < :start AND completed_at IS NOT NULL "
                "ORDER BY end_sequence DESC LIMIT 1"
            ),
            {"d": dataset, "t": episode["thread_id"], "start": episode["start_sequence"]},
        )
        .mappings()
        .all()
    )
    label = (
        conn.execute(
            text("SELECT label FROM threads WHERE dataset = :d AND thread_id = :t"),
            {"d": dataset, "t": episode["thread_id"]},
        )
        .mappings()
        .all()
    )
    previous_summary = vault.open_rows(conn, dataset, list(previous), "episodes")
    thread = vault.open_rows(conn, dataset, list(label), "threads")
    return SummaryRequest(
        messages=messages,
        window_start_sequence=episode["start_sequence"],
        previous_summary=(previous_summary[0]["summary"] if previous_summary else "") or None,
        thread_label=(thread[0]["label"] if thread else "") or "",
    )


def load_window(conn: Connection, vault: Vault, episode: RowMapping) -> list[WindowMessage]:
    """Only the episode's own window: semantic extraction never re-reads older messages."""
    rows = conn.execute(
        text(
            "SELECT sequence, role, content, created_at FROM messages WHERE dataset = :d "
            "AND thread_id = :t AND sequence BETWEEN :start AND :end ORDER BY sequence"
        ),
        {
            "d": episode["dataset"],
            "t": episode["thread_id"],
            "start": episode["start_sequence"],
            "end": episode["end_sequence"],
        },
    ).mappings()
    return [
        WindowMessage(r["sequence"], r["role"], r["content"], r["created_at"])
        for r in vault.open_rows(conn, episode["dataset"], list(rows), "messages")
    ]


def indexed_messages(request: SummaryRequest) -> list[tuple[int, str]]:
    """The thread as read for the summary, as the recall index reads it."""
    return [(m.sequence, f"{m.name}: {m.content}" if m.name else m.content) for m in request.rows]


def index_input(episode: RowMapping, request: SummaryRequest, result: Any) -> IndexInput:
    """What the episode's recall index is built from, out of what the summariser has in
    hand (the thread as read for the summary, and the summary)."""
    return IndexInput(
        episode_id=episode["episode_id"],
        thread_id=episode["thread_id"],
        dataset=episode["dataset"],
        end_sequence=episode["end_sequence"],
        messages=indexed_messages(request),
        summary=result.summary,
        key_learnings=list(result.key_learnings),
        entities=list(result.entities),
        speakers=[(m.sequence, " ".join(m.name.split())) for m in request.rows if m.name],
    )
