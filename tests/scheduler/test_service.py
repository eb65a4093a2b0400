"""The SchedulerService over gRPC in a real process: every RPC, its status codes, and
SIGTERM giving back claims and leases."""

from __future__ import annotations

import uuid
from datetime import timedelta

import grpc
import pytest
from google.protobuf import timestamp_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from sqlalchemy import text

from episodic.services.scheduler import domain
from episodic.testing.invariants import check_invariants
from episodic.v1 import episode_pb2 as e
from episodic.v1 import scheduler_service_pb2 as pb
from episodic.v1 import scheduler_service_pb2_grpc as g
from tests.scheduler.helpers import (
    add_messages,
    claim_episode,
    dataset_of,
    db_now,
    new_thread,
    timer,
)


def ts(value) -> timestamp_pb2.Timestamp:  # type: ignore[no-untyped-def]
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value)
    return out


def error_reason(err: grpc.RpcError) -> str:
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    return info.reason


def expect(code: grpc.StatusCode, call, *args):  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as err:
        call(*args, timeout=10)
    assert err.value.code() == code, err.value.details()
    return err.value


def test_scheduler_rpcs_end_to_end(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    service = spawn("scheduler")
    channel = service.channel()
    stub = g.SchedulerServiceStub(channel)
    now = db_now(engine)

    # RecordActivity arms the idle timer.
    thread_id = new_thread(engine, "ds", messages=2)
    fire_at = stub.RecordActivity(
        pb.RecordActivityRequest(thread_id=str(thread_id)), timeout=10
    ).fire_at.ToDatetime(tzinfo=now.tzinfo)
    assert timedelta(minutes=29) < fire_at - now < timedelta(minutes=31)

    # RecordThreadStarted pulls it forward.
    newcomer = new_thread(engine, "ds")
    answer = stub.RecordThreadStarted(
        pb.RecordThreadStartedRequest(thread_id=str(newcomer)), timeout=10
    )
    assert answer.timers_pulled_forward == 1
    assert timer(engine, thread_id)["trigger"] == "new_thread"

    # RunSweep at an injected time fires it.
    swept = stub.RunSweep(pb.RunSweepRequest(as_of=ts(now + timedelta(minutes=6))), timeout=30)
    assert swept.episodes_created == 1

    # RequestEpisode: explicit by default; nothing uncaptured answers false.
    add_messages(engine, thread_id, 3, notify=False)
    queued = stub.RequestEpisode(pb.RequestEpisodeRequest(thread_id=str(thread_id)), timeout=10)
    assert queued.episode_queued
    episode = queued.episode
    assert (episode.start_sequence, episode.end_sequence) == (3, 5)
    assert episode.trigger == e.EPISODE_TRIGGER_EXPLICIT
    assert episode.status == e.EPISODE_STATUS_PENDING and episode.thread_label == "label-ds"
    again = stub.RequestEpisode(pb.RequestEpisodeRequest(thread_id=str(thread_id)), timeout=10)
    assert not again.episode_queued and not again.HasField("episode")

    # RetryEpisode: FAILED_PRECONDITION unless failed, with a clear message.
    err = expect(
        grpc.StatusCode.FAILED_PRECONDITION,
        stub.RetryEpisode,
        pb.RetryEpisodeRequest(episode_id=episode.episode_id),
    )
    assert "is pending; only a failed episode can be retried" in err.details()
    assert error_reason(err) == "FAILED_PRECONDITION"
    claim_episode(engine, uuid.UUID(episode.episode_id), "w")
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE episodes SET status = 'failed', error = 'x' WHERE episode_id = :id"),
            {"id": episode.episode_id},
        )
    retried = stub.RetryEpisode(pb.RetryEpisodeRequest(episode_id=episode.episode_id), timeout=10)
    assert retried.episode.status == e.EPISODE_STATUS_PENDING and retried.episode.error == ""

    # DeleteEpisode: soft delete, returns the episode; idempotent.
    deleted = stub.DeleteEpisode(pb.DeleteEpisodeRequest(episode_id=episode.episode_id), timeout=10)
    assert deleted.episode.status == e.EPISODE_STATUS_ARCHIVED
    assert deleted.episode.episode_id == episode.episode_id
    twice = stub.DeleteEpisode(pb.DeleteEpisodeRequest(episode_id=episode.episode_id), timeout=10)
    assert twice.episode.status == e.EPISODE_STATUS_ARCHIVED

    # Bad input and unknown ids.
    missing = str(uuid.uuid4())
    for call, request in (
        (stub.RecordActivity, pb.RecordActivityRequest(thread_id="nope")),
        (stub.RecordThreadStarted, pb.RecordThreadStartedRequest(thread_id="")),
        (stub.RequestEpisode, pb.RequestEpisodeRequest(thread_id="x")),
        (stub.RequestEpisode, pb.RequestEpisodeRequest(thread_id=missing, trigger=99)),
        (stub.DeleteEpisode, pb.DeleteEpisodeRequest(episode_id="1")),
        (stub.RetryEpisode, pb.RetryEpisodeRequest(episode_id="")),
    ):
        assert error_reason(expect(grpc.StatusCode.INVALID_ARGUMENT, call, request))
    for call, request in (
        (stub.RecordActivity, pb.RecordActivityRequest(thread_id=missing)),
        (stub.RecordThreadStarted, pb.RecordThreadStartedRequest(thread_id=missing)),
        (stub.RequestEpisode, pb.RequestEpisodeRequest(thread_id=missing)),
        (stub.DeleteEpisode, pb.DeleteEpisodeRequest(episode_id=missing)),
        (stub.RetryEpisode, pb.RetryEpisodeRequest(episode_id=missing)),
    ):
        expect(grpc.StatusCode.NOT_FOUND, call, request)
    check_invariants(engine, all_covered=True)

    # SIGTERM: claims and leases of this replica are given back at once.
    with engine.connect() as conn:
        me = conn.execute(text("SELECT holder FROM leases LIMIT 1")).scalar_one()
    other = new_thread(engine, "ds", messages=1)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO scheduled_episodes (thread_id, dataset, fire_at, claimed_at, "
                "claimed_by) VALUES (:id, 'ds', now(), now(), :me)"
            ),
            {"id": other, "me": me},
        )
    channel.close()
    assert service.terminate() == 0
    assert timer(engine, other)["claimed_by"] is None
    with engine.connect() as conn:
        assert conn.execute(
            text("SELECT bool_and(expires_at < now()) FROM leases WHERE holder = :me"),
            {"me": me},
        ).scalar_one()


