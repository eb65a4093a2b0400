"""Prompt rendering of episodes (pure functions)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from episodic.render import absolute_time, relative_time, render_episodes
from episodic.sdk.client import Episode, ScoredEpisode

NOW = datetime(2026, 5, 17, 10, 10, tzinfo=UTC)


def _episode(summary: str, ended: datetime, label: str = "", learnings=()) -> Episode:  # type: ignore[no-untyped-def]
    return Episode(
        episode_id="e",
        thread_id="t",
        dataset="ds",
        status="completed",
        semantic_status="completed",
        summary=summary,
        key_learnings=list(learnings),
        entities=[],
        event_type="conversation",
        actor="user",
        message_count=2,
        start_sequence=1,
        end_sequence=2,
        started_at=ended,
        ended_at=ended,
        trigger="explicit",
        retry_count=0,
        error="",
        created_at=ended,
        updated_at=ended,
        thread_label=label,
    )


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(seconds=5), "just now"),
        (timedelta(minutes=1), "1 minute ago"),
        (timedelta(minutes=59), "59 minutes ago"),
        (timedelta(hours=2), "2 hours ago"),
        (timedelta(hours=30), "yesterday"),
        (timedelta(days=3), "3 days ago"),
        (timedelta(days=15), "2 weeks ago"),
        (timedelta(days=95), "3 months ago"),
        (timedelta(days=800), "2 years ago"),
        (-timedelta(hours=5), "in 5 hours"),
        (-timedelta(days=3), "in 3 days"),
    ],
)
def test_relative_time(delta: timedelta, text: str) -> None:
    assert relative_time(NOW - delta, NOW) == text


def test_absolute_time_is_utc() -> None:
    from datetime import timezone

    paris = timezone(timedelta(hours=2))
    assert absolute_time(datetime(2026, 5, 14, 16, 22, tzinfo=paris)) == "2026-05-14 14:22 UTC"
    assert absolute_time(datetime(2026, 5, 14, 14, 22)) == "2026-05-14 14:22 UTC"


def test_timeline_is_chronological_with_relative_and_absolute_time() -> None:
    recent = _episode(
        "Agent escalated invoice #42 to finance.", NOW - timedelta(hours=2), "support-#412"
    )
    older = _episode(
        "User confirmed the Pro tier at $29.",
        datetime(2026, 5, 14, 14, 22, tzinfo=UTC),
        "billing-q2",
        learnings=["user chose Pro"],
    )
    scored = [ScoredEpisode(recent, 0.9, 0.8, 0.9), ScoredEpisode(older, 0.5, 0.6, 0.2)]
    assert render_episodes(scored, now=NOW) == (
        '[2 days ago, 2026-05-14 14:22 UTC, thread "billing-q2"]\n'
        "User confirmed the Pro tier at $29.\n\n"
        '[2 hours ago, 2026-05-17 08:10 UTC, thread "support-#412"]\n'
        "Agent escalated invoice #42 to finance."
    )
    with_learnings = render_episodes([older], now=NOW, key_learnings=True)
    assert with_learnings.endswith("User confirmed the Pro tier at $29.\n- user chose Pro")
    unlabelled = render_episodes([replace(older, thread_label="")], now=NOW)
    assert unlabelled.startswith("[2 days ago, 2026-05-14 14:22 UTC]\n")


def test_past_conversation_keeps_the_given_order() -> None:
    a = _episode("First summary.", datetime(2026, 5, 1, tzinfo=UTC))
    b = _episode("Second summary.", datetime(2026, 4, 2, tzinfo=UTC))
    assert render_episodes([a, b], style="past_conversation") == (
        "Past conversation 1 (2026-05-01):\nFirst summary.\n\n"
        "Past conversation 2 (2026-04-02):\nSecond summary."
    )
    assert render_episodes([], style="past_conversation") == ""
    with pytest.raises(ValueError, match="unknown style"):
        render_episodes([a], style="other")  # type: ignore[arg-type]


def test_renders_protobuf_episodes_too() -> None:
    from google.protobuf import timestamp_pb2

    from episodic.v1 import episode_pb2

    ended = timestamp_pb2.Timestamp()
    ended.FromDatetime(NOW - timedelta(days=3))
    message = episode_pb2.ScoredEpisode(
        episode=episode_pb2.Episode(summary="From the wire.", thread_label="x", ended_at=ended)
    )
    assert render_episodes([message], now=NOW) == (
        '[3 days ago, 2026-05-14 10:10 UTC, thread "x"]\nFrom the wire.'
    )


def test_events_render_with_their_moment_type_and_actor() -> None:
    at = NOW - timedelta(days=2, minutes=40)
    event = replace(
        _episode("Switched the Atlas invoices to annual billing.", at, "billing-q2"),
        kind="event",
        event_source="agent",
        event_type="decision",
        actor="agent",
    )
    chat = _episode("We talked about invoices.", NOW - timedelta(days=3))
    text = render_episodes([event, chat], now=NOW)
    assert text.split("\n\n")[1] == (
        '[2 days ago, 2026-05-15 09:30 UTC, decision by agent, thread "billing-q2"]\n'
        "Switched the Atlas invoices to annual billing."
    )
    plain = render_episodes([event], now=NOW, style="past_conversation")
    assert plain == (
        "Event (2026-05-15 09:30 UTC, decision by agent):\n"
        "Switched the Atlas invoices to annual billing."
    )


def test_absolute_time_prints_every_year_as_a_date() -> None:
    assert absolute_time(datetime(1, 1, 1, tzinfo=UTC)) == "0001-01-01 00:00 UTC"
    assert absolute_time(datetime(987, 6, 5, 4, 3, tzinfo=UTC)) == "0987-06-05 04:03 UTC"
    assert absolute_time(datetime(2026, 5, 14, 14, 22, tzinfo=UTC)) == "2026-05-14 14:22 UTC"


def _procedure(**overrides):  # type: ignore[no-untyped-def]
    from episodic.sdk.client import Procedure, ProcedureStep

    fields = dict(
        procedure_id="p1",
        dataset="shop",
        goal="Please cancel my order #W1,\n I bought it by mistake",
        example_goals=["Please cancel my order #W1,\n I bought it by mistake", "cancel #W2"],
        steps=[
            ProcedureStep("get_order_details", "get order details", False, {"order_id": "user"}),
            ProcedureStep(
                "cancel_pending_order",
                "Cancelling it now.",
                True,
                {"order_id": "tool:get_order_details", "reason": "agent"},
            ),
        ],
        success_count=2,
        failure_count=1,
        partial_count=0,
        sources=[("t1", "e1", "success")],
        created_at=NOW,
        updated_at=NOW,
        extractor="rules",
    )
    fields.update(overrides)
    return Procedure(**fields)


def test_procedures_render_goal_numbered_steps_sources_and_support() -> None:
    from episodic.render import render_procedures
    from episodic.sdk.client import ScoredProcedure

    scored = [
        ScoredProcedure(_procedure(), 0.8234),
        ScoredProcedure(
            _procedure(
                goal="Return the kettle",
                steps=[],
                success_count=1,
                failure_count=0,
                partial_count=3,
            ),
            0.4,
        ),
    ]
    assert render_procedures(scored) == (
        "How this was done before:\n\n"
        "1. Goal: Please cancel my order #W1, I bought it by mistake\n"
        "   Worked twice, failed once (relevance 0.82).\n"
        # The extractor's fallback purpose (the tool's name in words) is not said twice.
        "   1. get_order_details [order_id from the user]\n"
        "   2. cancel_pending_order (changes something): Cancelling it now. "
        "[order_id from get_order_details's result, reason chosen by the agent]\n\n"
        "2. Goal: Return the kettle\n"
        "   Worked once, partly worked 3 times (relevance 0.40)."
    )
    # A plain Procedure has no relevance; examples add the other requests it served.
    text = render_procedures([_procedure()], heading="", examples=True)
    assert text.splitlines()[:3] == [
        "1. Goal: Please cancel my order #W1, I bought it by mistake",
        "   Worked twice, failed once.",
        "   Also used for: cancel #W2",
    ]
    # Nothing to add to a prompt: an empty string, not a lone heading.
    assert render_procedures([]) == ""


def test_renders_protobuf_procedures_and_recall_results() -> None:
    from episodic.render import render_procedures
    from episodic.sdk.client import RecallResult, ScoredProcedure
    from episodic.v1 import episode_pb2, recall_service_pb2

    wire = episode_pb2.ScoredProcedure(
        procedure=episode_pb2.Procedure(
            goal="cancel an order",
            success_count=3,
            steps=[
                episode_pb2.ProcedureStep(
                    tool="cancel_pending_order",
                    writes=True,
                    arguments=[episode_pb2.ProcedureArgument(name="order_id", source="user")],
                )
            ],
        ),
        relevance=0.5,
    )
    expected = (
        "How this was done before:\n\n"
        "1. Goal: cancel an order\n"
        "   Worked 3 times (relevance 0.50).\n"
        "   1. cancel_pending_order (changes something) [order_id from the user]"
    )
    assert render_procedures([wire]) == expected
    assert render_procedures(recall_service_pb2.RecallResponse(procedures=[wire])) == expected
    result = RecallResult(
        episodes=[], episode_count=0, procedures=[ScoredProcedure(_procedure(), 0.9)]
    )
    assert render_procedures(result).startswith("How this was done before:\n\n1. Goal: Please")
