"""Idempotency keys are looked up one by one in the thread's unique index, whatever the
table's statistics say. Written as ``idempotency_key = ANY(keys)``, PostgreSQL read the
whole thread through the primary key and filtered it whenever its statistics described
short threads (or there were none yet): a keyed batch on a long thread then cost the
thread's length. The statistics here are made to mislead on purpose — analysed while every
thread was short, then one thread grows long — and each statement's plan must still read
no message it then throws away."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Engine

from episodic.config import IngestSettings
from episodic.services.ingest import domain
from episodic.testing.keys import test_vault
from tests.ingest.helpers import new_thread

SETTINGS = IngestSettings()
DATASET = "ds-key-lookups"


def _keyed(prefix: str, n: int) -> list[domain.NewMessage]:
    return [
        domain.NewMessage(
            role="user", content=f"{prefix} {i}", metadata={}, idempotency_key=f"{prefix}:{i}"
        )
        for i in range(n)
    ]


def _message_scans(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of ``plan`` that reads a partition of ``messages``."""
    found = []
    if str(plan.get("Relation Name", "")).startswith("messages"):
        found.append(plan)
    for child in plan.get("Plans", []):
        found.extend(_message_scans(child))
    return found


def _explain(engine: Engine, statement: str, params: dict[str, Any], *, driver: bool) -> Any:
    """The executed plan of ``statement`` (rolled back: nothing it writes is kept)."""
    with engine.connect() as conn:
        transaction = conn.begin()
        try:
            explain = "EXPLAIN (ANALYZE, FORMAT JSON) " + statement
            result = (
                conn.exec_driver_sql(explain, params)
                if driver
                else conn.execute(text(explain), params)
            )
            return result.scalar_one()[0]["Plan"]
        finally:
            transaction.rollback()


def _long_thread_under_short_thread_statistics(engine: Engine, vault: Any) -> uuid.UUID:
    routes = domain.ThreadRoutes()
    for t in range(200):
        short = new_thread(engine, vault, DATASET)
        domain.write_messages(engine, vault, short, _keyed(f"s{t}", 5), SETTINGS, routes=routes)
    with engine.begin() as conn:
        conn.execute(text("ANALYZE messages"))
    long = new_thread(engine, vault, DATASET)
    for b in range(30):
        domain.write_messages(engine, vault, long, _keyed(f"b{b}", 100), SETTINGS, routes=routes)
    return long


def test_key_lookups_read_only_the_keys_index_entries(engine: Engine) -> None:
    vault = test_vault(encrypt=True)
    thread_id = _long_thread_under_short_thread_statistics(engine, vault)
    keys = [f"new:{i}" for i in range(98)] + ["b3:7", "b29:99"]  # two stored already

    # The locked transaction's lookup: finds exactly the stored keys...
    params = {"dataset": DATASET, "id": thread_id, "keys": keys}
    with engine.connect() as conn:
        found = conn.execute(text(domain.STORED_KEYS), params).mappings().all()
    assert sorted(r["idempotency_key"] for r in found) == ["b29:99", "b3:7"]
    # ...reading only their index entries (3,000 messages in the thread).
    scans = _message_scans(_explain(engine, domain.STORED_KEYS, params, driver=False))
    assert scans and all(s.get("Rows Removed by Filter", 0) == 0 for s in scans), scans
    assert sum(s["Actual Rows"] * s["Actual Loops"] for s in scans) == 2
    assert all("idempotency" in s.get("Index Name", "") for s in scans), scans

    # The routed statement's check that every key is new, the same way.
    route = domain.ThreadRoutes()
    domain.write_messages(engine, vault, thread_id, _keyed("warm", 1), SETTINGS, routes=route)
    dataset, data_key = route.get(thread_id)  # type: ignore[misc]
    statement, params = domain.append_statement(
        data_key, dataset, thread_id, _keyed("new", 100), check_route=True
    )
    scans = _message_scans(_explain(engine, statement, params, driver=True))
    lookups = [s for s in scans if s["Node Type"] != "ModifyTable"]
    assert lookups and all(s.get("Rows Removed by Filter", 0) == 0 for s in lookups), lookups
    assert all("idempotency" in s.get("Index Name", "") for s in lookups), lookups
