"""The whole loop across four real processes: write → trigger → summarise → recall."""

from __future__ import annotations

import pytest

from episodic.testing.invariants import check_invariants
from episodic.testing.processes import wait_until
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from episodic.v1 import recall_service_pb2 as rpb
from episodic.v1 import recall_service_pb2_grpc as rg

pytestmark = pytest.mark.citus  # the whole loop runs on Citus too (make test-citus)


def _say(stub, thread_id: str, *turns: tuple[int, str]) -> None:  # type: ignore[no-untyped-def]
    stub.AddMessages(
        ipb.AddMessagesRequest(
            thread_id=thread_id,
            messages=[ipb.NewMessage(role=role, content=text) for role, text in turns],
        ),
        timeout=10,
    )


def test_messages_become_recallable_episodes(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    # Real time, short idle interval: the scheduler loop fires the timer by itself.
    scheduler = spawn(
        "scheduler",
        env={"EPISODIC_SCHEDULER_POLL_INTERVAL": "0.2", "EPISODIC_AUTO_EPISODE_INTERVAL": "1"},
    )
    ingest = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    spawn("summariser", env={"EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"})
    recall = spawn("recall")
    writes = ig.IngestServiceStub(ingest.channel())
    reads = rg.RecallServiceStub(recall.channel())
    U, A = e.ROLE_USER, e.ROLE_ASSISTANT

    # Thread 1 ends explicitly (trigger 1).
    cars = writes.CreateThread(ipb.CreateThreadRequest(dataset="user_42", label="cars")).thread
    _say(
        writes,
        cars.thread_id,
        (U, "I need a compact family car under $30k for city commuting."),
        (A, "The Toyota Corolla Hybrid fits: efficient and affordable."),
        (U, "I decided to test drive the Corolla Hybrid on Saturday."),
    )
    assert writes.EndThread(ipb.EndThreadRequest(thread_id=cars.thread_id)).episode_queued

    # Thread 2 goes quiet and is caught by the inactivity timer (trigger 3).
    trip = writes.CreateThread(ipb.CreateThreadRequest(dataset="user_42", label="trip")).thread
    _say(
        writes,
        trip.thread_id,
        (U, "Plan a hiking trip to the Dolomites in July, budget 2000 euros."),
        (A, "I suggest the Alta Via 1 with mountain huts."),
    )

    def completed() -> list:  # type: ignore[type-arg]
        episodes = reads.Recall(
            rpb.RecallRequest(
                dataset="user_42", include=[rpb.RECALL_INCLUDE_EPISODES], context_episodes=10
            )
        ).episodes
        return list(episodes.episodes) if episodes.episode_count == 2 else []

    wait_until(completed, timeout=60, message="both episodes completed (explicit + idle timer)")

    hit = reads.Recall(
        rpb.RecallRequest(
            dataset="user_42",
            query="which car will I test drive?",
            include=[rpb.RECALL_INCLUDE_EPISODES],
        )
    ).episodes
    assert hit.episodes[0].episode.thread_id == cars.thread_id
    assert hit.episodes[0].episode.thread_label == "cars"
    assert hit.episodes[0].similarity > hit.episodes[1].similarity
    hike = reads.Recall(
        rpb.RecallRequest(
            dataset="user_42",
            query="mountain hiking holiday",
            include=[rpb.RECALL_INCLUDE_EPISODES],
        )
    ).episodes
    assert hike.episodes[0].episode.thread_id == trip.thread_id
    assert hike.episodes[0].episode.trigger == e.EPISODE_TRIGGER_INACTIVITY

    # The cars thread continues; a second episode supersedes the first (archival).
    _say(writes, cars.thread_id, (U, "The test drive went well, I bought the Corolla."))
    second = writes.EndThread(ipb.EndThreadRequest(thread_id=cars.thread_id))
    assert second.episode_queued

    def superseded() -> e.Episode | None:
        # EndThread names the episode only when the Scheduler answered in time (a loaded
        # machine may not): else the thread's episode covering its last message, once
        # the Scheduler has caught up.
        if second.episode_id:
            got = reads.GetEpisode(rpb.GetEpisodeRequest(episode_id=second.episode_id)).episode
        else:
            listed = reads.ListEpisodes(
                rpb.ListEpisodesRequest(dataset="user_42", thread_id=cars.thread_id)
            ).episodes
            got = next((ep for ep in listed if ep.end_sequence == 4), None)
        return got if got is not None and got.status == e.EPISODE_STATUS_COMPLETED else None

    current = wait_until(superseded, timeout=60, message="second cars episode completed")
    assert (current.start_sequence, current.end_sequence) == (4, 4)
    listed = reads.ListEpisodes(
        rpb.ListEpisodesRequest(dataset="user_42", status=e.EPISODE_STATUS_ARCHIVED)
    ).episodes
    assert [ep.thread_id for ep in listed] == [cars.thread_id]
    check_invariants(engine, all_covered=True)
