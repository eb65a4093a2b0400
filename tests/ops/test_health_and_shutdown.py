"""Health follows the database; SIGTERM drains in-flight calls and releases claims."""

from __future__ import annotations

import socket

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from sqlalchemy import text

from episodic.testing.processes import wait_until
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from tests.summariser.helpers import CAR_CHAT, add, make_thread, open_episode

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _status(channel: grpc.Channel, service: str) -> int:
    return (
        health_pb2_grpc.HealthStub(channel)
        .Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        .status
    )


def test_health_is_not_serving_while_the_database_is_unreachable(spawn, db_url, databases) -> None:  # type: ignore[no-untyped-def]
    service = spawn("ingest", env={"EPISODIC_DB_HEALTH_INTERVAL": "0.2"})
    channel = service.channel()
    name = "episodic.v1.IngestService"
    admin_name = "episodic.v1.AdminService"  # served by the same process: the same answer
    assert _status(channel, name) == SERVING
    assert _status(channel, admin_name) == SERVING
    database = db_url.partition("?")[0].rsplit("/", 1)[1]
    admin = psycopg.connect(databases.admin_url, autocommit=True)
    try:
        admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            (database,),
        )
        wait_until(lambda: _status(channel, name) == NOT_SERVING, timeout=30, message="not serving")
        assert _status(channel, admin_name) == NOT_SERVING
        assert _status(channel, "") == SERVING, "liveness stays up during a database outage"
        # Calls meanwhile get a retryable UNAVAILABLE, not INTERNAL.
        with pytest.raises(grpc.RpcError) as err:
            ig.IngestServiceStub(channel).CreateThread(
                ipb.CreateThreadRequest(dataset="d"), timeout=30
            )
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE, err.value.details()
        admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
        wait_until(lambda: _status(channel, name) == SERVING, timeout=30, message="serving again")
    finally:
        admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
        admin.close()


def test_reflection_lists_the_service(spawn) -> None:  # type: ignore[no-untyped-def]
    channel = spawn("summariser").channel()
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    responses = stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
    )
    names = {s.name for r in responses for s in r.list_services_response.service}
    assert {"episodic.v1.SummariserService", "grpc.health.v1.Health"} <= names


def _served(channel: grpc.Channel) -> list[str]:
    """Every service of our protos this server implements, found by calling it (not from
    the list the process announces): a harmless method of each (a Get/List one when the
    service has one) with an empty request; UNIMPLEMENTED means not served."""
    from google.protobuf import symbol_database

    from episodic.v1 import (
        admin_service_pb2,
        ingest_service_pb2,
        recall_service_pb2,
        scheduler_service_pb2,
        summariser_service_pb2,
    )

    served = []
    for module in (
        admin_service_pb2,
        ingest_service_pb2,
        recall_service_pb2,
        scheduler_service_pb2,
        summariser_service_pb2,
    ):
        for service in module.DESCRIPTOR.services_by_name.values():
            methods = sorted(
                (m for m in service.methods if not m.client_streaming and not m.server_streaming),
                key=lambda m: (not m.name.startswith(("Get", "List")), m.name),
            )
            method = methods[0]
            request = symbol_database.Default().GetSymbol(method.input_type.full_name)
            call = channel.unary_unary(
                f"/{service.full_name}/{method.name}",
                request_serializer=request.SerializeToString,
                response_deserializer=lambda b: b,
            )
            try:
                call(request(), timeout=10)
            except grpc.RpcError as err:
                if err.code() == grpc.StatusCode.UNIMPLEMENTED:
                    continue
            served.append(service.full_name)
    return served


@pytest.mark.parametrize("name", ["ingest", "scheduler", "summariser", "recall"])
def test_every_service_a_server_registers_answers_health(spawn, name: str) -> None:  # type: ignore[no-untyped-def]
    """Found by calling every service of our protos (not from the names the process
    announces), so a servicer added to a process without a health name fails here (Ingest's
    AdminService once did: a probe of it answered NOT_FOUND). Reflection lists them too."""
    service = spawn(name)
    channel = service.channel()
    served = _served(channel)
    assert f"episodic.v1.{name.capitalize()}Service" in served, served
    assert {n: _status(channel, n) for n in served} == dict.fromkeys(served, SERVING)
    assert _status(channel, "") == SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    responses = stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
    )
    listed = {s.name for r in responses for s in r.list_services_response.service}
    assert set(served) <= listed


