"""The SDK's flows for episodes (Recall reads, Admin and the Summariser act on one):
listing, paging, searching, an entity's timeline, reading, deleting and retrying an episode,
and :func:`wait_for_episode`, which polls until a thread's episode is summarised.
Re-exported by :mod:`episodic.sdk.operations`."""

from __future__ import annotations

import time

import grpc

from episodic.sdk.calling import call
from episodic.sdk.errors import DeadlineExceededError
from episodic.sdk.flow import ClientCore, Emit, Flow, Sleep, Stream
from episodic.sdk.thread_ops import get_thread
from episodic.sdk.types import (
    STATUSES,
    Entity,
    EntityTimelinePage,
    Episode,
    Page,
    ScoredEpisode,
)
from episodic.v1 import episode_pb2, recall_service_pb2
from episodic.v1 import scheduler_service_pb2 as scheduler_pb2

# -- episode administration (Recall reads, Scheduler writes)


def list_episodes(
    core: ClientCore,
    dataset: str,
    *,
    status: str | None = None,
    thread_id: str | None = None,
    page_size: int = 0,
    page_token: str = "",
    timeout: float | None = None,
) -> Flow[Page[Episode]]:
    """One page of a dataset's episodes, newest first; ``status`` is e.g.
    ``"completed"`` or ``"failed"`` (any when None)."""
    if status is not None and status not in STATUSES:
        raise ValueError(f"unknown status {status!r}; use one of {sorted(STATUSES)}")
    answer = yield from call(
        core,
        "recall",
        "ListEpisodes",
        recall_service_pb2.ListEpisodesRequest(
            dataset=dataset,
            status=STATUSES[status] if status else episode_pb2.EPISODE_STATUS_UNSPECIFIED,
            thread_id=thread_id or "",
            page_size=page_size,
            page_token=page_token,
        ),
        timeout,
    )
    return Page([Episode.from_proto(e) for e in answer.episodes], answer.next_page_token)


def iter_episodes(
    core: ClientCore,
    dataset: str,
    *,
    status: str | None = None,
    thread_id: str | None = None,
    timeout: float | None = None,
) -> Stream[Episode]:
    """Every episode of a dataset (optionally of one status or thread), newest first."""
    token = ""
    while True:
        page = yield from list_episodes(
            core,
            dataset,
            status=status,
            thread_id=thread_id,
            page_size=1000,
            page_token=token,
            timeout=timeout,
        )
        for item in page.items:
            yield Emit(item)
        token = page.next_page_token
        if not token:
            return


def search_episodes(
    core: ClientCore, dataset: str, query: str, *, limit: int = 0, timeout: float | None = None
) -> Flow[list[ScoredEpisode]]:
    """Current episodes matching ``query`` by text alone (no recency), best first."""
    answer = yield from call(
        core,
        "recall",
        "SearchEpisodes",
        recall_service_pb2.SearchEpisodesRequest(dataset=dataset, query=query, page_size=limit),
        timeout,
    )
    return [ScoredEpisode.from_proto(e) for e in answer.episodes]


def entity_timeline(
    core: ClientCore,
    dataset: str,
    entity: str,
    *,
    page_size: int = 0,
    page_token: str = "",
    timeout: float | None = None,
) -> Flow[EntityTimelinePage]:
    """Everything about one entity, in order: a page of the current episodes mentioning it
    under any alias, oldest first. ``entity`` is its id or any name of it ("atlas", "the
    Atlas project"); NotFoundError when the dataset has no such entity."""
    answer = yield from call(
        core,
        "recall",
        "EntityTimeline",
        recall_service_pb2.EntityTimelineRequest(
            dataset=dataset, entity=entity, page_size=page_size, page_token=page_token
        ),
        timeout,
    )
    return EntityTimelinePage(
        [Episode.from_proto(e) for e in answer.episodes],
        answer.next_page_token,
        entity=Entity.from_proto(answer.entity),
    )


def get_episode(
    core: ClientCore, episode_id: str, *, timeout: float | None = None
) -> Flow[Episode]:
    """One episode in any status (archived ones too, for provenance), or an event by the id
    recall and list_episodes give it."""
    answer = yield from call(
        core,
        "recall",
        "GetEpisode",
        recall_service_pb2.GetEpisodeRequest(episode_id=episode_id),
        timeout,
    )
    return Episode.from_proto(answer.episode)


def delete_episode(
    core: ClientCore, episode_id: str, *, timeout: float | None = None
) -> Flow[Episode]:
    """Soft-deletes an episode (it becomes archived and leaves recall) and returns it; an
    event's id (``Episode.is_event``) erases the event for good, returned as it was,
    marked archived."""
    answer = yield from call(
        core,
        "scheduler",
        "DeleteEpisode",
        scheduler_pb2.DeleteEpisodeRequest(episode_id=episode_id),
        timeout,
        retry=False,
    )
    return Episode.from_proto(answer.episode)


def retry_episode(
    core: ClientCore, episode_id: str, *, timeout: float | None = None
) -> Flow[Episode]:
    """Puts a failed episode back to pending (FailedPreconditionError otherwise)."""
    answer = yield from call(
        core,
        "scheduler",
        "RetryEpisode",
        scheduler_pb2.RetryEpisodeRequest(episode_id=episode_id),
        timeout,
        retry=False,
    )
    return Episode.from_proto(answer.episode)


def wait_for_episode(
    core: ClientCore,
    thread_id: str,
    *,
    end_sequence: int | None = None,
    timeout: float = 60.0,
    poll_interval: float = 0.2,
) -> Flow[Episode]:
    """Waits until the thread's episode covering ``end_sequence`` (default: the
    thread's last message) is summarised, and returns it — completed, or failed for
    good. Raises DeadlineExceededError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    thread = yield from get_thread(core, thread_id)
    if end_sequence is None:
        end_sequence = thread.message_count
    dataset = thread.dataset
    while True:
        page = yield from list_episodes(core, dataset, thread_id=thread_id, page_size=50)
        for episode in page:
            if episode.end_sequence >= end_sequence and episode.status in (
                "completed",
                "failed",
                "archived",
            ):
                return episode
        if time.monotonic() > deadline:
            raise DeadlineExceededError(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"no summarised episode of thread {thread_id} up to message {end_sequence} "
                f"after {timeout:.0f}s (are the scheduler and summariser running?)",
                method="wait_for_episode",
            )
        yield Sleep(poll_interval)
