"""A caller's own thread id is unique across datasets even when two creations race: the
primary key is (dataset, thread_id), so only the id's transaction lock stops two datasets
from both taking it."""

from __future__ import annotations

import threading
import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from episodic.config import PrivacySettings
from episodic.errors import AlreadyExists
from episodic.services.ingest import domain
from episodic.store.vault import make_vault
from episodic.testing.processes import wait_until


def test_two_datasets_racing_for_one_thread_id_leave_one_thread(engine: Engine) -> None:
    vault = make_vault(PrivacySettings())
    thread_id = uuid.uuid4()
    outcome: list[BaseException | dict[str, object]] = []

    def create(dataset: str) -> dict[str, object]:
        with engine.begin() as conn:
            return domain.create_thread(
                conn, vault, dataset=dataset, thread_id=thread_id, label="", metadata_json="{}"
            )

    def second() -> None:
        try:
            outcome.append(create("ds-race-b"))
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    with engine.connect() as first:
        first.begin()
        domain.create_thread(
            first, vault, dataset="ds-race-a", thread_id=thread_id, label="", metadata_json="{}"
        )
        # The first creation has inserted its row and not committed: the second, in another
        # dataset, must wait for it rather than miss the uncommitted row and insert its own.
        racer = threading.Thread(target=second)
        racer.start()
        with engine.connect() as watcher:
            wait_until(
                lambda: (
                    outcome  # finished without waiting: the assertions below say how
                    or watcher.execute(
                        text(
                            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                            "AND NOT granted AND classid = :space"
                        ),
                        {"space": domain.THREAD_ID_LOCK_SPACE},
                    ).scalar_one()
                    == 1
                ),
                timeout=30,
                message="the second creation waiting on the thread id's lock",
            )
        first.commit()
    racer.join(timeout=30)
    assert len(outcome) == 1
    assert isinstance(outcome[0], AlreadyExists), outcome[0]
    with engine.connect() as conn:
        datasets = conn.execute(
            text("SELECT dataset FROM threads WHERE thread_id = :id"), {"id": thread_id}
        ).scalars()
        assert list(datasets) == ["ds-race-a"]


def test_a_thread_id_taken_in_one_dataset_is_refused_in_another(engine: Engine) -> None:
    vault = make_vault(PrivacySettings())
    thread_id = uuid.uuid4()
    with engine.begin() as conn:
        domain.create_thread(
            conn, vault, dataset="ds-ids-a", thread_id=thread_id, label="", metadata_json="{}"
        )
    with pytest.raises(AlreadyExists), engine.begin() as conn:
        domain.create_thread(
            conn, vault, dataset="ds-ids-b", thread_id=thread_id, label="", metadata_json="{}"
        )
