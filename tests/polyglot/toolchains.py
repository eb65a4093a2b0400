"""The Go and Java toolchains the polyglot tests build with, offline: Debian's packages
(the Go module proxy and Maven Central are out of reach), and what to do where they are
missing — skip with the command that installs them on a developer's machine, fail under CI
(``CI`` set: ``.ci/run`` installs them, so a missing one is a broken CI, not a reason to skip).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from episodic.devtools import protogen

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
#: one version (3.21.12), grpc-java 1.41.3 and its protoc plugin (the stubs are generated,
#: not committed), and what its Netty transport needs at run time.
JAVA_PACKAGES = (
    "openjdk-17-jdk-headless",
    "protobuf-compiler",
    "protobuf-compiler-grpc-java-plugin",
    "libprotobuf-dev",
    "libprotobuf-java",
    "libgrpc-java",
    "libnetty-java",
    "libperfmark-java",
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


@dataclass(frozen=True)
class JavaToolchain:
    """Debian's JDK, protoc, grpc-java's protoc plugin and the jars of protobuf-java and
    grpc-java (one protobuf version for protoc and runtime: the classes protoc makes are for
    that runtime only)."""

    javac: str
    java: str
    protoc: Path
    protoc_version: str
    grpc_plugin: Path
    compile_jars: tuple[Path, ...]
    runtime_jars: tuple[Path, ...]


#: What javac needs for the stubs and the example: protobuf-java, grpc-java's API, stub and
#: protobuf parts, guava (ListenableFuture) and javax.annotation (@Generated).
JAVA_COMPILE_JARS = (
    "grpc-api",
    "grpc-stub",
    "grpc-protobuf",
    "grpc-protobuf-lite",
    "grpc-context",
    "guava",
    "geronimo-annotation-1.3-spec",
)
#: And what a call needs at run time: grpc-core, the Netty transport (found by
#: ManagedChannelBuilder through ServiceLoader) and perfmark (grpc-core's tracing). Not gson:
#: grpc-core parses JSON only for a service config, which a plain address has none of.
JAVA_RUNTIME_JARS = (
    "grpc-core",
    "grpc-netty",
    "netty-buffer",
    "netty-codec",
    "netty-codec-http",
    "netty-codec-http2",
    "netty-codec-socks",
    "netty-common",
    "netty-handler",
    "netty-handler-proxy",
    "netty-resolver",
    "netty-transport",
    "netty-transport-native-unix-common",
    "perfmark-api",
)


def java_toolchain(*, run: bool = True) -> JavaToolchain:
    """Debian's Java toolchain; ``run=False``: only what compiling needs (no transport)."""
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        missing("no JDK (javac and java)", JAVA_PACKAGES)
    protoc, why_protoc = protogen.java_protoc()
    plugin, why_plugin = protogen.java_grpc_plugin()
    if protoc is None or plugin is None:
        missing(f"cannot generate the Java stubs: {why_protoc or why_plugin}", JAVA_PACKAGES)
    runtime = sorted(SHARE_JAVA.glob("protobuf-3.*.jar"))
    names = JAVA_COMPILE_JARS + (JAVA_RUNTIME_JARS if run else ())
    wanted = [SHARE_JAVA / f"{name}.jar" for name in names]
    absent = [jar.name for jar in wanted if not jar.exists()]
    if not runtime or absent:
        missing(
            f"not Debian's protobuf-java and grpc-java with its transport "
            f"(missing: {', '.join(absent or ['protobuf-java'])})",
            JAVA_PACKAGES,
        )
    version = protogen.protoc_version(protoc)
    if version != runtime[-1].stem.removeprefix("protobuf-"):
        missing(f"{protoc} ({version}) is not the version of {runtime[-1]}", JAVA_PACKAGES)
    compile_jars = (runtime[-1], *wanted[: len(JAVA_COMPILE_JARS)])
    return JavaToolchain(
        javac=javac,
        java=java,
        protoc=protoc,
        protoc_version=version,
        grpc_plugin=plugin,
        compile_jars=compile_jars,
        runtime_jars=(*compile_jars, *wanted[len(JAVA_COMPILE_JARS) :]),
    )


def javac(tools: JavaToolchain, out: Path, classpath: list[Path], sources: list[Path]) -> None:
    options = ["-nowarn", "-proc:none", "-encoding", "UTF-8", "-d", str(out)]
    done = subprocess.run(
        [tools.javac, *options, "-cp", os.pathsep.join(map(str, classpath)), *map(str, sources)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]


#: Stub classes compiled once per content, kept under the temporary directory (javac takes
#: ~10 s over the generated messages, more on a loaded machine).
JAVA_STUB_CACHE = Path(tempfile.gettempdir()) / "episodic-java-stubs"


def java_stub_classes(tools: JavaToolchain) -> Path:
    """The Java stubs as `make java-stubs` generates them (protogen.generate_java: the
    episodic.v1 messages by Debian's protoc for its protobuf-java, the service classes by
    grpc_java_plugin 1.41.3 for its grpc-java, google.rpc's error details), compiled against
    Debian's grpc-java: a folder of classes, reused while none of their inputs changed (the
    protos, the generators, the jars, protogen itself). Runs side by side (pytest -n 2) wait
    for one another instead of compiling twice."""
    protos = sorted(protogen.proto_files())
    rpc = protogen.rpc_root()
    digest = hashlib.sha256(tools.protoc_version.encode())
    for jar in tools.compile_jars:
        digest.update(jar.resolve().name.encode())
    inputs = [
        *protos,
        *(rpc / p for p in protogen.RPC_PROTOS),
        tools.grpc_plugin,
        Path(protogen.__file__),
    ]
    for path in inputs:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    classes = JAVA_STUB_CACHE / digest.hexdigest()[:20]
    JAVA_STUB_CACHE.mkdir(exist_ok=True)
    with (JAVA_STUB_CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stale = time.time() - 7 * 24 * 3600  # classes of protos not built for a week
        for old in JAVA_STUB_CACHE.iterdir():
            if old.is_dir() and old != classes and old.stat().st_mtime < stale:
                shutil.rmtree(old, ignore_errors=True)
        if (classes / ".complete").exists():
            classes.touch()  # in use: kept
            return classes
        work = Path(tempfile.mkdtemp(prefix="building-", dir=JAVA_STUB_CACHE))
        try:
            out = work / "classes"
            sources = protogen.generate_java(work / "src", tools.protoc, tools.grpc_plugin)
            services = {
                f"{m[1]}Grpc.java"
                for proto in protos
                for m in re.finditer(r"^service (\w+)", proto.read_text(), re.MULTILINE)
            }
            written = {p.name for p in sources if p.name.endswith("Grpc.java")}
            assert written == services, f"{tools.grpc_plugin}: {written} for services {services}"
            javac(tools, out, list(tools.compile_jars), sources)
            (out / ".complete").touch()
            out.rename(classes)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return classes
