"""Procedural memory across the four real processes (issue 39): conversations with tool calls
and outcomes become procedures that Recall hands back, that outcomes correct, that erasure
forgets and that an admin can delete."""

from __future__ import annotations

import json

import grpc
import pytest

from episodic.testing.processes import wait_until
from episodic.v1 import admin_service_pb2 as apb
from episodic.v1 import admin_service_pb2_grpc as ag
from episodic.v1 import episode_pb2 as e
from episodic.v1 import ingest_service_pb2 as ipb
from episodic.v1 import ingest_service_pb2_grpc as ig
from episodic.v1 import recall_service_pb2 as rpb
from episodic.v1 import recall_service_pb2_grpc as rg

pytestmark = pytest.mark.citus  # procedures are dataset tables: they run on Citus too

DATASET = "shop_agent"


def _conversation(request: str, order: str, writes: list[str]) -> list[ipb.NewMessage]:
    """A user's request, a read, then the write calls given (each answered)."""
    out = [
        ipb.NewMessage(role=e.ROLE_USER, content=request),
        ipb.NewMessage(
            role=e.ROLE_ASSISTANT,
            tool_calls=[
                e.ToolCall(
                    id="r1", name="get_order_details", arguments=json.dumps({"order_id": order})
                )
            ],
        ),
        ipb.NewMessage(
            role=e.ROLE_TOOL, content=json.dumps({"status": "pending"}), tool_call_id="r1"
        ),
    ]
    for i, tool in enumerate(writes):
        out.append(
            ipb.NewMessage(
                role=e.ROLE_ASSISTANT,
                content="Doing it now.",
                tool_calls=[
                    e.ToolCall(id=f"w{i}", name=tool, arguments=json.dumps({"order_id": order}))
                ],
            )
        )
        out.append(ipb.NewMessage(role=e.ROLE_TOOL, content='{"ok": true}', tool_call_id=f"w{i}"))
    return out


