"""The suite as four real processes, for privacy tests (encryption on unless asked)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from episodic.sdk.client import EpisodicClient

Suite = Callable[..., EpisodicClient]


@pytest.fixture
def suite(spawn) -> Iterator[Suite]:  # type: ignore[no-untyped-def]
    """``suite(env={...}, loops=False)`` starts Scheduler, Ingest, Summariser and Recall and
    returns a client of them. ``loops``: the Scheduler and Summariser work by themselves
    (otherwise tests drive them with RunSweep / ProcessPending)."""
    clients: list[EpisodicClient] = []

    def start(env: dict[str, str] | None = None, *, loops: bool = False) -> EpisodicClient:
        env = dict(env or {})
        loop_env = (
            {"EPISODIC_SCHEDULER_POLL_INTERVAL": "0.2", "EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"}
            if loops
            else {}
        )
        scheduler = spawn("scheduler", env={**env, **loop_env})
        ingest = spawn("ingest", env={**env, "EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
        summariser = spawn("summariser", env={**env, **loop_env})
        recall = spawn("recall", env=env)
        client = EpisodicClient(
            ingest=ingest.address,
            recall=recall.address,
            scheduler=scheduler.address,
            summariser=summariser.address,
            timeout=60,
        )
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.close()
