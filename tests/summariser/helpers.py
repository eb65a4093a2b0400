"""Builders for summariser tests: threads with messages and pending episodes."""

from __future__ import annotations

import uuid
from datetime import timedelta

from sqlalchemy import Engine, text

from episodic.config import IngestSettings
from episodic.providers.embedding import HashingEmbedder
from episodic.providers.extractive import ExtractiveSummariser
from episodic.services.ingest import domain as ingest
from episodic.services.summariser.pipeline import Pipeline
from episodic.services.summariser.semantic import KeyLearningFacts
from episodic.store import episodes as states
from episodic.testing.keys import test_vault
from tests.scheduler.helpers import dataset_of

DEFAULT_EXTRACTOR = KeyLearningFacts()

CAR_CHAT = [
    ("user", "Hi! I'm looking for a family car and my budget is under $30k."),
    ("assistant", "Happy to help. Are you open to SUVs, or do you prefer something smaller?"),
    ("user", "I find SUVs too big. I mostly do city commutes, so I want something compact."),
    ("assistant", "Then the Toyota Corolla Hybrid is a strong choice for city driving."),
    ("user", "I decided to test drive the Toyota Corolla Hybrid on Saturday."),
    ("assistant", "Great, I booked the test drive for Saturday at 10am."),
]


def make_thread(engine: Engine, dataset: str = "user_42", label: str = "cars") -> uuid.UUID:
    with engine.begin() as conn:
        row = ingest.create_thread(
            conn, test_vault(), dataset=dataset, thread_id=None, label=label, metadata_json="{}"
        )
    return row["thread_id"]


def add(engine: Engine, thread_id: uuid.UUID, turns: list[tuple[str, str]]) -> None:
    with engine.begin() as conn:
        ingest.add_messages(
            conn,
            test_vault(),
            thread_id,
            [ingest.NewMessage(role=r, content=c, metadata={}) for r, c in turns],
            IngestSettings(),
        )


def open_episode(engine: Engine, thread_id: uuid.UUID, trigger: str = "explicit"):  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        return states.open_episode(conn, thread_id, trigger, dataset=dataset_of(conn, thread_id))


def make_pipeline(engine: Engine, summariser=None, extractor=DEFAULT_EXTRACTOR, **kw) -> Pipeline:  # type: ignore[no-untyped-def]
    embedder = kw.pop("embedder", None) or HashingEmbedder(dimension=384)
    return Pipeline(
        engine,
        summariser or ExtractiveSummariser(embedder),
        embedder,
        extractor,
        vault=kw.pop("vault", test_vault()),
        max_retries=kw.pop("max_retries", 2),
        retry_backoff=kw.pop("retry_backoff", timedelta(seconds=0)),
        **kw,
    )


def episode_row(engine: Engine, episode_id: uuid.UUID):  # type: ignore[no-untyped-def]
    """The stored episode row, its sealed text opened."""
    with engine.connect() as conn:
        row = (
            conn.execute(text("SELECT * FROM episodes WHERE episode_id = :id"), {"id": episode_id})
            .mappings()
            .one()
        )
        return test_vault().open_one(conn, row, "episodes")
