"""The Grafana dashboard and the Prometheus alerts: the rules checked and unit-tested by
the real promtool, and every panel's and alert's expression evaluated by a real Prometheus
scraping a real daemon that drifts, fails its syncs, has a prune blocked and a rollout that
never finishes."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml

from gitopsd.pages import SourceLine
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_value
from tests.harness.controllers import NOWHERE
from tests.harness.controlplane import Binaries
from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import unique_name
from tests.harness.manifests import config_map_files_with_data, deployment
from tests.harness.prometheus import Prometheus, PrometheusBinaries
from tests.harness.receivers import serving_receivers
from tests.harness.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "config" / "grafana"
DASHBOARD = GRAFANA / "gitopsd-dashboard.json"
RULE = ROOT / "config" / "prometheus" / "prometheusrule.yaml"
RULE_TESTS = ROOT / "tests" / "prometheus" / "rules.test.yaml"
RULES_FILE = "gitopsd.rules.yaml"  # the name rules.test.yaml's rule_files gives

ALERTS = {
    "GitopsdDriftPersists",
    "GitopsdSyncFailing",
    "GitopsdSourceStale",
    "GitopsdPruneBlocked",
    "GitopsdNoLeader",
    "GitopsdReplicaNotWriting",
    "GitopsdErrorsRising",
    "GitopsdSourceUnhealthy",
    "GitopsdRevisionRefused",
    "GitopsdNotificationsFailing",
    "GitopsdClusterUnreachable",
}
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
UNLABELLED = {
    "gitopsd_leader",
    "gitopsd_shard_members",
    "gitopsd_api_requests_total",
    "gitopsd_watch_events_total",
    "gitopsd_cluster_reachable",
}  # no source label (docs/metrics.md)
METRIC = re.compile(r"\b(gitopsd_[a-z_]+?)(_bucket|_count|_sum)?\b(\{[^}]*\})?")
# Grafana's rate interval is at least four scrapes; this one also holds everything the test
# makes happen, so each latency quantile has two observations in its window.
RATE_INTERVAL = "10m"


def rules(rule: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def prometheus_rule() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(RULE.read_text())
    return loaded


def extracted_rules(directory: Path) -> Path:
    """The PrometheusRule's spec as a plain rules file, with a copy of rules.test.yaml beside
    it (promtool reads rule_files relative to the test file); returns that copy."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / RULES_FILE).write_text(yaml.safe_dump(prometheus_rule()["spec"]))
    return Path(shutil.copy(RULE_TESTS, directory / RULE_TESTS.name))


