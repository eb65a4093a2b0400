"""AddMessages on a distributed store (Citus) takes two statements in one transaction —
the thread's counter bumped, then the messages inserted at the sequences it returned —
because Citus plans the one statement used elsewhere (a data-modifying CTE feeding
``INSERT … SELECT``) as subplans that reach every worker (tests/test_citus_worker_kill.py).
Here both shapes run on one PostgreSQL (the engine taken for a distributed store's, or
not) through the same calls — every shape of the write: the first write's transaction,
remembered routes with and without keys, one message and a batch, a replayed key, tool
calls and results, a stale route — and must answer the same receipts and store the same
rows."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from episodic.config import IngestSettings
from episodic.services.ingest import domain
from episodic.store import shards
from episodic.store.raw_statement import observing_statements
from episodic.store.vault import Vault
from episodic.testing.keys import test_vault
from episodic.tool_calls import ToolCall
from tests.ingest.helpers import new_thread

SETTINGS = IngestSettings()


def _m(content: str, key: str | None = None, role: str = "user", **kw: Any) -> domain.NewMessage:
    return domain.NewMessage(role=role, content=content, metadata={"c": content},
                             idempotency_key=key, **kw)  # fmt: skip


def _calls(engine: Engine, vault: Vault, dataset: str) -> tuple[list, list[str]]:  # type: ignore[type-arg]
    """The same calls on a new thread of ``dataset``: each call's receipts (sequence,
    stored) and stored count, and the statements sent."""
    thread_id = new_thread(engine, vault, dataset)
    routes = domain.ThreadRoutes()
    with engine.begin() as conn:  # another dataset's key: a route that went stale
        stale_key = vault.for_write(conn, dataset + "-other")
    batches: list[Any] = [
        [_m("one", "k1")],  # the first write: the lookup's transaction
        [_m("two", "k2"), _m("three", "k3")],  # routed, keyed batch
        [_m("four", role="assistant")],  # routed, one message, no key
        [_m("five"), _m("six")],  # routed batch, no keys
        [_m("one", "k1")],  # a replay: nothing stored, the first receipt
        "stale",  # the route's key is another dataset's: the transaction decides
        [
            _m("", role="assistant", tool_calls=(ToolCall("call_1", "lookup", '{"q": 1}'),)),
            _m("42", role="tool", tool_call_id="call_1", name="lookup"),
        ],  # tool parts: the transaction, with the calls made
        [_m("43", role="tool", tool_call_id="call_1", name="lookup")],  # a result alone
    ]
    answers = []
    sent: list[str] = []
    with observing_statements(lambda statement, parameters, driver: sent.append(statement)):
        for batch in batches:
            if batch == "stale":
                routes.remember(thread_id, dataset, stale_key)
                batch = [_m("seven", "k7")]
            result = domain.write_messages(engine, vault, thread_id, batch, SETTINGS, routes=routes)
            answers.append((result.stored_count, [(r.sequence, r.stored) for r in result.receipts]))
            if result.stored_count:  # one clock for the counter and the rows
                assert len({r.received_at for r in result.receipts}) == 1
    with engine.begin() as conn:
        page = domain.list_messages(conn, vault, thread_id, dataset=dataset, after_sequence=0,
                                    end_sequence=None, limit=100)  # fmt: skip
        rows = [
            (m["sequence"], m["role"], m["content"], m["metadata"], m["idempotency_key"],
             m["created_at"] == m["received_at"])
            for m in page.messages
        ]  # fmt: skip
        calls = conn.execute(
            text("SELECT call_id, sequence, tool FROM message_tool_calls WHERE thread_id = :t"),
            {"t": thread_id},
        ).all()
        last = conn.execute(
            text("SELECT last_sequence FROM threads WHERE thread_id = :t"), {"t": thread_id}
        ).scalar_one()
    return [answers, rows, [tuple(c) for c in calls], last], sent


@pytest.fixture
def vault() -> Vault:
    return test_vault(encrypt=True)


def test_the_two_steps_answer_and_store_what_the_one_statement_does(
    engine: Engine, vault: Vault
) -> None:
    one, sent_one = _calls(engine, vault, f"ds-one-{uuid.uuid4().hex[:6]}")
    shards._DISTRIBUTED[engine] = True  # taken for a Citus store's from here on
    try:
        two, sent_two = _calls(engine, vault, f"ds-two-{uuid.uuid4().hex[:6]}")
    finally:
        shards._DISTRIBUTED.pop(engine, None)
    assert two == one
    answers, rows, calls, last = two
    assert [a[1] for a in answers] == [
        [(1, True)], [(2, True), (3, True)], [(4, True)], [(5, True), (6, True)],
        [(1, False)], [(7, True)], [(8, True), (9, True)], [(10, True)],
    ]  # fmt: skip
    assert [r[:3] for r in rows][-4:] == [
        (7, "user", "seven"), (8, "assistant", ""), (9, "tool", "42"), (10, "tool", "43")
    ]  # fmt: skip
    assert calls == [("call_1", 8, "lookup")] and last == 10
    # each shape took its own statement: the CTE on one PostgreSQL, the steps on "Citus"
    assert any("WITH bumped" in s for s in sent_one)
    assert not any("WITH bumped" in s for s in sent_two)
    bumps = [s for s in sent_two if s.startswith("UPDATE threads SET last_sequence")]
    assert len(bumps) >= 7 and any("%(key_id)s" in s for s in bumps)
    # the calls' insert only when the batch makes calls (the results alone make none)
    assert sum(s.startswith("INSERT INTO message_tool_calls") for s in sent_two) == 1
