"""The entity canon through the real services: the Summariser files entities as it
completes episodes, Recall resolves them, the AdminService merges and splits them, and
erasure forgets them."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from episodic.sdk.client import (
    EpisodicClient,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from episodic.testing.scan import find

pytestmark = pytest.mark.citus  # entities through the services, on Citus too

DATASET = "canon_service"


def _conversation(client: EpisodicClient, label: str, *lines: str) -> str:
    thread = client.create_thread(DATASET, label=label)
    client.add_messages(thread.thread_id, [("user", line) for line in lines])
    client.end_thread(thread.thread_id)
    client.process_pending()
    assert client.wait_for_episode(thread.thread_id, timeout=60).status == "completed"
    return thread.thread_id


def _threads(result) -> set[str]:  # type: ignore[no-untyped-def]
    return {e.thread_id for e in result}


def test_spellings_become_one_entity_across_the_services(suite, engine) -> None:  # type: ignore[no-untyped-def]
    client = suite()
    first = _conversation(client, "one", "We agreed on the Pro tier for project Atlas.")
    second = _conversation(client, "two", "The Atlas project is late again, Alexandra says.")
    third = _conversation(client, "three", "Ask Alex whether Atlas ships in May.")
    other = _conversation(client, "four", "Orion needs a new logo.")

    found = {e.name: e for e in client.list_entities(DATASET)}
    atlas = next(e for e in found.values() if "atlas" in {a for a, _ in e.aliases})
    assert {a for a, _ in atlas.aliases} >= {"project atlas", "atlas"}
    assert atlas.episode_count == 3
    assert "alex" in found and "alexandra" in found  # two people stay apart

    # On query: any spelling finds every episode about Atlas.
    everything = {first, second, third}
    for spelling in ("atlas", "Atlas project", "the Atlas project"):
        result = client.recall(DATASET, entities=[spelling], limit=10)
        assert _threads(result) == everything, spelling
    exact = client.recall(DATASET, entities=["atlas"], limit=10, exact_entities=True)
    assert _threads(exact) < everything
    assert other not in _threads(client.recall(DATASET, entities=["atlas"], limit=10))

    # The timeline: oldest first, paged.
    seen, token = [], ""
    while True:
        page = client.entity_timeline(DATASET, "Atlas", page_size=2, page_token=token)
        assert page.entity is not None and page.entity.entity_id == atlas.entity_id
        seen.extend(e.thread_id for e in page)
        token = page.next_page_token
        if not token:
            break
    assert seen == [first, second, third]

    # Merge two people an admin knows are one; split them again.
    merged = client.merge_entities(DATASET, "alex", ["Alexandra"])
    assert {a for a, _ in merged.aliases} == {"alex", "alexandra"}
    assert _threads(client.recall(DATASET, entities=["alexandra"], limit=10)) == {second, third}
    split = client.split_entity(DATASET, "alexandra")
    assert split.split_off.name == "alexandra" and split.remaining.name == "alex"
    assert _threads(client.recall(DATASET, entities=["alexandra"], limit=10)) == {second}
    with engine.connect() as conn:
        actions = conn.execute(
            text("SELECT action, details::text FROM audit_events WHERE dataset = :d"),
            {"d": DATASET},
        ).all()
    assert {a for a, _ in actions} >= {"entity.merge", "entity.split"}
    assert all("alex" not in details for _, details in actions)  # ids, not names


def test_entity_calls_answer_clear_errors(suite) -> None:  # type: ignore[no-untyped-def]
    client = suite()
    _conversation(client, "one", "Alex met with Orion today. Project Atlas is on.")
    with pytest.raises(NotFoundError) as err:
        client.entity_timeline(DATASET, "Atlantis")
    assert err.value.field == "entity"
    with pytest.raises(InvalidArgumentError):
        client.entity_timeline(DATASET, "  ...  ")
    with pytest.raises(InvalidArgumentError) as bad:
        client.merge_entities(DATASET, "atlas", ["project atlas"])  # one entity already
    assert "itself" in str(bad.value)
    with pytest.raises(InvalidArgumentError):
        client.merge_entities(DATASET, "atlas", [])
    with pytest.raises(NotFoundError) as missing:
        client.merge_entities(DATASET, "atlas", ["nobody"])
    assert missing.value.field == "sources[0]"
    with pytest.raises(FailedPreconditionError):
        client.split_entity(DATASET, "orion")  # its only alias
    with pytest.raises(NotFoundError):
        client.split_entity(DATASET, "nobody")
    with pytest.raises(InvalidArgumentError):
        client.list_entities(DATASET, page_token="garbage")


def test_deleting_a_thread_forgets_the_names_only_it_used(suite, engine) -> None:  # type: ignore[no-untyped-def]
    client = suite({"EPISODIC_ENCRYPTION": "off"})  # in the clear: the scan can see names
    kept = _conversation(client, "kept", "Project Atlas is on track.")
    gone = _conversation(client, "gone", "Zorblax Quimby joins project Atlas.")
    names = {e.name for e in client.list_entities(DATASET)}
    assert "quimby" in names
    with engine.connect() as conn:
        assert any(h.table == "entity_aliases" for h in find(conn, ["quimby"]))  # in the clear
    receipt = client.delete_thread(gone)
    assert receipt.rows_deleted["entity_aliases"] >= 1
    with engine.connect() as conn:
        assert not find(conn, ["zorblax", "quimby"])
    left = {e.name: e for e in client.list_entities(DATASET)}
    assert "quimby" not in left
    atlas = next(e for e in left.values() if "atlas" in e.name)
    assert atlas.episode_count == 1
    assert [e.thread_id for e in client.entity_timeline(DATASET, "atlas")] == [kept]


def test_deleting_an_event_forgets_the_names_only_it_used(suite, engine) -> None:  # type: ignore[no-untyped-def]
    """An event erased by its id (DeleteEpisode) takes the names only it mentioned out of
    the canon, as a thread's erasure does; a name something else still mentions stays."""
    client = suite({"EPISODIC_ENCRYPTION": "off"})  # in the clear: the scan can see names
    _conversation(client, "kept", "Project Atlas is on track.")
    wrong = client.record_event(
        DATASET,
        "Zorblax Quimby approved Atlas",
        event_type="decision",
        entities=["Zorblax Quimby", "atlas"],
    ).event
    assert "zorblax quimby" in {e.name for e in client.list_entities(DATASET)}
    with engine.connect() as conn:
        assert any(h.table == "entity_aliases" for h in find(conn, ["quimby"]))

    client.delete_episode(wrong.episode_id)
    with engine.connect() as conn:
        assert not find(conn, ["zorblax", "quimby"])
    left = {e.name for e in client.list_entities(DATASET)}
    assert "zorblax quimby" not in left
    assert any("atlas" in name for name in left)  # the episode still mentions it


