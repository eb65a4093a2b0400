"""The hand-written code type-checks (mypy, configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_mypy_is_clean() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", "/tmp/episodic-mypy-cache"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
