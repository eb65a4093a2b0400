"""Events under the privacy rules: sealed at rest (the whole-database scan finds none of
their words), erased with their thread or their dataset (counted in the receipt), purged by
retention, and exported."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from episodic.ops.export import export_dataset
from episodic.testing.scan import find

WORDS = ("quagmirefox", "zebrastripe", "pelicanbot")


def _record(client, dataset: str, *, thread_id: str | None = None, words=WORDS, **kw):  # type: ignore[no-untyped-def]
    return client.record_event(
        dataset,
        f"Chose the {words[0]} plan after the review",
        event_type="decision",
        actor=words[2],
        entities=[words[1]],
        thread_id=thread_id,
        **kw,
    ).event


def _count(engine, dataset: str) -> int:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM events WHERE dataset = :d"), {"d": dataset}
            ).scalar_one()
        )


def test_event_words_are_sealed_and_still_found(suite, engine) -> None:  # type: ignore[no-untyped-def]
    client = suite()
    event = _record(client, "private_user")
    client.process_pending()  # embeds it
    with engine.connect() as conn:
        assert not find(conn, list(WORDS)), "no column holds an event's words in the clear"
        assert (
            conn.execute(
                text("SELECT count(*) FROM events WHERE embedding IS NOT NULL")
            ).scalar_one()
            == 1
        )
    found = client.recall("private_user", "quagmirefox plan", similarity_weight=1, recency_weight=0)
    assert [e.episode.episode_id for e in found] == [event.episode_id]
    assert [e.episode_id for e in client.recall("private_user", actor="PelicanBot")] == [
        event.episode_id
    ]
    assert [e.episode_id for e in client.recall("private_user", entities=["ZebraStripe"])] == [
        event.episode_id
    ]


def test_the_scan_sees_event_words_stored_in_the_clear(suite, engine) -> None:  # type: ignore[no-untyped-def]
    """The control of the test above."""
    client = suite({"EPISODIC_ENCRYPTION": "off"})
    _record(client, "open_user")
    with engine.connect() as conn:
        hits = {(h.table, h.column) for h in find(conn, list(WORDS))}
    assert {("events", "summary"), ("events", "actor"), ("events", "search_vector")} <= hits


def test_erasure_takes_events_with_their_thread_and_dataset(suite, engine) -> None:  # type: ignore[no-untyped-def]
    client = suite({"EPISODIC_ENCRYPTION": "off"})
    gone = client.create_thread("erased_user")
    kept = client.create_thread("erased_user")
    _record(client, "erased_user", thread_id=gone.thread_id)
    _record(client, "erased_user", thread_id=kept.thread_id, words=("keptword", "kept", "kept"))
    _record(client, "erased_user")  # no thread
    _record(client, "neighbour", words=("neighbourword", "nb", "nb"))

    receipt = client.delete_thread(gone.thread_id)
    assert receipt.rows_deleted["events"] == 1
    assert _count(engine, "erased_user") == 2

    receipt = client.delete_dataset("erased_user")
    assert receipt.rows_deleted["events"] == 2
    with engine.connect() as conn:
        assert not find(conn, ["erased_user", *WORDS, "keptword"])
    assert _count(engine, "neighbour") == 1


def test_retention_purges_threadless_events_by_when_they_occurred(suite, engine) -> None:  # type: ignore[no-untyped-def]
    client = suite({"EPISODIC_RETENTION_DAYS": "30"})
    now = datetime.now(UTC)
    old = _record(client, "kept_a_while", occurred_at=now - timedelta(days=20))
    _record(client, "kept_a_while", occurred_at=now - timedelta(days=5), words=("newer", "n", "n"))
    client.run_sweep(as_of=now + timedelta(days=11))  # the old one is now 31 days old
    with engine.connect() as conn:
        left = conn.execute(text("SELECT event_id::text FROM events")).scalars().all()
    assert len(left) == 1 and old.episode_id not in left


def test_export_carries_events(suite) -> None:  # type: ignore[no-untyped-def]
    client = suite()
    thread = client.create_thread("exported")
    with_thread = _record(client, "exported", thread_id=thread.thread_id)
    alone = _record(client, "exported", words=("alone", "a", "a"))
    out = io.StringIO()
    counts = export_dataset(client, "exported", out)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    events = {r["episode_id"]: r for r in records if r.get("kind") == "event"}
    assert set(events) == {with_thread.episode_id, alone.episode_id}
    assert events[with_thread.episode_id]["thread_id"] == thread.thread_id
    assert events[alone.episode_id]["summary"] == "Chose the alone plan after the review"
    assert counts.episode == 2
