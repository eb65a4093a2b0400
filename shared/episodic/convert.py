"""Conversions between database rows and protobuf messages, in one place."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2

from episodic import tool_calls
from episodic.errors import InvalidArgument
from episodic.v1 import admin_service_pb2, entity_pb2, episode_pb2

ROLE_TO_PROTO = {
    "system": episode_pb2.ROLE_SYSTEM,
    "user": episode_pb2.ROLE_USER,
    "assistant": episode_pb2.ROLE_ASSISTANT,
    "tool": episode_pb2.ROLE_TOOL,
}
ROLE_FROM_PROTO: dict[int, str] = {int(v): k for k, v in ROLE_TO_PROTO.items()}
OUTCOME_TO_PROTO = {
    "success": episode_pb2.OUTCOME_SUCCESS,
    "failure": episode_pb2.OUTCOME_FAILURE,
    "partial": episode_pb2.OUTCOME_PARTIAL,
}
OUTCOME_FROM_PROTO: dict[int, str] = {int(v): k for k, v in OUTCOME_TO_PROTO.items()}

# Every status the store produces (episodes.STATUSES); EPISODE_STATUS_DELETED is reserved
# by the design and never produced, so it maps to nothing.
STATUS_TO_PROTO = {
    "pending": episode_pb2.EPISODE_STATUS_PENDING,
    "processing": episode_pb2.EPISODE_STATUS_PROCESSING,
    "completed": episode_pb2.EPISODE_STATUS_COMPLETED,
    "failed": episode_pb2.EPISODE_STATUS_FAILED,
    "archived": episode_pb2.EPISODE_STATUS_ARCHIVED,
}
STATUS_FROM_PROTO: dict[int, str] = {int(v): k for k, v in STATUS_TO_PROTO.items()}

SEMANTIC_TO_PROTO = {
    "pending": episode_pb2.SEMANTIC_STATUS_PENDING,
    "processing": episode_pb2.SEMANTIC_STATUS_PROCESSING,
    "completed": episode_pb2.SEMANTIC_STATUS_COMPLETED,
    "failed": episode_pb2.SEMANTIC_STATUS_FAILED,
    "skipped": episode_pb2.SEMANTIC_STATUS_SKIPPED,
}

TRIGGER_TO_PROTO = {
    "explicit": episode_pb2.EPISODE_TRIGGER_EXPLICIT,
    "new_thread": episode_pb2.EPISODE_TRIGGER_NEW_THREAD,
    "inactivity": episode_pb2.EPISODE_TRIGGER_INACTIVITY,
    "backstop": episode_pb2.EPISODE_TRIGGER_BACKSTOP,
    "manual": episode_pb2.EPISODE_TRIGGER_MANUAL,
}
TRIGGER_FROM_PROTO: dict[int, str] = {int(v): k for k, v in TRIGGER_TO_PROTO.items()}
EVENT_SOURCE_TO_PROTO = {
    "agent": episode_pb2.EVENT_SOURCE_AGENT,
    "classifier": episode_pb2.EVENT_SOURCE_CLASSIFIER,
}


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def ts_fields(value: datetime | None) -> dict[str, int] | None:
    """``value`` (naive: UTC) as a Timestamp's fields, for a message's constructor — what
    ``Timestamp.FromDatetime`` computes, in integers, at a quarter of the cost of building
    the Timestamp (its Python ``FromDatetime`` and the copy into the message): four per
    episode of every Recall answer (docs/benchmarks.md "Recall, sixth pass")."""
    if value is None:
        return None
    delta = (value if value.tzinfo else value.replace(tzinfo=UTC)) - _EPOCH
    return {"seconds": delta.days * 86_400 + delta.seconds, "nanos": delta.microseconds * 1000}


def ts(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    fields = ts_fields(value)
    return None if fields is None else timestamp_pb2.Timestamp(**fields)


def from_ts(value: timestamp_pb2.Timestamp) -> datetime:
    return value.ToDatetime(tzinfo=UTC)


def optional_from_ts(message: Any, field: str, where: str | None = None) -> datetime | None:
    """Reads a Timestamp field of a request that may be unset (unset means None, not the
    epoch); one outside what a Timestamp may hold (nanos out of range, beyond year 9999)
    is INVALID_ARGUMENT naming ``where`` (the field's path in the request: default
    ``field``) and what is allowed."""
    if not message.HasField(field):
        return None
    value = getattr(message, field)
    try:
        return from_ts(value)
    except (ValueError, OverflowError):
        where = where or field
        why = (
            "nanos must be 0 to 999999999"
            if not 0 <= value.nanos <= 999_999_999
            else "it must lie between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z"
        )
        raise InvalidArgument(
            f"{where} is not a valid timestamp: {why} (got seconds={value.seconds}, "
            f"nanos={value.nanos})",
            field=where,
        ) from None


def struct(value: Mapping[str, Any] | str | None) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    data = json.loads(value) if isinstance(value, str) else value
    if data:
        out.update(dict(data))
    return out


def struct_to_dict(value: struct_pb2.Struct, field: str = "metadata") -> dict[str, Any]:
    """The Struct as plain JSON data; a value JSON cannot hold (NaN, ±inf) is bad input.

    The same values as ``json_format.MessageToDict`` (tests/ingest/test_struct_conversion.py),
    in about half its time: every message of an AddMessages batch carries a Struct, and the
    generic converter's per-field descriptor lookups were ~4 µs of each."""
    try:
        return {key: _json_value(item) for key, item in value.fields.items()}
    except ValueError:
        raise InvalidArgument(
            f"{field} contains NaN or an infinity, which JSON cannot hold", field=field
        ) from None


