"""The documentation: the site builds strictly, and what it says of the code is current.

The reference pages (gRPC API, configuration, CLI, metrics) are generated from the sources
by ``python -m episodic.devtools.reference --write`` (``make docs``); the tests here fail
when a committed page differs from what the sources give now.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from episodic import config
from episodic.devtools import reference
from episodic.devtools.config_table import AREAS
from episodic.store import distribution

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


@pytest.mark.parametrize("page", sorted(reference.PAGES))
def test_generated_reference_is_current(page: str) -> None:
    committed = (ROOT / page).read_text() if (ROOT / page).exists() else ""
    assert committed == reference.PAGES[page](), (
        f"{page} is stale: run python -m episodic.devtools.reference --write (make docs)"
    )


def test_a_stale_page_is_named(tmp_path: Path) -> None:
    """The check compares whole pages: a changed line, or a missing page, is reported."""
    reference.write(tmp_path)
    assert reference.stale(tmp_path) == []
    cli = tmp_path / "docs/reference/cli.md"
    cli.write_text(cli.read_text().replace("## episodic recall", "## episodic recal"))
    (tmp_path / "docs/reference/metrics.md").unlink()
    assert reference.stale(tmp_path) == ["docs/reference/cli.md", "docs/reference/metrics.md"]


def test_the_reference_covers_every_rpc_command_and_setting() -> None:
    """What the generators read is complete: every RPC of every service, every command,
    every setting."""
    from episodic.cli import build_parser
    from episodic.v1 import (
        admin_service_pb2,
        ingest_service_pb2,
        recall_service_pb2,
        scheduler_service_pb2,
        summariser_service_pb2,
    )

    api = (ROOT / "docs/reference/grpc-api.md").read_text()
    for module in (
        admin_service_pb2,
        ingest_service_pb2,
        recall_service_pb2,
        scheduler_service_pb2,
        summariser_service_pb2,
    ):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                assert f"#### {service.name}.{method.name} " in api, method.full_name
    cli = (ROOT / "docs/reference/cli.md").read_text()
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    for name in commands:
        assert f"## episodic {name}\n" in cli, name
    settings = (ROOT / "docs/reference/configuration.md").read_text()
    for _, cls in AREAS:
        for field in cls.model_fields:
            assert f"`EPISODIC_{field.upper()}`" in settings, field


def test_every_settings_area_is_in_the_table() -> None:
    """A new settings class appears in the configuration page once it is listed in AREAS."""
    areas = {cls for _, cls in AREAS}
    used = {type(area) for area in vars(config.Settings()).values()}
    assert used <= areas, f"add {used - areas} to episodic.devtools.config_table.AREAS"


def test_readme_quick_start_has_the_two_commands() -> None:
    """`.ci/run` runs the README's test command; the quick start page says the same."""
    for page in (README, ROOT / "docs/quick-start.md"):
        text = page.read_text()
        assert "make up" in text and "make test" in text, page


def test_readme_fits_on_a_few_screens() -> None:
    lines = README.read_text().count("\n")
    assert lines <= 250, f"README.md has {lines} lines; move detail into docs/ (the site)"


def test_make_up_needs_only_python() -> None:
    """The quick start: `make up` needs Python alone; `make test` also installs the
    TypeScript client's npm packages (its tests are part of the suite)."""

    def planned(target: str) -> str:
        # -n: print the commands, run none; -B: as if nothing were installed yet.
        done = subprocess.run(
            ["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    up = planned("up")
    assert "pip install" in up and "episodic up" in up and "npm" not in up
    assert "npm ci" in planned("test")
    for page in (README, ROOT / "docs/quick-start.md"):
        text = page.read_text()
        assert "Python 3.11+" in text and "Node 20+" in text, page


def test_citus_guide_list_of_cross_dataset_statements_is_current() -> None:
    """The Citus guide lists every statement marked ``across_datasets`` (generated from the
    code)."""
    guide = ROOT / distribution.CITUS_GUIDE
    text = guide.read_text()
    assert "<!-- ACROSS-DATASETS:START -->" in text
    assert text == distribution.render_readme(text, ROOT), (
        f"{distribution.CITUS_GUIDE}'s list of cross-dataset statements is stale: run make docs "
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


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a broken link or anchor, a page missing from the nav, or a
    docstring the SDK reference cannot render fails here (and so in CI, which runs
    `make test`)."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        if os.environ.get("CI"):
            pytest.fail("mkdocs-material is not installed: make install (the docs extra)")
        pytest.skip("mkdocs-material is not installed: make install (the docs extra)")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    warnings = [line for line in done.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert done.returncode == 0, "\n".join(warnings) or done.stderr[-3000:]
    assert (tmp_path / "site/reference/python-sdk/index.html").exists()


def test_readme_and_contributing_links_resolve() -> None:
    """The README and CONTRIBUTING.md are read on GitHub, outside the site's strict build:
    every relative link in them names a file of the repository."""
    import re

    for page in (README, ROOT / "CONTRIBUTING.md"):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            assert (page.parent / target).exists(), f"{page.name} links to a missing {target}"
