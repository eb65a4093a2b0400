"""The suite a polyglot client calls: the four services as real processes against this
test's database, requiring API keys, and a writer key for one dataset."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from episodic.access import Role
from episodic.store import keys

REQUIRED = {"EPISODIC_AUTH": "required"}


@dataclass
class KeyedSuite:
    ingest: str
    recall: str
    dataset: str
    key: str

    def client_env(self) -> dict[str, str]:
        """What a client reads (the names the Python and TypeScript clients read too)."""
        return {
            "EPISODIC_INGEST_ADDRESS": self.ingest,
            "EPISODIC_RECALL_ADDRESS": self.recall,
            "EPISODIC_API_KEY": self.key,
            "EPISODIC_DATASET": self.dataset,
        }


@pytest.fixture
def keyed_suite(spawn, engine) -> KeyedSuite:  # type: ignore[no-untyped-def]
    dataset = "polyglot"
    with engine.begin() as conn:
        key = keys.create_key(conn, role=Role.WRITER, datasets=[dataset], name="polyglot").secret
        # Ingest's own key for calling the Scheduler, as `episodic up` mints one.
        service = keys.create_key(conn, role=Role.SERVICE, datasets=["*"], name="services")
    env = {**REQUIRED, "EPISODIC_SERVICE_KEY": service.secret}
    scheduler = spawn("scheduler", env=env)
    ingest = spawn("ingest", env={**env, "EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    spawn("summariser", env={**env, "EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"})
    recall = spawn("recall", env=env)
    return KeyedSuite(ingest=ingest.address, recall=recall.address, dataset=dataset, key=key)
