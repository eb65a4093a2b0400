"""The distribution rule, checked against the live schema (pg_catalog).

The dataset is the unit of distribution: every table that holds a dataset's data carries
``dataset``, is hash-partitioned by it, and every primary key, unique index, exclusion
constraint and foreign key between such tables contains it. That is what PostgreSQL's
partitioning enforces on a partitioned table and what Citus requires of tables distributed
by ``dataset`` (``create_distributed_table(…, 'dataset')``, one colocation group), so a
schema that passes here moves to Citus without another migration. The few tables that
hold no single dataset's data are listed in ``GLOBAL_TABLES`` with the reason.
"""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import Connection

#: Tables that stay global (plain on PostgreSQL, reference/local tables on Citus).
GLOBAL_TABLES: dict[str, str] = {
    "alembic_version": "the schema's revision; one row for the whole database",
    "api_keys": "a key spans several datasets (exact names, prefixes or '*'); looked up "
    "by prefix on every call before any dataset is known; Citus reference table",
    "audit_events": "outlives the datasets it mentions (an erasure receipt must survive the "
    "erasure) and records dataset-less actions (key management); Citus local table on the "
    "coordinator",
    "embedding_space": "one row for the whole store: the embedding model whose vectors every "
    "dataset holds (store/embedding_space.py); Citus reference table",
    "leases": "singleton sweeps of the whole deployment (reclaim, retention, …); a plain "
    "table on the Citus coordinator (a reference table's writes need every worker)",
}


def distribution_violations(conn: Connection, schema: str = "public") -> list[str]:
    """Every way the schema breaks the distribution rule, one sentence each (empty: none)."""
    problems: list[str] = []
    tables = conn.execute(
        text(
            "SELECT c.relname, c.relkind, "
            "EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid "
            "  AND a.attname = 'dataset' AND a.attnotnull AND NOT a.attisdropped), "
            "pg_get_partkeydef(c.oid) "
            "FROM pg_class c WHERE c.relnamespace = CAST(:schema AS regnamespace) "
            "AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY c.relname"
        ),
        {"schema": schema},
    ).all()
    dataset_tables = {name for name, _, _, _ in tables if name not in GLOBAL_TABLES}
    for name, kind, has_dataset, partition_key in tables:
        if name in GLOBAL_TABLES:
            continue
        if not has_dataset:
            problems.append(
                f"table {name} has no NOT NULL `dataset` column (add it, or list the table "
                "in GLOBAL_TABLES with the reason it holds no single dataset's data)"
            )
            continue
        if kind != "p" or partition_key != "HASH (dataset)":
            problems.append(f"table {name} is not partitioned BY HASH (dataset)")

    keys = conn.execute(
        text(
            "SELECT r.relname, con.conname, con.contype, pg_get_constraintdef(con.oid), "
            "ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY k(n, i) "
            "  JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n "
            "  ORDER BY k.i), "
            "f.relname, "
            "ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY k(n, i) "
            "  JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n "
            "  ORDER BY k.i), "
            "ARRAY(SELECT o.oprname FROM unnest(con.conexclop) x(op) "
            "  JOIN pg_operator o ON o.oid = x.op) "
            "FROM pg_constraint con JOIN pg_class r ON r.oid = con.conrelid "
            "LEFT JOIN pg_class f ON f.oid = con.confrelid "
            "WHERE r.relnamespace = CAST(:schema AS regnamespace) AND NOT r.relispartition "
            "AND con.contype IN ('p', 'u', 'x', 'f') AND con.conparentid = 0 "
            "ORDER BY r.relname, con.conname"
        ),
        {"schema": schema},
    ).all()
    for table, name, kind, definition, columns, target, target_columns, operators in keys:
        if kind == "f":
            source_local = table in dataset_tables
            target_local = target in dataset_tables
            if source_local != target_local:
                problems.append(
                    f"foreign key {name} ({table} -> {target}) joins a dataset table and a "
                    "global one; Citus cannot keep it (distributed tables reference only "
                    "reference tables): drop it or make both sides dataset tables"
                )
            elif source_local and not _dataset_pairs(columns, target_columns):
                problems.append(
                    f"foreign key {name} ({table} -> {target}) does not pair dataset with "
                    f"dataset: {definition}"
                )
            continue
        if table not in dataset_tables:
            continue
        if "dataset" not in columns:
            problems.append(f"{_KIND[kind]} {name} on {table} lacks dataset: {definition}")
        elif kind == "x" and operators[columns.index("dataset")] != "=":
            problems.append(f"exclusion constraint {name} on {table} must use dataset WITH =")

    unique_indexes = conn.execute(
        text(
            "SELECT r.relname, c.relname, pg_get_indexdef(i.indexrelid), "
            "EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = i.indrelid "
            "  AND a.attname = 'dataset' AND a.attnum = ANY(CAST(i.indkey AS int2[]))) "
            "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_class r ON r.oid = i.indrelid "
            "WHERE i.indisunique AND r.relnamespace = CAST(:schema AS regnamespace) "
            "AND NOT r.relispartition AND NOT EXISTS "
            "  (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid) "
            "ORDER BY r.relname, c.relname"
        ),
        {"schema": schema},
    ).all()
    for table, name, definition, has_dataset in unique_indexes:
        if table in dataset_tables and not has_dataset:
            problems.append(f"unique index {name} on {table} lacks dataset: {definition}")
    return problems


