"""Time in the query: expressions read by episodic.temporal under the stated rules, and
Recall answering "what did we discuss 2 days ago?", "our second session", "the first time
we talked about X", "the last 2 decisions" from them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from episodic.services.recall import domain
from episodic.store.recall_queries import DEFAULT_RANKING, RecallFilters
from episodic.temporal import understand
from episodic.testing.keys import test_vault
from episodic.v1 import recall_service_pb2 as pb
from episodic.v1 import recall_service_pb2_grpc as pb_grpc
from tests.recall.factory import EMBEDDER, make_episode

# A Wednesday afternoon.
AS_OF = datetime(2023, 7, 12, 15, 30, tzinfo=UTC)


def _day(text: str) -> tuple[str, str]:
    got = understand(text, AS_OF)
    assert got.start is not None and got.end is not None, text
    return got.start.date().isoformat(), (got.end - timedelta(microseconds=1)).date().isoformat()


@pytest.mark.parametrize(
    ("query", "first", "last"),
    [
        ("what did we discuss yesterday?", "2023-07-11", "2023-07-11"),
        ("anything earlier today?", "2023-07-12", "2023-07-12"),
        ("what happened 3 days ago", "2023-07-09", "2023-07-09"),
        ("the day before yesterday", "2023-07-10", "2023-07-10"),
        ("what did we plan last week", "2023-07-03", "2023-07-09"),  # the previous ISO week
        ("a month ago", "2023-06-01", "2023-06-30"),
        ("in July", "2023-07-01", "2023-07-31"),
        ("in August", "2022-08-01", "2022-08-31"),  # a month without a year: the last begun
        ("in August 2021", "2021-08-01", "2021-08-31"),
        ("on May 8th", "2023-05-08", "2023-05-08"),
        ("the 8th of May", "2023-05-08", "2023-05-08"),
        ("on December 20", "2022-12-20", "2022-12-20"),  # after as_of this year: last year's
        ("on 2023-05-08", "2023-05-08", "2023-05-08"),
        ("between May 8th and June 9th", "2023-05-08", "2023-06-09"),
        ("from December 20 to January 5", "2022-12-20", "2023-01-05"),  # crosses the new year
        ("last Tuesday", "2023-07-11", "2023-07-11"),
        ("on Wednesday", "2023-07-05", "2023-07-05"),  # strictly before today (a Wednesday)
        ("last year", "2022-01-01", "2022-12-31"),
    ],
)
def test_time_expressions_resolve_by_the_stated_rules(query: str, first: str, last: str) -> None:
    assert _day(query) == (first, last)


def test_weeks_ago_is_the_week_centred_that_far_back() -> None:
    got = understand("2 weeks ago", AS_OF)
    assert got.start == AS_OF - timedelta(days=14, hours=84)
    assert got.end == AS_OF - timedelta(days=14) + timedelta(hours=84)


@pytest.mark.parametrize(
    ("query", "position", "from_end", "count", "scope"),
    [
        ("what did we talk about in our tenth session?", 10, False, 1, "sessions"),
        ("the 3rd conversation", 3, False, 1, "sessions"),
        ("what did Ann say the last time we talked", 1, True, 1, "sessions"),
        ("3 sessions ago", 3, True, 1, "sessions"),
        ("the chat before last", 2, True, 1, "sessions"),
        (
            "when did we first talk about Atlas? the first time we talked about Atlas",
            1,
            False,
            1,
            "matches",
        ),
        ("the last 3 decisions about pricing", 1, True, 3, "matches"),
    ],
)
def test_ordinals(query: str, position: int, from_end: bool, count: int, scope: str) -> None:
    ordinal = understand(query, AS_OF).ordinal
    assert ordinal is not None, query
    assert (ordinal.position, ordinal.from_end, ordinal.count, ordinal.scope) == (
        position,
        from_end,
        count,
        scope,
    )


def test_the_rest_of_the_query_is_ranked_and_time_only_is_recognised() -> None:
    got = understand("What did we decide about pricing last week?", AS_OF)
    assert got.remainder == "What did we decide about pricing" and not got.time_only
    assert [e.text for e in got.expressions] == ["last week"]
    assert understand("what did we discuss 2 days ago?", AS_OF).time_only
    decisions = understand("the last 3 decisions", AS_OF).ordinal
    assert decisions is not None and decisions.event_type == "decision"


@pytest.mark.parametrize(
    "query",
    [
        "May I ask about the pricing plan?",
        "how do I march the band",
        "my budget is 300",
        "what is my plan for next Tuesday?",
        "what should I finish by March 3rd?",
        "",
    ],
)
def test_a_query_without_time_is_left_alone(query: str) -> None:
    got = understand(query, AS_OF)
    assert not got.found and got.remainder == query


# ---- Recall, through the domain and the service ---------------------------------------------


def _sessions(conn) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Four sessions on four days, one of them about pricing twice."""
    made = {}
    for day, label, text, event in [
        (3, "first", "We decided the pricing is 20 dollars per seat.", "decision"),
        (7, "second", "My daughter's recital is on Friday evening.", "conversation"),
        (10, "third", "We decided to revisit pricing with an annual plan.", "decision"),
        (11, "fourth", "The dentist moved my appointment to Thursday.", "conversation"),
    ]:
        m = make_episode(
            conn,
            "timely",
            [text],
            ended_at=datetime(2023, 7, day, 10, tzinfo=UTC),
            label=label,
            event_type=event,
        )
        made[label] = str(m.thread_id)
    return made


