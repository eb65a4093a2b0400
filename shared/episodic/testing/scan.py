"""Whole-database scans for privacy tests: every column of every table, found from the
catalog, so a table added later is covered without anyone remembering to add it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Connection, text

__all__ = ["Hit", "columns", "find", "snapshot"]

#: Column types that can hold an identifier or words (arrays and documents included).
_SEARCHABLE = ("text", "character varying", "bytea", "jsonb", "json", "uuid", "tsvector", "ARRAY")


def columns(conn: Connection) -> list[tuple[str, str, str]]:
    """(table, column, data type) of every column of every table in the public schema."""
    return [
        (r[0], r[1], r[2])
        for r in conn.execute(
            text(
                "SELECT c.table_name, c.column_name, c.data_type "
                "FROM information_schema.columns c JOIN information_schema.tables t "
                "  ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
                "WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' "
                "ORDER BY c.table_name, c.ordinal_position"
            )
        )
    ]


@dataclass(frozen=True)
class Hit:
    table: str
    column: str
    needle: str
    rows: int


def find(conn: Connection, needles: Iterable[str]) -> list[Hit]:
    """Where any of ``needles`` occurs: as text in any text-like column (case-insensitive),
    and as UTF-8 bytes inside any bytea column (a value stored in the clear)."""
    hits = []
    wanted = [n for n in needles if n]
    for table, column, kind in columns(conn):
        if kind not in _SEARCHABLE:
            continue
        for needle in wanted:
            if kind == "bytea":
                condition = f"position(convert_to(:n, 'UTF8') IN \"{column}\") > 0"
            else:
                condition = f"\"{column}\"::text ILIKE '%' || :n || '%'"
            count = conn.execute(
                text(f'SELECT count(*) FROM "{table}" WHERE {condition}'), {"n": needle}
            ).scalar_one()
            if count:
                hits.append(Hit(table, column, needle, int(count)))
    return hits


def snapshot(conn: Connection, *, skip: Iterable[str] = ("leases",)) -> dict[str, set[str]]:
    """Every row of every table, as its full text form (``row::text``: each column, bytes
    in hex), per table; ``skip``: tables that change by themselves (leases)."""
    tables = sorted({t for t, _, _ in columns(conn)} - set(skip))
    return {
        table: {r[0] for r in conn.execute(text(f'SELECT t::text FROM "{table}" t'))}
        for table in tables
    }
