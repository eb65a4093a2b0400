"""AddMessages' SQL: one statement that bumps a thread's counter and inserts the batch.

Built once per shape (routed or not, one message or many, keyed, with tool parts) at
import, in psycopg's format, the sealed values and arrays bound in binary; and the same
write as two statements Citus routes to one shard each (:class:`TwoSteps`). Apart from the
write path's rules (:mod:`.writes`) because each shape is its own performance story (the
comments say which benchmark measured what).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from episodic.crypto import DatasetKey, json_text
from episodic.tool_calls import payload

from .model import NewMessage, has_tool_parts

#: The stored messages of a thread that hold one of ``:keys`` — one lookup of the thread's
#: unique index per key. Written as ``idempotency_key = ANY(:keys)`` the plan depended on
#: the statistics: when they say threads are short (or there are none yet) PostgreSQL
#: reads the whole thread through the primary key and filters it, which on a long thread
#: costs its length (6,000 rows read for 100 keys: 1.9 ms against 0.4 ms for the lookups;
#: 34-45 ms on a 10,000-message thread never analysed). ``LIMIT 1`` keeps each lookup a
#: lookup: without it the planner may turn the lateral subquery into a join and choose
#: the scan again.
STORED_KEYS = (
    "SELECT m.sequence, m.role, m.content, m.metadata, m.created_at, m.received_at, "
    "m.idempotency_key, m.tools, m.tool_call_id FROM unnest(CAST(:keys AS text[])) AS k(key) CROSS JOIN LATERAL "
    "(SELECT * FROM messages WHERE dataset = :dataset AND thread_id = :id "
    "AND idempotency_key = k.key LIMIT 1) AS m"
)


def _store_statement(
    check_route: bool, single: bool, keyed: bool = False, tools: bool = False
) -> str:
    # The counter bump and the insert in one statement: the new sequences are
    # last_sequence - n + 1 .. last_sequence, in request order. The UPDATE takes the
    # thread's row lock, which serialises its writers. With ``check_route``, the dataset
    # must still hold the remembered key (a dataset erased and created again has another
    # key id): otherwise no row is bumped, nothing is inserted and nothing is returned.
    # It returns one row whatever the batch size — the new last_sequence and the
    # statement's now(), stored as every row's received_at (and created_at when the
    # client gave none) — from which the receipts follow, instead of RETURNING each row.
    # ``single``: one message, bound as scalars. Most calls carry one message, and five
    # one-element arrays cost the driver ~50 µs of dumping and the server an unnest: the
    # scalar form measured ~30 % less client CPU and ~150 µs less per call
    # (bench/speed/ingest_layers.py, docs/benchmarks.md "AddMessages, fifth pass").
    # In psycopg's format: the routed call sends it without SQLAlchemy
    # (episodic.store.raw_statement), a transaction with exec_driver_sql. The sealed values
    # and the arrays go in binary (``%(…)b``): as text, psycopg hex-escapes every bytea and
    # quotes every array element in Python — 1.2 ms of CPU for 100 messages against
    # 0.4 ms in binary (docs/benchmarks.md "AddMessages, sixth pass").
    # ``keyed`` (the batch carries idempotency keys, none repeated; routed calls only): no
    # row is bumped when one of the keys is stored for the thread already — checked on the
    # statement's snapshot through the unique index on (dataset, thread_id,
    # idempotency_key). A key a concurrent call commits after that snapshot is not seen
    # here, but that call held the thread's row lock this UPDATE waits for, so the INSERT
    # then finds its key in the unique index and the statement fails whole (the caller
    # falls back to the locked transaction, which answers the replay).
    # ``tools`` (a batch with tool calls or results; transactions only, array form): the
    # rows carry their sealed tool parts and answered call ids, and the calls they make go
    # to ``message_tool_calls`` in the same statement.
    bump = _bump_sql(check_route, single, keyed)
    rows = _rows_sql(single, tools, last="b.last_sequence", received="now()", bumped=True)
    if tools:
        return (
            f"WITH bumped AS ({bump}RETURNING last_sequence), "
            f"inserted AS ({_MESSAGES_INSERT_TOOLS}{rows}), "
            f"calls AS ({_calls_sql('b.last_sequence', bumped=True)}) "
            "SELECT last_sequence, now() AS received_at FROM bumped"
        )
    return (
        f"WITH bumped AS ({bump}RETURNING last_sequence), "
        f"inserted AS ({_MESSAGES_INSERT}{rows}) "
        "SELECT last_sequence, now() AS received_at FROM bumped"
    )


_MESSAGES_INSERT = (
    "INSERT INTO messages (dataset, thread_id, sequence, role, content, metadata, created_at, "
    "received_at, idempotency_key) "
)
_MESSAGES_INSERT_TOOLS = (
    "INSERT INTO messages (dataset, thread_id, sequence, role, content, metadata, created_at, "
    "received_at, idempotency_key, tools, tool_call_id) "
)


def _bump_sql(check_route: bool, single: bool, keyed: bool) -> str:
    """The UPDATE that bumps the thread's counter by the batch (its row lock serialises the
    thread's writers), without its RETURNING; see :func:`_store_statement` for the checks."""
    route_check = (
        "AND EXISTS (SELECT 1 FROM datasets d WHERE d.dataset = %(dataset)s "
        "AND d.key_id IS NOT DISTINCT FROM CAST(%(key_id)s AS uuid)) "
    )
    # One lookup of the unique index per key, whatever the statistics say (see STORED_KEYS).
    new_keys = (
        "AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.dataset = %(dataset)s "
        "AND m.thread_id = %(id)s AND m.idempotency_key = CAST(%(ikey)s AS text)) "
        if single
        else "AND NOT EXISTS (SELECT 1 FROM unnest(CAST(%(keys)b AS text[])) AS k(key) "
        "CROSS JOIN LATERAL (SELECT 1 FROM messages m WHERE m.dataset = %(dataset)s "
        "AND m.thread_id = %(id)s AND m.idempotency_key = k.key LIMIT 1) AS hit) "
    )
    return (
        "UPDATE threads SET last_sequence = last_sequence + %(n)s, "
        "last_message_at = now(), last_activity_at = now() "
        "WHERE dataset = %(dataset)s AND thread_id = %(id)s "
        + (route_check if check_route else "")
        + (new_keys if keyed else "")
    )