def _recall(conn, query: str, *, literal: bool = False, limit: int = 5, ranking=DEFAULT_RANKING):  # type: ignore[no-untyped-def]
    understood = domain.read_time(query, AS_OF, literal)
    request = domain.RecallQuery(
        dataset="timely",
        query=query,
        include_episodes=True,
        limit=limit,
        similarity_weight=0.7,
        recency_weight=0.3,
        filters=RecallFilters(as_of=AS_OF),
        understanding=understood,
        ranking=ranking,
    )
    ranked = request.ranked_query
    vector = EMBEDDER.embed_query(ranked) if request.needs_embedding and ranked else None
    answer = domain.recall(conn, test_vault(), request, vector)
    return [r["thread_label"] for r in answer.rows], understood


def test_recall_answers_time_questions(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        _sessions(conn)
    with engine.connect() as conn:
        assert _recall(conn, "what did we discuss yesterday?")[0] == ["fourth"]
        assert _recall(conn, "what did we talk about last week?")[0] == ["first", "second"]
        # The window's episodes in time order, with no semantic match needed.
        assert _recall(conn, "what happened between July 2nd and July 10th?")[0] == [
            "first",
            "second",
            "third",
        ]
        assert _recall(conn, "what did we discuss in our second session?")[0] == ["second"]
        assert _recall(conn, "2 sessions ago")[0] == ["third"]
        assert _recall(conn, "the first time we talked about pricing")[0] == ["first"]
        assert _recall(conn, "the last 2 decisions")[0] == ["first", "third"]
        assert _recall(conn, "the last decision about pricing")[0] == ["third"]
        # Topic and time together: the window filters, the topic ranks.
        assert _recall(conn, "pricing in July")[0][0] in ("first", "third")
        assert _recall(conn, "what did we discuss on July 5th?")[0] == []
        # Read literally, the same words are only words.
        labels, understood = _recall(conn, "what did we discuss yesterday?", literal=True)
        assert understood is None and len(labels) == 4


def test_the_response_says_how_the_query_was_read(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        threads = _sessions(conn)
    recall = spawn("recall")
    stub = pb_grpc.RecallServiceStub(recall.channel())
    as_of = pb.RecallRequest().as_of
    as_of.FromDatetime(AS_OF)
    answer = stub.Recall(
        pb.RecallRequest(
            dataset="timely",
            query="What did we decide about pricing in our third session?",
            include=[pb.RECALL_INCLUDE_EPISODES],
            as_of=as_of,
        )
    )
    understood = answer.understanding
    assert understood.ranked_query == "What did we decide about pricing"
    assert [e.text for e in understood.expressions] == ["our third session"]
    assert understood.ordinal.position == 3 and understood.ordinal.scope == "sessions"
    assert list(understood.ordinal.thread_ids) == [threads["third"]]
    assert [e.episode.thread_label for e in answer.episodes.episodes] == ["third"]
    window = stub.Recall(
        pb.RecallRequest(
            dataset="timely",
            query="what did we discuss yesterday?",
            include=[pb.RECALL_INCLUDE_EPISODES],
            as_of=as_of,
        )
    ).understanding
    assert window.time_only and window.ranked_query == ""
    assert window.window_start.ToDatetime(UTC) == datetime(2023, 7, 11, tzinfo=UTC)
    assert window.window_end.ToDatetime(UTC) == datetime(2023, 7, 12, tzinfo=UTC)
    literal = stub.Recall(
        pb.RecallRequest(
            dataset="timely",
            query="what did we discuss yesterday?",
            include=[pb.RECALL_INCLUDE_EPISODES],
            as_of=as_of,
            literal_query=True,
        )
    )
    assert not literal.HasField("understanding")
    # A day past the calendar's end (it ends at 10000-01-01) is not read, like "in 9999":
    # the query is ranked as written (it was INTERNAL, an OverflowError in temporal).
    beyond = stub.Recall(
        pb.RecallRequest(
            dataset="timely",
            query="December 31, 9999",
            include=[pb.RECALL_INCLUDE_EPISODES],
            as_of=as_of,
        )
    )
    assert not beyond.HasField("understanding")
    with pytest.raises(grpc.RpcError) as err:
        stub.Recall(pb.RecallRequest(dataset="timely", query="x" * 9000, include=[1]))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_the_sdk_returns_the_understanding(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    from episodic.sdk.client import EpisodicClient

    with engine.begin() as conn:
        _sessions(conn)
    recall = spawn("recall")
    with EpisodicClient(recall=recall.address) as client:
        read = client.recall("timely", "what did we discuss yesterday?", as_of=AS_OF)
        literal = client.recall(
            "timely", "what did we discuss yesterday?", as_of=AS_OF, literal_query=True
        )
    assert [e.episode.thread_label for e in read] == ["fourth"]
    assert read.understanding is not None and read.understanding.time_only
    assert [e.text for e in read.understanding.expressions] == ["yesterday"]
    assert read.understanding.window_start == datetime(2023, 7, 11, tzinfo=UTC)
    assert literal.understanding is None and len(literal.episodes) > 1


def test_a_time_of_an_event_does_not_narrow_the_search(engine) -> None:  # type: ignore[no-untyped-def]
    """ "When did we go camping in June?" is answered by whichever conversation told of it
    (often a later one): the time is read and reported, not applied."""
    got = understand("When did Caroline go camping in June?", AS_OF)
    assert got.found and not got.applied and got.notes
    assert understand("What did Caroline tell you about camping in June?", AS_OF).applied
    with engine.begin() as conn:
        _sessions(conn)
    with engine.connect() as conn:
        event, understood = _recall(conn, "When did the dentist appointment move in June?")
        literal, _ = _recall(conn, "When did the dentist appointment move in June?", literal=True)
        everywhere, _ = _recall(
            conn,
            "When did the dentist appointment move in June?",
            ranking=replace(DEFAULT_RANKING, recency_band=0.0),
        )
    assert understood is not None and not understood.applied
    # nothing is left out, and the session that told of it comes first
    assert sorted(event) == sorted(literal) and event[0] == "fourth"
    # with recency weighed everywhere (not only inside the similarity band, where nothing
    # else is here) the rest are ordered by closeness to the named June (recency counts
    # from the time a question names, RankingOptions.named_time_recency), the earliest
    # July session first
    assert everywhere == ["fourth", "first", "second", "third"]
