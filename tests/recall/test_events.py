"""Events in Recall, through real Ingest, Summariser and Recall processes: recalled beside
episodes by the same formula, marked as events, filtered by type, actor and time, found
by words before the Summariser embeds them and by meaning after."""

from __future__ import annotations

from datetime import datetime, timedelta

import grpc
import pytest
from google.protobuf import timestamp_pb2
from sqlalchemy import text

from episodic.store.recall_queries import RECENCY_SPAN
from episodic.testing.processes import wait_until
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from episodic.v1 import recall_service_pb2 as pb
from episodic.v1 import recall_service_pb2_grpc as rg
from episodic.v1 import summariser_service_pb2 as spb
from episodic.v1 import summariser_service_pb2_grpc as sg
from tests.recall.factory import T0, make_episode

EPISODES = [pb.RECALL_INCLUDE_EPISODES]


def ts(value: datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value)
    return out


@pytest.fixture
def stubs(spawn):  # type: ignore[no-untyped-def]
    ingest, recall, summariser = spawn("ingest"), spawn("recall"), spawn("summariser")
    channels = [s.channel() for s in (ingest, recall, summariser)]
    yield (
        ig.IngestServiceStub(channels[0]),
        rg.RecallServiceStub(channels[1]),
        sg.SummariserServiceStub(channels[2]),
    )
    for channel in channels:
        channel.close()


def record(ingest, summary: str, at: datetime, **kw):  # type: ignore[no-untyped-def]
    fields = {"dataset": "user_42", "actor": "agent", "event_type": "decision"}
    fields.update(kw)
    return ingest.RecordEvent(
        ipb.RecordEventRequest(summary=summary, occurred_at=ts(at), **fields), timeout=10
    ).event


