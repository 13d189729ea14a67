"""gitopsd's cluster client against the real API server: requests go out at once over
connections it keeps, lists come page by page (and start over when their snapshot
expires), and the projection the watch cache and lists keep gives exactly the drift,
attribution, takeover and ownership of the whole object."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitopsd import diff, health, inventory, sync_options
from gitopsd.cluster import ApiError, Cluster, Resource
from gitopsd.config import SyncSettings
from gitopsd.errors import ClusterReason
from gitopsd.managed_fields import takeover_patch
from gitopsd.objects import PRUNE_ANNOTATION, Body, ObjectKey, key_of, owner_of
from tests.harness.controllers import NOWHERE
from tests.harness.controlplane import ControlPlane
from tests.harness.faultproxy import Answer, Fault, FaultProxy, Request
from tests.harness.kube import unique_name
from tests.harness.waiting import wait_for

CONFIG_MAPS = Resource("", "v1", "ConfigMap", "configmaps", namespaced=True)
DEPLOYMENTS = Resource("apps", "v1", "Deployment", "deployments", namespaced=True)
SERVICES = Resource("", "v1", "Service", "services", namespaced=True)
SECRETS = Resource("", "v1", "Secret", "secrets", namespaced=True)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False
)
MERGE_PATCH = "application/merge-patch+json"
EXPIRED = Answer(
    410,
    b'{"kind":"Status","apiVersion":"v1","status":"Failure","code":410,"reason":"Expired",'
    b'"message":"The provided continue parameter is too old to display a consistent list"}',
)
APPLYSET = inventory.ApplySet.of_source("reads", "default")
IN_FLIGHT = SyncSettings(name="any").concurrency


@pytest.fixture
def admin(control_plane: ControlPlane) -> Cluster:
    return Cluster.connect(str(control_plane.kubeconfig))


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[FaultProxy]:
    started = FaultProxy(control_plane).start()
    yield started
    started.stop()


def config_map(namespace: str, name: str) -> Body:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"k": "v"},
    }


def continued(request: Request) -> bool:
    return request.method == "GET" and "continue=" in request.query


def dry_run(request: Request) -> bool:
    return request.method == "PATCH" and "dryRun=All" in request.query


def test_requests_go_out_at_once_over_connections_kept_for_the_next_burst(
    proxy: FaultProxy, namespace: str, tmp_path: Path
) -> None:
    cluster = Cluster.connect(str(proxy.kubeconfig(tmp_path / "kubeconfig")))
    bodies = [config_map(namespace, f"c{number}") for number in range(IN_FLIGHT)]

    def burst() -> None:
        """Dry-runs that the proxy holds until all of them are there."""
        together = threading.Barrier(IN_FLIGHT, timeout=60)
        held = proxy.inject(Fault(dry_run, hold=together, times=IN_FLIGHT))
        with ThreadPoolExecutor(IN_FLIGHT) as pool:
            list(
                pool.map(lambda b: cluster.apply(CONFIG_MAPS, b, dry_run=True, force=True), bodies)
            )
        assert held.fired == IN_FLIGHT

    burst()
    opened = proxy.accepted
    burst()

    assert opened >= IN_FLIGHT and proxy.accepted == opened  # every connection was kept


def test_a_list_comes_in_pages_of_the_page_size(admin: Cluster, namespace: str) -> None:
    for name in "abcde":
        admin.apply(CONFIG_MAPS, config_map(namespace, name), dry_run=False, force=True)
    admin.page_size = 2
    before = admin.api.counters.snapshot().get(("GET", 200), 0)

    listed = admin.list_objects(CONFIG_MAPS, namespace)

    assert sorted(b["metadata"]["name"] for b in listed if b["metadata"]["name"] in "abcde") == [
        *"abcde"
    ]
    pages = admin.api.counters.snapshot()[("GET", 200)] - before
    assert pages == -(-len(listed) // 2)  # every page full but the last


def test_a_list_whose_snapshot_expired_starts_over_and_mixes_no_pages(
    proxy: FaultProxy, namespace: str, tmp_path: Path, admin: Cluster
) -> None:
    for name in "abcde":
        admin.apply(CONFIG_MAPS, config_map(namespace, name), dry_run=False, force=True)
    cluster = Cluster.connect(str(proxy.kubeconfig(tmp_path / "kubeconfig")))
    cluster.page_size = 2
    expired = proxy.inject(Fault(continued, EXPIRED, times=1))

    listed = cluster.list_objects(CONFIG_MAPS, namespace, selector="")

    assert expired.fired == 1
    names = [b["metadata"]["name"] for b in listed]
    assert sorted(names) == sorted(set(names)) and {*"abcde"} <= set(names)


def test_a_list_projects_and_holds_only_what_its_reader_keeps_and_names_every_key(
    admin: Cluster, namespace: str
) -> None:
    """A watch cache of all namespaces reads every object of its kind, most of them others'."""
    for name in "abcde":
        admin.apply(CONFIG_MAPS, config_map(namespace, name), dry_run=False, force=True)
    admin.page_size = 2

    listing = admin.list_with_version(
        CONFIG_MAPS, namespace, projected=True, keep=lambda key, body: key.name in ("a", "b")
    )

    assert sorted(b["metadata"]["name"] for b in listing.items) == ["a", "b"]
    assert all("creationTimestamp" not in b["metadata"] for b in listing.items)  # projected
    assert {key.name for key in listing.keys} >= {*"abcde"} and listing.version


