"""The fuzz suite's "a rejected call stored nothing" check stands on ``store_fingerprint``:
it must see every row change, including rows of partitioned tables (most of ours are)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from episodic.store.db import make_engine
from episodic.testing.database import TestDatabases
from episodic.testing.fuzz import fingerprint_changes, store_fingerprint


@pytest.fixture
def engine(databases: TestDatabases) -> Iterator[Engine]:
    url = databases.create(migrated=False)
    engine = make_engine(url, pool_size=1)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE plain (id int PRIMARY KEY, v text)"))
        conn.execute(text("CREATE TABLE parted (id int, v text) PARTITION BY HASH (id)"))
        for r in range(2):
            conn.execute(
                text(
                    f"CREATE TABLE parted_p{r} PARTITION OF parted "
                    f"FOR VALUES WITH (MODULUS 2, REMAINDER {r})"
                )
            )
    try:
        yield engine
    finally:
        engine.dispose()
        databases.drop(url)


def _changed(engine: Engine, statement: str) -> list[str]:
    before = store_fingerprint(engine)
    with engine.begin() as conn:
        conn.execute(text(statement))
    return fingerprint_changes(before, store_fingerprint(engine))


def _partition_of(engine: Engine, row_id: int) -> str:
    with engine.connect() as conn:
        return str(
            conn.execute(
                text("SELECT tableoid::regclass::text FROM parted WHERE id = :id"), {"id": row_id}
            ).scalar_one()
        )


def test_sees_rows_added_changed_and_removed_in_partitions_and_plain_tables(
    engine: Engine,
) -> None:
    # Every table that holds rows, each row counted once (in its leaf partition).
    assert set(store_fingerprint(engine)) == {"plain", "parted_p0", "parted_p1"}

    assert _changed(engine, "INSERT INTO parted VALUES (1, 'a')") == [
        f"{_partition_of(engine, 1)}: 0 -> 1 rows"
    ]
    assert _changed(engine, "UPDATE parted SET v = 'b' WHERE id = 1") == [
        f"{_partition_of(engine, 1)}: contents changed (1 rows)"
    ]
    assert _changed(engine, "UPDATE parted SET v = v") == []  # same contents, same snapshot
    partition = _partition_of(engine, 1)
    assert _changed(engine, "DELETE FROM parted WHERE id = 1") == [f"{partition}: 1 -> 0 rows"]

    assert _changed(engine, "INSERT INTO plain VALUES (1, 'p')") == ["plain: 0 -> 1 rows"]
    assert _changed(engine, "UPDATE plain SET v = 'q'") == ["plain: contents changed (1 rows)"]
    assert _changed(engine, "CREATE TABLE later (id int)") == ["later: table appeared"]