def _json_value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        number = value.number_value
        if math.isinf(number) or math.isnan(number):
            raise ValueError("JSON cannot hold NaN or an infinity")
        return number
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return {key: _json_value(item) for key, item in value.struct_value.fields.items()}
    if kind == "list_value":
        return [_json_value(item) for item in value.list_value.values]
    return None  # null_value, or no kind set (MessageToDict's None as well)


def thread(row: Mapping[Any, Any]) -> episode_pb2.Thread:
    return episode_pb2.Thread(
        thread_id=str(row["thread_id"]),
        dataset=row["dataset"],
        label=row["label"] or "",
        metadata=struct(row["metadata"]),
        message_count=row["last_sequence"],
        captured_sequence=row["captured_sequence"],
        created_at=ts(row["created_at"]),
        last_message_at=ts(row["last_message_at"]),
        ended_at=ts(row["ended_at"]),
        compaction=compaction(row),
    )


def compaction(row: Mapping[Any, Any]) -> episode_pb2.ThreadCompaction | None:
    """A thread row's compaction (None when it was never compacted); ``compaction_episode``
    (the current episode's id and summary) is attached by the ingest domain."""
    if row.get("compacted_at") is None:
        return None
    episode = row.get("compaction_episode") or {}
    return episode_pb2.ThreadCompaction(
        compacted_at=ts(row["compacted_at"]),
        through_sequence=row["compacted_through"],
        content_digest=row["compacted_digest"] or "",
        episode_id=str(episode.get("episode_id") or ""),
        summary=episode.get("summary") or "",
    )


def receipt(value: Any) -> admin_service_pb2.ErasureReceipt:
    """An :class:`episodic.store.erasure.Receipt` as the API returns it."""
    return admin_service_pb2.ErasureReceipt(
        receipt_id=value.receipt_id,
        scope=value.scope,
        dataset=value.dataset,
        dataset_digest=value.dataset_digest,
        thread_id=value.thread_id,
        rows_deleted={t: int(n) for t, n in value.rows.items()},
        started_at=ts(value.started_at),
        finished_at=ts(value.finished_at),
        data_key_destroyed=value.data_key_destroyed,
        audit_events_pseudonymised=value.audit_events_pseudonymised,
        api_keys_scrubbed=value.api_keys_scrubbed,
        digest=value.digest,
    )


def message(row: Mapping[Any, Any]) -> episode_pb2.Message:
    calls, name = tool_calls.from_payload(row.get("tools"))
    return episode_pb2.Message(
        thread_id=str(row["thread_id"]),
        sequence=row["sequence"],
        role=ROLE_TO_PROTO[row["role"]],
        content=row["content"],
        metadata=struct(row["metadata"]),
        created_at=ts(row["created_at"]),
        received_at=ts(row["received_at"]),
        idempotency_key=row["idempotency_key"] or "",
        tool_calls=[
            episode_pb2.ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in calls
        ],
        tool_call_id=row.get("tool_call_id") or "",
        name=name,
    )


