"""The TypeScript client (clients/typescript) passes its own tests: generated code current
with the protos, unit tests against a fake server, and the whole loop against a real
`episodic up` started from this checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"


def test_typescript_client_passes_its_tests(tmp_path: Path) -> None:
    npm = shutil.which("npm")
    assert npm, "npm is needed for the TypeScript client's tests (Node 20 and npm)"
    assert (CLIENT / "node_modules").is_dir(), "run `make install` (it runs npm ci)"
    env = {
        key: value
        for key, value in os.environ.items()
        # Its integration test starts its own suite: no address may point elsewhere.
        if not (key.startswith("EPISODIC_") and key.endswith("_ADDRESS"))
    }
    env["EPISODIC_UP_COMMAND"] = f"{sys.executable} -m episodic.cli up"
    env["EPISODIC_DATA_DIR"] = str(tmp_path / "state")
    done = subprocess.run(
        [npm, "test", "--silent"],
        cwd=CLIENT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, report
    assert "# fail 0" in done.stdout and "# skipped 0" in done.stdout, report
