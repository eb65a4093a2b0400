"""k8s/monitoring/: the PodMonitor, the alert rules and the Grafana dashboard, checked
offline — they render with kustomize, the rules are a well-formed PrometheusRule, the
dashboard is valid JSON, and every PromQL expression in either parses and asks only for
series (and labels) the services export, as declared in :mod:`episodic.metrics` (whose
names tests/ops/test_metrics.py checks against a real scrape)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from episodic import metrics
from tests.ops.test_k8s import INSTALL_HINT, SERVICES, container, kubectl, one

yaml = pytest.importorskip("yaml")
promql = pytest.importorskip("promql_parser", reason="promql-parser is a dev dependency")

MONITORING = Path(__file__).resolve().parents[2] / "k8s" / "monitoring"
DASHBOARD = MONITORING / "grafana-dashboard.json"
# Labels a Prometheus scrape adds to every series (kubernetes_sd via the PodMonitor).
TARGET_LABELS = {"namespace", "pod", "job", "instance", "container", "endpoint", "component"}
# Grafana's interval variables are not PromQL; everything else ($namespace) sits in strings.
GRAFANA_INTERVALS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
REQUIRED_ALERTS = {
    "EpisodicPipelineStuck",  # oldest pending age
    "EpisodicNoCompletions",  # pending > 0, nothing completed
    "EpisodicTimerLagGrowing",
    "EpisodicTimersOverdue",
    "EpisodicRPCServerErrors",  # INTERNAL/UNAVAILABLE share
}

Doc = dict[str, Any]


@cache
def rendered() -> list[Doc]:
    exe = kubectl()
    if exe is None:
        pytest.skip(INSTALL_HINT)
    proc = subprocess.run(
        [exe, "kustomize", str(MONITORING)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def rule_docs() -> list[Doc]:
    return [d for d in rendered() if d["kind"] == "PrometheusRule"]


def rules() -> Iterator[Doc]:
    for doc in rule_docs():
        for group in doc["spec"]["groups"]:
            yield from group["rules"]


def dashboard() -> Doc:
    loaded: Doc = json.loads(DASHBOARD.read_text())
    return loaded


def panels() -> Iterator[Doc]:
    for panel in dashboard()["panels"]:
        yield panel
        yield from panel.get("panels", [])


def dashboard_exprs() -> list[str]:
    return [t["expr"] for p in panels() for t in p.get("targets", [])]


def allowed_labels() -> dict[str, set[str]]:
    """For every sample name the services export: the labels it may carry."""
    allowed: dict[str, set[str]] = {name: set() for name in metrics.EXTRA_PROMETHEUS_NAMES}
    allowed["target_info"] = {"service_name", "service_version", "service_instance_id"}
    for spec in metrics.SPECS:
        own = set(spec.prometheus_labels) | {
            "otel_scope_name",
            "otel_scope_version",
            "otel_scope_schema_url",
        }
        for series in (spec.prometheus_name, *spec.prometheus_series):
            allowed[series] = own | ({"le"} if series.endswith("_bucket") else set())
    return {name: labels | TARGET_LABELS for name, labels in allowed.items()}


def check_promql(expr: str) -> set[str]:
    """Parses ``expr`` (Grafana's interval variables replaced) and checks every selector and
    grouping against what the services export; returns the metric names it reads."""
    for variable, value in GRAFANA_INTERVALS.items():
        expr = expr.replace(variable, value)
    tree = promql.parse(expr)  # raises ValueError on a syntax error
    known = allowed_labels()
    names: set[str] = set()

    def selectors(node: Any) -> list[Any]:
        found: list[Any] = []
        promql.walk(
            node,
            pre_visit=lambda n: found.append(n) if isinstance(n, promql.VectorSelector) else None,
        )
        return found

    for selector in selectors(tree):
        assert selector.name in known, f"{selector.name!r} is not exported: {expr}"
        names.add(selector.name)
        for matcher in selector.matchers.matchers:
            assert matcher.name in known[selector.name] | {"__name__"}, (
                f"{selector.name} has no label {matcher.name!r}: {expr}"
            )

    def groupings(node: Any) -> None:
        if isinstance(node, promql.AggregateExpr) and node.modifier is not None:
            inner = set().union(*(known[s.name] for s in selectors(node.expr)))
            missing = set(node.modifier.labels) - inner
            assert not missing, f"grouping by {missing} that no series has: {expr}"

    promql.walk(tree, pre_visit=groupings)
    return names


# --------------------------------------------------------------------------- rendering


def test_monitoring_renders_a_podmonitor_rules_and_the_dashboard() -> None:
    kinds = sorted(d["kind"] for d in rendered())
    assert kinds == ["ConfigMap", "PodMonitor", "PrometheusRule"]
    (config_map,) = [d for d in rendered() if d["kind"] == "ConfigMap"]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["episodic.json"]) == dashboard()
    # Not namespaced: applied into the deployment's namespace (kubectl -n … apply -k).
    assert all("namespace" not in d["metadata"] for d in rendered())


@pytest.mark.parametrize("overlay", ["dev", "prod"])
def test_podmonitor_scrapes_the_metrics_port_of_every_service(overlay: str) -> None:
    (monitor,) = [d for d in rendered() if d["kind"] == "PodMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    selector = monitor["spec"]["selector"]["matchLabels"]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    for name in SERVICES:
        deployment = one(overlay, "Deployment", f"episodic-{name}")
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert all(labels.get(k) == v for k, v in selector.items()), name
        ports = {p["name"] for p in container(deployment)["ports"]}
        assert endpoint["port"] in ports, name


# --------------------------------------------------------------------------- rules


def test_prometheus_rule_is_well_formed() -> None:
    (doc,) = rule_docs()
    assert doc["apiVersion"] == "monitoring.coreos.com/v1"
    assert doc["kind"] == "PrometheusRule"
    groups = doc["spec"]["groups"]
    assert len({g["name"] for g in groups}) == len(groups)
    alerts = [r["alert"] for r in rules()]
    assert len(set(alerts)) == len(alerts)
    assert set(alerts) >= REQUIRED_ALERTS
    for rule in rules():
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        if "for" in rule:
            assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["for"]


@pytest.mark.parametrize("rule", list(rules()) if kubectl() else [], ids=lambda r: r["alert"])
def test_alert_exprs_parse_and_use_exported_series(rule: Doc) -> None:
    assert check_promql(rule["expr"])


# --------------------------------------------------------------------------- dashboard


def test_dashboard_is_valid() -> None:
    board = dashboard()
    assert board["uid"] and board["title"]
    ids = [p["id"] for p in panels()]
    assert len(set(ids)) == len(ids)
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    for panel in panels():
        if panel["type"] == "row":
            continue
        assert panel["targets"], panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}"
        for target in panel["targets"]:
            # Every query is scoped to the chosen namespaces.
            assert 'namespace=~"$namespace"' in target["expr"], target["expr"]
    # The namespace variable reads a series the services export.
    query = variables["namespace"]["query"]["query"]
    metric = re.fullmatch(r"label_values\((\w+)\{.*\}, namespace\)", query)
    assert metric and metric.group(1) in metrics.prometheus_names()


def test_dashboard_exprs_parse_and_use_exported_series() -> None:
    used: set[str] = set()
    for expr in dashboard_exprs():
        used |= check_promql(expr)
    # The dashboard shows the signals.
    for name in (
        "rpc_server_call_duration_seconds_bucket",
        "episodic_messages_ingested_total",
        "episodic_pipeline_episodes",
        "episodic_pipeline_oldest_age_seconds",
        "episodic_pipeline_timers",
        "episodic_scheduler_timer_lag_seconds_bucket",
        "episodic_summariser_summarise_duration_seconds_bucket",
        "episodic_summariser_embed_duration_seconds_bucket",
        "episodic_provider_errors_total",
        "episodic_provider_retries_total",
        "episodic_recall_candidates_bucket",
    ):
        assert name in used, name


def test_a_promql_typo_is_caught() -> None:
    with pytest.raises(AssertionError, match="not exported"):
        check_promql("rate(episodic_messages_ingestd_total[5m])")
    with pytest.raises(AssertionError, match="no label"):
        check_promql('episodic_pipeline_episodes{state="pending"}')
    with pytest.raises(AssertionError, match="grouping"):
        check_promql("sum by (dataset) (rate(episodic_messages_ingested_total[5m]))")
    with pytest.raises(ValueError):
        check_promql("sum(rate(episodic_messages_ingested_total[5m])")
