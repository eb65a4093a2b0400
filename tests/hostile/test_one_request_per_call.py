"""A unary call carries one request message. The door reads the request itself (the
methods are served as client-streaming, episodic.serving.transport), and it read only the first:
a client that streamed two AddMessagesRequests on one call got OK with the first batch
stored and the second silently dropped. Such a call is refused, with nothing of it stored:
a method that changes something looks for the end of the request stream before its
handler runs; one a reader's key may call (it changes nothing) looks beside its handler,
so the check costs it no wait (server._end_of_requests, CallInterceptor.serve).
"""

from __future__ import annotations

import grpc
import pytest
from sqlalchemy import text

from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as pb
from episodic.v1 import ingest_service_pb2_grpc as g


def test_a_call_with_two_request_messages_is_refused_and_stores_nothing(spawn, engine) -> None:  # type: ignore[no-untyped-def]
    ingest = spawn("ingest")
    with ingest.channel() as channel:
        thread = (
            g.IngestServiceStub(channel)
            .CreateThread(pb.CreateThreadRequest(dataset="two_requests"), timeout=30)
            .thread
        )
        streamed = channel.stream_unary(
            "/episodic.v1.IngestService/AddMessages",
            request_serializer=pb.AddMessagesRequest.SerializeToString,
            response_deserializer=pb.AddMessagesResponse.FromString,
        )
        batches = [
            pb.AddMessagesRequest(
                thread_id=thread.thread_id,
                messages=[pb.NewMessage(role=e.ROLE_USER, content=word)],
            )
            for word in ("first", "second")
        ]
        with pytest.raises(grpc.RpcError) as refused:
            streamed(iter(batches), timeout=30)
        err = refused.value
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
        assert "one request message" in (err.details() or "")
        # One message is a call like any other through the same door.
        one = streamed(iter(batches[:1]), timeout=30)
        assert one.stored_count == 1
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM messages")).scalar_one() == 1


def test_a_read_with_two_request_messages_is_refused(spawn) -> None:  # type: ignore[no-untyped-def]
    """The same for a method that changes nothing (checked beside its handler)."""
    ingest = spawn("ingest")
    with ingest.channel() as channel:
        thread = (
            g.IngestServiceStub(channel)
            .CreateThread(pb.CreateThreadRequest(dataset="two_reads"), timeout=30)
            .thread
        )
        streamed = channel.stream_unary(
            "/episodic.v1.IngestService/GetThread",
            request_serializer=pb.GetThreadRequest.SerializeToString,
            response_deserializer=pb.GetThreadResponse.FromString,
        )
        ask = pb.GetThreadRequest(thread_id=thread.thread_id)
        with pytest.raises(grpc.RpcError) as refused:
            streamed(iter([ask, ask]), timeout=30)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "one request message" in (refused.value.details() or "")
        assert streamed(iter([ask]), timeout=30).thread.thread_id == thread.thread_id
