"""Distribution-ready schema: ``dataset`` in every key, tables hash-partitioned by dataset.

The dataset is the unit of distribution (DESIGN.md): PostgreSQL's declarative partitioning
and Citus both require every primary key, unique index, exclusion constraint and foreign
key between distributed tables to contain the distribution column. This migration

- gives ``messages`` its ``dataset`` (the one dataset table that lacked it; copied from
  its thread);
- finds every table of the schema with a ``dataset`` column (except the global tables
  below), so the tables that 0007-0009 add are covered without being named here, and
  rebuilds each as a table ``PARTITION BY HASH (dataset)`` with N partitions (N from
  ``EPISODIC_DATABASE_PARTITIONS`` when the schema is migrated, default 8), copying every
  row;
- widens every primary key, unique constraint/index, exclusion constraint and foreign key
  between those tables that lacks ``dataset`` with ``dataset`` in front (``dataset WITH =``
  for exclusions), and marks each widened object with a comment so the downgrade narrows
  exactly those and nothing another migration created with ``dataset`` already in it.

A table that references a dataset table without having a ``dataset`` column cannot be
partitioned consistently: the migration stops and names it (add the column in its own
migration). The schema test (tests/test_distribution_schema.py) checks the result.

Rebuilding copies every row under an exclusive lock: plan downtime proportional to the
database size (about the time of a ``pg_dump | psql`` of the same data).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30
"""

from __future__ import annotations

import re

from alembic import context, op
from sqlalchemy import text
from sqlalchemy.engine import Connection

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# Tables that hold no single dataset's data and stay plain (frozen here: a later change
# of the schema test's allow-list must not change what this migration did).
GLOBAL_TABLES = frozenset({"alembic_version", "api_keys", "audit_events", "leases"})
# Marks a key this migration widened with `dataset`, so the downgrade narrows only those.
WIDENED = "episodic 0010: dataset added for distribution"
DEFAULT_PARTITIONS = 8
_ROUTING_INDEXES = (("threads", "thread_id"), ("episodes", "episode_id"))


def _partitions() -> int:
    count = int(context.config.attributes.get("partitions", DEFAULT_PARTITIONS))
    if not 1 <= count <= 1024:
        raise RuntimeError(f"partition count must be in 1..1024, got {count}")
    return count


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _dataset_tables(conn: Connection, relkind: str) -> list[str]:
    rows = conn.execute(
        text(
            "SELECT c.relname FROM pg_class c "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'dataset' "
            "AND NOT a.attisdropped "
            "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = :kind "
            "AND NOT c.relispartition ORDER BY c.relname"
        ),
        {"kind": relkind},
    ).scalars()
    return [name for name in rows if name not in GLOBAL_TABLES]


def _foreign_keys(conn: Connection, tables: list[str]) -> list[tuple[str, str, str, bool]]:
    """(table, constraint, definition, widened?) of every foreign key from or to a table."""
    rows = conn.execute(
        text(
            "SELECT r.relname, con.conname, pg_get_constraintdef(con.oid), "
            "coalesce(obj_description(con.oid, 'pg_constraint') = :marker, false) "
            "FROM pg_constraint con JOIN pg_class r ON r.oid = con.conrelid "
            "JOIN pg_class f ON f.oid = con.confrelid "
            "WHERE con.contype = 'f' AND con.conparentid = 0 "
            "AND r.relnamespace = current_schema()::regnamespace "
            "AND (r.relname = ANY(:tables) OR f.relname = ANY(:tables)) "
            "ORDER BY r.relname, con.conname"
        ),
        {"tables": tables, "marker": WIDENED},
    )
    return [(t, n, d, bool(w)) for t, n, d, w in rows]


def _refuse_tables_without_dataset(conn: Connection, tables: list[str]) -> None:
    orphans = conn.execute(
        text(
            "SELECT DISTINCT r.relname FROM pg_constraint con "
            "JOIN pg_class r ON r.oid = con.conrelid JOIN pg_class f ON f.oid = con.confrelid "
            "WHERE con.contype = 'f' AND f.relname = ANY(:tables) "
            "AND NOT (r.relname = ANY(:tables)) AND NOT (r.relname = ANY(:global))"
        ),
        {"tables": tables, "global": list(GLOBAL_TABLES)},
    ).scalars()
    missing = sorted(orphans)
    if missing:
        raise RuntimeError(
            f"tables {missing} reference dataset tables but have no `dataset` column; add "
            "it (filled from the referenced row) in their own migration before 0010"
        )


# --- rewriting key definitions -------------------------------------------------------------


