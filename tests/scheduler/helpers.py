"""Helpers for the Scheduler tests: threads and messages written through Ingest's domain
functions (the same SQL the write path runs), settings with explicit values, the DB clock."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, text

from episodic.config import IngestSettings, SchedulerSettings
from episodic.services.ingest import domain as ingest
from episodic.services.scheduler import domain
from episodic.store.sql import or_now
from episodic.testing.keys import test_vault

INGEST = IngestSettings()


def settings(**overrides: Any) -> SchedulerSettings:
    """The seed's defaults, written out so the environment cannot change them."""
    values: dict[str, Any] = {
        "auto_episode_interval": timedelta(minutes=30),
        "sibling_pull_forward": timedelta(minutes=5),
        "backstop_interval": timedelta(hours=1),
        "backstop_quiet_period": timedelta(hours=24),
        "scheduler_poll_interval": timedelta(0),
        "claim_batch_size": 50,
        "lease_ttl": timedelta(seconds=30),
    }
    values.update(overrides)
    return SchedulerSettings(**values)


def db_now(engine: Engine) -> datetime:
    with engine.connect() as conn:
        return conn.execute(text("SELECT now()")).scalar_one()


def new_thread(engine: Engine, dataset: str = "user_42", messages: int = 0) -> uuid.UUID:
    with engine.begin() as conn:
        row = ingest.create_thread(
            conn,
            test_vault(),
            dataset=dataset,
            thread_id=None,
            label="label-" + dataset,
            metadata_json="{}",
        )
    thread_id = row["thread_id"]
    if messages:
        add_messages(engine, thread_id, messages, notify=False)
    return thread_id


def add_messages(
    engine: Engine,
    thread_id: uuid.UUID,
    n: int = 1,
    *,
    notify: bool = True,
    now: datetime | None = None,
    cfg: SchedulerSettings | None = None,
) -> int:
    """Appends n messages (one transaction) and, like Ingest, then tells the Scheduler.
    Returns the last sequence."""
    batch = [ingest.NewMessage(role="user", content=f"message {i}", metadata={}) for i in range(n)]
    with engine.begin() as conn:
        result = ingest.add_messages(conn, test_vault(), thread_id, batch, INGEST)
    if notify:
        with engine.begin() as conn:
            domain.record_activity(
                conn, thread_id, cfg or settings(), now, dataset=dataset_of(conn, thread_id)
            )
    return result.receipts[-1].sequence


def thread_row(engine: Engine, thread_id: uuid.UUID) -> Any:
    with engine.connect() as conn:
        return (
            conn.execute(text("SELECT * FROM threads WHERE thread_id = :id"), {"id": thread_id})
            .mappings()
            .one()
        )


def timer(engine: Engine, thread_id: uuid.UUID) -> Any:
    with engine.connect() as conn:
        return (
            conn.execute(
                text("SELECT * FROM scheduled_episodes WHERE thread_id = :id"), {"id": thread_id}
            )
            .mappings()
            .first()
        )


def episodes(engine: Engine, thread_id: uuid.UUID | None = None) -> list[Any]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                text(
                    "SELECT * FROM episodes WHERE CAST(:id AS uuid) IS NULL OR thread_id = :id "
                    "ORDER BY thread_id, start_sequence"
                ),
                {"id": thread_id},
            ).mappings()
        )


def windows(engine: Engine, thread_id: uuid.UUID) -> list[tuple[int, int, str]]:
    return [
        (e["start_sequence"], e["end_sequence"], e["trigger"]) for e in episodes(engine, thread_id)
    ]


def set_quiet_since(engine: Engine, thread_id: uuid.UUID, when: datetime) -> None:
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE threads SET last_message_at = :t WHERE thread_id = :id"),
            {"t": when, "id": thread_id},
        )


def claim_episode(engine: Engine, episode_id: Any, worker: str, at: datetime | None = None) -> None:
    """What a summariser's claim does (theirs to implement): pending -> processing."""
    with engine.begin() as conn:
        # or_now, not coalesce(…, now()), and the dataset named: Citus refuses a clock in
        # COALESCE in a write, and this claim must reach one shard.
        n = conn.execute(
            text(
                "UPDATE episodes SET status = 'processing', claimed_by = :w, "
                f"claimed_at = {or_now('CAST(:at AS timestamptz)')} "
                "WHERE dataset = :d AND episode_id = :id AND status = 'pending'"
            ),
            {"w": worker, "id": episode_id, "at": at, "d": episode_dataset(conn, episode_id)},
        ).rowcount
    assert n == 1


def dataset_of(conn: Connection, thread_id: uuid.UUID) -> str:
    """The dataset of a thread, as the services' routing lookup finds it (domain functions
    take the dataset their caller found; "" when there is none: the call finds nothing)."""
    return (
        conn.execute(
            text("SELECT dataset FROM threads WHERE thread_id = :id"), {"id": thread_id}
        ).scalar()
        or ""
    )


def episode_dataset(conn: Connection, episode_id: uuid.UUID) -> str:
    """The dataset of an episode ("" when there is none: the call then finds nothing)."""
    return (
        conn.execute(
            text("SELECT dataset FROM episodes WHERE episode_id = :id"), {"id": episode_id}
        ).scalar()
        or ""
    )
