"""Tool calls are part of the conversation (issue 39): OpenAI-format tool_calls on assistant
messages, tool_call_id and name on tool messages — validated, sealed, read back."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from sqlalchemy import text

from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as pb
from episodic.v1 import ingest_service_pb2_grpc as g


@pytest.fixture
def ingest(spawn):  # type: ignore[no-untyped-def]
    service = spawn("ingest")
    channel = service.channel()
    yield g.IngestServiceStub(channel)
    channel.close()


def _thread(stub: g.IngestServiceStub) -> str:
    return stub.CreateThread(
        pb.CreateThreadRequest(dataset="tools_user"), timeout=10
    ).thread.thread_id


def _call(call_id: str, name: str, arguments: str) -> e.ToolCall:
    return e.ToolCall(id=call_id, name=name, arguments=arguments)


def _conversation() -> list[pb.NewMessage]:
    return [
        pb.NewMessage(role=e.ROLE_USER, content="Cancel order #W1, I ordered it by mistake"),
        pb.NewMessage(
            role=e.ROLE_ASSISTANT,
            content="",
            tool_calls=[_call("call_1", "get_order_details", '{"order_id": "#W1"}')],
        ),
        pb.NewMessage(role=e.ROLE_TOOL, content='{"status": "pending"}', tool_call_id="call_1"),
        pb.NewMessage(
            role=e.ROLE_ASSISTANT,
            content="Cancelling it now.",
            tool_calls=[
                _call(
                    "call_2",
                    "cancel_pending_order",
                    '{"order_id": "#W1", "reason": "ordered by mistake"}',
                )
            ],
        ),
    ]


def _invalid(err: grpc.RpcError) -> str:
    """The field an INVALID_ARGUMENT names (its ErrorInfo's metadata)."""
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
    status = rpc_status.from_call(err)
    assert status is not None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info.metadata["field"]
    raise AssertionError("no ErrorInfo detail")


def test_tool_calls_round_trip_and_are_sealed(ingest, engine) -> None:  # type: ignore[no-untyped-def]
    thread_id = _thread(ingest)
    ingest.AddMessages(
        pb.AddMessagesRequest(thread_id=thread_id, messages=_conversation()), timeout=10
    )
    # A later call answers the call of the earlier one.
    ingest.AddMessages(
        pb.AddMessagesRequest(
            thread_id=thread_id,
            messages=[
                pb.NewMessage(
                    role=e.ROLE_TOOL,
                    content='{"status": "cancelled"}',
                    tool_call_id="call_2",
                    name="cancel_pending_order",
                )
            ],
        ),
        timeout=10,
    )
    got = ingest.ListMessages(pb.ListMessagesRequest(thread_id=thread_id), timeout=10).messages
    assert [m.role for m in got] == [
        e.ROLE_USER,
        e.ROLE_ASSISTANT,
        e.ROLE_TOOL,
        e.ROLE_ASSISTANT,
        e.ROLE_TOOL,
    ]
    assert got[1].content == ""
    assert [(c.id, c.name, c.arguments) for c in got[1].tool_calls] == [
        ("call_1", "get_order_details", '{"order_id": "#W1"}')
    ]
    assert got[2].tool_call_id == "call_1"
    assert got[2].name == "get_order_details"  # taken from the call it answers
    assert got[4].tool_call_id == "call_2" and got[4].name == "cancel_pending_order"
    assert got[3].tool_calls[0].arguments == '{"order_id": "#W1", "reason": "ordered by mistake"}'
    with engine.connect() as conn:
        raw = conn.execute(
            text("SELECT tools FROM messages WHERE tools IS NOT NULL ORDER BY sequence LIMIT 1")
        ).scalar_one()
    # Sealed like content: the arguments are not in the row in the clear (the test vault
    # encrypts).
    assert b"ordered by mistake" not in bytes(raw) and b"#W1" not in bytes(raw)


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (
            pb.NewMessage(role=e.ROLE_TOOL, content="{}", tool_call_id="call_nowhere"),
            "messages[0].tool_call_id",
        ),
        (
            pb.NewMessage(
                role=e.ROLE_ASSISTANT, content="", tool_calls=[_call("c1", "lookup", "{not json")]
            ),
            "messages[0].tool_calls[0].arguments",
        ),
        (
            pb.NewMessage(
                role=e.ROLE_ASSISTANT, content="", tool_calls=[_call("c1", "lookup", "[1, 2]")]
            ),
            "messages[0].tool_calls[0].arguments",
        ),
        (
            pb.NewMessage(role=e.ROLE_USER, content="hi", tool_calls=[_call("c1", "lookup", "{}")]),
            "messages[0].tool_calls",
        ),
        (
            pb.NewMessage(
                role=e.ROLE_ASSISTANT, content="", tool_calls=[_call("c 1", "lookup", "{}")]
            ),
            "messages[0].tool_calls[0].id",
        ),
        (
            pb.NewMessage(
                role=e.ROLE_ASSISTANT, content="", tool_calls=[_call("c1", "look up!", "{}")]
            ),
            "messages[0].tool_calls[0].name",
        ),
        (
            pb.NewMessage(role=e.ROLE_USER, content="hi", tool_call_id="c1"),
            "messages[0].tool_call_id",
        ),
        (pb.NewMessage(role=e.ROLE_ASSISTANT, content=""), "messages[0].content"),
        # JSON Python's parser gives up on: nesting past its recursion limit, and an integer
        # of more digits than it converts (both were INTERNAL).
        (
            pb.NewMessage(
                role=e.ROLE_ASSISTANT,
                content="",
                tool_calls=[_call("c1", "lookup", '{"a": ' + "[" * 5000 + "]" * 5000 + "}")],
            ),
            "messages[0].tool_calls[0].arguments",
        ),
        (
            pb.NewMessage(
                role=e.ROLE_ASSISTANT,
                content="",
                tool_calls=[_call("c1", "lookup", '{"order_id": ' + "9" * 5000 + "}")],
            ),
            "messages[0].tool_calls[0].arguments",
        ),
        # What Python reads but JSON has not: NaN and Infinity, and an escaped lone
        # surrogate (a string no UTF-8 reader of an export or a prompt can hold).
        *(
            (
                pb.NewMessage(
                    role=e.ROLE_ASSISTANT,
                    content="",
                    tool_calls=[_call("c1", "lookup", arguments)],
                ),
                "messages[0].tool_calls[0].arguments",
            )
            for arguments in (
                '{"ratio": NaN}',
                '{"limit": Infinity}',
                '{"floor": [-Infinity]}',
                '{"name": "\\ud800"}',
                '{"\\udfff": 1}',
            )
        ),
    ],
)
def test_bad_tool_parts_are_refused_with_the_field_named(ingest, engine, message, field) -> None:  # type: ignore[no-untyped-def]
    thread_id = _thread(ingest)
    with pytest.raises(grpc.RpcError) as err:
        ingest.AddMessages(
            pb.AddMessagesRequest(thread_id=thread_id, messages=[message]), timeout=10
        )
    assert _invalid(err.value) == field
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM messages")).scalar_one() == 0


