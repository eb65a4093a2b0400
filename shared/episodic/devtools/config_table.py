"""Prints the configuration table for the README from the settings classes.

``python -m episodic.devtools.config_table``; a test checks the README carries the current
table, so the documentation cannot drift from the code.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic.fields import FieldInfo

from episodic import config

AREAS = [
    ("Database", config.DatabaseSettings),
    ("Ingest", config.IngestSettings),
    ("Scheduler", config.SchedulerSettings),
    ("Recovery", config.RecoverySettings),
    ("Summariser", config.SummariserSettings),
    ("LLM", config.LLMSettings),
    ("Embeddings", config.EmbeddingSettings),
    ("Recall", config.RecallSettings),
    ("Services", config.ServiceSettings),
    ("Metrics", config.MetricsSettings),
    ("Auth", config.AuthSettings),
    ("TLS", config.TlsSettings),
    ("Privacy", config.PrivacySettings),
]


def _default(field: FieldInfo) -> str:
    value = field.default
    if value is None:
        return "unset"
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
        return f"{seconds:g} s"
    if hasattr(value, "get_secret_value"):
        return "unset" if not value.get_secret_value() else "(secret)"
    return f"`{value}`"


def table() -> str:
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for area, cls in AREAS:
        fields: dict[str, FieldInfo] = cls.model_fields  # type: ignore[attr-defined]
        for name, field in fields.items():
            desc = (field.description or "").replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `EPISODIC_{name.upper()}` | {_default(field)} | {area}: {desc} |")
    return "\n".join(lines)


START, END = "<!-- CONFIG-TABLE:START -->", "<!-- CONFIG-TABLE:END -->"


def render_readme(readme: str) -> str:
    """The README with the table between the markers replaced by the current one."""
    head, _, rest = readme.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{table()}\n{END}{tail}"


if __name__ == "__main__":
    import sys
    from pathlib import Path

    if sys.argv[1:] == ["--write"]:
        path = Path(__file__).resolve().parents[3] / "README.md"
        path.write_text(render_readme(path.read_text()))
    else:
        print(table())
