"""A kind discovery cannot resolve (its CRD deleted, its APIService without a backend) is
never reported pruned nor forgotten; every other kind keeps syncing and pruning."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client

from gitopsd import inventory
from gitopsd.cluster import Cluster
from gitopsd.cluster.discovery import AGGREGATED
from gitopsd.objects import APPLYSET_GROUP_KINDS_ANNOTATION, ObjectKey
from gitopsd.resources import CONFIG_MAPS
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_names
from tests.harness.commands import INVALID, PRUNE_BLOCKED, scope
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import unique_name
from tests.harness.manifests import config_map_files
from tests.harness.waiting import wait_for


@dataclass
class WidgetGroup:
    """A CRD-defined kind Widget in a group of its own, and the admin's view of discovery."""

    group: str
    admin: Cluster
    core: Any
    extensions: Any
    registrations: Any

    @property
    def crd_name(self) -> str:
        return f"widgets.{self.group}"

    def freshness(self) -> dict[str, str]:
        """Each group in aggregated discovery, with the freshness of its first version."""
        groups = self.admin.api.request("GET", "/apis", accept=AGGREGATED).get("items") or []
        return {
            g["metadata"]["name"]: (g.get("versions") or [{}])[0].get("freshness", "")
            for g in groups
        }

    def define(self) -> None:
        self.extensions.create_custom_resource_definition(widget_crd(self.group))
        wait_for(lambda: self.freshness().get(self.group) == "Current", "Widget to be served")

    def delete_definition(self) -> None:
        """Deletes the CRD; the API server deletes its objects and stops serving the kind."""
        self.extensions.delete_custom_resource_definition(self.crd_name)
        wait_for(lambda: self.group not in self.freshness(), "Widget to be no longer served")

    def break_discovery(self, namespace: str) -> None:
        """Serves the group through an APIService whose Service has no backend: the group's
        discovery fails (v1.34 lists it as Stale)."""
        service = {"metadata": {"name": "nobackend"}, "spec": {"ports": [{"port": 443}]}}
        self.core.create_namespaced_service(namespace, service)
        self.registrations.create_api_service(
            {
                "metadata": {"name": f"v1.{self.group}"},
                "spec": {
                    "group": self.group,
                    "version": "v1",
                    "service": {"name": "nobackend", "namespace": namespace},
                    "insecureSkipTLSVerify": True,
                    "groupPriorityMinimum": 1000,
                    "versionPriority": 15,
                },
            }
        )
        wait_for(lambda: self.freshness().get(self.group) == "Stale", "the group to go Stale")

    def clean_up(self) -> None:
        for delete, name in (
            (self.registrations.delete_api_service, f"v1.{self.group}"),
            (self.extensions.delete_custom_resource_definition, self.crd_name),
        ):
            try:
                delete(name)
            except client.ApiException as error:
                if error.status != 404:
                    raise


def widget_crd(group: str) -> dict[str, Any]:
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def widget_file(group: str, name: str) -> str:
    return f"apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: {name}\n"


@pytest.fixture
def widgets(admin_api: Any, control_plane: ControlPlane) -> Iterator[WidgetGroup]:
    found = WidgetGroup(
        f"{unique_name('w')}.example.com",
        Cluster.connect(str(control_plane.kubeconfig)),
        client.CoreV1Api(admin_api),
        client.ApiextensionsV1Api(admin_api),
        client.ApiregistrationV1Api(admin_api),
    )
    found.define()
    yield found
    found.clean_up()


def parent_of(widgets: WidgetGroup, namespace: str) -> dict[str, Any]:
    parent = widgets.admin.get(CONFIG_MAPS, namespace, "gitopsd-test")
    assert parent is not None
    return parent


def synced_with_a_widget(
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    widgets: WidgetGroup,
    ns: str,
    name: str = "test",
) -> str:
    git_repo.commit(
        {**config_map_files("a", "b", "c", "d"), "w.yaml": widget_file(widgets.group, "w")}
    )
    url = git_server.file_url(git_repo)
    run = gitopsd("sync", url, *scope(ns), "--name", name, "--prune")  # the last name wins
    assert run.code == 0, run.text
    return url


