"""Ingest through a real gRPC server process against a real PostgreSQL."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf import struct_pb2, timestamp_pb2
from grpc_status import rpc_status
from sqlalchemy import text

from episodic.testing.keys import test_vault
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as pb
from episodic.v1 import ingest_service_pb2_grpc as g


@pytest.fixture
def ingest(spawn):  # type: ignore[no-untyped-def]
    service = spawn("ingest")
    channel = service.channel()
    yield g.IngestServiceStub(channel)
    channel.close()


def _stored(engine) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Messages stored, and the sum of every thread's counter: what a refused AddMessages
    must leave as it was."""
    with engine.connect() as conn:
        return (
            conn.execute(text("SELECT count(*) FROM messages")).scalar_one(),
            conn.execute(text("SELECT coalesce(sum(last_sequence), 0) FROM threads")).scalar_one(),
        )


def msg(content: str = "hello", role: int = e.ROLE_USER, **kw) -> pb.NewMessage:  # type: ignore[no-untyped-def]
    return pb.NewMessage(role=role, content=content, **kw)


def new_thread(stub: g.IngestServiceStub, dataset: str = "user_42", **kw) -> e.Thread:  # type: ignore[no-untyped-def]
    return stub.CreateThread(pb.CreateThreadRequest(dataset=dataset, **kw), timeout=10).thread


def ts(value: datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value)
    return out


def test_create_get_and_add_messages_assign_sequences(ingest, engine) -> None:  # type: ignore[no-untyped-def]
    meta = struct_pb2.Struct()
    meta.update({"channel": "web", "n": 3})
    thread = new_thread(ingest, label="billing-q2", metadata=meta)
    assert uuid.UUID(thread.thread_id)
    assert thread.dataset == "user_42" and thread.label == "billing-q2"
    assert dict(thread.metadata) == {"channel": "web", "n": 3}

    one = ingest.AddMessages(pb.AddMessagesRequest(thread_id=thread.thread_id, messages=[msg("a")]))
    assert [r.sequence for r in one.receipts] == [1]
    many = ingest.AddMessages(
        pb.AddMessagesRequest(
            thread_id=thread.thread_id,
            messages=[msg("b", e.ROLE_ASSISTANT), msg("c", e.ROLE_TOOL), msg("d", e.ROLE_SYSTEM)],
        )
    )
    assert [r.sequence for r in many.receipts] == [2, 3, 4]
    stored = ingest.ListMessages(pb.ListMessagesRequest(thread_id=thread.thread_id)).messages
    assert [m.role for m in stored[1:]] == [e.ROLE_ASSISTANT, e.ROLE_TOOL, e.ROLE_SYSTEM]
    assert many.stored_count == 3

    got = ingest.GetThread(pb.GetThreadRequest(thread_id=thread.thread_id)).thread
    assert got.message_count == 4 and got.captured_sequence == 0
    assert got.HasField("last_message_at")

    # Durable: another connection sees every acknowledged message.
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT sequence, content FROM messages WHERE thread_id = :t ORDER BY sequence"),
            {"t": thread.thread_id},
        ).all()
        opened = test_vault().open_rows(conn, thread.dataset, rows, "messages")
    assert [(r["sequence"], r["content"]) for r in opened] == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
        (4, "d"),
    ]
    assert all(bytes(r[1]).startswith(b"\x01") for r in rows), "stored sealed, not in the clear"


def test_client_timestamp_and_metadata_are_kept(ingest) -> None:  # type: ignore[no-untyped-def]
    thread = new_thread(ingest)
    past = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    meta = struct_pb2.Struct()
    meta.update({"source": "import"})
    receipt = ingest.AddMessages(
        pb.AddMessagesRequest(
            thread_id=thread.thread_id, messages=[msg("old", created_at=ts(past), metadata=meta)]
        )
    ).receipts[0]
    assert receipt.created_at.ToDatetime(tzinfo=UTC) == past
    assert receipt.received_at.ToDatetime(tzinfo=UTC) > past
    (out,) = ingest.ListMessages(pb.ListMessagesRequest(thread_id=thread.thread_id)).messages
    assert out.created_at.ToDatetime(tzinfo=UTC) == past
    assert dict(out.metadata) == {"source": "import"}


