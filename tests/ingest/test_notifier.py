"""The Ingest's notices to the Scheduler: a thread's notices gathered during the linger are
one call, close() sends what is pending, and EndThread's RequestEpisode goes after the
thread's pending notices (an activity notice after it would re-arm an idle timer for
messages the episode already captured).

A real Scheduler process receives the notices; what it received is read from its /metrics
(``rpc.server.call.duration`` counts calls by method), polled against a deadline."""

from __future__ import annotations

import urllib.request
import uuid

import grpc
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from episodic.services.ingest import domain
from episodic.services.ingest.notifier import SchedulerNotifier
from episodic.testing.keys import test_vault
from episodic.testing.processes import ServiceProcess, wait_until

CALLS = "rpc_server_call_duration_seconds_count"


def _calls(scheduler: ServiceProcess, method: str) -> float:
    with urllib.request.urlopen(scheduler.metrics_url, timeout=10) as answer:
        body = answer.read().decode()
    return sum(
        s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
        if s.name == CALLS
        and s.labels.get("rpc_method") == f"episodic.v1.SchedulerService/{method}"
    )


def _threads(engine: Engine, n: int) -> list[str]:
    vault = test_vault(encrypt=False)
    with engine.begin() as conn:
        return [
            str(
                domain.create_thread(
                    conn, vault, dataset="ds-notices", thread_id=None, label="", metadata_json="{}"
                )["thread_id"]
            )
            for _ in range(n)
        ]


def test_a_threads_notices_during_the_linger_are_one_call_and_close_sends_them(
    spawn, engine: Engine
) -> None:  # type: ignore[no-untyped-def]
    scheduler = spawn("scheduler")
    a, b = _threads(engine, 2)
    channel = grpc.insecure_channel(scheduler.address)
    # A linger far longer than the test: nothing is sent before close().
    notifier = SchedulerNotifier(channel, timeout=10, linger=600)
    try:
        for _ in range(40):
            notifier.record_activity(a)
        notifier.record_activity(b)
        notifier.record_thread_started(b)
        assert _calls(scheduler, "RecordActivity") == 0
        notifier.close(timeout=30)
        assert _calls(scheduler, "RecordActivity") == 2  # one per thread, not 41
        assert _calls(scheduler, "RecordThreadStarted") == 1
        assert notifier.failures == 0
    finally:
        channel.close()


def test_notices_are_sent_after_the_linger_without_close(spawn, engine: Engine) -> None:  # type: ignore[no-untyped-def]
    scheduler = spawn("scheduler")
    (a,) = _threads(engine, 1)
    channel = grpc.insecure_channel(scheduler.address)
    notifier = SchedulerNotifier(channel, timeout=10, linger=0.05)
    try:
        for _ in range(5):
            notifier.record_activity(a)
        wait_until(
            lambda: _calls(scheduler, "RecordActivity") >= 1,
            timeout=30,
            message="the activity notice never reached the Scheduler",
        )
    finally:
        notifier.close()
        channel.close()


def test_request_episode_sends_the_threads_pending_notices_first(spawn, engine: Engine) -> None:  # type: ignore[no-untyped-def]
    scheduler = spawn("scheduler")
    a, b = _threads(engine, 2)
    channel = grpc.insecure_channel(scheduler.address)
    notifier = SchedulerNotifier(channel, timeout=10, linger=600)
    try:
        notifier.record_activity(a)
        notifier.record_activity(b)
        answer = notifier.request_episode(a, timeout=10)
        assert answer is not None
        # a's notice went before its request; b's still waits for the linger.
        assert _calls(scheduler, "RecordActivity") == 1
        assert _calls(scheduler, "RequestEpisode") == 1
    finally:
        notifier.close(timeout=30)
        channel.close()
    assert _calls(scheduler, "RecordActivity") == 2


def test_an_unknown_thread_is_a_failed_notice_not_an_error(spawn) -> None:  # type: ignore[no-untyped-def]
    scheduler = spawn("scheduler")
    channel = grpc.insecure_channel(scheduler.address)
    notifier = SchedulerNotifier(channel, timeout=10, linger=600)
    try:
        notifier.record_activity(str(uuid.uuid4()))
        notifier.close(timeout=30)
        assert notifier.failures == 1  # NOT_FOUND, logged; the write it followed stands
    finally:
        channel.close()
