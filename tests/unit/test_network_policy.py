"""The shipped install's network surface, read statically from config/ (TA-06, SE-19): the
NetworkPolicy names exactly the ports the Deployment exposes, the probes and the scrapes go
to the probe listener, which only Prometheus (and the pod's own node, the kubelet) may
reach, and the webhook listener is the one port open to everyone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gitopsd.configfile import load

CONFIG = Path(__file__).resolve().parents[2] / "config"
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def container() -> dict[str, Any]:
    [deployment] = documents(CONFIG / "manager" / "deployment.yaml")
    [found] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(found)


def container_ports() -> dict[str, int]:
    """The Deployment's ports by name."""
    return {port["name"]: port["containerPort"] for port in container()["ports"]}


def policy() -> dict[str, Any]:
    [found] = documents(CONFIG / "manager" / "network_policy.yaml")
    return found


def admitted() -> dict[str, list[dict[str, Any]]]:
    """The ports the policy admits, by name, each with its rule's `from` ([]: everyone)."""
    found = {}
    for rule in policy()["spec"]["ingress"]:
        for port in rule["ports"]:
            found[port["port"]] = rule.get("from", [])
    return found


def test_ta06_the_policy_admits_exactly_the_ports_the_deployment_exposes() -> None:
    assert set(admitted()) == set(container_ports())
    assert policy()["spec"]["policyTypes"] == ["Ingress"]
    [deployment] = documents(CONFIG / "manager" / "deployment.yaml")
    pods = deployment["spec"]["template"]["metadata"]["labels"]
    assert policy()["spec"]["podSelector"]["matchLabels"].items() <= pods.items()
    kustomization = yaml.safe_load((CONFIG / "manager" / "kustomization.yaml").read_text())
    assert "network_policy.yaml" in kustomization["resources"]


@pytest.mark.parametrize("variant", ["manager", "namespaced"])
def test_ta06_probes_and_scrapes_reach_the_probe_listener_only_prometheus_may_reach(
    variant: str,
) -> None:
    """The probes' port is probeListen's, admitted from Prometheus' pods only (the
    kubelet's probes come from the pod's node, always admitted); the webhooks' port is
    listen's, admitted from everyone."""
    config = load(CONFIG / variant / "gitopsd.yaml")
    ports = container_ports()
    probed = {container()[probe]["httpGet"]["port"] for probe in PROBES}
    assert probed == {"http-metrics"}
    assert ports["http-metrics"] == config.probe_address[1]
    assert ports["http-webhooks"] == config.listen_address[1]
    rules = admitted()
    assert rules["http-webhooks"] == []
    [prometheus] = rules["http-metrics"]
    assert prometheus["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}


def test_ta06_the_metrics_service_and_service_monitor_scrape_the_probe_listener() -> None:
    services = {
        service["metadata"]["name"]: service
        for service in documents(CONFIG / "manager" / "service.yaml")
    }
    [metrics] = services["gitopsd-metrics"]["spec"]["ports"]
    [webhooks] = services["gitopsd-webhooks"]["spec"]["ports"]
    assert (metrics["targetPort"], webhooks["targetPort"]) == ("http-metrics", "http-webhooks")
    [monitor] = documents(CONFIG / "prometheus" / "servicemonitor.yaml")
    assert [endpoint["port"] for endpoint in monitor["spec"]["endpoints"]] == [metrics["name"]]
