"""A source's own health rules in CEL against the real API server: a LoadBalancer Service
on a cluster without a load-balancer provider made Current; a custom resource's status
convention of its own read, by `sync --wait` and by the daemon's watch cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.harness.cli import Gitopsd
from tests.harness.commands import UNHEALTHY, scope
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import wait_established
from tests.harness.manifests import WIDGETS
from tests.harness.status_writer import StatusWriter

LOAD_BALANCER = """apiVersion: v1
kind: Service
metadata:
  name: frontend-external
spec:
  type: LoadBalancer
  selector: {app: frontend}
  ports: [{name: http, port: 80, targetPort: 8080}]
"""
SERVICE_RULE = {
    "apiVersion": "v1",
    "kind": "Service",
    "current": "has(spec.clusterIP)",  # Current once the API server gave it its address
}
GAUGE_RULE = {
    "apiVersion": "health.example.com/v1",
    "kind": "Gauge",
    "current": "status.level == 'normal'",
    "failed": "status.level == 'critical'",
}
"""`level` is a status field no built-in rule reads: the watch cache must keep it."""


def test_a_rule_makes_a_load_balancer_without_a_provider_current(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit({"service.yaml": LOAD_BALANCER})
    url = git_server.file_url(git_repo)
    service = f"Service/{namespace}/frontend-external"

    stuck = gitopsd("sync", url, *scope(namespace), "--wait", "--timeout", "3s")
    assert stuck.code == UNHEALTHY, stuck.text
    assert f"{service}: InProgress" in stuck.err

    rule = ["--health-check-expr", json.dumps(SERVICE_RULE)]
    done = gitopsd("sync", url, *scope(namespace), *rule, "--wait", "--timeout", "1m")
    assert done.code == 0, done.text
    assert "health: 1 Current" in done.out


def test_a_rule_reads_a_custom_resources_own_status_convention(
    admin_api: Any,
    daemons: Daemons,
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    # the Gauge CRD is cluster-wide and may be another test's source's: made here, not synced
    crd = tmp_path / "crd.yaml"
    crd.write_text(WIDGETS["crd.yaml"])
    gitopsd.kubectl("apply", "--server-side", "--field-manager=test", "-f", str(crd))
    wait_established(admin_api, "gauges.health.example.com")
    git_repo.commit({"gauge.yaml": WIDGETS["gauge.yaml"]})
    daemon = daemons.start(git_server.file_url(git_repo), healthCheckExprs=[GAUGE_RULE])
    controller = StatusWriter(gitopsd.kubectl, namespace)  # Gauges have no controller
    gauge = {"source": "app", "group_kind": "Gauge.health.example.com"}

    def health_of_gauges(status: str) -> None:
        daemon.wait_value(
            "gitopsd_health_objects", lambda v: v == 1, f"the Gauge {status}", 30,
            **gauge, status=status,
        )  # fmt: skip

    health_of_gauges("InProgress")  # no status yet: none of the expressions holds
    controller.write("gauges.health.example.com", "pressure", lambda found: {"level": "normal"})
    health_of_gauges("Current")
    controller.write("gauges.health.example.com", "pressure", lambda found: {"level": "critical"})
    health_of_gauges("Failed")
    status: Any = daemon.value("gitopsd_source_health", source="app", status="Failed")
    assert status == 1
