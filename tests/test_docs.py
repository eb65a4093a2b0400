"""The README's configuration table is generated from the settings and must be current."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from episodic import config
from episodic.devtools.config_table import AREAS, render_readme
from episodic.store import distribution

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_config_table_is_current() -> None:
    text = README.read_text()
    assert text == render_readme(text), (
        "README's configuration table is stale: run python -m episodic.devtools.config_table --write"
    )


def test_readme_quick_start_has_the_two_commands() -> None:
    text = README.read_text()
    assert "make up" in text and "make test" in text


def test_make_up_needs_only_python() -> None:
    """The quick start: `make up` needs Python alone; `make test` also installs the
    TypeScript client's npm packages (its tests are part of the suite)."""

    def planned(target: str) -> str:
        # -n: print the commands, run none; -B: as if nothing were installed yet.
        done = subprocess.run(
            ["make", "-n", "-B", target], cwd=README.parent, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    up = planned("up")
    assert "pip install" in up and "episodic up" in up and "npm" not in up
    assert "npm ci" in planned("test")
    text = README.read_text()
    assert "Python 3.11+" in text and "Node 20+" in text


def test_every_settings_area_is_in_the_table() -> None:
    """A new settings class appears in the README once it is listed in AREAS."""
    areas = {cls for _, cls in AREAS}
    used = {type(area) for area in vars(config.Settings()).values()}
    assert used <= areas, f"add {used - areas} to episodic.devtools.config_table.AREAS"


def test_readme_list_of_cross_dataset_statements_is_current() -> None:
    """The README lists every statement marked ``across_datasets`` (generated from the code)."""
    text = README.read_text()
    assert "<!-- ACROSS-DATASETS:START -->" in text
    assert text == distribution.render_readme(text, README.parent), (
        "README's list of cross-dataset statements is stale: run make docs "
        "(python -m episodic.store.distribution --write)"
    )


def test_a_marker_needs_a_literal_reason(tmp_path: Path) -> None:
    """The list is read from the code, so a reason must be written there."""
    (tmp_path / "services").mkdir()
    (tmp_path / "shared/episodic").mkdir(parents=True)
    (tmp_path / "services/sweeps.py").write_text(
        "def sweep(why):\n    return across_datasets('the sweep') + across_datasets(why)\n"
    )
    with pytest.raises(ValueError, match="takes a literal"):
        distribution.marked_statements(tmp_path)
    with pytest.raises(ValueError, match="close the SQL comment"):
        distribution.across_datasets("a */ b")