def test_entity_names_are_sealed_at_rest(suite, engine) -> None:  # type: ignore[no-untyped-def]
    client = suite()
    _conversation(client, "sealed", "Zorblax Quimby joins project Atlas.")
    assert "quimby" in {e.name for e in client.list_entities(DATASET)}
    with engine.connect() as conn:
        assert not find(conn, ["zorblax", "quimby"])


def test_an_events_entities_join_the_canon_and_filter_like_an_episodes(suite, engine) -> None:  # type: ignore[no-untyped-def]
    """RecordEvent files its entities in the canon, so a filter on "Atlas project" finds
    an event recorded about "atlas" as it finds the episodes about "project Atlas"."""
    client = suite()
    episode_thread = _conversation(client, "one", "We agreed on the Pro tier for project Atlas.")
    about_atlas = client.record_event(
        DATASET, "Moved the launch to June", event_type="decision", entities=["atlas"]
    ).event
    client.record_event(DATASET, "Orion logo approved", event_type="milestone", entities=["Orion"])

    atlas = next(e for e in client.list_entities(DATASET) if "atlas" in {a for a, _ in e.aliases})
    assert {a for a, _ in atlas.aliases} >= {"atlas", "project atlas"}

    result = client.recall(DATASET, entities=["Atlas project"], limit=10)
    assert {e.episode_id for e in result if e.kind == "event"} == {about_atlas.episode_id}
    assert episode_thread in _threads(result)
    exact = client.recall(DATASET, entities=["Atlas project"], limit=10, exact_entities=True)
    assert about_atlas.episode_id not in {e.episode_id for e in exact}
