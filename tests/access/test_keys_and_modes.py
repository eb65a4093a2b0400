"""API keys from the command line, revocation on every replica, development mode, secure
defaults, rate limits and TLS."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from sqlalchemy import text

from episodic.access import Role
from episodic.sdk.client import (
    EpisodicClient,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
)
from episodic.store import keys
from episodic.testing.certificates import Authority
from episodic.testing.processes import start_service, wait_until
from episodic.tls import channel_credentials
from tests.recall.factory import make_episode

REQUIRED = {"EPISODIC_AUTH": "required"}


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "episodic.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_keys_from_the_command_line_and_revocation_on_every_replica(spawn, engine, db_url) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        make_episode(conn, "acme/u1", ["the Pro tier at $29"])
    env = {"EPISODIC_DATABASE_URL": db_url}
    made = _cli(
        "keys", "create", "--dataset", "acme/*", "--role", "reader", "--name", "bot", env=env
    )
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip().splitlines()[-1]  # alone on the last line
    assert key.startswith("ek_") and "shown once" in made.stderr
    prefix = "_".join(key.split("_")[:2])
    listed = _cli("keys", "list", env=env)
    assert prefix in listed.stdout and "reader" in listed.stdout and "acme/*" in listed.stdout
    with engine.connect() as conn:  # stored as a hash: the secret is nowhere in the database
        row = conn.execute(text("SELECT * FROM api_keys")).mappings().one()
    assert key.split("_", 2)[2].encode() not in bytes(row["secret_hash"])
    assert key not in str(dict(row))

    replicas = [spawn("recall", env={**REQUIRED, "EPISODIC_AUTH_CACHE_TTL": "1"}) for _ in range(2)]
    clients = [EpisodicClient(recall=r.address, api_key=key) for r in replicas]
    for client in clients:  # both replicas trust (and cache) the key
        assert client.recall("acme/u1", "pricing").episode_count == 1
        with pytest.raises(PermissionDeniedError):
            client.recall("other/u2", "pricing")
    revoked = _cli("keys", "revoke", prefix, env=env)
    assert revoked.returncode == 0, revoked.stderr

    def refused_everywhere() -> bool:
        for client in clients:
            try:
                client.recall("acme/u1", "pricing")
                return False
            except UnauthenticatedError:
                pass
        return True

    wait_until(refused_everywhere, timeout=15, message="every replica refuses the revoked key")
    with engine.connect() as conn:
        audited = conn.execute(
            text("SELECT action, key_prefix FROM audit_events ORDER BY event_id")
        ).all()
    assert [tuple(a) for a in audited] == [("key.create", "cli"), ("key.revoke", "cli")]
    for client in clients:
        client.close()


def test_bad_key_commands_say_what_to_do(db_url, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    env = {"EPISODIC_DATABASE_URL": db_url}
    bad = _cli("keys", "create", "--dataset", "acme/**", "--role", "reader", env=env)
    assert bad.returncode == 1 and "'acme/**'" in bad.stderr
    missing = _cli("keys", "revoke", "ek_0000000000", env=env)
    assert missing.returncode == 1 and "NOT_FOUND" not in missing.stderr
    assert "no API key ek_0000000000" in missing.stderr
    unknown_id = "1df80a75-d53a-43c1-9a0b-5f3e2d1c0b9a"  # named whole (it was cut to 16)
    gone = _cli("keys", "revoke", unknown_id, env=env)
    assert gone.returncode == 1 and f"no API key with id {unknown_id}" in gone.stderr
    # The key itself is never echoed, only its public prefix.
    secret = "ek_0000000001_" + "s" * 43
    hidden = _cli("keys", "revoke", secret, env=env)
    assert "no API key ek_0000000001" in hidden.stderr and "sss" not in hidden.stderr
    # No database named, and no `episodic up` running on the data directory to find.
    no_db = _cli(
        "keys", "list", env={"EPISODIC_DATABASE_URL": "", "EPISODIC_DATA_DIR": str(tmp_path)}
    )
    assert no_db.returncode == 2 and "EPISODIC_DATABASE_URL" in no_db.stderr
    assert "`episodic up`" in no_db.stderr


def test_an_open_server_beyond_loopback_refuses_to_start(db_url) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RuntimeError) as err:
        start_service("recall", db_url, {"EPISODIC_BIND_HOST": "0.0.0.0"}, timeout=60)
    assert "EPISODIC_AUTH=required" in str(err.value)
    # Deliberately open, or with keys: it starts.
    for mode in ("disabled", "required"):
        service = start_service(
            "recall", db_url, {"EPISODIC_BIND_HOST": "0.0.0.0", "EPISODIC_AUTH": mode}
        )
        assert ("DISABLED" in service.log()) == (mode == "disabled")
        service.terminate()


def test_development_mode_on_loopback_needs_no_key(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        make_episode(conn, "dev", ["no keys here"])
    recall = spawn("recall")  # the default: EPISODIC_AUTH=auto on 127.0.0.1
    assert "development mode on loopback" in recall.log()
    with EpisodicClient(recall=recall.address) as client:
        assert client.recall("dev", "keys").episode_count == 1
    # A key that is presented is still checked.
    bad_key = "ek_0123456789_" + "x" * 43
    with (
        EpisodicClient(recall=recall.address, api_key=bad_key) as client,
        pytest.raises(UnauthenticatedError),
    ):
        client.recall("dev", "keys")


def test_a_malformed_authorization_header_is_unauthenticated_and_keeps_no_slot(
    spawn, engine
) -> None:  # type: ignore[no-untyped-def]
    """``authorization: Basic …`` (or ``Bearer`` with no key) is refused at the door as a bad
    key is. It used to escape the door as UNKNOWN and keep the caller's open-call slot:
    past EPISODIC_MAX_CALLS_PER_PEER such calls, every call from the address, good keys
    too, was RESOURCE_EXHAUSTED until the replica restarted."""
    from episodic.v1 import recall_service_pb2 as rpb
    from episodic.v1 import recall_service_pb2_grpc as rgrpc

    with engine.begin() as conn:
        make_episode(conn, "hdr", ["headers"])
        key = keys.create_key(conn, role=Role.READER, datasets=["hdr"]).secret
    recall = spawn(
        "recall",
        env={
            **REQUIRED,
            "EPISODIC_MAX_CALLS_PER_PEER": "4",
            "EPISODIC_RATE_LIMIT_UNAUTHENTICATED": "1000",
        },
    )
    request = rpb.RecallRequest(
        dataset="hdr", query="headers", include=[rpb.RECALL_INCLUDE_EPISODES]
    )
    with grpc.insecure_channel(recall.address) as channel:
        stub = rgrpc.RecallServiceStub(channel)
        for header in ["Basic eDp5", "Bearer", "Token abc", key] * 3:  # 12 > 4 slots
            with pytest.raises(grpc.RpcError) as err:
                stub.Recall(request, metadata=[("authorization", header)], timeout=10)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED, err.value
            assert "must read 'Bearer <key>'" in (err.value.details() or "")
        answer = stub.Recall(request, metadata=[("authorization", f"Bearer {key}")], timeout=10)
    assert answer.episodes.episode_count == 1
    assert "Unexpected" not in recall.log() and "Traceback" not in recall.log()


def test_rate_limits_answer_retry_info_and_the_sdk_waits(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        make_episode(conn, "ds", ["limits"])
        key = keys.create_key(conn, role=Role.READER, datasets=["ds"]).secret
    recall = spawn("recall", env={**REQUIRED, "EPISODIC_RATE_LIMIT_REQUESTS": "2"})
    impatient = EpisodicClient(recall=recall.address, api_key=key, rate_limit_retries=0)
    with pytest.raises(ResourceExhaustedError) as err:
        for _ in range(10):  # a burst holds 2 s worth: 4 calls
            impatient.recall("ds", "limits")
    assert err.value.reason == "RATE_LIMITED" and 0 < (err.value.retry_after or 0) <= 1.0
    patient = EpisodicClient(recall=recall.address, api_key=key, timeout=30)
    for _ in range(6):  # over the limit, the SDK waits as told instead of failing
        assert patient.recall("ds", "limits").episode_count == 1
    impatient.close()
    patient.close()


def test_tls_mutual_tls_and_certificate_reload(tmp_path: Path, spawn, engine) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        make_episode(conn, "ds", ["over TLS"])
    first, second = Authority(tmp_path / "ca1", "ca one"), Authority(tmp_path / "ca2", "ca two")
    server = first.issue("server", server=True)
    client_pair = first.issue("client", server=False)
    live = tmp_path / "live"
    live.mkdir()
    cert, key = live / "server.pem", live / "server.key"
    cert.write_bytes(server.cert.read_bytes())
    key.write_bytes(server.key.read_bytes())
    recall = spawn(
        "recall",
        env={
            "EPISODIC_TLS_CERT_FILE": str(cert),
            "EPISODIC_TLS_KEY_FILE": str(key),
            "EPISODIC_TLS_CLIENT_CA_FILE": str(first.ca_file),
        },
        credentials=channel_credentials(first.ca_file, client_pair.cert, client_pair.key),
    )
    address = f"localhost:{recall.port}"
    good = EpisodicClient(
        recall=address,
        ca_file=str(first.ca_file),
        client_cert_file=str(client_pair.cert),
        client_key_file=str(client_pair.key),
    )
    assert good.recall("ds", "TLS").episode_count == 1
    no_client_cert = EpisodicClient(recall=address, ca_file=str(first.ca_file), timeout=5)
    plaintext = EpisodicClient(recall=address, timeout=5)
    for refused in (no_client_cert, plaintext):
        with pytest.raises(Exception) as err:
            refused.recall("ds", "TLS")
        assert getattr(err.value, "code", None) == grpc.StatusCode.UNAVAILABLE
    # Rotate the server certificate to one of another CA: new connections get it.
    rotated = second.issue("server", server=True)
    cert.write_bytes(rotated.cert.read_bytes())
    key.write_bytes(rotated.key.read_bytes())

    def new_ca_accepted() -> bool:
        client = EpisodicClient(
            recall=address,
            ca_file=str(second.ca_file),
            client_cert_file=str(client_pair.cert),
            client_key_file=str(client_pair.key),
            timeout=5,
        )
        try:
            return client.recall("ds", "TLS").episode_count == 1
        except Exception:
            return False
        finally:
            client.close()

    wait_until(new_ca_accepted, timeout=30, message="the rotated certificate is served")
    for client in (good, no_client_cert, plaintext):
        client.close()


def test_a_key_name_postgresql_cannot_store_is_invalid_argument(engine) -> None:  # type: ignore[no-untyped-def]
    """A NUL in CreateApiKey's name reached the INSERT and answered INTERNAL."""
    from episodic.errors import InvalidArgument

    with engine.begin() as conn, pytest.raises(InvalidArgument) as refused:
        keys.create_key(conn, role=Role.READER, datasets=["ds"], name="ops\x00bot")
    assert refused.value.metadata.get("field") == "name" and "NUL" in refused.value.message
