"""The offline procedure extractor and the merge, free of the database (episodic.procedural)."""

from __future__ import annotations

import numpy as np

from episodic.procedural import (
    Candidate,
    WindowTurn,
    extract,
    is_write,
    merge,
    rank,
    signature_of,
)
from episodic.tool_calls import ToolCall


def _call(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def _cancel_window(request: str, order: str = "#W100") -> list[WindowTurn]:
    return [
        WindowTurn(1, "user", request),
        WindowTurn(
            2, "assistant", "", (_call("a", "find_user_id_by_email", '{"email": "x@y.z"}'),)
        ),
        WindowTurn(3, "tool", "user_77", tool_call_id="a", name="find_user_id_by_email"),
        WindowTurn(
            4, "assistant", "", (_call("b", "get_order_details", f'{{"order_id": "{order}"}}'),)
        ),
        WindowTurn(5, "tool", '{"status": "pending"}', tool_call_id="b"),
        WindowTurn(
            6, "assistant", "", (_call("b2", "get_order_details", f'{{"order_id": "{order}"}}'),)
        ),
        WindowTurn(7, "tool", '{"status": "pending"}', tool_call_id="b2"),
        WindowTurn(8, "user", "yes, go ahead"),
        WindowTurn(
            9,
            "assistant",
            "Cancelling the order.",
            (
                _call(
                    "c",
                    "cancel_pending_order",
                    f'{{"order_id": "{order}", "reason": "no longer needed", "user": "user_77"}}',
                ),
            ),
        ),
    ]


def test_reads_and_writes_are_told_apart_by_the_names_first_word() -> None:
    assert not is_write("get_order_details")
    assert not is_write("findUserIdByEmail")
    assert not is_write("list_all_product_types")
    assert not is_write("calculate")
    assert is_write("cancel_pending_order")
    assert is_write("exchange_delivered_order_items")
    assert is_write("transfer_to_human_agents")


def test_a_window_teaches_its_goal_steps_and_where_arguments_came_from() -> None:
    window = _cancel_window("Please cancel order #W100 for me, I no longer need it. Email x@y.z")
    candidate = extract(window, episode_id="e1", thread_id="t1")
    assert candidate is not None
    # The goal is the user's request, in their words; the confirmation is no request.
    assert candidate.goal == "Please cancel order #W100 for me, I no longer need it. Email x@y.z"
    tools = [s.tool for s in candidate.steps]
    # The repeated read is one step.
    assert tools == ["find_user_id_by_email", "get_order_details", "cancel_pending_order"]
    assert candidate.signature == "w:cancel_pending_order"
    cancel = candidate.steps[-1]
    assert cancel.writes and cancel.purpose == "Cancelling the order."
    sources = dict(cancel.arguments)
    assert sources["order_id"] == "user"  # the user said #W100
    assert sources["user"] == "tool:find_user_id_by_email"  # a tool returned user_77
    assert sources["reason"] == "agent"
    assert candidate.steps[1].purpose == "get order details"  # no words: the tool's name


def test_a_window_without_calls_or_requests_teaches_nothing() -> None:
    assert (
        extract(
            [WindowTurn(1, "user", "hi"), WindowTurn(2, "assistant", "hello")],
            episode_id="e",
            thread_id="t",
        )
        is None
    )
    calls_only = [WindowTurn(1, "assistant", "", (_call("a", "get_time", "{}"),))]
    assert extract(calls_only, episode_id="e", thread_id="t") is None


def test_read_only_stretches_are_signed_by_their_reads() -> None:
    candidate = extract(
        [
            WindowTurn(1, "user", "what is the status of #W1?"),
            WindowTurn(
                2, "assistant", "", (_call("a", "get_order_details", '{"order_id": "#W1"}'),)
            ),
        ],
        episode_id="e",
        thread_id="t",
    )
    assert candidate is not None and candidate.signature == "r:get_order_details"
    assert signature_of(candidate.steps) == candidate.signature


def _candidate(
    n: int, signature: str, outcome: str | None, vector: list[float], goal: str = ""
) -> Candidate:
    base = extract(
        _cancel_window(goal or f"cancel my order number {n}"), episode_id=f"e{n}", thread_id=f"t{n}"
    )
    assert base is not None
    steps = base.steps
    if signature != base.signature:  # a misordered or different stretch
        steps = tuple(reversed(steps))
    return Candidate(
        episode_id=f"e{n}",
        thread_id=f"t{n}",
        signature=signature,
        goal=goal or f"cancel my order number {n}",
        steps=steps,
        outcome=outcome,
        embedding=np.asarray(vector, dtype=float),
        created_at=f"2026-12-0{n}",
    )


def test_successes_merge_and_failures_count_against_them() -> None:
    drafts = merge(
        [
            _candidate(1, "w:cancel_pending_order", "success", [1, 0, 0]),
            _candidate(2, "w:cancel_pending_order", "success", [0.9, 0.1, 0]),
            _candidate(3, "w:cancel_pending_order", "failure", [1, 0, 0]),
            _candidate(4, "w:cancel_pending_order", "partial", [1, 0, 0]),
            _candidate(5, "w:cancel_pending_order", None, [1, 0, 0]),  # no outcome yet
            # A failure of other actions, about the same goal: counts against it.
            _candidate(
                6, "w:cancel_pending_order>cancel_pending_order", "failure", [0.95, 0.05, 0]
            ),
            # A failure about something else entirely matches nothing.
            _candidate(7, "w:modify_address", "failure", [0, 0, 1]),
        ]
    )
    assert len(drafts) == 1
    [d] = drafts
    assert (len(d.success), len(d.failure), len(d.partial)) == (2, 2, 1)
    assert d.steps[-1].tool == "cancel_pending_order"
    assert {d.goal, *d.example_goals} == {"cancel my order number 1", "cancel my order number 2"}


def test_failures_alone_create_no_procedure() -> None:
    assert merge([_candidate(1, "w:cancel_pending_order", "failure", [1, 0, 0])]) == []
    assert merge([_candidate(1, "w:cancel_pending_order", None, [1, 0, 0])]) == []


def _write(call_id: str, tool: str, order: str) -> tuple[WindowTurn, WindowTurn]:
    return (
        WindowTurn(0, "assistant", "", (_call(call_id, tool, f'{{"order_id": "{order}"}}'),)),
        WindowTurn(0, "tool", '{"ok": true}', tool_call_id=call_id),
    )


def test_the_goal_is_every_request_before_the_last_write_and_no_reply() -> None:
    window = [
        WindowTurn(1, "user", "Hi! I'd like to cancel order #W1, it was a mistake."),
        WindowTurn(2, "assistant", "Sure. Your email, or your name and zip code?"),
        # Hands over values the tools use: it identifies, it asks for nothing.
        WindowTurn(3, "user", "Name's Ada Lovelace and my zip is 10001."),
        WindowTurn(
            4,
            "assistant",
            "",
            (
                _call(
                    "a",
                    "find_user_id_by_name_zip",
                    '{"first_name": "Ada", "last_name": "Lovelace", "zip": "10001"}',
                ),
            ),
        ),
        WindowTurn(5, "tool", "ada_1", tool_call_id="a"),
        WindowTurn(6, "assistant", "Cancel #W1 (ordered by mistake). Shall I proceed?"),
        WindowTurn(7, "user", "Yes, please go ahead."),  # a confirmation
        *_write("b", "cancel_pending_order", "#W1"),
        WindowTurn(10, "assistant", "Done. Anything else?"),
        # A second request, made after the first action: part of what the stretch served.
        WindowTurn(11, "user", "Also, please ship order #W2 to my new office address."),
        WindowTurn(12, "user", "ok"),
        *_write("c", "modify_pending_order_address", "#W2"),
        WindowTurn(15, "user", "Thanks, that's all!"),  # after the last write
    ]
    candidate = extract(window, episode_id="e", thread_id="t")
    assert candidate is not None
    assert candidate.signature == "w:cancel_pending_order>modify_pending_order_address"
    assert candidate.goal == (
        "Hi! I'd like to cancel order #W1, it was a mistake. "
        "Also, please ship order #W2 to my new office address."
    )


def test_a_short_opening_request_is_kept() -> None:
    window = [WindowTurn(1, "user", "Cancel #W7"), *_write("a", "cancel_order", "#W7")]
    candidate = extract(window, episode_id="e", thread_id="t")
    assert candidate is not None and candidate.goal == "Cancel #W7"


def test_the_requests_nearest_the_query_vote() -> None:
    # One request of "b" is the nearest, but three of "a" are nearly as near: "a" first.
    ranked = rank([("a", 3, [0.80, 0.79, 0.78]), ("b", 1, [0.82]), ("c", 2, [0.1, 0.2])])
    assert [sig for sig, _ in ranked] == ["a", "b", "c"]
    assert dict(ranked) == {"a": 0.80, "b": 0.82, "c": 0.2}  # the best cosine is the fit
    # Only the nearest requests vote; the others rank by their best cosine.
    assert [sig for sig, _ in rank([("a", 3, [0.9, 0.2, 0.2]), ("b", 1, [0.5])], neighbours=1)] == [
        "a",
        "b",
    ]
    assert [sig for sig, _ in rank([("a", 2, [0.3, 0.3]), ("b", 1, [0.5])], neighbours=1)] == [
        "b",
        "a",
    ]
    assert rank([("a", 0, [])]) == []
