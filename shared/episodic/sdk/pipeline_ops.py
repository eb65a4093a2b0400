"""The SDK's flows that drive or watch the pipeline (Scheduler and Summariser): asking for
an episode now, the activity and thread-start signals Ingest sends, a sweep, processing
pending episodes, the providers' health and the pipeline's status. Re-exported by
:mod:`episodic.sdk.operations`."""

from __future__ import annotations

from datetime import datetime

from episodic.sdk.calling import call
from episodic.sdk.flow import ClientCore, Flow
from episodic.sdk.types import (
    Episode,
    EpisodeFailure,
    LifecycleStatus,
    PipelineStatus,
    ProviderHealth,
    SweepResult,
    duration_of,
    health_of,
    time_of,
    timestamp_of,
)
from episodic.v1 import episode_pb2
from episodic.v1 import scheduler_service_pb2 as scheduler_pb2
from episodic.v1 import summariser_service_pb2 as summariser_pb2


def request_episode(
    core: ClientCore, thread_id: str, *, timeout: float | None = None
) -> Flow[Episode | None]:
    """Asks the Scheduler for an episode over the thread's uncaptured messages now (an
    operator's manual trigger); None when there was nothing to capture."""
    answer = yield from call(
        core,
        "scheduler",
        "RequestEpisode",
        scheduler_pb2.RequestEpisodeRequest(
            thread_id=thread_id, trigger=episode_pb2.EPISODE_TRIGGER_MANUAL
        ),
        timeout,
        retry=False,
    )
    return Episode.from_proto(answer.episode) if answer.episode_queued else None


def record_activity(
    core: ClientCore, thread_id: str, *, timeout: float | None = None
) -> Flow[datetime | None]:
    """Tells the Scheduler a thread received messages (Ingest does this after every
    write; exposed for completeness and tools). Returns when its idle timer fires."""
    answer = yield from call(
        core,
        "scheduler",
        "RecordActivity",
        scheduler_pb2.RecordActivityRequest(thread_id=thread_id),
        timeout,
        retry=False,
    )
    return time_of(answer, "fire_at")


def record_thread_started(
    core: ClientCore, thread_id: str, *, timeout: float | None = None
) -> Flow[int]:
    """Tells the Scheduler a thread started (Ingest does this on CreateThread); returns
    how many sibling timers were pulled forward."""
    answer = yield from call(
        core,
        "scheduler",
        "RecordThreadStarted",
        scheduler_pb2.RecordThreadStartedRequest(thread_id=thread_id),
        timeout,
        retry=False,
    )
    return int(answer.timers_pulled_forward)


def run_sweep(
    core: ClientCore, *, as_of: datetime | None = None, timeout: float | None = None
) -> Flow[SweepResult]:
    """Runs one pass of the Scheduler's periodic work now (tests, operators)."""
    request = scheduler_pb2.RunSweepRequest()
    if as_of is not None:
        request.as_of.CopyFrom(timestamp_of(as_of))
    a = yield from call(core, "scheduler", "RunSweep", request, timeout, retry=False)
    return SweepResult(
        a.episodes_created,
        a.timers_dropped,
        a.timers_caught_up,
        a.claims_reclaimed,
        a.backstop_episodes,
        a.threads_purged,
        a.threads_compacted,
    )


def process_pending(
    core: ClientCore, max_episodes: int = 0, *, timeout: float | None = None
) -> Flow[int]:
    """Makes the Summariser process up to ``max_episodes`` pending episodes now;
    returns how many completed."""
    answer = yield from call(
        core,
        "summariser",
        "ProcessPending",
        summariser_pb2.ProcessPendingRequest(max_episodes=max_episodes),
        timeout,
        retry=False,
    )
    return int(answer.completed)


def check_providers(
    core: ClientCore, *, timeout: float | None = None
) -> Flow[dict[str, ProviderHealth]]:
    """Whether the Summariser's LLM and embedding providers answer."""
    a = yield from call(
        core, "summariser", "CheckProviders", summariser_pb2.CheckProvidersRequest(), timeout
    )
    return {
        "llm": ProviderHealth(a.llm.name, a.llm.ok, a.llm.error),
        "embedder": ProviderHealth(a.embedder.name, a.embedder.ok, a.embedder.error),
    }


def pipeline_status(
    core: ClientCore,
    dataset: str | None = None,
    *,
    max_errors: int = 0,
    check_providers: bool = True,
    timeout: float | None = None,
) -> Flow[PipelineStatus]:
    """Whether the pipeline moves, for one dataset or the whole suite: episodes per
    status, backlog ages, overdue timers, recent errors and (unless
    ``check_providers=False``, which avoids calling a remote LLM) provider health."""
    a = yield from call(
        core,
        "summariser",
        "GetPipelineStatus",
        summariser_pb2.GetPipelineStatusRequest(
            dataset=dataset or "",
            max_errors=max_errors,
            skip_provider_checks=not check_providers,
        ),
        timeout,
    )
    return PipelineStatus(
        observed_at=time_of(a, "observed_at"),
        status_counts=dict(a.status_counts),
        semantic_status_counts=dict(a.semantic_status_counts),
        oldest_pending_age=duration_of(a, "oldest_pending_age"),
        oldest_processing_age=duration_of(a, "oldest_processing_age"),
        timers_due=a.timers_due,
        oldest_due_timer_age=duration_of(a, "oldest_due_timer_age"),
        timers_waiting=a.timers_waiting,
        threads_uncaptured=a.threads_uncaptured,
        recent_errors=[EpisodeFailure.from_proto(e) for e in a.recent_errors],
        llm=health_of(a, "llm"),
        embedder=health_of(a, "embedder"),
        pending_waiting=a.pending_waiting,
        latest_retry_at=time_of(a, "latest_retry_at"),
        failed_episodes=[EpisodeFailure.from_proto(e) for e in a.failed_episodes],
        threads_without_timer=a.threads_without_timer,
        oldest_untimed_thread_age=duration_of(a, "oldest_untimed_thread_age"),
        lifecycle=LifecycleStatus(
            last_run_at=time_of(a.lifecycle, "last_run_at"),
            threads_purged=a.lifecycle.threads_purged,
            threads_compacted=a.lifecycle.threads_compacted,
            messages_compacted=a.lifecycle.messages_compacted,
            erasures_resumed=a.lifecycle.erasures_resumed,
            datasets_erasing=a.lifecycle.datasets_erasing,
            threads_compacted_total=a.lifecycle.threads_compacted_total,
        ),
    )