def test_successful_tool_use_becomes_a_recalled_procedure(spawn) -> None:  # type: ignore[no-untyped-def]
    scheduler = spawn("scheduler", env={"EPISODIC_SCHEDULER_POLL_INTERVAL": "0.2"})
    ingest = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    spawn("summariser", env={"EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"})
    recall = spawn("recall")
    writes = ig.IngestServiceStub(ingest.channel())
    admin = ag.AdminServiceStub(ingest.channel())
    reads = rg.RecallServiceStub(recall.channel())

    def thread(request: str, order: str, tools: list[str], outcome: int | None) -> str:
        t = writes.CreateThread(ipb.CreateThreadRequest(dataset=DATASET), timeout=10).thread
        if outcome is not None:  # an outcome may come before the episode exists
            writes.RecordOutcome(
                ipb.RecordOutcomeRequest(thread_id=t.thread_id, outcome=outcome), timeout=10
            )
        writes.AddMessages(
            ipb.AddMessagesRequest(
                thread_id=t.thread_id, messages=_conversation(request, order, tools)
            ),
            timeout=10,
        )
        writes.EndThread(ipb.EndThreadRequest(thread_id=t.thread_id), timeout=10)
        return t.thread_id

    S, F = e.OUTCOME_SUCCESS, e.OUTCOME_FAILURE
    first = thread(
        "Please cancel my order #W1, I bought it by mistake", "#W1", ["cancel_pending_order"], S
    )
    thread(
        "I'd like to cancel order #W2, it's no longer needed", "#W2", ["cancel_pending_order"], S
    )
    failed = thread("cancel #W3 please", "#W3", ["cancel_pending_order"], F)
    thread("Return the kettle from order #W4", "#W4", ["return_delivered_order_items"], S)
    # No outcome: taught nothing yet.
    pending = thread("Return my lamp, order #W5", "#W5", ["return_delivered_order_items"], None)

    def procedures() -> dict[str, e.Procedure]:
        listed = reads.ListProcedures(rpb.ListProceduresRequest(dataset=DATASET), timeout=10)
        return {p.steps[-1].tool: p for p in listed.procedures}

    def extracted() -> bool:
        """Every thread's episode went through extraction (with or without an outcome)."""
        listed = reads.ListEpisodes(rpb.ListEpisodesRequest(dataset=DATASET), timeout=10)
        done = (e.SEMANTIC_STATUS_COMPLETED, e.SEMANTIC_STATUS_SKIPPED)
        return len(listed.episodes) == 5 and all(x.semantic_status in done for x in listed.episodes)

    def learned() -> dict[str, e.Procedure]:
        if not extracted():
            return {}
        found = procedures()
        cancel = found.get("cancel_pending_order")
        if cancel is None or cancel.success_count + cancel.failure_count < 3:
            return {}
        return found if "return_delivered_order_items" in found else {}

    found = wait_until(learned, timeout=90, message="procedures learned from five threads")
    cancel = found["cancel_pending_order"]
    assert (cancel.success_count, cancel.failure_count) == (2, 1)
    assert [s.tool for s in cancel.steps] == ["get_order_details", "cancel_pending_order"]
    assert cancel.steps[1].writes and not cancel.steps[0].writes
    assert {a.name: a.source for a in cancel.steps[1].arguments} == {"order_id": "user"}
    assert "cancel" in cancel.goal.lower()
    assert {s.outcome for s in cancel.sources} == {e.OUTCOME_SUCCESS, e.OUTCOME_FAILURE}
    assert found["return_delivered_order_items"].success_count == 1

    # Recall hands back the procedure that fits the task, with its support.
    answer = reads.Recall(
        rpb.RecallRequest(
            dataset=DATASET,
            query="a customer wants to cancel an order they placed",
            include=[rpb.RECALL_INCLUDE_PROCEDURES],
        ),
        timeout=30,
    )
    assert not answer.HasField("episodes")  # only what was asked for
    top = answer.procedures[0]
    assert top.procedure.procedure_id == cancel.procedure_id
    assert [s.tool for s in top.procedure.steps][-1] == "cancel_pending_order"
    assert top.relevance > answer.procedures[1].relevance
    fetched = reads.GetProcedure(
        rpb.GetProcedureRequest(dataset=DATASET, procedure_id=cancel.procedure_id), timeout=10
    ).procedure
    assert fetched == cancel

    # The late outcome of the pending thread teaches its procedure.
    writes.RecordOutcome(ipb.RecordOutcomeRequest(thread_id=pending, outcome=S), timeout=10)
    # (Its episode's extraction may still be under way: then the candidate it stores counts.)
    wait_until(
        lambda: procedures()["return_delivered_order_items"].success_count == 2,
        timeout=60,
        message="the late outcome counted",
    )
    # Sending it again changes nothing; correcting it does (the last one stands).
    again = writes.RecordOutcome(ipb.RecordOutcomeRequest(thread_id=pending, outcome=S), timeout=10)
    assert not again.changed
    writes.RecordOutcome(
        ipb.RecordOutcomeRequest(thread_id=first, outcome=F, score=0.1, note="refund never came"),
        timeout=10,
    )
    corrected = procedures()["cancel_pending_order"]
    assert (corrected.success_count, corrected.failure_count) == (1, 2)
    # More failures than successes: Recall leaves it out.
    answer = reads.Recall(
        rpb.RecallRequest(
            dataset=DATASET, query="cancel an order", include=[rpb.RECALL_INCLUDE_PROCEDURES]
        ),
        timeout=30,
    )
    assert cancel.procedure_id not in {p.procedure.procedure_id for p in answer.procedures}

    # Erasing a thread forgets what it taught.
    admin.DeleteThread(apb.DeleteThreadRequest(thread_id=failed), timeout=30)
    assert (procedures()["cancel_pending_order"].failure_count) == 1

    # An admin deletes a procedure: gone, and not learned again.
    deleted = admin.DeleteProcedure(
        apb.DeleteProcedureRequest(dataset=DATASET, procedure_id=cancel.procedure_id), timeout=10
    )
    assert deleted.forgotten_sources == 2
    assert "cancel_pending_order" not in procedures()
    with pytest.raises(grpc.RpcError) as err:
        reads.GetProcedure(
            rpb.GetProcedureRequest(dataset=DATASET, procedure_id=cancel.procedure_id), timeout=10
        )
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_record_outcome_validates_its_input(spawn) -> None:  # type: ignore[no-untyped-def]
    ingest = spawn("ingest")
    writes = ig.IngestServiceStub(ingest.channel())
    t = writes.CreateThread(ipb.CreateThreadRequest(dataset=DATASET), timeout=10).thread
    cases = [
        (ipb.RecordOutcomeRequest(thread_id=t.thread_id), grpc.StatusCode.INVALID_ARGUMENT),
        (
            ipb.RecordOutcomeRequest(thread_id=t.thread_id, outcome=e.OUTCOME_SUCCESS, score=1.5),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            ipb.RecordOutcomeRequest(
                thread_id=t.thread_id, outcome=e.OUTCOME_SUCCESS, score=float("nan")
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            ipb.RecordOutcomeRequest(
                thread_id=t.thread_id, outcome=e.OUTCOME_SUCCESS, note="x" * 2001
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            ipb.RecordOutcomeRequest(thread_id="not-a-uuid", outcome=e.OUTCOME_SUCCESS),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            ipb.RecordOutcomeRequest(
                thread_id="00000000-0000-4000-8000-000000000001", outcome=e.OUTCOME_SUCCESS
            ),
            grpc.StatusCode.NOT_FOUND,
        ),
        (
            ipb.RecordOutcomeRequest(
                thread_id=t.thread_id,
                outcome=e.OUTCOME_SUCCESS,
                episode_id="00000000-0000-4000-8000-000000000002",
            ),
            grpc.StatusCode.NOT_FOUND,
        ),
    ]
    for request, code in cases:
        with pytest.raises(grpc.RpcError) as err:
            writes.RecordOutcome(request, timeout=10)
        assert err.value.code() == code, (request, err.value.details())
    ok = writes.RecordOutcome(
        ipb.RecordOutcomeRequest(thread_id=t.thread_id, outcome=e.OUTCOME_PARTIAL, score=0.5),
        timeout=10,
    )
    assert ok.changed and ok.outcome == e.OUTCOME_PARTIAL and ok.recorded_at.seconds > 0