def recall_(stub, **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("dataset", "user_42")
    kw.setdefault("as_of", ts(T0))
    return stub.Recall(pb.RecallRequest(include=EPISODES, **kw), timeout=10).episodes.episodes


def test_events_are_recalled_beside_episodes_and_filtered(stubs, engine) -> None:  # type: ignore[no-untyped-def]
    ingest, recall, _ = stubs
    with engine.begin() as conn:
        chat = make_episode(
            conn,
            "user_42",
            ["we talked about the weather in Lisbon"],
            ended_at=T0 - timedelta(days=1),
        )
    pricing = record(
        ingest,
        "Switched the Atlas invoices to annual billing",
        T0 - timedelta(days=2),
        entities=["project atlas"],
    )
    deploy = record(
        ingest,
        "Deployed the billing service v2",
        T0 - timedelta(hours=3),
        actor="ci-bot",
        event_type="tool_call",
    )
    record(ingest, "Planned next quarter", T0 + timedelta(days=1))  # after as_of: never

    # By words, before any embedding: the event answers, marked as an event.
    top = recall_(recall, query="annual billing for the invoices")[0]
    assert top.episode.episode_id == pricing.episode_id
    assert top.episode.kind == e.EPISODE_KIND_EVENT
    assert top.lexical > 0 and top.semantic == 0
    # 2 days back, the oldest event: recency relative to the events' span (RECENCY_SPAN)
    assert top.recency == pytest.approx(1 / (1 + 2 / (RECENCY_SPAN * 2)))
    assert top.relevance_score == pytest.approx(0.7 * top.similarity + 0.3 * top.recency)

    # No query: everything by recency, episodes and events together; nothing after as_of.
    ids = [s.episode.episode_id for s in recall_(recall, context_episodes=10)]
    assert ids == [deploy.episode_id, str(chat.episode_id), pricing.episode_id]
    kinds = {s.episode.episode_id: s.episode.kind for s in recall_(recall, context_episodes=10)}
    assert kinds[str(chat.episode_id)] == e.EPISODE_KIND_SUMMARY

    # Filters: event type (episodes and events alike), actor (events only), entities, time.
    assert [s.episode.episode_id for s in recall_(recall, event_type="tool_call")] == [
        deploy.episode_id
    ]
    assert [s.episode.episode_id for s in recall_(recall, actor="CI-Bot")] == [deploy.episode_id]
    assert [s.episode.episode_id for s in recall_(recall, entities=["Atlas Project"])] == [
        pricing.episode_id
    ]
    window = recall_(
        recall, since=ts(T0 - timedelta(days=3)), until=ts(T0 - timedelta(days=1, hours=12))
    )
    assert [s.episode.episode_id for s in window] == [pricing.episode_id]
    only_summaries = recall_(recall, exclude_events=True, context_episodes=10)
    assert [s.episode.episode_id for s in only_summaries] == [str(chat.episode_id)]

    # Time in the query places events by when they occurred.
    understood = recall.Recall(
        pb.RecallRequest(
            dataset="user_42",
            query="what did we decide 2 days ago?",
            include=EPISODES,
            as_of=ts(T0),
        ),
        timeout=10,
    )
    assert [s.episode.episode_id for s in understood.episodes.episodes] == [pricing.episode_id]

    # actor and exclude_events contradict each other.
    with pytest.raises(grpc.RpcError) as err:
        recall_(recall, actor="agent", exclude_events=True)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "exclude_events" in err.value.details()


def test_the_summariser_embeds_events_so_meaning_finds_them(stubs, engine) -> None:  # type: ignore[no-untyped-def]
    ingest, recall, summariser = stubs
    event = record(ingest, "Agreed on the Pro tier pricing", T0 - timedelta(days=1))
    with engine.connect() as conn:
        assert (
            conn.execute(text("SELECT count(*) FROM events WHERE embedding IS NULL")).scalar_one()
            == 1
        )

    def embedded() -> bool:
        summariser.ProcessPending(spb.ProcessPendingRequest(), timeout=30)
        with engine.connect() as conn:
            return (
                conn.execute(
                    text("SELECT count(*) FROM events WHERE embedding IS NOT NULL")
                ).scalar_one()
                == 1
            )

    wait_until(embedded, timeout=30)
    top = recall_(recall, query="pricing tier agreed")[0]
    assert top.episode.episode_id == event.episode_id
    assert top.semantic > 0  # the hashing embedder shares words with the query


def test_events_carry_the_calibrated_relevance_and_min_relevance_drops_them(stubs, engine) -> None:  # type: ignore[no-untyped-def]
    """Events take part in abstention like episodes: a question the event answers keeps it
    at the recommended threshold (with its calibrated relevance on the answer), one it does
    not answer gets nothing."""
    from episodic.store.relevance import MINILM, RECOMMENDED_MIN_RELEVANCE

    ingest, recall, _ = stubs
    with engine.begin() as conn:  # the dataset exists
        make_episode(
            conn, "user_42", ["we talked about the weather"], ended_at=T0 - timedelta(days=9)
        )
    dog = record(
        ingest, "The user's dog is named Rex", T0 - timedelta(days=1), event_type="milestone"
    )

    found = recall_(recall, query="what is my dog's name?", min_relevance=RECOMMENDED_MIN_RELEVANCE)
    assert [s.episode.episode_id for s in found] == [dog.episode_id]
    assert found[0].relevance >= RECOMMENDED_MIN_RELEVANCE
    unrelated = recall_(
        recall, query="which airline flies to Lisbon?", min_relevance=RECOMMENDED_MIN_RELEVANCE
    )
    assert unrelated == []
    everything = recall_(recall, query="which airline flies to Lisbon?", context_episodes=10)
    assert dog.episode_id in {s.episode.episode_id for s in everything}  # only the threshold
    # and in the request-level decision: the events' best match decides for them
    gate = MINILM.abstention.min_match
    assert [
        s.episode.episode_id
        for s in recall_(recall, query="what is my dog's name?", min_match=gate)
    ] == [dog.episode_id]
    assert recall_(recall, query="which airline flies to Lisbon?", min_match=gate) == []


def test_the_answer_counts_events_in_its_match_and_abstention(stubs, engine) -> None:  # type: ignore[no-untyped-def]
    """``RecalledEpisodes.match`` and ``abstained`` read events as they read episodes: a
    dataset whose only candidate is an event abstains on a question nothing answers (and
    says its match), not on one the event answers; beside an episode that answers nothing,
    the event's better match is the answer's."""
    from episodic.store.relevance import RECOMMENDED_MIN_RELEVANCE

    ingest, recall, _ = stubs
    dog = record(
        ingest, "The user's dog is named Rex", T0 - timedelta(days=1), event_type="milestone"
    )

    def ask(query: str, **kw):  # type: ignore[no-untyped-def]
        request = pb.RecallRequest(
            dataset="user_42", query=query, as_of=ts(T0), include=EPISODES, **kw
        )
        return recall.Recall(request, timeout=10).episodes

    strict = {"min_relevance": RECOMMENDED_MIN_RELEVANCE}
    unrelated = ask("which airline flies to Lisbon?", **strict)
    assert list(unrelated.episodes) == [] and unrelated.abstained
    assert unrelated.HasField("match")
    answered = ask("what is my dog's name?", **strict)
    assert [s.episode.episode_id for s in answered.episodes] == [dog.episode_id]
    assert not answered.abstained and answered.match > unrelated.match
    # events alone (by actor): the same decision
    by_actor = ask("which airline flies to Lisbon?", actor="agent", **strict)
    assert list(by_actor.episodes) == [] and by_actor.abstained
    assert by_actor.match == pytest.approx(unrelated.match)
    # an unrelated episode beside it: the event's match, the better, is the answer's
    with engine.begin() as conn:
        make_episode(
            conn, "user_42", ["we talked about the weather"], ended_at=T0 - timedelta(days=9)
        )
    mixed = ask("what is my dog's name?", **strict)
    assert [s.episode.episode_id for s in mixed.episodes] == [dog.episode_id]
    assert not mixed.abstained and mixed.match == pytest.approx(answered.match)
    both_withheld = ask("which airline flies to Lisbon?", **strict)
    assert list(both_withheld.episodes) == [] and both_withheld.abstained


def test_an_event_is_got_and_erased_by_the_id_it_is_listed_under(stubs, spawn, engine) -> None:  # type: ignore[no-untyped-def]
    """ListEpisodes and Recall list events under their ids: GetEpisode answers them,
    DeleteEpisode erases them (no status to archive: gone from every answer, audited),
    RetryEpisode says an event is no failed summary; a second delete is NOT_FOUND."""
    from episodic.v1 import scheduler_service_pb2 as schpb
    from episodic.v1 import scheduler_service_pb2_grpc as schg

    ingest, recall, _ = stubs
    with engine.begin() as conn:  # a summary beside it
        make_episode(conn, "user_42", ["we talked about the weather"], ended_at=T0)
    wrong = record(ingest, "The user's dog is named Rex", T0 - timedelta(days=1))
    kept = record(ingest, "Chose the Pro tier", T0 - timedelta(days=2))
    listed = recall.ListEpisodes(pb.ListEpisodesRequest(dataset="user_42"), timeout=10).episodes
    assert wrong.episode_id in {ep.episode_id for ep in listed}

    got = recall.GetEpisode(pb.GetEpisodeRequest(episode_id=wrong.episode_id), timeout=10).episode
    assert got.kind == e.EPISODE_KIND_EVENT and got.summary == "The user's dog is named Rex"
    assert got.event_type == "decision" and got.status == e.EPISODE_STATUS_COMPLETED

    scheduler = spawn("scheduler")
    with scheduler.channel() as channel:
        sched = schg.SchedulerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            sched.RetryEpisode(schpb.RetryEpisodeRequest(episode_id=wrong.episode_id), timeout=10)
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "is an event" in (caught.value.details() or "")
        deleted = sched.DeleteEpisode(
            schpb.DeleteEpisodeRequest(episode_id=wrong.episode_id), timeout=10
        ).episode
        assert deleted.kind == e.EPISODE_KIND_EVENT and deleted.episode_id == wrong.episode_id
        assert deleted.status == e.EPISODE_STATUS_ARCHIVED
        with pytest.raises(grpc.RpcError) as again:
            sched.DeleteEpisode(schpb.DeleteEpisodeRequest(episode_id=wrong.episode_id), timeout=10)
        assert again.value.code() == grpc.StatusCode.NOT_FOUND

    with pytest.raises(grpc.RpcError) as gone:
        recall.GetEpisode(pb.GetEpisodeRequest(episode_id=wrong.episode_id), timeout=10)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    remaining = {
        ep.episode_id
        for ep in recall.ListEpisodes(
            pb.ListEpisodesRequest(dataset="user_42"), timeout=10
        ).episodes
    }
    assert wrong.episode_id not in remaining and kept.episode_id in remaining
    assert wrong.episode_id not in {
        s.episode.episode_id for s in recall_(recall, query="what is my dog's name?")
    }
    with engine.connect() as conn:
        assert conn.execute(
            text("SELECT action FROM audit_events WHERE target = :t"), {"t": wrong.episode_id}
        ).scalars().all() == ["event.delete"]