def _rows_sql(single: bool, tools: bool, *, last: str, received: str, bumped: bool) -> str:
    """The rows the messages' INSERT takes: ``last`` is the thread's new last sequence (an
    expression), ``received`` the call's clock; ``bumped``: read beside the CTE ``bumped b``
    (one statement) — else ``last`` and ``received`` are bound (:func:`_two_steps`), and a
    single message is a VALUES row."""
    created = f"coalesce(CAST(%(created_at)s AS timestamptz), {received})"
    if single and not tools:
        values = (
            f"%(dataset)s, %(id)s, {last}, CAST(%(role)s AS text), "
            f"CAST(%(content)b AS bytea), CAST(%(meta)b AS bytea), {created}, {received}, "
            "CAST(%(ikey)s AS text)"
        )
        return f"SELECT {values} FROM bumped b" if bumped else f"VALUES ({values})"
    source = "bumped b, " if bumped else ""
    arrays = (
        "unnest(CAST(%(roles)b AS text[]), CAST(%(contents)b AS bytea[]), "
        "CAST(%(metas)b AS bytea[]), CAST(%(created)b AS timestamptz[]), CAST(%(keys)b AS text[])"
    )
    if tools:
        return (
            f"SELECT %(dataset)s, %(id)s, {last} - %(n)s + u.i, u.role, u.content, u.meta, "
            f"coalesce(u.created_at, {received}), {received}, u.ikey, u.tools, u.call_id "
            f"FROM {source}{arrays}, CAST(%(tools)b AS bytea[]), "
            "CAST(%(call_ids)b AS text[])) WITH ORDINALITY AS u(role, content, meta, "
            "created_at, ikey, tools, call_id, i)"
        )
    return (
        f"SELECT %(dataset)s, %(id)s, {last} - %(n)s + u.i, u.role, u.content, u.meta, "
        f"coalesce(u.created_at, {received}), {received}, u.ikey "
        f"FROM {source}{arrays}) WITH ORDINALITY AS u(role, content, meta, created_at, ikey, i)"
    )


def _calls_sql(last: str, *, bumped: bool) -> str:
    """The INSERT of the tool calls a batch makes, at their messages' sequences."""
    return (
        "INSERT INTO message_tool_calls (dataset, thread_id, call_id, sequence, tool) "
        f"SELECT %(dataset)s, %(id)s, c.call_id, {last} - %(n)s + c.i, c.tool "
        f"FROM {'bumped b, ' if bumped else ''}unnest(CAST(%(made_ids)b AS text[]), "
        "CAST(%(made_tools)b AS text[]), CAST(%(made_at)b AS bigint[])) AS c(call_id, tool, i)"
    )


@dataclass(frozen=True)
class TwoSteps:
    """The same write as one of :data:`_STATEMENTS` as statements Citus routes to one shard
    each, for a distributed store (``store.shards.distributed``): there the one statement (a
    data-modifying CTE feeding ``INSERT … SELECT``) is planned as subplans whose
    intermediate result goes to every worker, so one worker down failed every dataset's
    writes (tests/test_citus_worker_kill.py). ``bump`` returns the new last sequence and the
    call's clock (the ``last_message_at`` it set: ``now()`` in a RETURNING is refused
    there); ``insert`` (the messages) and ``calls`` (the tool calls the batch makes, when
    it makes any) take them as ``%(last)s`` and ``%(received)s``. Run in one transaction
    (:func:`run_two_steps`): on Citus a routed AddMessages is BEGIN, these and COMMIT."""

    bump: str
    insert: str
    calls: str | None = None