def _widen(kind: str, definition: str) -> str:
    """Puts `dataset` first in a key's definition (pg_get_constraintdef / pg_get_indexdef)."""
    if kind in ("p", "u"):
        return re.sub(
            r"^((?:PRIMARY KEY|UNIQUE(?: NULLS NOT DISTINCT)?) )\(", r"\1(dataset, ", definition
        )
    if kind == "x":
        return re.sub(r"^(EXCLUDE USING \w+ )\(", r"\1(dataset WITH =, ", definition)
    if kind == "f":
        match = re.match(r"^FOREIGN KEY \((.*?)\) REFERENCES (\S+?)\((.*?)\)(.*)$", definition)
        if match is None:
            raise RuntimeError(f"cannot parse foreign key {definition!r}")
        local, target, remote, rest = match.groups()
        # SET NULL/DEFAULT must not touch dataset (it is NOT NULL and the routing key).
        rest = re.sub(r"(ON DELETE SET (?:NULL|DEFAULT))(?! \()", rf"\1 ({local})", rest)
        return f"FOREIGN KEY (dataset, {local}) REFERENCES {target}(dataset, {remote}){rest}"
    if kind == "i":
        return re.sub(r" USING (\w+) \(", r" USING \1 (dataset, ", definition, count=1)
    raise ValueError(kind)


def _narrow(kind: str, definition: str) -> str:
    if kind in ("p", "u"):
        return definition.replace("(dataset, ", "(", 1)
    if kind == "x":
        return definition.replace("(dataset WITH =, ", "(", 1)
    if kind == "f":
        narrowed = definition.replace("(dataset, ", "(", 2)
        return re.sub(r"(ON DELETE SET (?:NULL|DEFAULT)) \([^)]*\)", r"\1", narrowed)
    if kind == "i":
        return definition.replace(" (dataset, ", " (", 1)
    raise ValueError(kind)


# --- rebuilding one table ------------------------------------------------------------------


def _rebuild(conn: Connection, table: str, partitions: int | None, widen: bool) -> None:
    """Rebuilds ``table`` with every row: hash-partitioned by dataset into ``partitions``
    (widening its keys when ``widen``), or plain (``partitions`` None, narrowing the keys
    this migration widened)."""
    oid = conn.execute(text("SELECT to_regclass(:t)::oid"), {"t": table}).scalar_one()
    triggers = conn.execute(
        text("SELECT count(*) FROM pg_trigger WHERE tgrelid = :oid AND NOT tgisinternal"),
        {"oid": oid},
    ).scalar_one()
    if triggers:
        raise RuntimeError(f"{table} has triggers; 0010 does not know how to carry them over")
    keys = conn.execute(
        text(
            "SELECT conname, contype, pg_get_constraintdef(oid), EXISTS (SELECT 1 FROM "
            "pg_attribute a WHERE a.attrelid = conrelid AND a.attname = 'dataset' "
            "AND a.attnum = ANY(conkey)), "
            "coalesce(obj_description(oid, 'pg_constraint') = :marker, false) "
            "FROM pg_constraint WHERE conrelid = :oid AND contype IN ('p', 'u', 'x') "
            "ORDER BY contype, conname"
        ),
        {"oid": oid, "marker": WIDENED},
    ).all()
    indexes = conn.execute(
        text(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisunique, EXISTS (SELECT 1 "
            "FROM pg_attribute a WHERE a.attrelid = i.indrelid AND a.attname = 'dataset' "
            "AND a.attnum = ANY(i.indkey::int2[])), "
            "coalesce(obj_description(i.indexrelid, 'pg_class') = :marker, false) "
            "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = :oid "
            "AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid "
            "AND k.conrelid = :oid) ORDER BY c.relname"
        ),
        {"oid": oid, "marker": WIDENED},
    ).all()
    columns = conn.execute(
        text(
            "SELECT attname, attidentity <> '' FROM pg_attribute WHERE attrelid = :oid "
            "AND attnum > 0 AND NOT attisdropped AND attgenerated = '' ORDER BY attnum"
        ),
        {"oid": oid},
    ).all()
    table_comment = conn.execute(
        text("SELECT obj_description(:oid, 'pg_class')"), {"oid": oid}
    ).scalar()

    staging = f"{table}__rebuilt"
    layout = " PARTITION BY HASH (dataset)" if partitions else ""
    op.execute(
        f"CREATE TABLE {_q(staging)} (LIKE {_q(table)} INCLUDING DEFAULTS INCLUDING "
        "CONSTRAINTS INCLUDING IDENTITY INCLUDING GENERATED INCLUDING STORAGE "
        f"INCLUDING COMMENTS INCLUDING COMPRESSION){layout}"
    )
    for remainder in range(partitions or 0):
        op.execute(
            f"CREATE TABLE {_q(f'{table}_p{remainder}')} PARTITION OF {_q(staging)} "
            f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {remainder})"
        )
    names = ", ".join(_q(name) for name, _ in columns)
    op.execute(
        f"INSERT INTO {_q(staging)} ({names}) OVERRIDING SYSTEM VALUE "
        f"SELECT {names} FROM {_q(table)}"
    )
    # Plain tables' partitions (downgrade) go with DROP TABLE of their parent.
    op.execute(f"DROP TABLE {_q(table)}")
    op.execute(f"ALTER TABLE {_q(staging)} RENAME TO {_q(table)}")
    if table_comment is not None:
        op.execute(text(f"COMMENT ON TABLE {_q(table)} IS {_literal(conn, table_comment)}"))
    for name, identity in columns:
        if not identity:
            continue
        sequence = conn.execute(
            text("SELECT pg_get_serial_sequence(:t, :c)"), {"t": table, "c": name}
        ).scalar_one()
        op.execute(f"ALTER SEQUENCE {sequence} RENAME TO {_q(f'{table}_{name}_seq')}")
        op.execute(
            f"SELECT setval('{_q(f'{table}_{name}_seq')}', "
            f"coalesce((SELECT max({_q(name)}) FROM {_q(table)}), 0) + 1, false)"
        )

    for name, kind, definition, has_dataset, marked in keys:
        changed = False
        if widen and not has_dataset:
            definition, changed = _widen(kind, definition), True
        elif not widen and marked:
            definition = _narrow(kind, definition)
        op.execute(f"ALTER TABLE {_q(table)} ADD CONSTRAINT {_q(name)} {definition}")
        if changed:
            op.execute(f"COMMENT ON CONSTRAINT {_q(name)} ON {_q(table)} IS '{WIDENED}'")
    for name, definition, unique, has_dataset, marked in indexes:
        changed = False
        if widen and unique and not has_dataset:
            definition, changed = _widen("i", definition), True
        elif not widen and marked:
            definition = _narrow("i", definition)
        op.execute(definition)
        if changed:
            op.execute(f"COMMENT ON INDEX {_q(name)} IS '{WIDENED}'")


