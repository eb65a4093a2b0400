"""A key scoped to many datasets, refused a call that spans every dataset, is told so in a
message a person can read — and one that fits in gRPC's trailers.

The refusal listed every dataset of the key: with 3,000 of them (~26 KB) the trailers
passed grpc's 16 KB hard limit and the client got RESOURCE_EXHAUSTED "Stream removed
(received metadata size exceeds hard limit)" instead of PERMISSION_DENIED.
"""

from __future__ import annotations

import grpc
import pytest

from episodic.access import Role
from episodic.store.keys import create_key
from episodic.v1 import admin_service_pb2 as pb
from episodic.v1 import admin_service_pb2_grpc as g

SCOPES = [f"tenant_{i:04d}/user" for i in range(3000)]


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
    assert SCOPES[0] in details and "3000 datasets" in details, details
    assert len(details) < 1000, len(details)
