"""Logs never carry user content: a failing statement's parameters, a database error that
quotes the value it choked on, or a model's answer never reach a service's log."""

from __future__ import annotations

import uuid

import grpc
import pytest
from sqlalchemy import text

from episodic.testing.processes import wait_until
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as pb
from episodic.v1 import ingest_service_pb2_grpc as g


def _secret() -> str:
    return f"SECRET-{uuid.uuid4().hex}"


@pytest.fixture
def ingest(spawn):  # type: ignore[no-untyped-def]
    service = spawn("ingest")
    return service, g.IngestServiceStub(service.channel())


def _add(stub: g.IngestServiceStub, thread_id: str, content: str) -> grpc.StatusCode:
    try:
        stub.AddMessages(
            pb.AddMessagesRequest(
                thread_id=thread_id, messages=[pb.NewMessage(role=e.ROLE_USER, content=content)]
            ),
            timeout=10,
        )
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


def test_a_database_error_quoting_the_content_is_logged_without_it(ingest, engine) -> None:  # type: ignore[no-untyped-def]
    service, stub = ingest
    thread = stub.CreateThread(pb.CreateThreadRequest(dataset="ds"), timeout=10).thread
    with engine.begin() as conn:  # a constraint whose error message quotes the row
        conn.execute(
            text(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "RAISE EXCEPTION 'refused: %', NEW.content; END $$; "
                "CREATE TRIGGER refuse BEFORE INSERT ON messages "
                "FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
        )
    secret = _secret()
    assert _add(stub, thread.thread_id, secret) == grpc.StatusCode.INTERNAL
    # The log line may reach us a moment after the answer (it is read from a pipe).
    log = wait_until(
        lambda: "SQLSTATE" in service.log() and service.log(), message="the error is logged"
    )
    assert "unhandled error in /episodic.v1.IngestService/AddMessages" in log
    assert "SQLSTATE P0001" in log  # what went wrong is still there, without the words
    assert secret not in log


def test_a_statement_cut_off_mid_flight_is_logged_without_its_parameters(ingest, engine) -> None:  # type: ignore[no-untyped-def]
    service, stub = ingest
    thread = stub.CreateThread(pb.CreateThreadRequest(dataset="ds"), timeout=10).thread
    with engine.begin() as conn:  # the backend dies while inserting the message
        conn.execute(
            text(
                "CREATE FUNCTION die() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NEW; END $$; "
                "CREATE TRIGGER die BEFORE INSERT ON messages "
                "FOR EACH ROW EXECUTE FUNCTION die()"
            )
        )
    secret = _secret()
    assert _add(stub, thread.thread_id, secret) == grpc.StatusCode.UNAVAILABLE
    log = wait_until(
        lambda: "database unavailable" in service.log() and service.log(),
        message="the outage is logged",
    )
    assert secret not in log
