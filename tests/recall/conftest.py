"""Fixtures of the Recall tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from episodic.config import Settings
from episodic.services.recall.__main__ import engine_options
from episodic.store.db import make_engine


@pytest.fixture
def recall_engine(db_url: str) -> Iterator[Engine]:
    """An engine with the Recall service's session settings (iterative HNSW scans); a
    module that needs other settings defines its own."""
    eng = make_engine(db_url, pool_size=3, **engine_options(Settings()))
    yield eng
    eng.dispose()
