"""The protos are lint-clean, formatted, and the committed stubs match them."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from episodic.devtools import protogen

REPO = Path(__file__).resolve().parents[1]


def _buf() -> str:
    exe = shutil.which("buf") or str(Path(sys.executable).parent / "buf")
    if not Path(exe).exists():
        pytest.fail("buf is not installed; `pip install -e .[dev]` installs buf-bin")
    return exe


def test_buf_lint_is_clean() -> None:
    out = subprocess.run([_buf(), "lint"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_buf_format_leaves_nothing_to_change() -> None:
    out = subprocess.run(
        [_buf(), "format", "-d", "--exit-code"], cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_generated_stubs_match_protos(tmp_path: Path) -> None:
    generated = protogen.generate(tmp_path)
    assert generated, "protoc generated nothing"
    committed = REPO / "shared" / "episodic" / "v1"
    for path in generated:
        twin = committed / path.name
        assert twin.exists(), (
            f"{path.name} is not committed; run python -m episodic.devtools.protogen"
        )
        assert filecmp.cmp(path, twin, shallow=False), (
            f"{path.name} differs from the protos; run python -m episodic.devtools.protogen"
        )
    names = {p.name for p in generated}
    stale = {p.name for p in committed.glob("*_pb2*.py*")} - names
    assert not stale, f"stale stubs without a proto: {stale}"


def test_every_rpc_the_seeds_name_exists() -> None:
    from episodic.v1 import (
        ingest_service_pb2,
        recall_service_pb2,
        scheduler_service_pb2,
    )

    def methods(module, service: str) -> set[str]:  # type: ignore[no-untyped-def]
        return {m.name for m in module.DESCRIPTOR.services_by_name[service].methods}

    assert {
        "CreateThread",
        "AddMessages",
        "EndThread",
        "GetThread",
        "ListMessages",
        "ListThreads",
    } <= methods(ingest_service_pb2, "IngestService")
    assert {"Recall", "ListEpisodes", "SearchEpisodes", "GetEpisode"} <= methods(
        recall_service_pb2, "RecallService"
    )
    assert {"DeleteEpisode", "RetryEpisode"} <= methods(scheduler_service_pb2, "SchedulerService")
