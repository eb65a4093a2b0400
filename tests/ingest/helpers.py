"""Helpers for the Ingest domain tests: threads created through the domain's own SQL."""

from __future__ import annotations

import uuid

from sqlalchemy import Engine

from episodic.services.ingest import domain
from episodic.store.vault import Vault


def new_thread(engine: Engine, vault: Vault, dataset: str) -> uuid.UUID:
    """A new thread of ``dataset`` (no label, empty metadata), committed."""
    with engine.begin() as conn:
        row = domain.create_thread(
            conn, vault, dataset=dataset, thread_id=None, label="", metadata_json="{}"
        )
    return row["thread_id"]