_KIND = {"p": "primary key", "u": "unique constraint", "x": "exclusion constraint"}


def _dataset_pairs(columns: list[str], target_columns: list[str]) -> bool:
    """A foreign key routes to one shard when it maps dataset onto dataset."""
    return any(
        local == "dataset" and remote == "dataset"
        for local, remote in zip(columns, target_columns, strict=True)
    )


#: What every statement that scans across datasets on purpose carries in its SQL.
ACROSS_DATASETS = "/* across datasets:"


def across_datasets(reason: str) -> str:
    """The marker that opens a statement which reaches every dataset's partition on purpose
    (a sweep, a claim, the routing lookup of a request that names only an id):
    ``/* across datasets: <reason> */``. Every other statement names one dataset, and
    tests/test_one_shard.py EXPLAINs each statement the services send and fails on one that
    reaches several partitions without this marker. ``reason`` must be a string literal:
    the README's list of such statements is generated from these calls
    (:func:`marked_statements`)."""
    if "*/" in reason:
        raise ValueError("a reason cannot close the SQL comment")
    return f"{ACROSS_DATASETS} {reason} */ "


@dataclass(frozen=True)
class MarkedStatement:
    path: str  # relative to the repository
    function: str
    reason: str


def marked_statements(root: Path) -> list[MarkedStatement]:
    """Every ``across_datasets("…")`` call in the code under ``root`` (the repository:
    shared/, services/ and tools/), with the function that makes it."""
    found: list[MarkedStatement] = []
    for base in ("shared/episodic", "services", "tools"):
        for path in sorted((root / base).rglob("*.py")):
            if path.name == "distribution.py" or "testing" in path.parts:
                continue
            finder = _MarkerFinder(str(path.relative_to(root)))
            finder.visit(ast.parse(path.read_text(), str(path)))
            found.extend(finder.found)
    return sorted(found, key=lambda m: (m.path, m.function, m.reason))


class _MarkerFinder(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.functions: list[str] = []
        self.found: list[MarkedStatement] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Call(self, node: ast.Call) -> None:
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        if name == "across_datasets":
            reason = node.args[0] if node.args else None
            if not (isinstance(reason, ast.Constant) and isinstance(reason.value, str)):
                raise ValueError(f"{self.path}:{node.lineno}: across_datasets takes a literal")
            function = ".".join(self.functions) or "<module>"
            self.found.append(MarkedStatement(self.path, function, reason.value))
        self.generic_visit(node)


START, END = "<!-- ACROSS-DATASETS:START -->", "<!-- ACROSS-DATASETS:END -->"


#: The page that lists the statements (``make docs`` rewrites the list between the markers).
CITUS_GUIDE = "docs/guides/citus.md"


def render_readme(readme: str, root: Path) -> str:
    """A page (the Citus guide; once the README) with the list of cross-dataset statements
    between the markers replaced by the current one."""
    head, _, rest = readme.partition(START)
    _, _, tail = rest.partition(END)
    counted = Counter(marked_statements(root))  # in order; a repeated reason counts once
    lines = [
        f"- `{m.path}` `{m.function}`: {m.reason}" + (f" ({n} statements)" if n > 1 else "")
        for m, n in counted.items()
    ]
    return f"{head}{START}\n" + "\n".join(lines) + f"\n{END}{tail}"


if __name__ == "__main__":
    import sys

    repository = Path(__file__).resolve().parents[3]
    # The list sits in the Citus guide of the documentation site, between its markers.
    readme = repository / CITUS_GUIDE
    if sys.argv[1:] == ["--write"]:
        readme.write_text(render_readme(readme.read_text(), repository))
    else:
        for m in marked_statements(repository):
            print(f"{m.path} {m.function}: {m.reason}")
