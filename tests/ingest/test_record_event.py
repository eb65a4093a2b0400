"""RecordEvent through a real Ingest process against a real PostgreSQL: what is stored,
what is refused (and that a refusal stores nothing), idempotency, and the thread rule."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf import timestamp_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from sqlalchemy import text

from episodic.testing import keys
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as pb
from episodic.v1 import ingest_service_pb2_grpc as g

pytestmark = pytest.mark.citus  # events through the services, on Citus too


@pytest.fixture
def ingest(spawn):  # type: ignore[no-untyped-def]
    service = spawn("ingest")
    channel = service.channel()
    yield g.IngestServiceStub(channel)
    channel.close()


def ts(value: datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value)
    return out


def event(**kw) -> pb.RecordEventRequest:  # type: ignore[no-untyped-def]
    fields = {
        "dataset": "user_42",
        "actor": "agent",
        "event_type": "decision",
        "summary": "Chose the Pro tier at $29 for project Atlas.",
    }
    fields.update(kw)
    return pb.RecordEventRequest(**fields)


def test_record_event_stores_a_sealed_event_shaped_as_an_episode(ingest, engine) -> None:  # type: ignore[no-untyped-def]
    thread = ingest.CreateThread(pb.CreateThreadRequest(dataset="user_42", label="billing")).thread
    at = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)
    answer = ingest.RecordEvent(
        event(
            entities=["Atlas Project", "Pro tier"],
            occurred_at=ts(at),
            thread_id=thread.thread_id,
        ),
        timeout=10,
    )
    got = answer.event
    assert answer.stored
    assert got.kind == e.EPISODE_KIND_EVENT
    assert got.event_source == e.EVENT_SOURCE_AGENT
    assert uuid.UUID(got.episode_id)
    assert (got.dataset, got.thread_id, got.thread_label) == (
        "user_42",
        thread.thread_id,
        "billing",
    )
    assert (got.actor, got.event_type) == ("agent", "decision")
    assert list(got.entities) == ["pro tier", "project atlas"]  # normalised like episodes'
    assert got.started_at.ToDatetime(UTC) == at == got.ended_at.ToDatetime(UTC)
    assert got.status == e.EPISODE_STATUS_COMPLETED

    # At rest: the words are sealed (not in the row), the filters are blind tokens.
    with engine.connect() as conn:
        row = conn.execute(text("SELECT * FROM events")).mappings().one()
        opened = keys.test_vault().open_rows(conn, "user_42", [row], "events")[0]
    assert b"Pro tier" not in bytes(row["summary"]) and b"agent" not in bytes(row["actor"])
    assert "project atlas" not in row["entity_tokens"]
    assert opened["summary"] == "Chose the Pro tier at $29 for project Atlas."
    assert row["embedding"] is None  # the Summariser embeds it later
    assert row["search_vector"] is not None  # found by its words at once

    # Without occurred_at: the time it was stored.
    now = ingest.RecordEvent(event(summary="Deployed v2"), timeout=10).event
    assert abs(now.ended_at.ToDatetime(UTC) - datetime.now(UTC)) < timedelta(minutes=5)
    assert now.thread_id == ""


def test_idempotency_key_replays_the_stored_event_and_refuses_other_content(ingest, engine) -> None:  # type: ignore[no-untyped-def]
    first = ingest.RecordEvent(event(idempotency_key="k1", entities=["Atlas"]), timeout=10)
    again = ingest.RecordEvent(event(idempotency_key="k1", entities=["atlas"]), timeout=10)
    assert first.stored and not again.stored
    assert again.event.episode_id == first.event.episode_id

    with pytest.raises(grpc.RpcError) as err:
        ingest.RecordEvent(event(idempotency_key="k1", summary="something else"), timeout=10)
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert "k1" in err.value.details() and first.event.episode_id in err.value.details()
    status = rpc_status.from_call(err.value)
    info = error_details_pb2.ErrorInfo()
    assert status is not None and status.details[0].Unpack(info)
    assert info.reason == "IDEMPOTENCY_KEY_REUSED"

    # Keys are per dataset: another dataset may use the same key.
    other = ingest.RecordEvent(event(dataset="user_7", idempotency_key="k1"), timeout=10)
    assert other.stored
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM events")).scalar_one() == 2


def test_thread_must_belong_to_the_dataset(ingest, engine) -> None:  # type: ignore[no-untyped-def]
    theirs = ingest.CreateThread(pb.CreateThreadRequest(dataset="user_7")).thread
    for thread_id in (theirs.thread_id, str(uuid.uuid4())):
        with pytest.raises(grpc.RpcError) as err:
            ingest.RecordEvent(event(thread_id=thread_id), timeout=10)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert "does not exist in dataset 'user_42'" in err.value.details()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM events")).scalar_one() == 0


_FUTURE = datetime.now(UTC) + timedelta(hours=1)


@pytest.mark.parametrize(
    ("request_", "phrase"),
    [
        (event(dataset=""), "dataset is required"),
        (event(dataset="has space"), "not valid"),
        (event(actor=""), "actor is required"),
        (event(actor="  "), "actor is required"),
        (event(actor="a" * 129), "actor is 129 characters"),
        (event(event_type=""), "event_type is required"),
        (event(event_type="Decision"), "not valid"),
        (event(event_type="price change"), "not valid"),
        (event(event_type="9lives"), "not valid"),
        (event(event_type="x" * 65), "not valid"),
        (event(summary=""), "summary is required"),
        (event(summary="x" * 4097), "summary is 4097 characters"),
        (event(summary="a\x00b"), "NUL"),
        (event(entities=["ok", "..."]), "entities[1]"),
        (event(entities=[f"e{i}" for i in range(51)]), "at most 50"),
        (event(occurred_at=ts(_FUTURE)), "occurred_at"),
        (event(thread_id="not-a-uuid"), "thread_id"),
        (event(idempotency_key="k" * 129), "idempotency_key is longer than 128"),
    ],
    ids=[
        "no-dataset",
        "bad-dataset",
        "no-actor",
        "blank-actor",
        "long-actor",
        "no-type",
        "uppercase-type",
        "spaced-type",
        "digit-first-type",
        "long-type",
        "no-summary",
        "long-summary",
        "nul-summary",
        "empty-entity",
        "too-many-entities",
        "future",
        "bad-thread",
        "long-key",
    ],
)
def test_bad_record_event_is_invalid_argument_and_stores_nothing(
    shared_ingest, module_engine, request_, phrase
) -> None:  # type: ignore[no-untyped-def]
    # One Ingest for every case (tests/conftest.py: shared_ingest); the module's other
    # tests have their own.
    with pytest.raises(grpc.RpcError) as err:
        shared_ingest.RecordEvent(request_, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert phrase in err.value.details()
    with module_engine.connect() as conn:  # nothing else writes to the module's database
        assert conn.execute(text("SELECT count(*) FROM events")).scalar_one() == 0


def test_custom_types_and_the_tolerated_skew_are_accepted(ingest) -> None:  # type: ignore[no-untyped-def]
    soon = datetime.now(UTC) + timedelta(minutes=2)  # within the 5-minute tolerance
    got = ingest.RecordEvent(event(event_type="price_change", occurred_at=ts(soon)), timeout=10)
    assert got.event.event_type == "price_change" and got.stored
