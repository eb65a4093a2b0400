"""The Java example (examples/java) run against the suite as real processes, keys required,
on the Java toolchain Debian has: OpenJDK 17, protoc and protobuf-java 3.21.12, grpc-java
1.41.3 over Netty. The committed message classes need protobuf-java 4.35.1, which is not
here (Maven Central is out of reach; tests/test_contracts.py keeps them current): so the
messages, and google.rpc's Status and ErrorInfo, are generated at test time by Debian's
protoc for its runtime, beside the committed gRPC service stubs (grpc_java_plugin 1.41.3's,
for that grpc-java). The example is what a backend team copies; the classes it compiles
against are what their build generates."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from google.rpc import error_details_pb2

from episodic.devtools import protogen
from tests.polyglot.suite import KeyedSuite, check_the_loop
from tests.polyglot.toolchains import REPO, JavaToolchain, java_toolchain

EXAMPLE = REPO / "examples" / "java"
GRPC_STUBS = protogen.CLIENT_STUBS / "java" / "episodic" / "v1"
#: google/rpc/status.proto and error_details.proto, as googleapis-common-protos ships them
#: (grpcio-status's dependency): Debian's proto-google-common-protos 1.16 has no ErrorInfo.
RPC_ROOT = Path(error_details_pb2.__file__).resolve().parents[2]
RPC_PROTOS = ("google/rpc/status.proto", "google/rpc/error_details.proto")
#: Stub classes compiled once per content, kept under the temporary directory (javac takes
#: ~10 s over the generated messages; the example alone ~1 s).
CACHE = Path(tempfile.gettempdir()) / "episodic-java-stubs"
JAVA_CODES = {name: name for name in ("INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "UNAUTHENTICATED")}


def _javac(tools: JavaToolchain, out: Path, classpath: list[Path], sources: list[Path]) -> None:
    options = ["-nowarn", "-proc:none", "-encoding", "UTF-8", "-d", str(out)]
    done = subprocess.run(
        [tools.javac, *options, "-cp", os.pathsep.join(map(str, classpath)), *map(str, sources)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]


def stub_classes(tools: JavaToolchain) -> Path:
    """The episodic.v1 messages and google.rpc's from Debian's protoc and the committed gRPC
    stubs, compiled: a folder of classes, reused while none of its inputs changed."""
    protos = sorted(protogen.proto_files())
    grpc_stubs = sorted(GRPC_STUBS.glob("*Grpc.java"))
    digest = hashlib.sha256(tools.protoc_version.encode())
    for jar in tools.compile_jars:
        digest.update(jar.resolve().name.encode())
    for path in [*protos, *(RPC_ROOT / p for p in RPC_PROTOS), *grpc_stubs]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    classes = CACHE / digest.hexdigest()[:20]
    if (classes / ".complete").exists():
        return classes
    CACHE.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="building-", dir=CACHE))
    try:
        sources, out = work / "src", work / "classes"
        sources.mkdir()
        rel = [str(p.relative_to(protogen.PROTO_ROOT)) for p in protos]
        for root, files in ((protogen.PROTO_ROOT, rel), (RPC_ROOT, list(RPC_PROTOS))):
            subprocess.run(
                [tools.protoc, f"-I{root}", f"--java_out={sources}", *files],
                cwd=root,
                check=True,
                capture_output=True,
            )
        for stub in grpc_stubs:
            shutil.copy(stub, sources / "episodic" / "v1" / stub.name)
        _javac(tools, out, list(tools.compile_jars), sorted(sources.rglob("*.java")))
        (out / ".complete").touch()
        try:
            out.rename(classes)
        except OSError:  # another run (pytest -n 2) finished the same first
            assert (classes / ".complete").exists()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return classes


def build_example(tmp_path: Path) -> tuple[JavaToolchain, list[Path]]:
    """Compiles the example; returns the toolchain and the classpath to run it with."""
    tools = java_toolchain()
    stubs = stub_classes(tools)
    out = tmp_path / "classes"
    _javac(tools, out, [stubs, *tools.compile_jars], sorted(EXAMPLE.glob("*.java")))
    return tools, [out, stubs, *tools.runtime_jars]


def test_the_java_example_runs_the_loop_against_the_suite(tmp_path: Path, request) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    tools, classpath = build_example(tmp_path)  # before the suite: a missing JDK skips first
    built = time.monotonic()
    suite: KeyedSuite = request.getfixturevalue("keyed_suite")
    ready = time.monotonic()
    run = subprocess.run(
        [tools.java, "-cp", os.pathsep.join(map(str, classpath)), "EpisodicExample"],
        env={"PATH": "/usr/bin:/bin", **suite.client_env()},
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(
        f"built in {built - started:.1f} s, suite in {ready - built:.1f} s, "
        f"ran in {time.monotonic() - ready:.1f} s"
    )
    print(run.stdout + run.stderr)
    assert run.returncode == 0, run.stdout + run.stderr
    check_the_loop(run.stdout, suite, prefix="java", codes=JAVA_CODES)
