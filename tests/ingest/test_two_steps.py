"""AddMessages on a distributed store (Citus) takes two statements in one transaction —
the thread's counter bumped, then the messages inserted at the sequences it returned —
because Citus plans the one statement used elsewhere (a data-modifying CTE feeding
``INSERT … SELECT``) as subplans that reach every worker (tests/test_citus_worker_kill.py).
Here the two-step shape runs on one PostgreSQL (the engine marked distributed), so both
shapes are held to the same receipts and rows: one message, a batch, a replayed key,
tool calls, a stale route."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from episodic.config import IngestSettings
from episodic.services.ingest import domain
from episodic.store import shards
from episodic.store.raw_statement import observing_statements
from episodic.testing.keys import test_vault
from episodic.tool_calls import ToolCall
from tests.ingest.helpers import new_thread

SETTINGS = IngestSettings()


@pytest.fixture
def citus_shaped(engine: Engine) -> Iterator[Engine]:
    """``engine``, taken for a distributed store's (its cached answer set)."""
    shards._DISTRIBUTED[engine] = True
    yield engine
    shards._DISTRIBUTED.pop(engine, None)


def _write(engine: Engine, vault, thread_id, routes, messages):  # type: ignore[no-untyped-def]
    return domain.write_messages(engine, vault, thread_id, messages, SETTINGS, routes=routes)


def test_every_shape_of_add_messages_stores_the_same_in_two_steps(citus_shaped: Engine) -> None:
    engine = citus_shaped
    vault = test_vault(encrypt=True)
    routes = domain.ThreadRoutes()
    thread_id = new_thread(engine, vault, "ds-two-steps")
    sent: list[str] = []
    with observing_statements(lambda statement, parameters, driver: sent.append(statement)):
        # the first write looks the thread up in a transaction; later ones take the route
        first = _write(engine, vault, thread_id, routes, [
            domain.NewMessage(role="user", content="one", metadata={}, idempotency_key="k1")
        ])  # fmt: skip
        batch = _write(engine, vault, thread_id, routes, [
            domain.NewMessage(role="user", content=c, metadata={"i": i}, idempotency_key=f"b{i}")
            for i, c in enumerate(("two", "three"))
        ])  # fmt: skip
        single = _write(engine, vault, thread_id, routes, [
            domain.NewMessage(role="assistant", content="four", metadata={})
        ])  # fmt: skip
        replay = _write(engine, vault, thread_id, routes, [
            domain.NewMessage(role="user", content="one", metadata={}, idempotency_key="k1")
        ])  # fmt: skip
        tools = _write(engine, vault, thread_id, routes, [
            domain.NewMessage(role="assistant", content="", metadata={},
                              tool_calls=(ToolCall("call_1", "lookup", '{"q": 1}'),)),
            domain.NewMessage(role="tool", content="42", metadata={}, tool_call_id="call_1",
                              name="lookup"),
        ])  # fmt: skip
    assert [r.sequence for r in first.receipts] == [1]
    assert [r.sequence for r in batch.receipts] == [2, 3]
    assert [r.sequence for r in single.receipts] == [4]
    assert replay.stored_count == 0 and [r.sequence for r in replay.receipts] == [1]
    assert [r.sequence for r in tools.receipts] == [5, 6]
    # the same clock for the counter and the rows: received_at is the bump's last_message_at
    assert batch.receipts[0].received_at == batch.receipts[1].received_at
    assert all(r.created_at == r.received_at for r in batch.receipts)
    # the two-step statements, never the CTE of one PostgreSQL
    assert not any("WITH bumped" in s for s in sent)
    assert sum(s.startswith("UPDATE threads SET last_sequence") for s in sent) >= 4

    with engine.begin() as conn:
        page = domain.list_messages(
            conn, vault, thread_id, dataset="ds-two-steps", after_sequence=0,
            end_sequence=None, limit=100,
        )  # fmt: skip
        calls = conn.execute(
            text("SELECT call_id, sequence, tool FROM message_tool_calls WHERE thread_id = :t"),
            {"t": thread_id},
        ).all()
        last = conn.execute(
            text("SELECT last_sequence FROM threads WHERE thread_id = :t"), {"t": thread_id}
        ).scalar_one()
    assert [(m["sequence"], m["content"]) for m in page.messages] == [
        (1, "one"), (2, "two"), (3, "three"), (4, "four"), (5, ""), (6, "42"),
    ]  # fmt: skip
    assert [tuple(c) for c in calls] == [("call_1", 5, "lookup")]
    assert last == 6
