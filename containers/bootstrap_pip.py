"""Installs the pinned pip of requirements/build.txt into a fresh venv, for the image's build
stage: the base image carries no pip (nor does the runtime stage, which shares the base).

Finds pip's wheel in the index's simple API (PEP 691 JSON; PIP_INDEX_URL, else PyPI),
downloads it, checks it against the lock's hashes and lets that wheel
install itself and setuptools from the same lock (pip runs straight from its wheel).
    python bootstrap_pip.py requirements/build.txt /opt/tools
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
import venv
from pathlib import Path

INDEX = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")


def wheel_url(version: str) -> str:
    request = urllib.request.Request(
        f"{INDEX}/pip/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=120) as reply:
        files = json.load(reply)["files"]
    name = f"pip-{version}-py3-none-any.whl"
    for entry in files:
        if entry["filename"] == name:
            return str(entry["url"])
    sys.exit(f"{INDEX}/pip/: no {name}")


def main(lock: Path, target: Path) -> None:
    text = lock.read_text()
    match = re.search(r"^pip==(\S+)((?:\s*\\\n\s*--hash=sha256:[0-9a-f]{64})+)", text, re.M)
    if match is None:
        sys.exit(f"{lock}: no pinned pip with hashes")
    version, hashes = match.group(1), set(re.findall(r"sha256:([0-9a-f]{64})", match.group(2)))
    venv.create(target, with_pip=False)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = Path(tmp) / f"pip-{version}-py3-none-any.whl"
        with urllib.request.urlopen(wheel_url(version), timeout=120) as reply:
            wheel.write_bytes(reply.read())
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest not in hashes:
            sys.exit(f"{wheel.name}: sha256 {digest} is not one of the lock's")
        subprocess.run(
            [
                str(target / "bin" / "python"),
                str(wheel / "pip"),
                "install",
                "--quiet",
                "--no-cache-dir",
                "--require-hashes",
                "--no-deps",
                "--only-binary",
                ":all:",
                "-r",
                str(lock),
            ],
            check=True,
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
