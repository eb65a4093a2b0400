"""The turn classifier (EPISODIC_EVENT_CLASSIFIER) through real Ingest and Summariser
processes: turns written with AddMessages become events after the write has committed, the
ack never waits for the classifier, a provider outage loses nothing, and each turn is
recorded once."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from episodic.providers.turn_classifier import HeuristicClassifier, OpenAITurnClassifier, Turn
from episodic.testing import keys
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from episodic.v1 import summariser_service_pb2 as spb
from episodic.v1 import summariser_service_pb2_grpc as sg
from tests.providers.fake_openai import FakeOpenAI

TURNS = [
    (e.ROLE_USER, "Hi there, how are you today?"),
    (e.ROLE_ASSISTANT, "Doing well! What can I do for you?"),
    (e.ROLE_USER, "I've decided to move the Atlas launch to next Friday."),
    (e.ROLE_ASSISTANT, "Nice, that sounds like a good plan."),
    (e.ROLE_USER, "Yesterday I finally finished the migration of the billing service."),
]


def _events(engine) -> list[dict]:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        rows = (
            conn.execute(
                text("SELECT * FROM events WHERE dataset = 'user_42' ORDER BY source_sequence")
            )
            .mappings()
            .all()
        )
        return keys.test_vault().open_rows(conn, "user_42", list(rows), "events")


def _classified(engine, thread_id: str) -> int:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT classified_sequence FROM threads WHERE thread_id = :t"),
                {"t": thread_id},
            ).scalar_one()
        )


def _write(spawn, env):  # type: ignore[no-untyped-def]
    ingest = ig.IngestServiceStub(spawn("ingest").channel())
    summariser = sg.SummariserServiceStub(spawn("summariser", env=env).channel())
    thread = ingest.CreateThread(ipb.CreateThreadRequest(dataset="user_42"), timeout=10).thread
    ack = ingest.AddMessages(
        ipb.AddMessagesRequest(
            thread_id=thread.thread_id,
            messages=[ipb.NewMessage(role=r, content=c) for r, c in TURNS],
        ),
        timeout=10,
    )
    assert ack.stored_count == len(TURNS)  # acknowledged before anything was classified
    return thread, summariser


def test_heuristic_records_the_turns_that_are_events_once(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    thread, summariser = _write(spawn, {"EPISODIC_EVENT_CLASSIFIER": "heuristic"})
    assert _events(engine) == [] and _classified(engine, thread.thread_id) == 0

    summariser.ProcessPending(spb.ProcessPendingRequest(), timeout=30)
    got = _events(engine)
    assert [(r["source_sequence"], r["event_type"]) for r in got] == [
        (3, "decision"),
        (5, "milestone"),
    ]
    assert all(r["source"] == "classifier" and r["actor"] == "user" for r in got)
    assert "Atlas launch" in got[0]["summary"]
    assert all(r["embedding"] is not None for r in got)  # embedded in the same pass
    assert _classified(engine, thread.thread_id) == len(TURNS)

    # Another pass reads nothing new and records nothing twice.
    summariser.ProcessPending(spb.ProcessPendingRequest(), timeout=30)
    assert len(_events(engine)) == 2


def test_off_by_default_records_nothing(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    thread, summariser = _write(spawn, {})
    summariser.ProcessPending(spb.ProcessPendingRequest(), timeout=30)
    assert _events(engine) == [] and _classified(engine, thread.thread_id) == 0


@pytest.fixture
def fake():  # type: ignore[no-untyped-def]
    with FakeOpenAI(dimension=384) as server:
        yield server


def _llm_env(fake: FakeOpenAI) -> dict[str, str]:
    return {
        "EPISODIC_EVENT_CLASSIFIER": "openai",
        "EPISODIC_LLM_BASE_URL": fake.base_url,
        "EPISODIC_LLM_MODEL": "classifier-model",
        "EPISODIC_LLM_MAX_RETRIES": "0",
    }


def test_llm_classifier_with_a_strict_schema_survives_an_outage(spawn, engine, fake) -> None:  # type: ignore[no-untyped-def]
    thread, summariser = _write(spawn, _llm_env(fake))
    fake.enqueue_chat(status=500, body={"error": {"message": "upstream down"}})
    summariser.ProcessPending(spb.ProcessPendingRequest(), timeout=30)
    # The outage loses nothing: the turns stay unread, and are read on the next pass.
    assert _events(engine) == [] and _classified(engine, thread.thread_id) == 0

    verdicts = [
        {"turn": i, "is_event": False, "event_type": "none", "summary": "", "entities": []}
        for i in range(1, 6)
    ]
    verdicts[2] = {
        "turn": 3,
        "is_event": True,
        "event_type": "decision",
        "summary": "The user moved the Atlas launch to next Friday.",
        "entities": ["Atlas"],
    }
    verdicts.append(  # a turn the request did not number is ignored, not guessed
        {"turn": 9, "is_event": True, "event_type": "milestone", "summary": "x", "entities": []}
    )
    fake.enqueue_chat(result={"turns": verdicts})
    summariser.ProcessPending(spb.ProcessPendingRequest(), timeout=30)
    got = _events(engine)
    assert [(r["source_sequence"], r["event_type"], r["summary"]) for r in got] == [
        (3, "decision", "The user moved the Atlas launch to next Friday.")
    ]
    assert got[0]["entities"] == ["atlas"]
    assert _classified(engine, thread.thread_id) == len(TURNS)

    body = fake.requests_to("chat")[-1].json()
    assert body["model"] == "classifier-model"
    schema = body["response_format"]
    assert schema["type"] == "json_schema" and schema["json_schema"]["strict"] is True
    item = schema["json_schema"]["schema"]["properties"]["turns"]["items"]
    assert item["additionalProperties"] is False
    assert set(item["required"]) == {"turn", "is_event", "event_type", "summary", "entities"}
    assert "3. user: I've decided to move the Atlas launch" in body["messages"][1]["content"]


def test_llm_answer_that_breaks_the_schema_is_an_error_not_a_guess(fake) -> None:  # type: ignore[no-untyped-def]
    classifier = OpenAITurnClassifier(base_url=fake.base_url, model="m")
    fake.enqueue_chat(content=json.dumps({"turns": [{"turn": 1, "is_event": True}]}))
    from episodic.errors import ProviderError

    with pytest.raises(ProviderError, match="not the turn verdicts"):
        classifier.classify([Turn(1, "user", "I decided to go")], [])


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("I've decided to sign up for the marathon in May.", "decision"),
        ("Maybe one day I'll sign up for a marathon.", None),  # a hedge
        ("Thanks! I'm gonna keep going, you're the best!", None),  # encouragement
        ("Yesterday I won my first chess tournament!", "milestone"),
        ("Did you go to the concert yesterday?", None),  # a question
        ("I took your advice and it worked great.", "feedback"),
        ("ok thanks", None),
    ],
)
def test_heuristic_rules(content: str, expected: str | None) -> None:
    verdicts = HeuristicClassifier().classify([Turn(1, "user", content)], [])
    assert [v.event_type for v in verdicts] == ([expected] if expected else [])


def test_heuristic_tool_calls_count_once_and_retries_do_not() -> None:
    call = Turn(2, "tool", '{"ok": true, "rows": 12, "table": "invoices"}', tool_call=True)
    retry = Turn(3, "tool", '{"ok": true, "rows": 12, "table": "invoices"}', tool_call=True)
    verdicts = HeuristicClassifier().classify([call, retry], [Turn(1, "user", "count invoices")])
    assert [(v.sequence, v.event_type, v.actor) for v in verdicts] == [(2, "tool_call", "agent")]
