"""The Recall answer's conversions, made cheaper (docs/benchmarks.md "Recall, sixth pass"),
give exactly what the slower forms gave."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from google.protobuf import timestamp_pb2

from episodic import convert

MOMENTS = [
    datetime(2026, 11, 30, 16, 11, 20, 753856, tzinfo=UTC),
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(1969, 12, 31, 23, 59, 59, 1, tzinfo=UTC),  # before the epoch: negative seconds
    datetime(2026, 3, 1, 0, 30, tzinfo=timezone(timedelta(hours=-5))),  # not UTC
    datetime(2026, 3, 1, 0, 30, tzinfo=timezone(timedelta(hours=5, minutes=45))),
    datetime(2026, 3, 1, 1, 2, 3, 4),  # naive: UTC
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
]


def _from_datetime(value: datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(value if value.tzinfo else value.replace(tzinfo=UTC))
    return out


@pytest.mark.parametrize("moment", MOMENTS, ids=str)
def test_a_timestamp_is_what_from_datetime_gives(moment: datetime) -> None:
    assert convert.ts(moment) == _from_datetime(moment)
    assert timestamp_pb2.Timestamp(**convert.ts_fields(moment)) == _from_datetime(moment)  # type: ignore[arg-type]


def test_no_moment_is_no_timestamp() -> None:
    assert convert.ts(None) is None
    assert convert.ts_fields(None) is None


def test_an_episodes_times_are_its_rows() -> None:
    moments = MOMENTS[:4]
    row = {
        "episode_id": uuid.uuid4(),
        "thread_id": uuid.uuid4(),
        "dataset": "ds",
        "status": "completed",
        "semantic_status": "skipped",
        "summary": "a summary",
        "key_learnings": ["one"],
        "entities": ["atlas"],
        "message_count": 8,
        "start_sequence": 1,
        "end_sequence": 8,
        "started_at": moments[0],
        "ended_at": moments[1],
        "trigger": "explicit",
        "created_at": moments[2],
        "updated_at": moments[3],
    }
    episode = convert.episode(row)
    for field, moment in zip(
        ("started_at", "ended_at", "created_at", "updated_at"), moments, strict=True
    ):
        assert getattr(episode, field) == _from_datetime(moment), field
        assert getattr(episode, field).ToDatetime(tzinfo=UTC) == moment
