"""Retention and compaction, applied by the Scheduler's lifecycle sweep (driven here with
RunSweep at an injected time)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest
from sqlalchemy import text

from episodic.sdk.client import EpisodicRpcError
from episodic.store.lifecycle import messages_digest
from episodic.testing.scan import find

pytestmark = pytest.mark.citus  # retention and compaction run on Citus too

CHAT = [
    ("user", "We agreed the quarterly pricing review moves to the second Monday."),
    ("assistant", "Noted: pricing review on the second Monday of each quarter."),
    ("user", "Also my manager Priyanka approves discounts above ten percent."),
]


def _later(days: int) -> datetime:
    return datetime.now(UTC) + timedelta(days=days)


def _summarised_thread(client, dataset: str) -> str:  # type: ignore[no-untyped-def]
    thread = client.create_thread(dataset, label="pricing")
    client.add_messages(thread.thread_id, CHAT)
    client.end_thread(thread.thread_id)
    assert client.process_pending() >= 1
    return str(thread.thread_id)


def test_retention_purges_threads_past_their_datasets_policy(suite, engine) -> None:  # type: ignore[no-untyped-def]
    client = suite({"EPISODIC_RETENTION_DAYS": "90"})
    short = _summarised_thread(client, "short_memory")
    default = _summarised_thread(client, "default_memory")
    policy = client.set_dataset_policy("short_memory", retention_days=30)
    assert policy.retention_days == 30 and policy.effective_retention_days == 30
    assert client.get_dataset_policy("default_memory").effective_retention_days == 90
    assert client.get_dataset_policy("default_memory").retention_days is None

    assert client.run_sweep(as_of=_later(10)).threads_purged == 0
    swept = client.run_sweep(as_of=_later(31))
    assert swept.threads_purged == 1
    with pytest.raises(EpisodicRpcError) as err:
        client.get_thread(short)
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    with engine.connect() as conn:
        assert not find(conn, [short])
        purge = conn.execute(
            text("SELECT dataset, details FROM audit_events WHERE action = 'retention.purge'")
        ).one()
    assert purge[0] == "short_memory" and purge[1] == {"threads": 1}
    assert client.get_thread(default).dataset == "default_memory"  # 90 days not passed
    status = client.pipeline_status(check_providers=False)
    assert status.lifecycle is not None and status.lifecycle.threads_purged == 1
    assert status.lifecycle.last_run_at is not None
    assert client.run_sweep(as_of=_later(91)).threads_purged == 1
    with pytest.raises(EpisodicRpcError):
        client.get_thread(default)


def test_compaction_keeps_the_episode_and_drops_the_messages(suite, engine) -> None:  # type: ignore[no-untyped-def]
    client = suite({"EPISODIC_COMPACT_AFTER_DAYS": "30"})
    thread_id = _summarised_thread(client, "old_chats")
    before = client.list_messages(thread_id).items
    episode = client.recall("old_chats", "pricing review").episodes[0].episode
    expected = messages_digest(
        {
            "sequence": m.sequence,
            "role": m.role,
            "content": m.content,
            "metadata": m.metadata,
            "created_at": m.created_at,
        }
        for m in before
    )

    assert client.run_sweep(as_of=_later(29)).threads_compacted == 0
    assert client.run_sweep(as_of=_later(31)).threads_compacted == 1

    page = client.list_messages(thread_id)
    assert page.items == [] and page.compaction is not None
    assert page.compaction.through_sequence == 3
    assert page.compaction.content_digest == expected  # proof of exactly what was dropped
    assert page.compaction.episode_id == episode.episode_id
    assert page.compaction.summary == episode.summary and episode.summary
    thread = client.get_thread(thread_id)
    assert thread.compaction == page.compaction and thread.message_count == 3
    kept = client.get_episode(episode.episode_id)
    assert (kept.start_sequence, kept.end_sequence, kept.message_count) == (1, 3, 3)
    assert kept.summary == episode.summary and kept.key_learnings == episode.key_learnings
    # Recall still finds it, by meaning and by the summary's words.
    found = client.recall("old_chats", "pricing review", similarity_weight=1, recency_weight=0)
    assert [e.episode.episode_id for e in found.episodes] == [episode.episode_id]
    with engine.connect() as conn:
        counts = conn.execute(
            text(
                "SELECT (SELECT count(*) FROM messages WHERE thread_id = :t), "
                "(SELECT count(*) FROM message_chunks WHERE thread_id = :t)"
            ),
            {"t": thread_id},
        ).one()
    assert tuple(counts) == (0, 0)
    # A second pass has nothing to do; the thread lives on and takes new messages.
    assert client.run_sweep(as_of=_later(32)).threads_compacted == 0
    client.add_messages(thread_id, [("user", "A new note after compaction.")])
    after = client.list_messages(thread_id)
    assert [m.sequence for m in after.items] == [4] and after.compaction is not None
    status = client.pipeline_status("old_chats", check_providers=False)
    assert status.lifecycle.threads_compacted_total == 1


def test_compaction_waits_for_pending_work(suite) -> None:  # type: ignore[no-untyped-def]
    client = suite({"EPISODIC_COMPACT_AFTER_DAYS": "30"})
    thread = client.create_thread("busy", label="x")
    client.add_messages(thread.thread_id, CHAT)
    client.end_thread(thread.thread_id)  # an episode is pending, not summarised yet
    assert client.run_sweep(as_of=_later(40)).threads_compacted == 0
    assert len(client.list_messages(thread.thread_id).items) == 3
    client.process_pending()
    client.add_messages(thread.thread_id, [("user", "uncaptured")])  # not in any episode
    assert client.run_sweep(as_of=_later(40)).threads_compacted == 0
    assert len(client.list_messages(thread.thread_id).items) == 4


def test_dataset_policy_is_checked(suite) -> None:  # type: ignore[no-untyped-def]
    client = suite()
    for bad in (0, -3, 40_000):
        with pytest.raises(EpisodicRpcError) as err:
            client.set_dataset_policy("p", retention_days=bad)
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.field == "retention_days"
    with pytest.raises(EpisodicRpcError) as err:
        client.get_dataset_policy("nobody_here")
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    policy = client.set_dataset_policy("p", compact_after_days=7)
    assert policy.compact_after_days == 7 and policy.retention_days is None
    assert policy.encrypted
    assert client.set_dataset_policy("p", retention_days=30).compact_after_days == 7  # kept
    kept = client.set_dataset_policy("p", language="de")  # the language alone
    assert (kept.retention_days, kept.compact_after_days, kept.language) == (30, 7, "german")
    assert client.set_dataset_policy("p") == kept  # nothing given: nothing changes
    reset = client.set_dataset_policy("p", retention_days=None, compact_after_days=None)
    assert reset.compact_after_days is None and reset.effective_compact_after_days is None
