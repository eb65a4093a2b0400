"""The Go and Java toolchains the polyglot tests build with, offline: Debian's packages
(the Go module proxy and Maven Central are out of reach), and what to do where they are
missing — skip with the command that installs them on a developer's machine, fail under CI
(``CI`` set: ``.ci/run`` installs them, so a missing one is a broken CI, not a reason to skip).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[2]

#: Debian bookworm's Go packages the Go client builds with. The protobuf library is named:
#: grpc's package accepts golang/protobuf 1.3 or 1.5, and apt picks 1.3, whose codec
#: panics on the first reply of stubs made by protoc-gen-go 1.28 ("protobuf tag not enough
#: fields"). `.ci/run` and clients/stubs/README.md install exactly these.
GO_PACKAGES = (
    "golang-go",
    "golang-google-grpc-dev",
    "golang-google-protobuf-dev",
    "golang-github-golang-protobuf-1-5-dev",
)
#: Debian's Java packages the Java client builds and runs with: protoc and protobuf-java of
#: one version (3.21.12), grpc-java 1.41.3 and what its Netty transport needs at run time.
JAVA_PACKAGES = (
    "openjdk-17-jdk-headless",
    "protobuf-compiler",
    "libprotobuf-java",
    "libgrpc-java",
    "libnetty-java",
    "libperfmark-java",
    "libgoogle-gson-java",
)
GOCODE = Path("/usr/share/gocode")
SHARE_JAVA = Path("/usr/share/java")


def install_command(packages: tuple[str, ...]) -> str:
    return "apt-get install --no-install-recommends " + " ".join(packages)


def missing(what: str, packages: tuple[str, ...]) -> NoReturn:
    """Skips (a developer's machine) or fails (CI) because ``what`` is missing."""
    reason = f"{what}: install with `{install_command(packages)}`"
    if os.environ.get("CI"):
        pytest.fail(f"under CI the toolchain must be there (.ci/run installs it): {reason}")
    pytest.skip(reason)


def go_toolchain() -> str:
    """The `go` command, with the Go sources of grpc and protobuf 1.5 beside it."""
    go = shutil.which("go")
    if go is None:
        missing("no Go toolchain (go)", GO_PACKAGES)
    src = GOCODE / "src"
    needed = [src / "google.golang.org" / name for name in ("grpc", "protobuf", "genproto")]
    if not all(path.is_dir() for path in needed):
        missing("no Go sources of google.golang.org/grpc, /protobuf and /genproto", GO_PACKAGES)
    # golang/protobuf 1.4+ is a shim over google.golang.org/protobuf (registry.go); 1.3 is
    # the old codec that cannot read protoc-gen-go 1.28's messages.
    if not (src / "github.com" / "golang" / "protobuf" / "proto" / "registry.go").exists():
        missing(
            "github.com/golang/protobuf is 1.3 (golang-github-golang-protobuf-1-3-dev), which "
            "panics on the stubs' first reply; 1.5 replaces it",
            GO_PACKAGES,
        )
    return go


def go_cache() -> Path:
    """One build cache for every Go build of the tests, kept across runs under the temporary
    directory: a cold build of grpc is ~15 s, a warm one ~1 s. Go locks its cache: builds
    running side by side (pytest -n 2) share it safely."""
    cache = Path(tempfile.gettempdir()) / "episodic-go-cache"
    cache.mkdir(exist_ok=True)
    return cache


def go_env(gopath: Path) -> dict[str, str]:
    """GOPATH mode over Debian's Go sources: no module proxy, no network."""
    return {
        **os.environ,
        "GOPATH": f"{gopath}{os.pathsep}{GOCODE}",
        "GO111MODULE": "off",
        "GOFLAGS": "",
        "GOPROXY": "off",
        "GOCACHE": str(go_cache()),
    }