def test_sigterm_releases_claims_for_other_replicas(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    """A summariser stuck in a slow LLM call is stopped: its claim goes back to pending at
    once (without counting a retry) instead of waiting 10 minutes for the orphan reclaim."""
    hanging = socket.socket()
    hanging.bind(("127.0.0.1", 0))
    hanging.listen(8)  # accepts connections, never answers
    try:
        thread = make_thread(engine)
        add(engine, thread, CAR_CHAT)
        ep = open_episode(engine, thread)
        service = spawn(
            "summariser",
            env={
                "EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2",
                "EPISODIC_LLM_PROVIDER": "openai",
                "EPISODIC_LLM_BASE_URL": f"http://127.0.0.1:{hanging.getsockname()[1]}/v1",
                "EPISODIC_LLM_TIMEOUT": "120",
                "EPISODIC_SHUTDOWN_GRACE": "1",
            },
        )
        wait_until(lambda: _status_of(engine, ep["episode_id"])[0] == "processing", timeout=30)
        assert service.terminate(timeout=60) == 0, service.log()
        status, claimed_by, retries = _status_of(engine, ep["episode_id"])
        assert (status, claimed_by, retries) == ("pending", None, 0)
    finally:
        hanging.close()


def _status_of(engine, episode_id):  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return tuple(
            conn.execute(
                text("SELECT status, claimed_by, retry_count FROM episodes WHERE episode_id = :id"),
                {"id": episode_id},
            ).one()
        )


@pytest.fixture
def own_postgres(tmp_path):  # type: ignore[no-untyped-def]
    """A PostgreSQL of this test's own, which it may restart (the shared one may not be)."""
    from episodic.ops.runtime import EmbeddedPostgres
    from episodic.store import migrate
    from episodic.testing.database import EMBEDDING_DIMENSION

    pg = EmbeddedPostgres(tmp_path / "pgdata")
    url = pg.start()
    migrate.upgrade(url, EMBEDDING_DIMENSION)
    try:
        yield pg, url
    finally:
        pg.stop()


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_a_restart_mid_transaction_loses_nothing_and_health_recovers(own_postgres, mode) -> None:  # type: ignore[no-untyped-def]
    """PostgreSQL restarts while an AddMessages transaction is open: the call answers
    UNAVAILABLE (retryable), nothing half-written stays, health goes NOT_SERVING and comes
    back by itself, and the retry with the same idempotency key stores the message once."""
    from concurrent.futures import ThreadPoolExecutor

    from episodic.testing.processes import start_service
    from episodic.v1 import episode_pb2

    pg, url = own_postgres
    service = start_service("ingest", url, {"EPISODIC_DB_HEALTH_INTERVAL": "0.2"})
    try:
        channel = service.channel()
        name = "episodic.v1.IngestService"
        stub = ig.IngestServiceStub(channel)
        thread = stub.CreateThread(ipb.CreateThreadRequest(dataset="d"), timeout=10).thread
        with psycopg.connect(url, autocommit=True) as conn:  # inserts now take 30 s
            conn.execute(
                "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "PERFORM pg_sleep(30); RETURN NEW; END $$; "
                "CREATE TRIGGER slow BEFORE INSERT ON messages "
                "FOR EACH ROW EXECUTE FUNCTION slow()"
            )
        request = ipb.AddMessagesRequest(
            thread_id=thread.thread_id,
            messages=[
                ipb.NewMessage(role=episode_pb2.ROLE_USER, content="keep", idempotency_key="k")
            ],
        )
        with ThreadPoolExecutor(1) as pool:
            call = pool.submit(stub.AddMessages, request, timeout=60)

            def in_flight() -> bool:
                with psycopg.connect(url, autocommit=True) as conn:
                    row = conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                        # AddMessages' insert is a CTE (the counter bump) around it.
                        "AND query LIKE '%INSERT INTO messages%' AND pid <> pg_backend_pid()"
                    ).fetchone()
                    return bool(row and row[0])

            wait_until(in_flight, timeout=30, message="the INSERT is running")
            # A loaded machine's restart (shutdown checkpoint, start) can pass 60 s; the
            # test is about what the services do, not how fast PostgreSQL restarts.
            pg.bounce(mode, timeout=180)
            with pytest.raises(grpc.RpcError) as err:
                call.result(timeout=60)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE, err.value.details()
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM messages").fetchone() == (0,)
            assert conn.execute("SELECT last_sequence FROM threads").fetchone() == (0,)
            conn.execute("DROP TRIGGER slow ON messages")
        # Health noticed (its checks share the pool the restart emptied) and came back.
        wait_until(lambda: _status(channel, name) == SERVING, timeout=30, message="serving")
        stored = stub.AddMessages(request, timeout=30)  # the client's retry
        again = stub.AddMessages(request, timeout=30)
        assert stored.stored_count == 1 and again.stored_count == 0
        assert stored.receipts[0].sequence == 1
        assert "Traceback" not in service.log()
    finally:
        service.terminate()
