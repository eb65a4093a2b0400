"""The README's configuration table is generated from the settings and must be current."""

from __future__ import annotations

from pathlib import Path

from episodic import config
from episodic.devtools.config_table import AREAS, render_readme

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_config_table_is_current() -> None:
    text = README.read_text()
    assert text == render_readme(text), (
        "README's configuration table is stale: run python -m episodic.devtools.config_table --write"
    )


def test_readme_quick_start_has_the_two_commands() -> None:
    text = README.read_text()
    assert "make up" in text and "make test" in text


def test_every_settings_area_is_in_the_table() -> None:
    """A new settings class appears in the README once it is listed in AREAS."""
    areas = {cls for _, cls in AREAS}
    used = {type(area) for area in vars(config.Settings()).values()}
    assert used <= areas, f"add {used - areas} to episodic.devtools.config_table.AREAS"
