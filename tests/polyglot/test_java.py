"""The Java example (examples/java) run against the suite as real processes, keys required,
on the Java toolchain Debian has: OpenJDK 17, protoc and protobuf-java 3.21.12, grpc-java
1.41.3 over Netty. The Java stubs are not committed: the test generates them as `make
java-stubs` does (the messages and google.rpc's Status and ErrorInfo by Debian's protoc for
its protobuf-java, the service classes by Debian's grpc_java_plugin for its grpc-java) and
compiles the example against them. The example is what a backend team copies; the classes it
compiles against are what their build generates."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from tests.polyglot.suite import KeyedSuite, check_the_loop
from tests.polyglot.toolchains import (
    REPO,
    JavaToolchain,
    java_stub_classes,
    java_toolchain,
    javac,
)

EXAMPLE = REPO / "examples" / "java"
JAVA_CODES = {name: name for name in ("INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "UNAUTHENTICATED")}


def build_example(tmp_path: Path) -> tuple[JavaToolchain, list[Path]]:
    """Compiles the example; returns the toolchain and the classpath to run it with."""
    tools = java_toolchain()
    stubs = java_stub_classes(tools)
    out = tmp_path / "classes"
    javac(tools, out, [stubs, *tools.compile_jars], sorted(EXAMPLE.glob("*.java")))
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
