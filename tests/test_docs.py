"""The README's configuration table is generated from the settings and must be current."""

from __future__ import annotations

from pathlib import Path

from episodic.devtools.config_table import render_readme

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_config_table_is_current() -> None:
    text = README.read_text()
    assert text == render_readme(text), (
        "README's configuration table is stale: run python -m episodic.devtools.config_table --write"
    )


def test_readme_quick_start_has_the_two_commands() -> None:
    text = README.read_text()
    assert "make up" in text and "make test" in text