def test_a_list_that_keeps_expiring_fails_with_410_after_a_few_restarts(
    proxy: FaultProxy, namespace: str, tmp_path: Path, admin: Cluster
) -> None:
    for name in "abc":
        admin.apply(CONFIG_MAPS, config_map(namespace, name), dry_run=False, force=True)
    cluster = Cluster.connect(str(proxy.kubeconfig(tmp_path / "kubeconfig")))
    cluster.page_size = 2
    expired = proxy.inject(Fault(continued, EXPIRED))

    with pytest.raises(ApiError) as failed:
        cluster.list_objects(CONFIG_MAPS, namespace)

    assert failed.value.status == 410 and failed.value.reason == "gone"
    assert expired.fired == 4  # the first list and three restarts


# The projection: the same drift, attribution, takeover and ownership as the whole object.


Edit = tuple[Body, str]
"""A merge patch and the field manager that makes it: kubectl or a controller."""
STATUS = {"status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True"}]}}
"""What a custom resource's controller would write (the test's kind has none)."""


@dataclass
class Case:
    resource: Resource
    declared: Body
    """What git declares, applied by gitopsd before the edits."""
    edits: list[Edit]
    status: str = ""
    """Who writes its status: "controller" (the cluster's), "test" (its kind has no
    controller: the test writes STATUS as one would), or nobody."""

    @property
    def key(self) -> ObjectKey:
        return key_of(self.declared)

    @property
    def path(self) -> str:
        metadata = self.declared["metadata"]
        return self.resource.path(metadata["namespace"], metadata["name"])

    def live(self, cluster: Cluster) -> Body:
        found = cluster.get(self.resource, self.key.namespace, self.key.name)
        assert found is not None
        return found


def client_side_applied(kind: str) -> Edit:
    """kubectl's last-applied annotation, which drift ignores."""
    annotation = {diff.LAST_APPLIED: f'{{"kind":"{kind}"}}'}
    return {"metadata": {"annotations": annotation}}, "kubectl-client-side-apply"


def deployment(namespace: str) -> Case:
    labels = {"app": "web"}
    container = {"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}
    pods = {"containers": [container], "nodeSelector": NOWHERE}  # a status that stays put
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pods},
        },
    }
    edit = {"spec": {"replicas": 5}, "metadata": {"labels": {"team": "ops"}}}
    return Case(DEPLOYMENTS, APPLYSET.member(body), [(edit, "kubectl-edit")], "controller")


def service(namespace: str) -> Case:
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]},
    }
    edits: list[Edit] = [
        ({"spec": {"selector": {"app": "api"}, "sessionAffinity": "ClientIP"}}, "kubectl-patch"),
        ({"metadata": {"annotations": {PRUNE_ANNOTATION: "disabled"}}}, "kubectl-annotate"),
    ]
    return Case(SERVICES, APPLYSET.member(body), edits)


def secret(namespace: str) -> Case:
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "token", "namespace": namespace},
        "data": {"token": "c2VjcmV0LXZhbHVl"},
    }
    return Case(
        SECRETS, APPLYSET.member(body), [({"data": {"token": "Y2hhbmdlZA=="}}, "kubectl-edit")]
    )


def crd(group: str) -> Body:
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    version = {
        "name": "v1",
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
        "schema": {"openAPIV3Schema": schema},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
            "scope": "Namespaced",
            "versions": [version],
        },
    }


def gadget(admin: Cluster, namespace: str) -> Case:
    """A custom resource, of a kind defined for this test."""
    group = f"{unique_name('reads')}.example.com"
    admin.apply(CRDS, crd(group), dry_run=False, force=True)
    admin.wait_established([f"gadgets.{group}"], 60)
    body = {
        "apiVersion": f"{group}/v1",
        "kind": "Gadget",
        "metadata": {"name": "g", "namespace": namespace},
        "spec": {"size": 3, "parts": [{"name": "a", "count": 1}]},
    }
    resource = Resource(group, "v1", "Gadget", "gadgets", namespaced=True)
    return Case(resource, APPLYSET.member(body), [({"spec": {"size": 4}}, "kubectl-edit")], "test")