def test_idempotency_key_prevents_double_store(ingest) -> None:  # type: ignore[no-untyped-def]
    thread = new_thread(ingest)
    req = pb.AddMessagesRequest(
        thread_id=thread.thread_id,
        messages=[msg("a", idempotency_key="k1"), msg("b", idempotency_key="k2")],
    )
    first = ingest.AddMessages(req)
    retried = ingest.AddMessages(req)
    assert [(r.sequence, r.stored) for r in first.receipts] == [(1, True), (2, True)]
    assert [(r.sequence, r.stored) for r in retried.receipts] == [(1, False), (2, False)]
    assert first.stored_count == 2 and retried.stored_count == 0
    assert retried.thread_id == thread.thread_id
    assert [r.idempotency_key for r in retried.receipts] == ["k1", "k2"]
    assert retried.receipts[0].received_at == first.receipts[0].received_at
    # A batch mixing a replay, a new key and a duplicate key inside the batch.
    mixed = ingest.AddMessages(
        pb.AddMessagesRequest(
            thread_id=thread.thread_id,
            messages=[
                msg("a", idempotency_key="k1"),
                msg("c", idempotency_key="k3"),
                msg("c", idempotency_key="k3"),
                msg("no key"),
            ],
        )
    )
    assert [(r.sequence, r.stored) for r in mixed.receipts] == [
        (1, False),
        (3, True),
        (3, False),
        (4, True),
    ]
    assert mixed.stored_count == 2
    page = ingest.ListMessages(pb.ListMessagesRequest(thread_id=thread.thread_id))
    assert [m.content for m in page.messages] == ["a", "b", "c", "no key"]


def test_a_reused_idempotency_key_with_other_content_is_refused(ingest) -> None:  # type: ignore[no-untyped-def]
    thread = new_thread(ingest)
    past = datetime(2024, 1, 1, tzinfo=UTC)
    first = msg("hello", idempotency_key="k1", created_at=ts(past), metadata=_struct(a="1"))
    ingest.AddMessages(pb.AddMessagesRequest(thread_id=thread.thread_id, messages=[first]))
    changed = [
        msg("hello, edited", idempotency_key="k1", created_at=ts(past), metadata=_struct(a="1")),
        msg("hello", idempotency_key="k1", created_at=ts(past), metadata=_struct(a="2")),
        msg("hello", idempotency_key="k1", created_at=ts(past + timedelta(seconds=1))),
        msg("hello", role=e.ROLE_ASSISTANT, idempotency_key="k1", created_at=ts(past)),
    ]
    for i, reused in enumerate(changed):
        batch = [msg(f"new {i}", idempotency_key=f"n{i}"), reused]
        with pytest.raises(grpc.RpcError) as err:
            ingest.AddMessages(pb.AddMessagesRequest(thread_id=thread.thread_id, messages=batch))
        assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS, reused
        assert "'k1'" in err.value.details() and "messages[1]" in err.value.details()
    # Inside one batch, two messages with one key must be the same message too.
    with pytest.raises(grpc.RpcError) as err:
        ingest.AddMessages(
            pb.AddMessagesRequest(
                thread_id=thread.thread_id,
                messages=[msg("x", idempotency_key="k9"), msg("y", idempotency_key="k9")],
            )
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # Nothing of the refused batches was stored.
    page = ingest.ListMessages(pb.ListMessagesRequest(thread_id=thread.thread_id))
    assert [m.content for m in page.messages] == ["hello"]


def test_eight_concurrent_writers_get_exactly_one_to_1600(ingest, engine) -> None:  # type: ignore[no-untyped-def]
    thread = new_thread(ingest)

    def writer(w: int) -> list[int]:
        seqs = []
        for i in range(200):
            r = ingest.AddMessages(
                pb.AddMessagesRequest(thread_id=thread.thread_id, messages=[msg(f"w{w} m{i}")]),
                timeout=30,
            )
            seqs.append(r.receipts[0].sequence)
        return seqs

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(writer, range(8)))
    returned = sorted(s for seqs in results for s in seqs)
    assert returned == list(range(1, 1601))
    for seqs in results:  # each writer sees its own writes in increasing order
        assert seqs == sorted(seqs)
    with engine.connect() as conn:
        stored = [
            r[0]
            for r in conn.execute(
                text("SELECT sequence FROM messages WHERE thread_id = :t ORDER BY sequence"),
                {"t": thread.thread_id},
            )
        ]
        last = conn.execute(
            text("SELECT last_sequence FROM threads WHERE thread_id = :t"), {"t": thread.thread_id}
        ).scalar_one()
    assert stored == list(range(1, 1601)) and last == 1600


