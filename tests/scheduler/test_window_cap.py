"""An episode's window is capped in messages and bytes (issue 49): a longer stretch of
conversation becomes several consecutive episodes, opened together, contiguous, the last
one covering the stretch's end — and an explicit episode still stops at its EndThread's
checkpoint."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import Engine, text

from episodic.services.ingest import domain as ingest
from episodic.store import episode_windows
from episodic.store import episodes as states
from episodic.testing.keys import test_vault

from .helpers import INGEST, add_messages, dataset_of, episodes, new_thread, thread_row


def _open(engine: Engine, thread_id: uuid.UUID, trigger: str = "inactivity") -> dict:  # type: ignore[type-arg]
    with engine.begin() as conn:
        row = states.open_episode(conn, thread_id, trigger, dataset=dataset_of(conn, thread_id))
    assert row is not None
    return dict(row)


def _windows(engine: Engine, thread_id: uuid.UUID) -> list[tuple[int, int]]:
    return [(e["start_sequence"], e["end_sequence"]) for e in episodes(engine, thread_id)]


def test_a_stretch_over_the_message_cap_becomes_consecutive_episodes(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(episode_windows, "MAX_WINDOW_MESSAGES", 5)
    thread_id = new_thread(engine, messages=12)
    last = _open(engine, thread_id)
    assert _windows(engine, thread_id) == [(1, 5), (6, 10), (11, 12)]
    assert (last["start_sequence"], last["end_sequence"]) == (11, 12)  # the stretch's end
    assert [e["message_count"] for e in episodes(engine, thread_id)] == [5, 5, 2]
    assert thread_row(engine, thread_id)["captured_sequence"] == 12
    assert all(e["status"] == "pending" for e in episodes(engine, thread_id))
    # Within the cap, one episode as before.
    add_messages(engine, thread_id, 3, notify=False)
    _open(engine, thread_id)
    assert _windows(engine, thread_id)[-1] == (13, 15)


def test_the_byte_cap_counts_stored_content_and_a_lone_giant_message_is_its_own_window(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread_id = new_thread(engine)
    sizes = [100, 100, 100, 1000, 100]
    batch = [ingest.NewMessage(role="user", content="x" * n, metadata={}) for n in sizes]
    with engine.begin() as conn:
        ingest.add_messages(conn, test_vault(), thread_id, batch, INGEST)
        stored = conn.execute(
            text("SELECT octet_length(content) FROM messages WHERE thread_id = :t ORDER BY 1"),
            {"t": thread_id},
        ).scalars()
        smallest = min(stored)
    # Room for two of the small ones (as stored: with the format byte, or sealed).
    monkeypatch.setattr(episode_windows, "MAX_WINDOW_BYTES", 2 * smallest + 10)
    _open(engine, thread_id)
    assert _windows(engine, thread_id) == [(1, 2), (3, 3), (4, 4), (5, 5)]


def test_an_explicit_episode_over_the_cap_still_stops_at_its_checkpoint(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(episode_windows, "MAX_WINDOW_MESSAGES", 4)
    thread_id = new_thread(engine, messages=10)
    with engine.begin() as conn:  # an EndThread was made after message 7
        conn.execute(
            text("UPDATE threads SET end_requested_sequence = 7 WHERE thread_id = :t"),
            {"t": thread_id},
        )
    last = _open(engine, thread_id, "explicit")
    assert _windows(engine, thread_id) == [(1, 4), (5, 7)]
    assert last["end_sequence"] == 7
    # Messages 8-10, written after the EndThread, wait for their own trigger.
    assert thread_row(engine, thread_id)["captured_sequence"] == 7


def test_a_summary_reads_its_window_and_only_the_newest_older_messages_that_fit(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Summariser's read is bounded whatever the thread's length: the window, then the
    older messages newest first, a page at a time, until the context budget is met."""
    from episodic.services.summariser import pipeline, reading

    thread_id = new_thread(engine, messages=20)  # "message 0" … "message 19": 9-10 chars
    _open(engine, thread_id)
    add_messages(engine, thread_id, 10, notify=False)
    window = _open(engine, thread_id)
    assert (window["start_sequence"], window["end_sequence"]) == (21, 30)
    monkeypatch.setattr(reading, "SUMMARY_CONTEXT_CHARS", 45)  # five older messages
    monkeypatch.setattr(reading, "CONTEXT_PAGE", 2)  # read in pages of two
    with engine.connect() as conn:
        request = pipeline.load_summary_request(conn, test_vault(), window)
    assert [m.sequence for m in request.window] == list(range(21, 31))
    assert [m.sequence for m in request.context] == [16, 17, 18, 19, 20]
    assert request.rows[0].content == "message 15"