def _two_steps(
    check_route: bool, single: bool, keyed: bool = False, tools: bool = False
) -> TwoSteps:
    last, received = "CAST(%(last)s AS bigint)", "CAST(%(received)s AS timestamptz)"
    rows = _rows_sql(single, tools, last=last, received=received, bumped=False)
    bump = _bump_sql(check_route, single, keyed) + "RETURNING last_sequence, last_message_at"
    if tools:
        return TwoSteps(bump, _MESSAGES_INSERT_TOOLS + rows, _calls_sql(last, bumped=False))
    return TwoSteps(bump, _MESSAGES_INSERT + rows)


def run_two_steps(conn: Connection, steps: TwoSteps, params: dict[str, Any]) -> Any:
    """``steps`` in ``conn``'s transaction: the bump's (last sequence, clock), None when it
    bumped nothing (so nothing was inserted)."""
    bumped = conn.exec_driver_sql(steps.bump, params).first()
    if bumped is None:
        return None
    inserted = {**params, "last": bumped[0], "received": bumped[1]}
    conn.exec_driver_sql(steps.insert, inserted)
    if steps.calls is not None and params["made_ids"]:
        conn.exec_driver_sql(steps.calls, inserted)
    return bumped


# (check_route, single, keyed) of every statement; the transaction checked the keys under
# its lock already, so only routed statements check them.
_SHAPES = [
    (route, single, keyed)
    for route in (False, True)
    for single in (False, True)
    for keyed in ((False, True) if route else (False,))
]
_STATEMENTS = {shape: _store_statement(*shape) for shape in _SHAPES}
_TOOL_STATEMENT = _store_statement(check_route=False, single=False, tools=True)
#: The same in two steps, for a distributed store (:class:`TwoSteps`).
_TWO_STEPS = {shape: _two_steps(*shape) for shape in _SHAPES}
_TOOL_TWO_STEPS = _two_steps(check_route=False, single=False, tools=True)
TWO_STEPS_OF = {_STATEMENTS[k]: _TWO_STEPS[k] for k in _STATEMENTS} | {
    _TOOL_STATEMENT: _TOOL_TWO_STEPS
}


def append_statement(
    data_key: DatasetKey,
    dataset: str,
    thread_id: uuid.UUID,
    messages: list[NewMessage],
    *,
    check_route: bool,
) -> tuple[str, dict[str, Any]]:
    """The statement that bumps the thread's counter and inserts ``messages`` (sealed),
    with its parameters. ``check_route``: it also requires the dataset's current key to be
    ``data_key`` — when it is not (or the thread is not in ``dataset``) it writes nothing
    and returns no row."""
    n = len(messages)
    params: dict[str, Any] = {"dataset": dataset, "id": thread_id, "n": n}
    if not check_route and has_tool_parts(messages):
        return _TOOL_STATEMENT, _tool_params(data_key, messages, params)
    if n == 1:
        (m,) = messages
        params.update(
            role=m.role,
            content=data_key.seal(m.content, "messages.content"),
            meta=sealed_metadata(data_key, m),
            created_at=m.created_at,
            ikey=m.idempotency_key,
        )
    else:
        params.update(
            roles=[m.role for m in messages],
            contents=data_key.seal_many([m.content for m in messages], "messages.content"),
            metas=data_key.seal_many([_metadata_json(m) for m in messages], "messages.metadata"),
            created=[m.created_at for m in messages],
            keys=[m.idempotency_key for m in messages],
        )
    keyed = False
    if check_route:
        params["key_id"] = data_key.key_id
        keyed = any(m.idempotency_key for m in messages)
    return _STATEMENTS[(check_route, n == 1, keyed)], params


def _tool_params(
    data_key: DatasetKey, messages: list[NewMessage], params: dict[str, Any]
) -> dict[str, Any]:
    """The parameters of :data:`_TOOL_STATEMENT`: every column as an array, the tool parts
    sealed, and the calls made as (id, tool, 1-based position in the batch)."""
    payloads = [payload(m.tool_calls, m.name) for m in messages]
    sealed = data_key.seal_many([json_text(p) for p in payloads if p is not None], "messages.tools")
    it = iter(sealed)
    made = [(c.id, c.name, i) for i, m in enumerate(messages, 1) for c in m.tool_calls]
    return {
        **params,
        "roles": [m.role for m in messages],
        "contents": data_key.seal_many([m.content for m in messages], "messages.content"),
        "metas": data_key.seal_many([_metadata_json(m) for m in messages], "messages.metadata"),
        "created": [m.created_at for m in messages],
        "keys": [m.idempotency_key for m in messages],
        "tools": [next(it) if p is not None else None for p in payloads],
        "call_ids": [m.tool_call_id for m in messages],
        "made_ids": [c[0] for c in made],
        "made_tools": [c[1] for c in made],
        "made_at": [c[2] for c in made],
    }


def sealed_metadata(data_key: DatasetKey, message: NewMessage) -> bytes:
    """The message's metadata sealed (see :func:`_metadata_json`)."""
    return data_key.seal(_metadata_json(message), "messages.metadata")


def _metadata_json(message: NewMessage) -> str:
    """The message's metadata as the JSON text that is sealed: what check_new_messages
    encoded when it did, else the text seal_json makes."""
    if message.metadata_json is None:
        return json_text(message.metadata)
    return message.metadata_json
