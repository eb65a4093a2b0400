"""The Summariser as a real process: ProcessPending, pipeline status, SIGTERM releases."""

from __future__ import annotations

import subprocess
import sys

import grpc
import pytest
from sqlalchemy import text

from episodic.testing.processes import wait_until
from episodic.v1 import summariser_service_pb2 as pb
from episodic.v1 import summariser_service_pb2_grpc as g
from tests.summariser.helpers import CAR_CHAT, add, make_thread, open_episode


def test_process_pending_and_pipeline_status(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    ep = open_episode(engine, thread)
    service = spawn("summariser")
    stub = g.SummariserServiceStub(service.channel())

    before = stub.GetPipelineStatus(pb.GetPipelineStatusRequest())
    assert before.status_counts["pending"] == 1
    assert before.HasField("oldest_pending_age")
    assert before.llm.ok and before.embedder.ok and before.embedder.name

    done = stub.ProcessPending(pb.ProcessPendingRequest(max_episodes=5))
    assert done.completed == 1 and done.failed == 0 and done.semantic_processed == 1

    after = stub.GetPipelineStatus(pb.GetPipelineStatusRequest(dataset="user_42"))
    assert after.status_counts["completed"] == 1 and "pending" not in after.status_counts
    assert not after.HasField("oldest_pending_age")
    other = stub.GetPipelineStatus(pb.GetPipelineStatusRequest(dataset="nobody"))
    assert dict(other.status_counts) == {}

    with engine.connect() as conn:
        status = conn.execute(
            text("SELECT status FROM episodes WHERE episode_id = :id"), {"id": ep["episode_id"]}
        ).scalar_one()
    assert status == "completed"

    cli = subprocess.run(
        [sys.executable, "-m", "episodic.cli", "status", "--address", service.address],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 0, cli.stderr
    assert "completed 1" in cli.stdout and "oldest pending:     -" in cli.stdout


def test_status_shows_a_stuck_pipeline(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    with engine.begin() as conn:  # a timer long overdue: the scheduler is not running
        conn.execute(
            text(
                "INSERT INTO scheduled_episodes (thread_id, dataset, fire_at) "
                "VALUES (:t, 'user_42', now() - interval '2 hours')"
            ),
            {"t": thread},
        )
    service = spawn("summariser")
    status = g.SummariserServiceStub(service.channel()).GetPipelineStatus(
        pb.GetPipelineStatusRequest(skip_provider_checks=True)
    )
    assert status.timers_due == 1 and status.threads_uncaptured == 1
    assert status.oldest_due_timer_age.ToTimedelta().total_seconds() >= 7000
    assert not status.llm.name  # skipped


def test_status_shows_failed_backing_off_and_lost_notices(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    failed_thread, waiting_thread, lost_thread = (make_thread(engine) for _ in range(3))
    for thread in (failed_thread, waiting_thread, lost_thread):
        add(engine, thread, CAR_CHAT)
    failed = open_episode(engine, failed_thread)
    waiting = open_episode(engine, waiting_thread)
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE episodes SET status = 'failed', retry_count = 4, error = 'gave up' "
                "WHERE episode_id = :id"
            ),
            {"id": failed["episode_id"]},
        )
        conn.execute(
            text(
                "UPDATE episodes SET next_attempt_at = now() + interval '20 minutes' "
                "WHERE episode_id = :id"
            ),
            {"id": waiting["episode_id"]},
        )
        # Messages no episode covers, quiet for 5 minutes, and no timer: a lost notice.
        conn.execute(
            text(
                "UPDATE threads SET last_message_at = now() - interval '5 minutes' WHERE thread_id = :t"
            ),
            {"t": lost_thread},
        )
    service = spawn("summariser")
    status = g.SummariserServiceStub(service.channel()).GetPipelineStatus(
        pb.GetPipelineStatusRequest(skip_provider_checks=True)
    )
    assert [e.episode_id for e in status.failed_episodes] == [str(failed["episode_id"])]
    assert status.failed_episodes[0].error == "gave up"
    assert status.pending_waiting == 1 and status.HasField("latest_retry_at")
    assert status.threads_without_timer == 1
    assert status.oldest_untimed_thread_age.ToTimedelta().total_seconds() >= 290

    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "episodic.cli",
            "status",
            "--address",
            service.address,
            "--skip-providers",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 0, cli.stderr
    assert "failed for good" in cli.stdout and str(failed["episode_id"]) in cli.stdout
    assert "backing off:        1" in cli.stdout
    assert "notices lost:       1 thread(s)" in cli.stdout


def test_bad_requests(spawn) -> None:  # type: ignore[no-untyped-def]
    stub = g.SummariserServiceStub(spawn("summariser").channel())
    for call, req in (
        (stub.ProcessPending, pb.ProcessPendingRequest(max_episodes=-1)),
        (stub.GetPipelineStatus, pb.GetPipelineStatusRequest(dataset="bad dataset")),
        (stub.GetPipelineStatus, pb.GetPipelineStatusRequest(max_errors=-3)),
    ):
        with pytest.raises(grpc.RpcError) as err:
            call(req)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_background_worker_completes_episodes_on_notify(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    spawn("summariser", env={"EPISODIC_SUMMARISER_POLL_INTERVAL": "30"})
    thread = make_thread(engine)
    add(engine, thread, CAR_CHAT)
    ep = open_episode(engine, thread)  # NOTIFY wakes the worker long before the poll

    def completed() -> bool:
        with engine.connect() as conn:
            return (
                conn.execute(
                    text("SELECT status FROM episodes WHERE episode_id = :id"),
                    {"id": ep["episode_id"]},
                ).scalar_one()
                == "completed"
            )

    wait_until(completed, timeout=60, message="episode completed by the background worker")
