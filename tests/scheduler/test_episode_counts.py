"""A dataset's completed episodes counted by its writers (store/episode_counts.py, issue 50):
every writer that moves an episode into or out of ``completed`` keeps the count equal to
the truth, the seed loses no change made while it counts, and the maintenance seeds a
large dataset's count and puts a wrong one right."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, text

from episodic.crypto import ClearKey
from episodic.services.scheduler import domain
from episodic.store import episode_counts, kept_statistics
from episodic.store import episodes as states
from episodic.store.erasure import erase_thread
from episodic.testing.keys import test_vault
from episodic.testing.processes import wait_until
from tests.scheduler.helpers import add_messages, new_thread

pytestmark = pytest.mark.citus


def _counted(engine: Engine, dataset: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM episodes WHERE dataset = :d AND status = 'completed'"),
                {"d": dataset},
            ).scalar_one()
        )


def _kept(engine: Engine, dataset: str) -> int | None:
    with engine.connect() as conn:
        return episode_counts.kept(conn, dataset)


def _open(engine: Engine, thread_id: uuid.UUID, dataset: str) -> None:
    """An episode over the thread's uncaptured messages (its explicit end)."""
    with engine.begin() as conn:
        domain.request_episode(conn, thread_id, dataset=dataset)


def _complete(conn: Connection, claimed: Any, worker: str) -> str | None:
    return states.complete(
        conn,
        claimed,
        worker,
        key=ClearKey(claimed["dataset"]),
        summary="what was said",
        key_learnings=[],
        entities=[],
        event_type="conversation",
        actor="",
        embedding=[0.1] * 384,
    )


def _summarise_one(engine: Engine, worker: str = "w:1") -> Any:
    """What a Summariser does with the next pending episode: claims and completes it."""
    with engine.begin() as conn:
        (claimed,) = states.claim_pending(conn, worker, 1)
    with engine.begin() as conn:
        assert _complete(conn, claimed, worker) is not None
    return claimed


def test_every_writer_keeps_the_count_equal_to_the_truth(engine: Engine) -> None:
    """Completions (a thread's first episode, then its next one replacing it), an
    operator's delete (of a completed episode, again, and of a pending one) and an erasure
    each leave the kept count where a count of the episodes puts it."""
    dataset = "counts-writers"
    first = new_thread(engine, dataset, messages=2)
    assert episode_counts.seed(engine, dataset) == episode_counts.Seeded(0, None)
    steps: list[tuple[str, int | None, int]] = []

    def step(name: str) -> None:
        steps.append((name, _kept(engine, dataset), _counted(engine, dataset)))

    _open(engine, first, dataset)
    _summarise_one(engine)
    step("first thread's first episode")
    add_messages(engine, first, 2, notify=False)
    _open(engine, first, dataset)
    _summarise_one(engine)
    step("first thread's next episode")
    second = new_thread(engine, dataset, messages=2)
    _open(engine, second, dataset)
    done = _summarise_one(engine)
    step("second thread's episode")
    with engine.begin() as conn:
        states.delete_episode(conn, done["episode_id"], dataset=dataset)
    step("its delete")
    with engine.begin() as conn:
        states.delete_episode(conn, done["episode_id"], dataset=dataset)
    step("its delete again")
    add_messages(engine, second, 1, notify=False)
    _open(engine, second, dataset)
    with engine.connect() as conn:
        pending = conn.execute(
            text("SELECT episode_id FROM episodes WHERE dataset = :d AND status = 'pending'"),
            {"d": dataset},
        ).scalar_one()
    with engine.begin() as conn:
        states.delete_episode(conn, pending, dataset=dataset)
    step("a pending episode's delete")
    erase_thread(engine, first, dataset=dataset, actor="test", vault=test_vault())
    step("the first thread's erasure")
    assert steps == [
        ("first thread's first episode", 1, 1),
        ("first thread's next episode", 1, 1),
        ("second thread's episode", 2, 2),
        ("its delete", 1, 1),
        ("its delete again", 1, 1),
        ("a pending episode's delete", 1, 1),
        ("the first thread's erasure", 0, 0),
    ]


def _seed_in_the_background(engine: Engine, dataset: str) -> tuple[threading.Thread, list[Any]]:
    got: list[Any] = []

    def run() -> None:
        got.append(episode_counts.seed(engine, dataset))

    seeder = threading.Thread(target=run)
    seeder.start()
    return seeder, got


