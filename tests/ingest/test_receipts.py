"""AddMessages' receipts, built with their times shared (services/ingest/servicer.py
``_add_receipts``), against each receipt built on its own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from episodic import convert
from episodic.services.ingest.domain import Receipt
from episodic.services.ingest.servicer import _add_receipts
from episodic.v1 import ingest_service_pb2 as pb


def _one_by_one(receipts: list[Receipt]) -> pb.AddMessagesResponse:
    return pb.AddMessagesResponse(
        receipts=[
            pb.MessageReceipt(
                sequence=r.sequence,
                idempotency_key=r.idempotency_key or "",
                stored=r.stored,
                created_at=convert.ts(r.created_at),
                received_at=convert.ts(r.received_at),
            )
            for r in receipts
        ]
    )


def test_receipts_match_one_by_one_with_shared_and_distinct_times() -> None:
    now = datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC)
    earlier = now - timedelta(days=3, microseconds=7)
    receipts = [
        Receipt(1, None, True, now, now),
        Receipt(2, "k-2", True, now, now),
        Receipt(3, "k-3", False, earlier, now - timedelta(hours=1)),  # a replay: its own times
        Receipt(4, None, True, earlier, now),  # a client-set created_at
        Receipt(5, "", True, now, now),
    ]
    response = pb.AddMessagesResponse()
    _add_receipts(response, receipts)
    assert response == _one_by_one(receipts)
    assert [r.created_at.ToDatetime(tzinfo=UTC) for r in response.receipts] == [
        now,
        now,
        earlier,
        earlier,
        now,
    ]
    assert response.receipts[2].received_at.ToDatetime(tzinfo=UTC) == now - timedelta(hours=1)
    assert [r.stored for r in response.receipts] == [True, True, False, True, True]


def test_receipts_of_an_empty_batch() -> None:
    response = pb.AddMessagesResponse()
    _add_receipts(response, [])
    assert len(response.receipts) == 0


def test_a_single_receipt_with_one_time_or_two() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    for receipt in (
        Receipt(7, "k", True, now, now),
        Receipt(7, None, False, now - timedelta(days=1), now),  # backfilled created_at
    ):
        response = pb.AddMessagesResponse()
        _add_receipts(response, [receipt])
        assert response == _one_by_one([receipt])
