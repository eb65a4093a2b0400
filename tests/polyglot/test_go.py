"""The Go example (examples/go) on the committed Go stubs (clients/stubs/go), built offline
with Debian's Go packages and run against the suite as real processes, keys required: it
creates a thread, writes, reads a bad request's ErrorInfo, ends the thread, waits for the
episode and recalls it. Then this checks from Python what it claims."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import grpc

from episodic.v1 import episode_pb2 as epb
from episodic.v1 import recall_service_pb2 as rpb
from episodic.v1 import recall_service_pb2_grpc as rg
from tests.polyglot.conftest import KeyedSuite
from tests.polyglot.toolchains import GO_PACKAGES, REPO, go_env, go_toolchain, install_command

EXAMPLE = REPO / "examples" / "go"
STUBS = REPO / "clients" / "stubs" / "go"


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


def test_the_go_example_runs_the_loop_against_the_suite(
    tmp_path: Path, keyed_suite: KeyedSuite
) -> None:
    started = time.monotonic()
    program = build_example(tmp_path)
    built = time.monotonic()
    run = subprocess.run(
        [str(program)],
        env={"PATH": "/usr/bin:/bin", **keyed_suite.client_env()},
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(f"built in {built - started:.1f} s, ran in {time.monotonic() - built:.1f} s")
    print(run.stdout + run.stderr)
    out = run.stdout
    assert run.returncode == 0 and out.endswith("OK\n"), out + run.stderr

    thread_id = re.search(r"^thread (\S+) created in polyglot \(label car-search\)$", out, re.M)
    assert thread_id, out
    assert "messages stored 3: #1 go-1 stored=true; #2 go-2 stored=true; #3 go-3" in out
    assert (
        'bad request: code=InvalidArgument message="messages[0].role is not set or unknown; '
        'use one of system, user, assistant, tool" ErrorInfo{reason=INVALID_ARGUMENT '
        "domain=episodic.dev metadata={field=messages[0].role}}\n"
    ) in out
    assert "deadline: DeadlineExceeded\n" in out
    assert re.search(r"^no key: code=Unauthenticated .*ErrorInfo\{reason=\w+ ", out, re.M), out
    episode_id = re.search(r"^episode (\S+) EPISODE_STATUS_COMPLETED after \d+ poll", out, re.M)
    assert episode_id, out
    assert re.search(rf"^recall: 1 episode\(s\), top {episode_id[1]} relevance ", out, re.M), out

    # What the program says it did, as the suite saw it.
    with grpc.insecure_channel(keyed_suite.recall) as channel:
        got = (
            rg.RecallServiceStub(channel)
            .GetEpisode(
                rpb.GetEpisodeRequest(episode_id=episode_id[1]),
                metadata=[("authorization", f"Bearer {keyed_suite.key}")],
                timeout=10,
            )
            .episode
        )
    assert (got.thread_id, got.dataset, got.status) == (
        thread_id[1],
        keyed_suite.dataset,
        epb.EPISODE_STATUS_COMPLETED,
    )
    assert (got.start_sequence, got.end_sequence) == (1, 3)
    assert f"summary: {got.summary}\n" in out


def test_the_readme_recipe_is_what_ci_installs() -> None:
    """clients/stubs/README.md tells a new user what .ci/run installs, and both name the
    protobuf library apt would otherwise pick wrong."""
    recipe = (REPO / "clients" / "stubs" / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert install_command(GO_PACKAGES) in " ".join(recipe.replace("\\\n", " ").split())
    assert " ".join(GO_PACKAGES) in " ".join(ci.replace("\\\n", " ").split())