def test_list_messages_pages_in_order(ingest) -> None:  # type: ignore[no-untyped-def]
    thread = new_thread(ingest)
    ingest.AddMessages(
        pb.AddMessagesRequest(
            thread_id=thread.thread_id, messages=[msg(f"m{i}") for i in range(1, 26)]
        )
    )
    seen, token = [], ""
    while True:
        page = ingest.ListMessages(
            pb.ListMessagesRequest(thread_id=thread.thread_id, page_size=10, page_token=token)
        )
        seen += [m.sequence for m in page.messages]
        token = page.next_page_token
        if not token:
            break
    assert seen == list(range(1, 26))
    window = ingest.ListMessages(
        pb.ListMessagesRequest(thread_id=thread.thread_id, start_sequence=5, end_sequence=7)
    )
    assert [m.content for m in window.messages] == ["m5", "m6", "m7"]


def test_list_threads_most_recent_first_with_paging(ingest) -> None:  # type: ignore[no-untyped-def]
    threads = [new_thread(ingest, dataset="alice", label=f"t{i}") for i in range(5)]
    new_thread(ingest, dataset="bob")
    # Activity moves a thread to the front.
    ingest.AddMessages(pb.AddMessagesRequest(thread_id=threads[1].thread_id, messages=[msg()]))
    labels, token = [], ""
    while True:
        page = ingest.ListThreads(
            pb.ListThreadsRequest(dataset="alice", page_size=2, page_token=token)
        )
        labels += [t.label for t in page.threads]
        token = page.next_page_token
        if not token:
            break
    assert labels == ["t1", "t4", "t3", "t2", "t0"]


def test_end_thread_answers_whether_an_episode_is_owed(ingest) -> None:  # type: ignore[no-untyped-def]
    empty = new_thread(ingest)
    assert ingest.EndThread(pb.EndThreadRequest(thread_id=empty.thread_id)).episode_queued is False
    busy = new_thread(ingest)
    ingest.AddMessages(pb.AddMessagesRequest(thread_id=busy.thread_id, messages=[msg()]))
    ended = ingest.EndThread(pb.EndThreadRequest(thread_id=busy.thread_id))
    # No scheduler runs in this test: the request is still durable and answered.
    assert ended.episode_queued is True and ended.thread_id == busy.thread_id
    # The thread stays writable: EndThread is a checkpoint, not a close.
    more = ingest.AddMessages(pb.AddMessagesRequest(thread_id=busy.thread_id, messages=[msg()]))
    assert more.receipts[0].sequence == 2
    got = ingest.GetThread(pb.GetThreadRequest(thread_id=busy.thread_id)).thread
    assert got.HasField("ended_at")


def test_create_thread_with_client_id_and_duplicate(ingest) -> None:  # type: ignore[no-untyped-def]
    tid = str(uuid.uuid4())
    assert new_thread(ingest, thread_id=tid).thread_id == tid
    with pytest.raises(grpc.RpcError) as err:
        new_thread(ingest, thread_id=tid)
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert tid in err.value.details()


def test_acknowledged_write_survives_kill_9(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    service = spawn("ingest")
    stub = g.IngestServiceStub(service.channel())
    thread = new_thread(stub)
    stub.AddMessages(pb.AddMessagesRequest(thread_id=thread.thread_id, messages=[msg("keep me")]))
    service.kill()
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT content FROM messages WHERE thread_id = :t"), {"t": thread.thread_id}
        ).all()
        [stored] = test_vault().open_rows(conn, thread.dataset, rows, "messages")
    assert stored["content"] == "keep me"


