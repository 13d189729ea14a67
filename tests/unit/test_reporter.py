"""The reporter of a daemon's source: health assessed again when only status moved."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client import CollectorRegistry

from gitopsd import configfile
from gitopsd.cluster import Cluster
from gitopsd.daemon.reporter import Reporter
from gitopsd.health import Health, Status
from gitopsd.metrics import Recorder
from gitopsd.objects import Body, ObjectKey
from gitopsd.reconcile import State

WEB = ObjectKey("apps", "Deployment", "app", "web")
API = ObjectKey("apps", "Deployment", "app", "api")


def deployment(updated: int) -> Body:
    """A Deployment of 2 replicas rolling out, `updated` of them updated."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "app", "generation": 1},
        "spec": {"replicas": 2},
        "status": {
            "observedGeneration": 1,
            "replicas": 2,
            "updatedReplicas": updated,
            "readyReplicas": updated,
            "availableReplicas": updated,
        },
    }


def reporter(tmp_path: Path, registry: CollectorRegistry) -> Reporter:
    config = tmp_path / "gitopsd.yaml"
    source = {"name": "app", "repository": str(tmp_path), "namespace": "app"}
    config.write_text(json.dumps({"kubeconfig": str(tmp_path / "none"), "sources": [source]}))
    [source_config] = configfile.load(config).sources
    cluster: Cluster = None  # type: ignore[assignment]  # health alone writes nothing
    return Reporter(source_config, Recorder(registry), cluster, State())


def healthy_objects(registry: CollectorRegistry, status: str) -> float | None:
    labels = {"source": "app", "group_kind": "Deployment.apps", "status": status}
    return registry.get_sample_value("gitopsd_health_objects", labels)


def test_health_assessed_again_is_told_only_where_it_moved(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    told = reporter(tmp_path, registry)
    rolling = Health(Status.IN_PROGRESS, "Rollout", "waiting")
    told.report.health = {WEB: rolling, API: Health(Status.CURRENT)}

    assert told.reassessed({WEB: deployment(updated=2)}, None)  # rolled out
    assert told.report.health[WEB].status == Status.CURRENT
    assert healthy_objects(registry, "Current") == 2

    told.report.health = before = {**told.report.health}
    assert not told.reassessed({WEB: deployment(updated=2)}, None)  # status moved, health not
    assert told.report.health is before  # nothing told again