def _wait_for_the_seed_to_wait(engine: Engine) -> None:
    """Until the seed's insert of the row is running: it waits there for the writer's
    (the writer's session is idle in its transaction). Seen as running rather than as
    waiting on a lock: on Citus the coordinator's backend waits on the worker's."""

    def waiting() -> bool:
        with engine.connect() as conn:
            return bool(
                conn.execute(
                    text(
                        "SELECT EXISTS (SELECT 1 FROM pg_stat_activity "
                        "WHERE state = 'active' AND pid <> pg_backend_pid() "
                        "AND query LIKE 'INSERT INTO episode_counts%DO NOTHING')"
                    )
                ).scalar_one()
            )

    wait_until(waiting, timeout=30, message="the seed waits for the writer's lock")


def _claimed(engine: Engine, dataset: str, *, seeded: bool) -> Any:
    """A new thread's episode, claimed by worker w:1; the dataset's count seeded first
    (0) when ``seeded``."""
    thread = new_thread(engine, dataset, messages=2)
    if seeded:
        assert episode_counts.seed(engine, dataset) == episode_counts.Seeded(0, None)
    _open(engine, thread, dataset)
    with engine.begin() as conn:
        (claimed,) = states.claim_pending(conn, "w:1", 1)
    return claimed


def test_a_completion_committed_while_the_seed_waits_is_in_its_count(engine: Engine) -> None:
    """A writer whose change of the count came first (here it creates the row: nothing
    was kept) holds the seed until it commits, and the seed then counts its episode."""
    dataset = "counts-race-before"
    claimed = _claimed(engine, dataset, seeded=False)
    writer = engine.connect()
    try:
        writer.begin()
        assert _complete(writer, claimed, "w:1") == "completed"  # not committed yet
        seeder, got = _seed_in_the_background(engine, dataset)
        _wait_for_the_seed_to_wait(engine)
        writer.commit()
    finally:
        writer.close()
    seeder.join(timeout=30)
    assert got == [episode_counts.Seeded(1, None)]
    assert _kept(engine, dataset) == _counted(engine, dataset) == 1


def test_a_completion_that_changes_the_count_after_the_seed_adds_to_it(engine: Engine) -> None:
    """A writer whose episode was written before the seed's count but not committed, and
    whose change of the count comes after the seed: the seed did not count the episode,
    and the writer's change adds it."""
    dataset = "counts-race-after"
    claimed = _claimed(engine, dataset, seeded=True)
    writer = engine.connect()
    try:
        writer.begin()
        # The completion's episode row, written; its count's change not yet made.
        writer.execute(
            text(
                "UPDATE episodes SET status = 'completed', claimed_by = NULL "
                "WHERE dataset = :d AND episode_id = :id"
            ),
            {"d": dataset, "id": claimed["episode_id"]},
        )
        assert episode_counts.seed(engine, dataset) == episode_counts.Seeded(0, 0)
        episode_counts.changed(writer, dataset, 1)
        writer.commit()
    finally:
        writer.close()
    assert _kept(engine, dataset) == _counted(engine, dataset) == 1


def test_the_maintenance_seeds_a_large_datasets_count_and_puts_a_wrong_one_right(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """A dataset past the threshold with fresh statistics but no kept count is due (a store
    migrated to revision 0025); its refresh keeps the count; a count made wrong is counted
    again by the next refresh, which says by how much it was off."""
    dataset = "counts-large"
    for _ in range(3):
        thread = new_thread(engine, dataset, messages=2)
        _open(engine, thread, dataset)
        _summarise_one(engine)
    assert kept_statistics.refresh(engine, dataset) is not None
    assert _kept(engine, dataset) == 3
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE episode_counts SET completed = NULL WHERE dataset = :d"), {"d": dataset}
        )
        assert kept_statistics.due(conn, above=2) == [dataset]
        assert kept_statistics.due(conn, above=3) == []
    assert kept_statistics.refresh(engine, dataset) is not None
    with engine.begin() as conn:
        assert kept_statistics.due(conn, above=2) == []
        conn.execute(
            text("UPDATE episode_counts SET completed = 7 WHERE dataset = :d"), {"d": dataset}
        )
    with caplog.at_level("WARNING", logger="episodic.store.episode_counts"):
        assert episode_counts.seed(engine, dataset) == episode_counts.Seeded(3, 7)
    assert "+4 off" in caplog.text
    assert _kept(engine, dataset) == 3