def drifted(admin: Cluster, namespace: str) -> list[Case]:
    """Each kind applied by gitopsd, annotated by kubectl's client-side apply, its status
    written by a controller where it has one, then edited out of band; returned once the
    controllers have caught up with the edits."""
    cases = [deployment(namespace), service(namespace), secret(namespace), gadget(admin, namespace)]
    for case in cases:
        admin.apply(case.resource, case.declared, dry_run=False, force=True)
        write(admin, case.path, client_side_applied(case.key.kind))
        if case.status == "test":
            write(admin, case.path + "/status", (STATUS, "gadget-controller"))
        for edit in case.edits:
            write(admin, case.path, edit)
    for case in cases:
        if case.status == "controller":
            wait_for(lambda: caught_up(admin, case), f"{case.key}'s status")  # noqa: B023
    return cases


def caught_up(admin: Cluster, case: Case) -> bool:
    """The Deployment controller has seen the last edit and scaled: a status that stays."""
    live = case.live(admin)
    status = live.get("status") or {}
    generation = live["metadata"]["generation"]
    return bool(status.get("observedGeneration") == generation and status.get("replicas") == 5)


def write(cluster: Cluster, path: str, edit: Edit) -> None:
    patch, manager = edit
    query = [("fieldManager", manager)]
    cluster.api.request("PATCH", path, query, patch, content_type=MERGE_PATCH)


def test_drift_measured_on_projections_is_the_drift_of_the_whole_objects(
    admin: Cluster, namespace: str
) -> None:
    for case in drifted(admin, namespace):
        expected = admin.apply(case.resource, case.declared, dry_run=True, force=True)
        whole = case.live(admin)
        listed = admin.list_objects(case.resource, namespace, APPLYSET.selector, projected=True)
        (projected,) = [body for body in listed if key_of(body) == case.key]

        assert diff.LAST_APPLIED in whole["metadata"]["annotations"]  # dropped, as in drift
        assert diff.LAST_APPLIED not in (projected["metadata"].get("annotations") or {})
        assert projected.get("status") == (health.essentials(whole) or None)  # what health reads
        assert health.assess(projected) == health.assess(whole), case.key
        assert not case.status or whole["status"]["observedGeneration"] >= 1
        drift = diff.compare(case.key, expected, whole, case.declared)
        assert drift is not None and drift.changes, case.key  # real drift, with its managers
        assert diff.compare(case.key, expected, projected, case.declared) == drift, case.key
        expected = admin.apply(
            case.resource, case.declared, dry_run=True, force=True, projected=True
        )
        assert diff.compare(case.key, expected, projected, case.declared) == drift, case.key
        assert diff.normalize(projected) == diff.normalize(whole), case.key


def test_the_projection_keeps_what_takeover_and_ownership_read(
    admin: Cluster, namespace: str
) -> None:
    for case in drifted(admin, namespace):
        whole = case.live(admin)
        projected = admin.get(case.resource, namespace, case.key.name, projected=True)
        assert projected is not None and health.assess(projected) == health.assess(whole)

        assert takeover_patch(whole) is not None, case.key  # kubectl's fields to take over
        assert takeover_patch(projected) == takeover_patch(whole), case.key
        assert projected["metadata"]["managedFields"] == whole["metadata"]["managedFields"]
        assert projected["metadata"]["resourceVersion"] == whole["metadata"]["resourceVersion"]
        assert inventory.uid_prefix(projected) == inventory.uid_prefix(whole)
        assert APPLYSET.owns(projected) and owner_of(projected) == APPLYSET.id
        assert sync_options.prune_disabled(projected) == (case.resource == SERVICES)


def test_a_json_patch_whose_version_test_fails_is_a_conflict(
    admin: Cluster, namespace: str
) -> None:
    """The API server answers a failed `test` operation 422 Invalid; it means the object
    changed since it was read, so gitopsd calls it a conflict (read again, try again)."""
    created = admin.create(CONFIG_MAPS, config_map(namespace, "tested"))
    version = created["metadata"]["resourceVersion"]
    admin.patch(CONFIG_MAPS, namespace, "tested", [{"op": "add", "path": "/data/k", "value": "w"}])
    stale = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "add", "path": "/data/k", "value": "x"},
    ]

    with pytest.raises(ApiError) as raised:
        admin.patch(CONFIG_MAPS, namespace, "tested", stale)

    assert (raised.value.status, raised.value.reason) == (409, ClusterReason.CONFLICT)
    assert "changed since it was read" in str(raised.value)
    assert (admin.get(CONFIG_MAPS, namespace, "tested") or {})["data"] == {"k": "w"}