def test_a_far_future_sweep_strands_nothing(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    """RunSweep(as_of=9999-12-31) moves the horizon of decisions only: the claims it
    reclaims, the timers it creates and the episodes it opens are stamped with the
    database's clock and due at once, so live workers pick them up."""
    scheduler = spawn("scheduler")
    stub = g.SchedulerServiceStub(scheduler.channel())
    processing = new_thread(engine, "ds", messages=2)
    with engine.begin() as conn:
        episode_id = domain.request_episode(
            conn, processing, dataset=dataset_of(conn, processing)
        ).episode["episode_id"]
    claim_episode(engine, episode_id, "live-worker")  # a live claim a moment ago
    owed = new_thread(engine, "ds", messages=1)  # an EndThread whose notice was lost
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE threads SET end_requested_sequence = 1 WHERE thread_id = :t"),
            {"t": owed},
        )
    idle = new_thread(engine, "ds", messages=1)  # activity whose notice was lost

    far = ts(db_now(engine).replace(year=9999, month=12, day=31))
    stub.RunSweep(pb.RunSweepRequest(as_of=far), timeout=30)

    with engine.connect() as conn:
        real_now = db_now(engine)
        rows = conn.execute(
            text("SELECT status, next_attempt_at, created_at, updated_at, claimed_at FROM episodes")
        ).all()
        timers = conn.execute(
            text("SELECT thread_id, fire_at, created_at, updated_at FROM scheduled_episodes")
        ).all()
    assert rows, "the sweep fired or reclaimed episodes"
    for status, next_attempt_at, created_at, updated_at, claimed_at in rows:
        assert status in ("pending", "failed"), status  # reclaimed, or opened and not claimed
        assert next_attempt_at <= real_now, "due at once, not in year 9999"
        assert created_at <= real_now and updated_at <= real_now
        assert claimed_at is None
    for thread_id, fire_at, created_at, updated_at in timers:
        assert created_at <= real_now and updated_at <= real_now
        assert thread_id != owed or fire_at <= real_now
    assert {t[0] for t in timers} <= {idle}, "the owed thread's episode was opened at once"