def test_a_paired_surrogate_escape_is_a_character(ingest) -> None:  # type: ignore[no-untyped-def]
    """The refusal above is of lone surrogates only: an escaped pair is one character."""
    thread_id = _thread(ingest)
    ingest.AddMessages(
        pb.AddMessagesRequest(
            thread_id=thread_id,
            messages=[
                pb.NewMessage(
                    role=e.ROLE_ASSISTANT,
                    content="",
                    tool_calls=[_call("c1", "react", '{"emoji": "\\ud83d\\ude00"}')],
                )
            ],
        ),
        timeout=10,
    )


def test_a_reused_call_id_is_answered_by_the_latest_call(ingest) -> None:  # type: ignore[no-untyped-def]
    """Some model servers number their calls per response ("call_0" in every turn), so an
    id may come back later in the thread: it is accepted, and a result answers the latest
    call made before it with that id (in a later request or in the same batch)."""
    thread_id = _thread(ingest)
    turn = [
        pb.NewMessage(
            role=e.ROLE_ASSISTANT, content="", tool_calls=[_call("call_0", "find_user", "{}")]
        ),
        pb.NewMessage(role=e.ROLE_TOOL, content='{"user": "u1"}', tool_call_id="call_0"),
        pb.NewMessage(
            role=e.ROLE_ASSISTANT, content="", tool_calls=[_call("call_0", "get_order", "{}")]
        ),
        pb.NewMessage(role=e.ROLE_TOOL, content='{"order": "#W1"}', tool_call_id="call_0"),
    ]
    ingest.AddMessages(pb.AddMessagesRequest(thread_id=thread_id, messages=turn), timeout=10)
    ingest.AddMessages(
        pb.AddMessagesRequest(
            thread_id=thread_id,
            messages=[pb.NewMessage(role=e.ROLE_TOOL, content="again", tool_call_id="call_0")],
        ),
        timeout=10,
    )
    got = ingest.ListMessages(pb.ListMessagesRequest(thread_id=thread_id), timeout=10).messages
    assert [m.name for m in got if m.role == e.ROLE_TOOL] == ["find_user", "get_order", "get_order"]