def _literal(conn: Connection, value: str) -> str:
    return str(conn.execute(text("SELECT quote_literal(:v)"), {"v": value}).scalar_one())


def upgrade() -> None:
    conn = op.get_bind()
    partitions = _partitions()

    op.execute("ALTER TABLE messages ADD COLUMN dataset text")
    op.execute(
        "UPDATE messages AS m SET dataset = t.dataset FROM threads AS t "
        "WHERE t.thread_id = m.thread_id"
    )
    op.execute("ALTER TABLE messages ALTER COLUMN dataset SET NOT NULL")
    op.execute(f"COMMENT ON COLUMN messages.dataset IS '{WIDENED}'")

    tables = _dataset_tables(conn, "r")
    _refuse_tables_without_dataset(conn, tables)
    foreign_keys = _foreign_keys(conn, tables)
    for table, name, _, _ in foreign_keys:
        op.execute(f"ALTER TABLE {_q(table)} DROP CONSTRAINT {_q(name)}")
    for table in tables:
        _rebuild(conn, table, partitions, widen=True)
    for table, name, definition, _ in foreign_keys:
        local = re.match(r"^FOREIGN KEY \((.*?)\)", definition)
        if local is not None and "dataset" in [c.strip() for c in local.group(1).split(",")]:
            op.execute(f"ALTER TABLE {_q(table)} ADD CONSTRAINT {_q(name)} {definition}")
            continue
        op.execute(f"ALTER TABLE {_q(table)} ADD CONSTRAINT {_q(name)} {_widen('f', definition)}")
        op.execute(f"COMMENT ON CONSTRAINT {_q(name)} ON {_q(table)} IS '{WIDENED}'")
    # The primary keys now lead with dataset. An RPC that carries only a thread's or an
    # episode's id finds its dataset through these (one index probe per partition; on
    # Citus one per shard), then names the dataset in every later statement.
    for table, column in _ROUTING_INDEXES:
        op.execute(f"CREATE INDEX {table}_{column}_routing_idx ON {table} ({column})")


def downgrade() -> None:
    conn = op.get_bind()
    for table, column in _ROUTING_INDEXES:
        op.execute(f"DROP INDEX IF EXISTS {table}_{column}_routing_idx")
    tables = _dataset_tables(conn, "p")
    foreign_keys = _foreign_keys(conn, tables)
    for table, name, _, _ in foreign_keys:
        op.execute(f"ALTER TABLE {_q(table)} DROP CONSTRAINT {_q(name)}")
    for table in tables:
        _rebuild(conn, table, None, widen=False)
    for table, name, definition, widened in foreign_keys:
        if widened:
            definition = _narrow("f", definition)
        op.execute(f"ALTER TABLE {_q(table)} ADD CONSTRAINT {_q(name)} {definition}")
    op.execute("ALTER TABLE messages DROP COLUMN dataset")
