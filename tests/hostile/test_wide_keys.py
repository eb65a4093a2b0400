"""A key scoped to many datasets, refused a call that spans every dataset, is told so in a
message a person can read — and one that fits in gRPC's trailers.

The refusal listed every dataset of the key: with 3,000 of them (54 KB here) the
trailers passed grpc's 16 KB hard limit and the client got RESOURCE_EXHAUSTED "Stream removed
(received metadata size exceeds hard limit)" instead of PERMISSION_DENIED.
"""

from __future__ import annotations

import grpc
import pytest

from episodic.access import Role
from episodic.store.keys import create_key
from episodic.v1 import admin_service_pb2 as pb
from episodic.v1 import admin_service_pb2_grpc as g

#: As many as a key may hold, named as tenants do: together ~35 KB.
SCOPES = [f"tenant_{i:04d}/customer_support_agent" for i in range(1000)]


def test_a_key_of_many_datasets_refused_a_global_call_gets_a_short_permission_denied(
    spawn, engine
) -> None:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        secret = create_key(conn, role=Role.ADMIN, datasets=SCOPES).secret
    ingest = spawn("ingest", env={"EPISODIC_AUTH": "required"})
    with ingest.channel() as channel, pytest.raises(grpc.RpcError) as refused:
        g.AdminServiceStub(channel).ListDatasets(
            pb.ListDatasetsRequest(),
            metadata=[("authorization", f"Bearer {secret}")],
            timeout=30,
        )
    err = refused.value
    assert err.code() == grpc.StatusCode.PERMISSION_DENIED, err.details()
    details = err.details() or ""
    assert "ListDatasets spans every dataset" in details
    # A few of its scopes name the key for the reader, and the count says the rest.
    assert SCOPES[0] in details and "1000 datasets" in details, details
    assert len(details) < 1000, len(details)


def test_a_key_is_refused_more_datasets_than_its_cap_with_a_way_out(spawn) -> None:  # type: ignore[no-untyped-def]
    """Nothing capped a key's datasets: 20,000 were accepted (their duplicate check alone
    kept a handler ~1 s busy, and every call of the key walks the list). Over the cap the
    answer says the cap and what covers many datasets instead."""
    ingest = spawn("ingest")  # development mode: the anonymous caller is a global admin
    with ingest.channel() as channel:
        admin = g.AdminServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            admin.CreateApiKey(
                pb.CreateApiKeyRequest(role=1, datasets=[*SCOPES, "tenant_x/user"]),
                timeout=30,
            )
        err = refused.value
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
        assert "at most 1000 datasets (got 1001)" in (err.details() or "")
        assert "'acme/*'" in (err.details() or "")
        # At the cap, and with duplicates (counted once), the key is made.
        made = admin.CreateApiKey(
            pb.CreateApiKeyRequest(role=1, datasets=SCOPES + SCOPES[:5]), timeout=30
        )
        assert len(made.key.datasets) == 1000
