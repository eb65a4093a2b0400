"""A page token is the caller's to edit (base64 of JSON): every field of it that reaches
SQL is checked first, so an edited token is INVALID_ARGUMENT "page_token is malformed",
never INTERNAL. ListProcedures (a reader key is enough), ListAuditEvents and ListDatasets
passed an integer past its column's range, a NUL or a lone surrogate on to PostgreSQL
(found by a hostile-client probe). And ListMessages' token carries its start_sequence as
it does its end_sequence."""

from __future__ import annotations

import uuid

import grpc
import pytest

from episodic.v1 import admin_service_pb2 as apb
from episodic.v1 import admin_service_pb2_grpc as agrpc
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as igrpc
from episodic.v1 import recall_service_pb2 as rpb
from episodic.v1 import recall_service_pb2_grpc as rgrpc
from episodic.validation import encode_page_token

PID = str(uuid.uuid4())
AT = "2026-01-01T00:00:00+00:00"

PROCEDURE_TOKENS = [
    {"dataset": "acme/a", "ok": 2**63, "pid": PID},
    {"dataset": "acme/a", "ok": 2**31, "pid": PID},  # success_count is an integer
    {"dataset": "acme/a", "ok": 1, "pid": "\x00"},
    {"dataset": "acme/a", "ok": 1, "pid": "\ud800"},
    {"dataset": "acme/a", "ok": 1, "pid": "not a uuid"},
]
AUDIT_TOKENS = [
    {"dataset": "", "before": 2**63},
    {"dataset": "", "before": -(2**63) - 1},
    {"dataset": "", "before": 1.5},
]
DATASET_TOKENS = [
    {"at": AT, "dataset": "\x00", "prefix": ""},
    {"at": AT, "dataset": "\ud800", "prefix": ""},
    {"at": AT, "dataset": 7, "prefix": ""},
]


def _malformed(call, request, cursor) -> None:  # type: ignore[no-untyped-def]
    request.page_token = encode_page_token(cursor)
    with pytest.raises(grpc.RpcError) as err:
        call(request, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (cursor, err.value.details())
    assert "page_token is malformed" in (err.value.details() or ""), cursor


def test_edited_page_tokens_are_invalid_argument_never_internal(spawn) -> None:  # type: ignore[no-untyped-def]
    ingest, recall = spawn("ingest"), spawn("recall")  # development mode: a global admin
    with ingest.channel() as channel:
        admin = agrpc.AdminServiceStub(channel)
        for cursor in AUDIT_TOKENS:
            _malformed(admin.ListAuditEvents, apb.ListAuditEventsRequest(), cursor)
        for cursor in DATASET_TOKENS:
            _malformed(admin.ListDatasets, apb.ListDatasetsRequest(), cursor)
    with recall.channel() as channel:
        procedures = rgrpc.RecallServiceStub(channel).ListProcedures
        for cursor in PROCEDURE_TOKENS:
            _malformed(procedures, rpb.ListProceduresRequest(dataset="acme/a"), cursor)
    for service in (ingest, recall):
        assert "unhandled error" not in service.log(), service.log()


def test_list_messages_keeps_its_start_sequence_across_pages(spawn) -> None:  # type: ignore[no-untyped-def]
    ingest = spawn("ingest")
    with ingest.channel() as channel:
        stub = igrpc.IngestServiceStub(channel)
        thread = stub.CreateThread(ipb.CreateThreadRequest(dataset="pages"), timeout=30).thread
        stub.AddMessages(
            ipb.AddMessagesRequest(
                thread_id=thread.thread_id,
                messages=[ipb.NewMessage(role=e.ROLE_USER, content=f"m{i}") for i in range(6)],
            ),
            timeout=30,
        )
        first = stub.ListMessages(
            ipb.ListMessagesRequest(thread_id=thread.thread_id, page_size=1), timeout=30
        )
        assert [m.sequence for m in first.messages] == [1] and first.next_page_token
        # The token was made without a start: with one it is another request.
        with pytest.raises(grpc.RpcError) as err:
            stub.ListMessages(
                ipb.ListMessagesRequest(
                    thread_id=thread.thread_id,
                    start_sequence=4,
                    page_token=first.next_page_token,
                ),
                timeout=30,
            )
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "its start differs" in (err.value.details() or "")
        # Made with a start, it continues from there.
        pages, token = [], ""
        while True:
            page = stub.ListMessages(
                ipb.ListMessagesRequest(
                    thread_id=thread.thread_id, start_sequence=4, page_size=1, page_token=token
                ),
                timeout=30,
            )
            pages += [m.sequence for m in page.messages]
            token = page.next_page_token
            if not token:
                break
        assert pages == [4, 5, 6]
        with pytest.raises(grpc.RpcError) as err:
            stub.ListMessages(
                ipb.ListMessagesRequest(
                    thread_id=thread.thread_id, start_sequence=5, end_sequence=3
                ),
                timeout=30,
            )
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "start_sequence (5) is after end_sequence (3)" in (err.value.details() or "")
