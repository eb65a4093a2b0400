"""RecordEvent's rules, free of gRPC: what an agent may record as an event, checked
before anything is written (storage: :mod:`episodic.store.events`)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from episodic.config import IngestSettings
from episodic.errors import InvalidArgument
from episodic.providers.entities import normalise_entity
from episodic.store.events import BUILT_IN_TYPES, NewEvent, check_event_type_form

MAX_ACTOR_CHARS = 128
MAX_SUMMARY_CHARS = 4096
MAX_ENTITIES = 50
MAX_ENTITY_CHARS = 200
MAX_IDEMPOTENCY_KEY_CHARS = 128


def _text(value: str, field: str, max_chars: int, *, required: bool) -> str:
    value = value.strip()
    if required and not value:
        raise InvalidArgument(f"{field} is required", field=field)
    if len(value) > max_chars:
        raise InvalidArgument(
            f"{field} is {len(value)} characters; the limit is {max_chars}", field=field
        )
    if "\x00" in value:
        raise InvalidArgument(
            f"{field} contains a NUL character, which cannot be stored", field=field
        )
    return value


def check_event_type(value: str) -> str:
    value = value.strip()
    if not value:
        raise InvalidArgument(
            f"event_type is required: one of {', '.join(BUILT_IN_TYPES)}, or a custom type",
            field="event_type",
        )
    return check_event_type_form(value)


def check_entities(values: list[str]) -> tuple[str, ...]:
    if len(values) > MAX_ENTITIES:
        raise InvalidArgument(
            f"{len(values)} entities; at most {MAX_ENTITIES} may be given", field="entities"
        )
    out: list[str] = []
    for i, raw in enumerate(values):
        _text(raw, f"entities[{i}]", MAX_ENTITY_CHARS, required=False)
        normalised = normalise_entity(raw)
        if not normalised:
            raise InvalidArgument(
                f"entities[{i}] {raw[:80]!r} is empty once normalised", field=f"entities[{i}]"
            )
        if normalised not in out:
            out.append(normalised)
    return tuple(out)


def check_new_event(
    *,
    dataset: str,
    actor: str,
    event_type: str,
    summary: str,
    entities: list[str],
    occurred_at: datetime | None,
    thread_id: uuid.UUID | None,
    idempotency_key: str,
    settings: IngestSettings,
    now: datetime | None = None,
) -> NewEvent:
    """The event as it will be stored; INVALID_ARGUMENT names the first bad field."""
    checked_actor = _text(actor, "actor", MAX_ACTOR_CHARS, required=True)
    checked_type = check_event_type(event_type)
    checked_summary = _text(summary, "summary", MAX_SUMMARY_CHARS, required=True)
    checked_entities = check_entities(entities)
    latest_allowed = (now or datetime.now(UTC)) + settings.future_timestamp_tolerance
    if occurred_at is not None and occurred_at > latest_allowed:
        raise InvalidArgument(
            f"occurred_at {occurred_at.isoformat()} is in the future (more than "
            f"{settings.future_timestamp_tolerance} ahead of the server clock); record an "
            "event once it has happened",
            field="occurred_at",
        )
    key = idempotency_key
    if len(key) > MAX_IDEMPOTENCY_KEY_CHARS:
        raise InvalidArgument(
            f"idempotency_key is longer than {MAX_IDEMPOTENCY_KEY_CHARS} characters",
            field="idempotency_key",
        )
    if "\x00" in key:
        raise InvalidArgument("idempotency_key contains a NUL character", field="idempotency_key")
    return NewEvent(
        dataset=dataset,
        actor=checked_actor,
        event_type=checked_type,
        summary=checked_summary,
        entities=checked_entities,
        occurred_at=occurred_at,
        thread_id=thread_id,
        idempotency_key=key or None,
    )