def test_a_call_of_another_thread_is_not_an_answer(ingest) -> None:  # type: ignore[no-untyped-def]
    first, second = _thread(ingest), _thread(ingest)
    ingest.AddMessages(pb.AddMessagesRequest(thread_id=first, messages=_conversation()), timeout=10)
    with pytest.raises(grpc.RpcError) as err:
        ingest.AddMessages(
            pb.AddMessagesRequest(
                thread_id=second,
                messages=[pb.NewMessage(role=e.ROLE_TOOL, content="ok", tool_call_id="call_1")],
            ),
            timeout=10,
        )
    assert _invalid(err.value) == "messages[0].tool_call_id"


def test_a_replayed_key_with_other_tool_calls_is_refused(ingest) -> None:  # type: ignore[no-untyped-def]
    thread_id = _thread(ingest)
    first = pb.NewMessage(
        role=e.ROLE_ASSISTANT,
        content="",
        tool_calls=[_call("c1", "lookup", '{"q": "a"}')],
        idempotency_key="k1",
    )
    ingest.AddMessages(pb.AddMessagesRequest(thread_id=thread_id, messages=[first]), timeout=10)
    again = ingest.AddMessages(
        pb.AddMessagesRequest(thread_id=thread_id, messages=[first]), timeout=10
    )
    assert again.receipts[0].stored is False
    changed = pb.NewMessage()
    changed.CopyFrom(first)
    changed.tool_calls[0].arguments = '{"q": "b"}'
    with pytest.raises(grpc.RpcError) as err:
        ingest.AddMessages(
            pb.AddMessagesRequest(thread_id=thread_id, messages=[changed]), timeout=10
        )
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS


@pytest.mark.parametrize(
    "given",
    [
        {"id": "c1", "type": "function", "function": {"name": "refund", "arguments": '{"a": 1}'}},
        {"id": "c1", "name": "refund", "arguments": {"a": 1}},  # flat, arguments an object
    ],
)
def test_a_tool_call_is_read_as_openai_writes_it_or_flat(given) -> None:  # type: ignore[no-untyped-def]
    """One reading for the SDK and the importer (episodic.tool_calls.ToolCall.from_openai)."""
    from episodic.tool_calls import ToolCall

    assert ToolCall.from_openai(given) == ToolCall("c1", "refund", '{"a": 1}')


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"function": {"name": "refund"}}, "needs an 'id'"),
        ({"id": 7, "function": {"name": "refund"}}, "needs an 'id'"),
        ({"id": "c1", "function": {"arguments": "{}"}}, "needs a function 'name'"),
        ({"id": "c1", "function": "refund"}, "needs an 'id' and a function 'name'"),
    ],
)
def test_a_tool_call_without_its_id_or_name_is_refused(given, said) -> None:  # type: ignore[no-untyped-def]
    from episodic.tool_calls import ToolCall

    with pytest.raises(ValueError, match=said):
        ToolCall.from_openai(given)