def promtool(binaries: PrometheusBinaries, *arguments: str | Path) -> str:
    """Runs promtool; fails with its output unless it exits 0."""
    done = subprocess.run(
        [str(binaries.promtool), *map(str, arguments)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_promtool_accepts_the_rules(
    prometheus_binaries: PrometheusBinaries, tmp_path: Path
) -> None:
    rule = prometheus_rule()
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rule["metadata"]["name"] == "gitopsd"
    assert rule["metadata"]["namespace"] == "gitopsd-system"
    assert rule["metadata"]["labels"]["app.kubernetes.io/name"] == "gitopsd"
    extracted_rules(tmp_path)

    checked = promtool(prometheus_binaries, "check", "rules", tmp_path / RULES_FILE)

    assert f"SUCCESS: {len(rules(rule))} rules found" in checked
    assert {r["alert"] for r in rules(rule)} == ALERTS
    for alert in rules(rule):
        assert alert["labels"]["severity"] in ("warning", "critical"), alert["alert"]
        assert set(alert["annotations"]) == {"summary", "description", "runbook"}, alert["alert"]
        assert "{{ $labels." in alert["annotations"]["description"], alert["alert"]


def test_promtool_unit_tests_fire_each_alert_and_keep_it_quiet_when_healthy(
    prometheus_binaries: PrometheusBinaries, tmp_path: Path
) -> None:
    cases = [
        case
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
    ]
    assert {c["alertname"] for c in cases if c["exp_alerts"]} == ALERTS  # each fires
    assert {c["alertname"] for c in cases if not c["exp_alerts"]} == ALERTS  # and is quiet

    tested = promtool(prometheus_binaries, "test", "rules", extracted_rules(tmp_path))

    assert "SUCCESS" in tested


# The dashboard's structure


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def targets(board: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(panel title, target) for every query of every panel."""
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            yield panel["title"], target


def variables(board: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in board["templating"]["list"]}


def unfiltered_selectors(expr: str) -> list[str]:
    """Selectors of metrics with a source label that do not filter by `$source`."""
    return [
        found.group(0)
        for found in METRIC.finditer(expr)
        if found.group(1) not in UNLABELLED and 'source=~"$source"' not in (found.group(3) or "")
    ]


def metrics_used(board: dict[str, Any]) -> set[str]:
    """The gitopsd metric names the panels query (histogram suffixes dropped)."""
    return {m.group(1) for _, t in targets(board) for m in METRIC.finditer(t["expr"])}


def test_the_dashboard_is_importable_and_every_query_follows_its_variables() -> None:
    board = dashboard()

    assert (board["uid"], board["id"]) == ("gitopsd", None)
    assert board["schemaVersion"] >= 39
    found = variables(board)
    assert (found["datasource"]["type"], found["datasource"]["query"]) == (
        "datasource",
        "prometheus",
    )
    source = found["source"]
    assert source["datasource"] == DATASOURCE
    assert source["query"]["query"] == "label_values(gitopsd_reconcile_total, source)"
    assert source["multi"] and source["includeAll"]
    for panel in board["panels"]:
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
    for title, target in targets(board):
        assert target["datasource"] == DATASOURCE, title
        assert unfiltered_selectors(target["expr"]) == [], title
    ids = [panel["id"] for panel in board["panels"]]
    assert len(set(ids)) == len(ids)


def test_the_dashboard_shows_every_metric_gitopsd_exports() -> None:
    documented_metrics = {
        "gitopsd_drift_objects",
        "gitopsd_object_drift",
        "gitopsd_object_drift_over_budget",
        "gitopsd_drift_detection_seconds",
        "gitopsd_reconcile_total",
        "gitopsd_reconcile_duration_seconds",
        "gitopsd_apply_total",
        "gitopsd_health_objects",
        "gitopsd_source_health",
        "gitopsd_prune_blocked_total",
        "gitopsd_errors_total",
        "gitopsd_last_success_timestamp_seconds",
        "gitopsd_source_revision_info",
        "gitopsd_commit_to_applied_seconds",
        "gitopsd_git_fetch_duration_seconds",
        "gitopsd_api_requests_total",
        "gitopsd_watch_events_total",
        "gitopsd_leader",
        "gitopsd_notifications_total",
        "gitopsd_source_cluster_info",
        "gitopsd_cluster_reachable",
    }
    assert metrics_used(dashboard()) == documented_metrics


PAGE_LINKED = {"stat", "table"}
"""Panels with a value per source (not over time): each links to the source's status page."""


def page_links(panel: dict[str, Any]) -> list[str]:
    """The URLs of a panel's data links, on all its fields or on its `source` column."""
    config = panel.get("fieldConfig") or {}
    links = list((config.get("defaults") or {}).get("links") or [])
    for override in config.get("overrides") or []:
        if override["matcher"] == {"id": "byName", "options": "source"}:
            links += next(p["value"] for p in override["properties"] if p["id"] == "links")
    return [link["url"] for link in links]


def test_each_sources_value_links_to_its_status_page_by_its_metrics_label() -> None:
    board = dashboard()
    page = variables(board)["status_page"]
    assert (page["type"], page["label"]) == ("textbox", "Status page URL")
    per_source = [
        panel
        for panel in board["panels"]
        if panel["type"] in PAGE_LINKED and "source" in panel["targets"][0]["expr"]
    ]
    assert len(per_source) == 6
    for panel in per_source:
        field = "__data.fields" if panel["type"] == "table" else "__field.labels"
        wanted = f"${{status_page}}/sources/${{{field}.source:percentencode}}"
        assert page_links(panel) == [wanted], panel["title"]
    # Grafana's percentencode is encodeURIComponent: a GitSync's label is the page's path
    assert SourceLine("team/web").path == "/sources/" + quote("team/web", safe="")


def test_the_grafana_kustomization_renders_the_labelled_config_map(binaries: Binaries) -> None:
    rendered = subprocess.run(
        [str(binaries.kubectl), "kustomize", str(GRAFANA)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert rendered.returncode == 0, rendered.stderr

    [config_map] = list(yaml.safe_load_all(rendered.stdout))
    assert config_map["kind"] == "ConfigMap"
    metadata = config_map["metadata"]
    assert (metadata["name"], metadata["namespace"]) == ("gitopsd-dashboard", "gitopsd-system")
    assert metadata["labels"]["grafana_dashboard"] == "1"
    assert metadata["annotations"]["grafana_folder"] == "gitopsd"
    assert config_map["data"] == {DASHBOARD.name: DASHBOARD.read_text()}


# Every expression, evaluated by Prometheus on a daemon that made each condition happen


@dataclass(frozen=True)
class Shape:
    """What a query returns: each series has exactly `labels`; `rows` are the values of
    those labels expected (all of them when `exact`), each with a finite value, > 0 when
    `positive`."""

    labels: tuple[str, ...]
    rows: frozenset[tuple[str, ...]]
    exact: bool = True
    positive: bool = True

    def mismatch(self, found: list[dict[str, Any]]) -> str | None:
        """Why `found` does not have this shape (None when it does)."""
        values = {}
        for series in found:
            labels = {k: v for k, v in series["metric"].items() if k != "__name__"}
            if set(labels) != set(self.labels):
                return f"labels {sorted(labels)}, not {sorted(self.labels)}"
            values[tuple(labels[k] for k in self.labels)] = float(series["value"][1])
        if self.exact and set(values) != self.rows:
            return f"series {sorted(values)}, not {sorted(self.rows)}"
        for row in self.rows:
            value = values.get(row, math.nan)
            if not math.isfinite(value) or (self.positive and value <= 0):
                return f"{row}: {value}, in {values}"
        return None


def shape(labels: tuple[str, ...], *rows: tuple[str, ...], **options: bool) -> Shape:
    return Shape(labels, frozenset(rows), **options)


SOURCES = ("drifting", "failing", "pruning")


def per_source(*sources: str, **options: bool) -> Shape:
    return shape(("source",), *((s,) for s in sources), **options)


def quantile_shapes(*sources: str) -> list[Shape]:
    """p50, p90 and p99 of each of `sources` (more series may come: NaN for no traffic)."""
    return [per_source(*sources, exact=False)] * 3


def panel_shapes(
    namespace: str, revisions: dict[str, str], instance: str
) -> dict[str, list[Shape]]:
    """What each panel's queries return, in order, once the test made everything happen."""
    drift = (("drifting", "ConfigMap", "modified"), ("pruning", "ConfigMap", "extraneous"))
    kept = [("pruning", "ConfigMap", namespace, f"pruning-{n}", "unknown") for n in range(3)]
    return {
        "Drifted objects": [per_source("drifting", "pruning")],
        "Drifted objects not listed": [per_source("drifting", "pruning", positive=False)],
        "Since last clean reconcile": [per_source("drifting", "pruning")],
        "Replicas leading": [shape((), ())],
        "Drift by state": [shape(("source", "state"), *((s, t) for s, _, t in drift))],
        "Drift by group/kind": [shape(("source", "group_kind", "state"), *drift)],
        # No node takes the pods of `drifting`'s Deployment: InProgress for good.
        "Source health": [
            shape(("source", "status"), ("drifting", "InProgress"), ("pruning", "Current"))
        ],
        "Objects by health": [
            shape(
                ("source", "group_kind", "status"),
                ("drifting", "ConfigMap", "Current"),
                ("drifting", "Deployment.apps", "InProgress"),
                ("pruning", "ConfigMap", "Current"),
            )
        ],
        "Drifted objects and who drifted them": [
            shape(
                ("source", "group_kind", "namespace", "name", "manager"),
                ("drifting", "ConfigMap", namespace, "drifting-a", "kubectl-patch"),
                *kept,
            )
        ],
        "Reconciles by result": [
            shape(
                ("source", "result"),
                ("drifting", "success"),
                ("failing", "failed"),
                ("pruning", "success"),
            )
        ],
        "Reconcile duration": quantile_shapes(*SOURCES),
        "Objects acted on by action and result": [
            shape(
                ("source", "action", "result"),
                ("drifting", "created", "success"),
                ("failing", "apply", "invalid"),
                ("pruning", "created", "success"),
                exact=False,
            )
        ],
        "Errors by stage and reason": [
            shape(("source", "stage", "reason"), ("failing", "cluster", "invalid"))
        ],
        "Drift detection latency": quantile_shapes("drifting"),
        "Commit to applied latency": quantile_shapes("pruning"),
        "Objects kept by prune guards": [shape(("source", "reason"), ("pruning", "threshold"))],
        "Git fetch duration": quantile_shapes(*SOURCES),
        "Source revision and cluster": [
            shape(
                ("source", "revision", "cluster"),
                *((s, revisions[s], "in-cluster") for s in SOURCES),
            )
        ],
        "Leader": [shape(("instance",), (instance,))],  # no pod label outside Kubernetes
        "API requests by cluster, verb and code": [
            shape(
                ("cluster", "verb", "code"),
                ("in-cluster", "PATCH", "200"),
                ("in-cluster", "PATCH", "422"),
                exact=False,
            )
        ],
        "Clusters reachable": [shape(("cluster",), ("in-cluster",))],
        # kubectl's edit of drifting-a moved a field gitopsd owns
        "Watch events by resource and outcome": [
            shape(("resource", "outcome"), ("configmaps", "owned"), exact=False)
        ],
        # `chat` takes every message; `down` refuses the connection, tried once
        "Notifications by provider and outcome": [
            shape(
                ("source", "provider", "outcome"),
                ("failing", "chat", "sent"),
                ("failing", "down", "failed"),
                ("pruning", "chat", "sent"),
                exact=False,
            )
        ],
    }


ALERT_SHAPES = {
    "GitopsdDriftPersists": shape(
        ("source", "group_kind", "state"),
        ("drifting", "ConfigMap", "modified"),
        ("pruning", "ConfigMap", "extraneous"),
    ),
    "GitopsdSyncFailing": per_source("failing"),
    "GitopsdSourceStale": per_source("failing"),  # never succeeded; the others just did
    "GitopsdPruneBlocked": shape(("source", "reason"), ("pruning", "threshold")),
    "GitopsdNoLeader": shape(()),  # the daemon leads
    "GitopsdReplicaNotWriting": shape(()),  # no sharding: no members
    "GitopsdErrorsRising": shape(("source", "stage", "reason"), ("failing", "cluster", "invalid")),
    "GitopsdSourceUnhealthy": shape(("source", "status"), ("drifting", "InProgress")),
    "GitopsdRevisionRefused": shape(()),  # no source verifies signatures here
    # `down` refuses every connection, tried once
    "GitopsdNotificationsFailing": shape(("source", "provider"), ("failing", "down"), exact=False),
    "GitopsdClusterUnreachable": shape(()),  # the one cluster answers
}


def instantiate(expr: str, source: str = ".*") -> str:
    """`expr` with Grafana's variables replaced, as Grafana would send it."""
    query = expr.replace("$__rate_interval", RATE_INTERVAL).replace("$source", source)
    assert "$" not in query, f"a variable the test does not know: {query}"
    return query


def wait_for_shape(server: Prometheus, what: str, promql: str, expected: Shape) -> None:
    """Waits until `promql` returns `expected`; fails saying what it returned last."""
    last: list[str | None] = [None]

    def matches() -> bool:
        last[0] = expected.mismatch(server.query(promql))
        return last[0] is None

    try:
        wait_for(matches, what, 180)
    except AssertionError as error:
        raise AssertionError(f"{error}\n{promql}\n{last[0]}") from None


def assert_filtered_to(server: Prometheus, title: str, expr: str, source: str) -> None:
    """With `$source` set to one source, no series of another shows."""
    shown = {s["metric"].get("source") for s in server.query(instantiate(expr, source))}
    assert shown <= {source, None}, f"{title}: {shown}"


@dataclass
class Scene:
    daemon: DaemonProcess
    server: Prometheus
    namespace: str
    repos: dict[str, GitRepo]
    revisions: dict[str, str]  # the revision each source read last


def wait_seen(server: Prometheus, promql: str, what: str) -> None:
    """Waits until `promql` returns a series."""
    wait_for(lambda: server.query(promql), f"{what}, in Prometheus", 60)


def drift_twice(scene: Scene, gitopsd: Gitopsd) -> None:
    """Two out-of-band edits, the second once Prometheus scraped the first's detection:
    a histogram is born at its first observation, so a rate needs a second one."""
    for n in (1, 2):
        patch = json.dumps({"data": {"k": f"edited-{n}"}})
        scope = ("-n", scene.namespace, "--type", "merge", "-p", patch)
        gitopsd.kubectl("patch", "configmap", "drifting-a", *scope)
        detected = f'gitopsd_drift_detection_seconds_count{{source="drifting"}} >= {n}'
        wait_seen(scene.server, detected, f"detection {n}")


def block_a_prune(scene: Scene) -> None:
    """Git drops 3 of 8 objects, more than the 25 % prune budget allows."""
    applied = 'gitopsd_commit_to_applied_seconds_count{source="pruning"} >= 1'
    wait_seen(scene.server, applied, "the first commit applied")
    scene.revisions["pruning"] = scene.repos["pruning"].commit(
        dict.fromkeys(f"pruning-{n}.yaml" for n in range(3))
    )
    blocked = 'gitopsd_prune_blocked_total{source="pruning", reason="threshold"} == 3'
    wait_seen(scene.server, blocked, "the blocked prune")


def fail_again(scene: Scene, gitopsd: Gitopsd, times: int) -> None:
    """Failing reconciles asked for now, each waited for: the errors GitopsdErrorsRising
    counts within its 10 minutes, however long the test took to get here (the backoff
    alone spaces them minutes apart after the first few)."""
    for _ in range(times):
        run = gitopsd("reconcile", "failing", "--daemon", scene.daemon.control_url)
        # an invalid ConfigMap: bad input, as `gitopsd sync` says of it too
        assert run.code == 2 and run.out.startswith("failing: failed: Invalid: "), run.text


def invalid_config_map(name: str) -> dict[str, str]:
    """A ConfigMap the API server refuses (a data key may not hold a space)."""
    return {
        f"{name}.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
        'data:\n  "not a key": v\n'
    }


def applied(admin_api: Any, namespace: str, *names: str) -> bool:
    return all(config_map_value(admin_api, namespace, name) == "v" for name in names)


@pytest.fixture
def scene(
    daemons: Daemons,
    prometheus_binaries: PrometheusBinaries,
    admin_api: Any,
    git_server: GitServer,
    namespace: str,
    tmp_path: Path,
) -> Iterator[Scene]:
    receivers = serving_receivers()
    """One daemon with three sources, scraped every second: `drifting` (selfHeal off, and a
    Deployment whose pods no node takes), `failing` (an object the API
    server refuses) and `pruning` (prune on)."""
    repos = {name: git_server.create_repo(unique_name(name)) for name in SOURCES}
    never_rolled_out = deployment("web", pods_on=NOWHERE, deadline=3600)
    revisions = {
        "drifting": repos["drifting"].commit(
            config_map_files_with_data("drifting-a") | never_rolled_out
        ),
        "failing": repos["failing"].commit(invalid_config_map("failing-a")),
        "pruning": repos["pruning"].commit(
            config_map_files_with_data(*(f"pruning-{n}" for n in range(8)))
        ),
    }
    fields: dict[str, dict[str, Any]] = {
        "drifting": {"selfHeal": False},
        "pruning": {"prune": True},
    }
    sources = [
        daemons.source(git_server.file_url(repos[name]), name=name, **fields.get(name, {}))
        for name in SOURCES
    ]
    chat = {"name": "chat", "type": "slack", "address": f"{receivers.url}/slack"}
    down = {"name": "down", "type": "slack", "address": "http://127.0.0.1:1/slack"}
    told = {"providers": [chat, down], "attempts": 1}
    daemon = daemons.start_with(sources, "daemon", notifications=told)
    # Prometheus scrapes from the daemon's first moment: a counter is born at its first
    # increment and increase() counts only what follows the first sample it saw, so the
    # failing source's quick first retries, made before a late first scrape, would be lost
    # to GitopsdErrorsRising (its later ones come minutes apart).
    server = Prometheus(
        prometheus_binaries, tmp_path / "prometheus", [daemon.config["probeListen"]]
    )
    try:
        server.start()
        daemon.start()
        wait_seen(server, 'up{job="gitopsd"} == 1', "gitopsd scraped")
        wait_for(lambda: applied(admin_api, namespace, "drifting-a", "pruning-7"), "syncs", 60)
        yield Scene(daemon, server, namespace, repos, revisions)
    finally:
        server.stop()
        receivers.close()


def test_prometheus_answers_every_panel_and_alert_as_the_daemon_behaved(
    scene: Scene, gitopsd: Gitopsd
) -> None:
    drift_twice(scene, gitopsd)
    block_a_prune(scene)

    board = dashboard()
    expected = panel_shapes(scene.namespace, scene.revisions, scene.daemon.config["probeListen"])
    assert set(expected) == {panel["title"] for panel in board["panels"]}
    for panel in board["panels"]:
        for target, wanted in zip(panel["targets"], expected[panel["title"]], strict=True):
            wait_for_shape(scene.server, panel["title"], instantiate(target["expr"]), wanted)
            assert_filtered_to(scene.server, panel["title"], target["expr"], "failing")
    fail_again(scene, gitopsd, 6)
    for rule in rules(prometheus_rule()):
        wait_for_shape(scene.server, rule["alert"], rule["expr"], ALERT_SHAPES[rule["alert"]])

    assert scene.daemon.stop() == 0

    [no_leader] = [r["expr"] for r in rules(prometheus_rule()) if r["alert"] == "GitopsdNoLeader"]
    wait_for_shape(scene.server, "no leader once the daemon stopped", no_leader, shape((), ()))
