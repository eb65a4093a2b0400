"""The Go example (examples/go) on the committed Go stubs (clients/stubs/go), built offline
with Debian's Go packages and run against the suite as real processes, keys required: it
creates a thread, writes, reads a bad request's ErrorInfo, ends the thread, waits for the
episode and recalls it. Then this checks from Python what it claims."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from tests.polyglot.suite import KeyedSuite, check_the_loop
from tests.polyglot.toolchains import REPO, go_env, go_toolchain

EXAMPLE = REPO / "examples" / "go"
STUBS = REPO / "clients" / "stubs" / "go"
#: How grpc-go's codes.Code prints the codes the example meets.
GO_CODES = {
    "INVALID_ARGUMENT": "InvalidArgument",
    "DEADLINE_EXCEEDED": "DeadlineExceeded",
    "UNAUTHENTICATED": "Unauthenticated",
}


def build_example(tmp_path: Path) -> Path:
    """`go vet` and `go build` of the example in GOPATH mode, the stubs at their import path
    (module episodic/stubs); returns the program."""
    go = go_toolchain()
    src = tmp_path / "gopath" / "src"
    shutil.copytree(STUBS, src / "episodic" / "stubs")
    shutil.copytree(EXAMPLE, src / "episodic-example")
    env = go_env(tmp_path / "gopath")
    program = tmp_path / "episodic-example"
    for command in (["vet", "."], ["build", "-o", str(program), "."]):
        done = subprocess.run(
            [go, *command],
            cwd=src / "episodic-example",
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"go {command[0]}:\n{done.stdout}{done.stderr}"
    gofmt = shutil.which("gofmt") or str(Path(go).parent / "gofmt")
    unformatted = subprocess.run([gofmt, "-l", str(EXAMPLE)], capture_output=True, text=True)
    assert unformatted.stdout == "", f"gofmt -w {unformatted.stdout}"
    return program


def test_the_go_example_runs_the_loop_against_the_suite(tmp_path: Path, request) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    program = build_example(tmp_path)  # before the suite: a missing toolchain skips first
    built = time.monotonic()
    suite: KeyedSuite = request.getfixturevalue("keyed_suite")
    ready = time.monotonic()
    run = subprocess.run(
        [str(program)],
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
    check_the_loop(run.stdout, suite, prefix="go", codes=GO_CODES)