def assert_kept_and_refused(run_out: str, widgets: WidgetGroup, namespace: str) -> None:
    """The widget is refused as discovery_incomplete, never pruned, and stays recorded, its
    group-kind in the parent."""
    widget = ObjectKey(widgets.group, "Widget", namespace, "w")
    assert f"{widget}  (prune refused: discovery_incomplete)" in run_out
    assert f"pruned     {widget}" not in run_out
    parent = parent_of(widgets, namespace)
    assert widget in inventory.recorded(parent)
    group_kinds = parent["metadata"]["annotations"][APPLYSET_GROUP_KINDS_ANNOTATION]
    assert f"Widget.{widgets.group}" in group_kinds.split(",")


@pytest.mark.case("FA-13")
def test_fa13_a_recorded_object_whose_crd_was_deleted_stays_recorded_and_is_refused(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    widgets: WidgetGroup,
) -> None:
    url = synced_with_a_widget(gitopsd, git_server, git_repo, widgets, namespace)
    widgets.delete_definition()
    git_repo.commit({"w.yaml": None, "d.yaml": None})

    run = gitopsd("sync", url, *scope(namespace), "--prune")

    assert run.code == PRUNE_BLOCKED, run.text
    assert_kept_and_refused(run.out, widgets, namespace)
    assert f"pruned     ConfigMap/{namespace}/d" in run.out  # other kinds still prune
    assert config_map_names(admin_api, namespace) >= {"a", "b", "c"}
    assert "d" not in config_map_names(admin_api, namespace)
    again = gitopsd("sync", url, *scope(namespace), "--prune")
    assert again.code == PRUNE_BLOCKED, again.text  # refused every time, never forgotten
    assert_kept_and_refused(again.out, widgets, namespace)


@pytest.mark.case("FA-14")
def test_fa14_a_group_whose_discovery_fails_blocks_only_its_own_prunes(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    widgets: WidgetGroup,
) -> None:
    url = synced_with_a_widget(gitopsd, git_server, git_repo, widgets, namespace)
    widgets.delete_definition()
    widgets.break_discovery(namespace)
    git_repo.commit({"w.yaml": None, "d.yaml": None, **config_map_files("e")})

    run = gitopsd("sync", url, *scope(namespace), "--prune")

    assert run.code == PRUNE_BLOCKED, run.text
    assert_kept_and_refused(run.out, widgets, namespace)
    assert f"created    ConfigMap/{namespace}/e" in run.out
    assert f"pruned     ConfigMap/{namespace}/d" in run.out
    assert config_map_names(admin_api, namespace) >= {"a", "b", "c", "e"}
    assert "d" not in config_map_names(admin_api, namespace)

    git_repo.commit({"w2.yaml": widget_file(widgets.group, "w2")})
    using = gitopsd("sync", url, *scope(namespace), "--prune")
    assert using.code == INVALID, using.text
    assert f"w2.yaml:1: Widget w2: the cluster's discovery of group {widgets.group} failed" in (
        using.err
    )


@pytest.mark.case("FA-14")
def test_fa14_the_daemon_counts_logs_and_keeps_a_recorded_object_it_cannot_see(
    gitopsd: Gitopsd,
    daemons: Daemons,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    widgets: WidgetGroup,
) -> None:
    url = synced_with_a_widget(gitopsd, git_server, git_repo, widgets, namespace, name="app")
    widgets.delete_definition()
    widgets.break_discovery(namespace)
    git_repo.commit({"w.yaml": None, "d.yaml": None})

    daemon = daemons.start(url, prune=True)

    daemon.wait_value(
        "gitopsd_prune_blocked_total",
        lambda v: v >= 1,
        "the prune of the widget to be refused",
        reason="discovery_incomplete",
    )
    wait_for(lambda: "d" not in config_map_names(admin_api, namespace), "d to be pruned")
    widget = ObjectKey(widgets.group, "Widget", namespace, "w")
    refusals = [line for line in daemon.log_lines() if line.get("object") == str(widget)]
    assert refusals and refusals[0]["message"] == "prune refused (discovery_incomplete)"
    parent = widgets.admin.get(CONFIG_MAPS, namespace, "gitopsd-app")
    assert parent is not None and widget in inventory.recorded(parent)