# ---- bad input: every case answers a clear status and stores nothing --------------------

FUTURE = datetime.now(UTC) + timedelta(days=1)
OTHER = str(uuid.uuid4())


def _bad_cases():  # type: ignore[no-untyped-def]
    big = "x" * 65537
    return [
        (
            "empty content",
            lambda t: pb.AddMessagesRequest(thread_id=t, messages=[msg("")]),
            grpc.StatusCode.INVALID_ARGUMENT,
            "content is empty",
        ),
        (
            "blank content",
            lambda t: pb.AddMessagesRequest(thread_id=t, messages=[msg("  \n ")]),
            grpc.StatusCode.INVALID_ARGUMENT,
            "content is empty",
        ),
        (
            "oversized content",
            lambda t: pb.AddMessagesRequest(thread_id=t, messages=[msg(big)]),
            grpc.StatusCode.INVALID_ARGUMENT,
            "limit is 65536",
        ),
        (
            "NUL in content",
            lambda t: pb.AddMessagesRequest(thread_id=t, messages=[msg("a\x00b")]),
            grpc.StatusCode.INVALID_ARGUMENT,
            "NUL",
        ),
        (
            "unknown role",
            lambda t: pb.AddMessagesRequest(
                thread_id=t, messages=[pb.NewMessage(role=e.ROLE_UNSPECIFIED, content="x")]
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "role",
        ),
        (
            "role out of range",
            lambda t: pb.AddMessagesRequest(
                thread_id=t, messages=[pb.NewMessage(role=42, content="x")]
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "role",
        ),
        (
            "no messages",
            lambda t: pb.AddMessagesRequest(thread_id=t),
            grpc.StatusCode.INVALID_ARGUMENT,
            "messages is empty",
        ),
        (
            "unknown thread",
            lambda t: pb.AddMessagesRequest(thread_id=OTHER, messages=[msg()]),
            grpc.StatusCode.NOT_FOUND,
            "does not exist",
        ),
        (
            "malformed thread id",
            lambda t: pb.AddMessagesRequest(thread_id="abc", messages=[msg()]),
            grpc.StatusCode.INVALID_ARGUMENT,
            "not a UUID",
        ),
        (
            "missing thread id",
            lambda t: pb.AddMessagesRequest(messages=[msg()]),
            grpc.StatusCode.INVALID_ARGUMENT,
            "thread_id is required",
        ),
        (
            "batch mixing threads",
            lambda t: pb.AddMessagesRequest(thread_id=t, messages=[msg(), msg(thread_id=OTHER)]),
            grpc.StatusCode.INVALID_ARGUMENT,
            "one thread only",
        ),
        (
            "timestamp in the future",
            lambda t: pb.AddMessagesRequest(
                thread_id=t, messages=[msg("x"), msg("y", created_at=ts(FUTURE))]
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "in the future",
        ),
        (
            # Which message of the batch, and what a Timestamp may hold (the answer was
            # "created_at is not a valid timestamp", naming neither).
            "timestamp with negative nanos",
            lambda t: pb.AddMessagesRequest(
                thread_id=t,
                messages=[
                    msg("x"),
                    msg("y", created_at=timestamp_pb2.Timestamp(seconds=0, nanos=-1)),
                ],
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "messages[1].created_at is not a valid timestamp: nanos must be 0 to 999999999",
        ),
        (
            "timestamp past year 9999",
            lambda t: pb.AddMessagesRequest(
                thread_id=t,
                messages=[msg("y", created_at=timestamp_pb2.Timestamp(seconds=253402300800))],
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "messages[0].created_at is not a valid timestamp: it must lie between "
            "0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z",
        ),
        (
            "idempotency key too long",
            lambda t: pb.AddMessagesRequest(thread_id=t, messages=[msg(idempotency_key="k" * 129)]),
            grpc.StatusCode.INVALID_ARGUMENT,
            "idempotency_key",
        ),
    ]


@pytest.mark.parametrize(
    ("case", "make", "code", "phrase"), _bad_cases(), ids=[c[0] for c in _bad_cases()]
)
def test_bad_add_messages_is_rejected_and_stores_nothing(
    shared_ingest, module_engine, case, make, code, phrase
) -> None:  # type: ignore[no-untyped-def]
    thread = new_thread(shared_ingest)
    before = _stored(module_engine)
    with pytest.raises(grpc.RpcError) as err:
        shared_ingest.AddMessages(make(thread.thread_id))
    assert err.value.code() == code, err.value.details()
    assert phrase in err.value.details()
    status = rpc_status.from_call(err.value)
    assert status is not None and status.details, "errors carry a google.rpc.ErrorInfo"
    assert _stored(module_engine) == before


@pytest.mark.parametrize(
    ("rpc", "request_", "code", "phrase"),
    [
        (
            "CreateThread",
            pb.CreateThreadRequest(),
            grpc.StatusCode.INVALID_ARGUMENT,
            "dataset is required",
        ),
        (
            "CreateThread",
            pb.CreateThreadRequest(dataset="has space"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "not valid",
        ),
        (
            "CreateThread",  # `$` alone would match before a trailing newline
            pb.CreateThreadRequest(dataset="user_42\n"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "not valid",
        ),
        *[
            (
                "CreateThread",
                pb.CreateThreadRequest(dataset=d),
                grpc.StatusCode.INVALID_ARGUMENT,
                "not valid",
            )
            for d in ("/acme", "acme/", "acme//u", "acme/*", "x" * 129)
        ],
        (
            "CreateThread",
            pb.CreateThreadRequest(dataset="d", thread_id="nope"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "not a UUID",
        ),
        (
            "CreateThread",
            pb.CreateThreadRequest(dataset="d", label="l" * 201),
            grpc.StatusCode.INVALID_ARGUMENT,
            "label",
        ),
        (
            "GetThread",
            pb.GetThreadRequest(thread_id=OTHER),
            grpc.StatusCode.NOT_FOUND,
            "does not exist",
        ),
        (
            "GetThread",
            pb.GetThreadRequest(thread_id="1234"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "not a UUID",
        ),
        (
            "EndThread",
            pb.EndThreadRequest(thread_id=OTHER),
            grpc.StatusCode.NOT_FOUND,
            "does not exist",
        ),
        (
            "ListMessages",
            pb.ListMessagesRequest(thread_id=OTHER),
            grpc.StatusCode.NOT_FOUND,
            "does not exist",
        ),
        (
            "ListMessages",
            pb.ListMessagesRequest(thread_id=OTHER, page_size=-1),
            grpc.StatusCode.INVALID_ARGUMENT,
            "negative",
        ),
        (
            "ListMessages",
            pb.ListMessagesRequest(thread_id=OTHER, page_token="%%%"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "page_token",
        ),
        (
            "ListThreads",
            pb.ListThreadsRequest(dataset="d", page_size=-5),
            grpc.StatusCode.INVALID_ARGUMENT,
            "negative",
        ),
        (
            "ListThreads",
            pb.ListThreadsRequest(dataset=""),
            grpc.StatusCode.INVALID_ARGUMENT,
            "dataset is required",
        ),
    ],
)
def test_bad_requests_get_clear_errors(shared_ingest, rpc, request_, code, phrase) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as err:
        getattr(shared_ingest, rpc)(request_)
    assert err.value.code() == code, err.value.details()
    assert phrase in err.value.details()


def test_page_token_from_other_thread_is_rejected(ingest) -> None:  # type: ignore[no-untyped-def]
    a, b = new_thread(ingest), new_thread(ingest)
    ingest.AddMessages(pb.AddMessagesRequest(thread_id=a.thread_id, messages=[msg()] * 3))
    token = ingest.ListMessages(
        pb.ListMessagesRequest(thread_id=a.thread_id, page_size=1)
    ).next_page_token
    assert token
    with pytest.raises(grpc.RpcError) as err:
        ingest.ListMessages(pb.ListMessagesRequest(thread_id=b.thread_id, page_token=token))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "belongs to another request" in (err.value.details() or "")


def _struct(**values):  # type: ignore[no-untyped-def]
    out = struct_pb2.Struct()
    out.update(values)
    return out


@pytest.mark.parametrize(
    ("metadata", "phrase"),
    [
        (_struct(x=float("nan")), "NaN"),
        (_struct(x=float("inf")), "NaN or an infinity"),
        (_struct(**{"k\x00": 1}), "NUL"),
        (_struct(nested={"v": "a\x00b"}), "NUL"),
        (_struct(nested={"list": ["fine", {"deep": "a\x00"}]}), "NUL"),
        # An escaped-looking text beside a real NUL: the JSON holds both \u0000 forms.
        (_struct(a="\\u0000 literal", b="x\x00"), "NUL"),
    ],
    ids=[
        "nan",
        "infinity",
        "nul-key",
        "nested-nul",
        "nul-in-list",
        "nul-beside-escape",
    ],
)
def test_metadata_json_cannot_hold_is_invalid_argument(shared_ingest, metadata, phrase) -> None:  # type: ignore[no-untyped-def]
    thread = new_thread(shared_ingest)
    with pytest.raises(grpc.RpcError) as err:
        shared_ingest.AddMessages(
            pb.AddMessagesRequest(thread_id=thread.thread_id, messages=[msg(metadata=metadata)])
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert phrase in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        shared_ingest.CreateThread(pb.CreateThreadRequest(dataset="d", metadata=metadata))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_escaped_text_that_looks_like_nul_is_fine(ingest) -> None:  # type: ignore[no-untyped-def]
    thread = new_thread(ingest)
    ingest.AddMessages(
        pb.AddMessagesRequest(
            thread_id=thread.thread_id, messages=[msg(metadata=_struct(k="\\u0000 literal"))]
        )
    )
    (stored,) = ingest.ListMessages(pb.ListMessagesRequest(thread_id=thread.thread_id)).messages
    assert dict(stored.metadata) == {"k": "\\u0000 literal"}


def test_forged_page_token_is_invalid_argument(ingest) -> None:  # type: ignore[no-untyped-def]
    from episodic.validation import encode_page_token

    thread = new_thread(ingest)
    for cursor in (
        {"thread": thread.thread_id, "end": 0},
        {"thread": thread.thread_id, "end": 0, "after": True},
    ):
        with pytest.raises(grpc.RpcError) as err:
            ingest.ListMessages(
                pb.ListMessagesRequest(
                    thread_id=thread.thread_id, page_token=encode_page_token(cursor)
                )
            )
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_tenant_datasets_take_segments(ingest) -> None:  # type: ignore[no-untyped-def]
    assert new_thread(ingest, dataset="acme/user_42").dataset == "acme/user_42"


def _nested(levels: int) -> struct_pb2.Struct:
    data: dict = {}
    node = data
    for _ in range(levels - 1):
        node["a"] = {}
        node = node["a"]
    out = struct_pb2.Struct()
    out.update(data)
    return out


def test_struct_nesting_is_bounded_on_every_door(ingest, engine) -> None:  # type: ignore[no-untyped-def]
    ok = new_thread(ingest, metadata=_nested(16))
    assert ok.metadata.fields["a"].struct_value.fields  # stored and answered back
    with pytest.raises(grpc.RpcError) as err:
        new_thread(ingest, dataset="too_deep", metadata=_nested(17))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "metadata" in err.value.details() and "17 levels" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        ingest.AddMessages(
            pb.AddMessagesRequest(
                thread_id=ok.thread_id, messages=[msg(), msg(metadata=_nested(30))]
            )
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "messages[1].metadata" in err.value.details()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM messages")).scalar_one() == 0
        assert (
            conn.execute(
                text("SELECT count(*) FROM threads WHERE dataset = 'too_deep'")
            ).scalar_one()
            == 0
        )


def test_malformed_bytes_answer_invalid_argument_and_log_nothing(spawn) -> None:  # type: ignore[no-untyped-def]
    service = spawn("ingest")
    raw = service.channel().unary_unary("/episodic.v1.IngestService/CreateThread")
    bad = {
        "invalid UTF-8 in dataset": b"\x0a\x02\xff\xfe",
        "truncated field": b"\x0a\x10abc",
        "huge length prefix": b"\x0a\xff\xff\xff\xff\x0f",
    }
    for name, data in bad.items():
        with pytest.raises(grpc.RpcError) as err:
            raw(data, timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, name
        assert "CreateThreadRequest" in err.value.details(), name
    assert " ERROR " not in service.log() and "Traceback" not in service.log()


def test_batches_are_bounded_in_bytes(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    service = spawn(
        "ingest", env={"EPISODIC_MAX_BATCH_BYTES": "100000", "EPISODIC_MAX_REQUEST_BYTES": "300000"}
    )
    stub = g.IngestServiceStub(service.channel())
    thread = new_thread(stub)
    three = [msg("x" * 40_000) for _ in range(3)]
    with pytest.raises(grpc.RpcError) as err:
        stub.AddMessages(pb.AddMessagesRequest(thread_id=thread.thread_id, messages=three))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "100000 bytes" in err.value.details() and "messages[2]" in err.value.details()
    # Larger than a server reads at all: refused before it is read into memory.
    huge = [msg("x" * 60_000) for _ in range(6)]
    with pytest.raises(grpc.RpcError) as err:
        stub.AddMessages(pb.AddMessagesRequest(thread_id=thread.thread_id, messages=huge))
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "300000" in err.value.details()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM messages")).scalar_one() == 0


def test_message_pages_stop_before_three_mebibytes(ingest) -> None:  # type: ignore[no-untyped-def]
    thread = new_thread(ingest)
    for _ in range(4):  # 80 messages of 60 kB: 4.8 MB in all
        ingest.AddMessages(
            pb.AddMessagesRequest(
                thread_id=thread.thread_id, messages=[msg("y" * 60_000) for _ in range(20)]
            )
        )
    first = ingest.ListMessages(pb.ListMessagesRequest(thread_id=thread.thread_id, page_size=1000))
    assert 0 < len(first.messages) < 80 and first.next_page_token
    assert sum(len(m.content) for m in first.messages) <= 3 * 1024 * 1024
    rest = ingest.ListMessages(
        pb.ListMessagesRequest(
            thread_id=thread.thread_id, page_size=1000, page_token=first.next_page_token
        )
    )
    sequences = [m.sequence for m in [*first.messages, *rest.messages]]
    assert sequences == list(range(1, 81)) and not rest.next_page_token


def test_a_threads_idempotency_key_finds_the_thread_it_created(ingest) -> None:  # type: ignore[no-untyped-def]
    """CreateThread with a key the dataset holds returns that thread (created false), the
    same key in another dataset is that dataset's own (nothing about it leaks), and a key
    sent again for another thread is ALREADY_EXISTS."""

    def create(dataset: str = "keyed", **kw) -> pb.CreateThreadResponse:  # type: ignore[no-untyped-def]
        return ingest.CreateThread(pb.CreateThreadRequest(dataset=dataset, **kw), timeout=10)

    first = create(idempotency_key="session-7", label="support", metadata=_struct(channel="web"))
    again = create(idempotency_key="session-7", label="support", metadata=_struct(channel="web"))
    assert first.created and not again.created
    assert again.thread.thread_id == first.thread.thread_id and again.thread.label == "support"
    # By its id too, when the caller knows it.
    assert not create(idempotency_key="session-7", thread_id=first.thread.thread_id,
                      label="support", metadata=_struct(channel="web")).created  # fmt: skip
    other = create(dataset="someone_else", idempotency_key="session-7", label="support")
    assert other.created and other.thread.thread_id != first.thread.thread_id

    for changed in (
        {"label": "sales", "metadata": _struct(channel="web")},
        {"label": "support"},
        {"label": "support", "metadata": _struct(channel="web"), "thread_id": str(uuid.uuid4())},
    ):
        with pytest.raises(grpc.RpcError) as err:
            create(idempotency_key="session-7", **changed)
        assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
        assert "idempotency_key 'session-7'" in (err.value.details() or "")
    with pytest.raises(grpc.RpcError) as err:
        create(idempotency_key="k" * 129)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    # Many callers at once with one key: one thread, created once.
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: create(idempotency_key="burst"), range(16)))
    assert len({a.thread.thread_id for a in answers}) == 1
    assert sum(a.created for a in answers) == 1
