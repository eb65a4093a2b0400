"""What an id that ListEpisodes and Recall list stands for: a summarised episode or an
event (both are returned as ``Episode`` messages, events with kind EVENT). GetEpisode,
DeleteEpisode and RetryEpisode take either, routed here so their servicers stay thin.

Each function routes the id first (:func:`episodic.store.owners.require_record`: NOT_FOUND,
the same for a missing id and another dataset's) and returns the row opened."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Connection

from episodic.errors import FailedPrecondition
from episodic.store import episodes, owners
from episodic.store import events as event_store
from episodic.store.vault import Vault

__all__ = ["delete_record", "get_record", "retry_record"]


def get_record(conn: Connection, vault: Vault, record_id: uuid.UUID) -> dict[str, Any]:
    """An episode in any status (archived ones too, for provenance), or an event."""
    dataset, kind = owners.require_record(conn, record_id)
    if kind == "event":
        return vault.open_one(conn, event_store.get_event(conn, dataset, record_id), "events")
    return vault.open_one(conn, episodes.get_episode(conn, record_id, dataset=dataset), "episodes")


def delete_record(
    conn: Connection, vault: Vault, record_id: uuid.UUID
) -> tuple[dict[str, Any], str, str]:
    """An episode archived (a soft delete, AIP-164: kept for provenance), or an event
    erased outright (it has no status to archive) and returned as it was, marked archived:
    no longer current either way. Returns the row, its dataset, and the audit action."""
    dataset, kind = owners.require_record(conn, record_id)
    if kind == "event":
        erased = vault.open_one(
            conn, event_store.delete_event(conn, vault, dataset, record_id), "events"
        )
        return {**erased, "status": "archived"}, dataset, "event.delete"
    deleted = episodes.delete_episode(conn, record_id, dataset=dataset)
    return vault.open_one(conn, deleted, "episodes"), dataset, "episode.delete"


def retry_record(
    conn: Connection, vault: Vault, record_id: uuid.UUID
) -> tuple[dict[str, Any], str]:
    """A failed episode put back to pending; FAILED_PRECONDITION for any other, and for an
    event (recorded as it is, never failed). Returns the row and its dataset."""
    dataset, kind = owners.require_record(conn, record_id)
    if kind == "event":
        raise FailedPrecondition(
            f"{record_id} is an event, recorded as it is: only a summarised episode that "
            "failed can be retried",
            episode_id=str(record_id),
        )
    retried = episodes.retry_episode(conn, record_id, dataset=dataset)
    return vault.open_one(conn, retried, "episodes"), dataset