def procedure(row: Mapping[Any, Any]) -> episode_pb2.Procedure:
    """A procedure as stored (store/procedures.py opens its sealed parts)."""
    return episode_pb2.Procedure(
        procedure_id=str(row["procedure_id"]),
        dataset=row["dataset"],
        goal=row["goal"],
        example_goals=list(row["example_goals"]),
        steps=[
            episode_pb2.ProcedureStep(
                tool=s.tool,
                purpose=s.purpose,
                writes=s.writes,
                arguments=[
                    episode_pb2.ProcedureArgument(name=n, source=src) for n, src in s.arguments
                ],
            )
            for s in row["steps"]
        ],
        success_count=row["success_count"],
        failure_count=row["failure_count"],
        partial_count=row["partial_count"],
        sources=[
            episode_pb2.ProcedureSource(
                thread_id=src["thread_id"],
                episode_id=src["episode_id"],
                outcome=OUTCOME_TO_PROTO.get(
                    src.get("outcome") or "", episode_pb2.OUTCOME_UNSPECIFIED
                ),
            )
            for src in row["sources"]
        ],
        created_at=ts(row["created_at"]),
        updated_at=ts(row["updated_at"]),
        extractor=row["extractor"],
    )


def episode(row: Mapping[Any, Any]) -> episode_pb2.Episode:
    learnings = row.get("key_learnings") or []
    if isinstance(learnings, str):
        learnings = json.loads(learnings)
    is_event = row.get("kind") == "event"
    return episode_pb2.Episode(
        episode_id=str(row["episode_id"]),
        thread_id=str(row["thread_id"]) if row["thread_id"] is not None else "",
        dataset=row["dataset"],
        status=STATUS_TO_PROTO[row["status"]],
        semantic_status=SEMANTIC_TO_PROTO[row["semantic_status"]],
        summary=row.get("summary") or "",
        key_learnings=list(learnings),
        entities=list(row.get("entities") or []),
        event_type=row.get("event_type") or "",
        actor=row.get("actor") or "",
        message_count=row["message_count"],
        start_sequence=row["start_sequence"],
        end_sequence=row["end_sequence"],
        started_at=ts_fields(row["started_at"]),
        ended_at=ts_fields(row["ended_at"]),
        trigger=(
            TRIGGER_TO_PROTO[row["trigger"]]
            if not is_event
            else episode_pb2.EPISODE_TRIGGER_UNSPECIFIED
        ),
        retry_count=row.get("retry_count") or 0,
        error=row.get("error") or "",
        created_at=ts_fields(row["created_at"]),
        updated_at=ts_fields(row["updated_at"]),
        thread_label=row.get("thread_label") or "",
        kind=episode_pb2.EPISODE_KIND_EVENT if is_event else episode_pb2.EPISODE_KIND_SUMMARY,
        event_source=EVENT_SOURCE_TO_PROTO.get(
            row.get("event_source") or "", episode_pb2.EVENT_SOURCE_UNSPECIFIED
        ),
        chunks_pending=bool(row.get("chunks_pending")),
    )


def api_key(row: Mapping[Any, Any]) -> admin_service_pb2.ApiKey:
    return admin_service_pb2.ApiKey(
        key_id=str(row["key_id"]),
        prefix=f"ek_{row['prefix']}",
        name=row["name"] or "",
        role=f"ACCESS_ROLE_{row['role'].upper()}",  # protobuf takes the enum value name
        datasets=list(row["datasets"]),
        created_at=ts(row["created_at"]),
        expires_at=ts(row["expires_at"]),
        revoked_at=ts(row["revoked_at"]),
        created_by=row["created_by"] or "",
    )


def audit_event(row: Mapping[Any, Any]) -> admin_service_pb2.AuditEvent:
    return admin_service_pb2.AuditEvent(
        event_id=row["event_id"],
        occurred_at=ts(row["occurred_at"]),
        key_prefix=row["key_prefix"],
        action=row["action"],
        dataset=row["dataset"] or "",
        target=row["target"] or "",
        details=struct(row["details"]),
    )


def entity(value: Any) -> entity_pb2.Entity:
    """A canonical entity (:class:`episodic.store.entities.Entity`, opened)."""
    return entity_pb2.Entity(
        entity_id=str(value.entity_id),
        name=value.name,
        aliases=[
            entity_pb2.EntityAlias(alias=alias, episode_count=count)
            for alias, count in value.aliases
        ],
        episode_count=value.episode_count,
        created_at=ts(value.created_at),
    )
