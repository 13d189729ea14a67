"""The tenant boundary of operator mode: what a tenant edits (its
GitSync, its ApplySet parent, the Secrets it names) never widens what the daemon reads,
watches or discloses beyond the tenant's own rights. The daemon runs as the audited user,
so the API server's audit log holds every request it makes."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from gitopsd.inventory import RECORD_KEY, ApplySet, decode_record, encode_record
from gitopsd.objects import APPLYSET_PART_OF_LABEL, ObjectKey
from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.commands import scope
from tests.harness.controlplane import AUDITED_USER, ControlPlane
from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import (
    GROUP,
    PLURAL,
    VERSION,
    condition,
    create,
    get,
    patch_spec,
    wait_ready,
)
from tests.harness.kube import create_namespace
from tests.harness.loopback import Loopback, serving
from tests.harness.manifests import config_map_with_value
from tests.harness.operators import audited_operator, operator
from tests.harness.waiting import wait_for

KINDS = ",".join(
    [
        *("ConfigMap", "Secret", "Deployment.apps", "Role.rbac.authorization.k8s.io"),
        *("ServiceAccount", "Service", "Job.batch", "ClusterRole.rbac.authorization.k8s.io"),
    ]
)


def parent_patch(record: dict[ObjectKey, str], namespaces: str, kinds: str) -> dict[str, Any]:
    """What a tenant may write to its own parent: the record and both annotations."""
    return {
        "metadata": {
            "annotations": {
                "applyset.kubernetes.io/additional-namespaces": namespaces,
                "applyset.kubernetes.io/contains-group-kinds": kinds,
            }
        },
        "binaryData": {RECORD_KEY: base64.b64encode(encode_record(record)).decode()},
    }


@pytest.mark.case("SE-09")
def test_se09_a_tenant_cannot_steer_what_the_daemon_lists_watches_or_prunes_through_its_parent(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    """A GitSync without a ServiceAccount (the daemon's rights, confined to its namespace)
    whose tenant edits its parent: 401 namespaces and 8 kinds in the annotations, and a
    record naming an object of another namespace that carries the set's label, with its
    very uid (the strongest forgery). Then its GitSync changes, so the parent is read afresh
    and the revision synced again, prune on. ConfigMaps, the kind of its revision, the
    daemon watches in all namespaces for every source at once (one shared watch); no kind
    the forgery names is listed or watched beyond its namespace."""
    core: Any = client.CoreV1Api(admin_api)
    victim = create_namespace(admin_api)
    git_repo.commit({"app/own.yaml": config_map_with_value("own")})
    daemon = audited_operator(daemons, control_plane, namespace)
    spec = {"repository": {"url": git_server.file_url(git_repo)}, "paths": ["app"], "prune": True}
    create(admin_api, namespace, "tenant", spec)
    wait_ready(admin_api, namespace, "tenant", "True", "Succeeded")
    applyset = ApplySet.of_source("tenant", namespace)
    record = recorded(core, applyset)
    labels = {APPLYSET_PART_OF_LABEL: applyset.id}
    body = {"metadata": {"name": "precious", "labels": labels}}
    uid = core.create_namespaced_config_map(victim, body).metadata.uid
    record[ObjectKey("", "ConfigMap", victim, "precious")] = uid.replace("-", "")[:8]
    threads = daemon.threads()
    namespaces = ",".join([victim, *(f"ns-{n}" for n in range(400))])

    forgery = parent_patch(record, namespaces, KINDS)
    core.patch_namespaced_config_map(applyset.name, namespace, forgery)
    started = time.time()
    patch_spec(admin_api, namespace, "tenant", {"interval": "2s"})  # read afresh, and synced
    wait_ready(admin_api, namespace, "tenant", "True", "Succeeded")
    source = f"{namespace}/tenant"
    reconciles = daemon.value("gitopsd_reconcile_total", source=source)
    daemon.wait_value(
        "gitopsd_reconcile_total", lambda v: v >= reconciles + 3, "3 reconciles", source=source
    )

    elsewhere = [
        r
        for r in audit.requests(control_plane, AUDITED_USER, started)
        if r.namespace not in ("", namespace) or (r.namespace == "" and r.resource in FORGED)
    ]
    assert elsewhere == []
    assert core.read_namespaced_config_map("precious", victim).metadata.uid == uid
    assert daemon.threads() < threads + 20  # not a list and a watch per forged namespace


FORGED = {"clusterroles", "secrets", "deployments", "roles", "serviceaccounts"}


def recorded(core: Any, applyset: ApplySet) -> dict[ObjectKey, str]:
    parent = core.read_namespaced_config_map(applyset.name, applyset.namespace)
    return decode_record(base64.b64decode(parent.binary_data[RECORD_KEY]))


def test_what_a_source_lists_is_bounded_whatever_its_parent_records(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit({"a.yaml": config_map_with_value("a")})
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    applyset = ApplySet.of_source("test", namespace)
    forged = {ObjectKey("", "ConfigMap", f"ns-{n}", "x"): "0a1b2c3d" for n in range(600)}
    core: Any = client.CoreV1Api(admin_api)
    core.patch_namespaced_config_map(applyset.name, namespace, parent_patch(forged, "", ""))

    run = gitopsd("sync", url, *scope(namespace))

    assert run.code == 2, run.text
    assert "lie in 601 kinds x namespaces" in run.err
    assert "over the limit of 500" in run.err and "(--max-watches, limits.maxWatches)" in run.err
    raised = gitopsd("diff", url, *scope(namespace), "--max-watches", "601")
    assert raised.code == 0, raised.text  # the limit is the user's to raise


# secretRef: a GitSync's creator never has the daemon disclose a Secret they could not read


@pytest.fixture
def collector() -> Iterator[Loopback]:
    """A git host of the tenant's choosing: it asks for credentials and keeps what it gets."""
    asking = (("WWW-Authenticate", 'Basic realm="loot"'),)
    with serving(Loopback(401, "/loot.git", headers=asking)) as found:
        yield found


def team_secret(api: Any, namespace: str, **annotations: str) -> str:
    """A Secret the platform team keeps in the tenant's namespace, which the tenant may not
    read: a git password worth stealing."""
    core: Any = client.CoreV1Api(api)
    body = {
        "metadata": {"name": "team-git", "annotations": annotations},
        "stringData": {"username": "team", "password": PASSWORD},
    }
    core.create_namespaced_secret(namespace, body)
    return "team-git"


PASSWORD = "s3cret-canary-5b1f0e"


def assert_nothing_disclosed(collector: Loopback, daemon: DaemonProcess, api: Any, ns: str) -> None:
    encoded = base64.b64encode(f"team:{PASSWORD}".encode()).decode()
    assert collector.requests == []  # not even asked: nothing was fetched
    assert encoded not in str(collector.requests)
    status = json.dumps(get(api, ns, "loot"))
    assert PASSWORD not in status + daemon.logs() and encoded not in daemon.logs()


@pytest.mark.case("SE-05")
def test_se05_a_gitsync_cannot_send_a_secret_of_its_namespace_to_a_host_of_its_choosing(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    collector: Loopback,
) -> None:
    """Without a ServiceAccount the daemon's rights read the Secret, so it is used only if
    it opts in to the URL: this one does not, and a second opts in to another host."""
    secret = team_secret(admin_api, namespace)
    daemon = operator(daemons, namespace)
    repository = {"url": collector.url, "secretRef": {"name": secret}}

    create(admin_api, namespace, "loot", {"repository": repository})
    refused = wait_ready(admin_api, namespace, "loot", "False", "Forbidden")

    message = condition(refused, "Ready")["message"]
    assert f"Secret {namespace}/{secret} (spec.repository.secretRef) does not allow" in message
    assert "gitopsd.io/git-credentials-for" in message
    assert condition(refused, "Stalled")["status"] == "True"
    assert_nothing_disclosed(collector, daemon, admin_api, namespace)


@pytest.mark.case("SE-05")
def test_se05_a_gitsync_with_a_serviceaccount_reads_its_secret_with_that_accounts_rights(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    collector: Loopback,
) -> None:
    """Opted in or not, the Secret is read as the account, which may not read it."""
    secret = team_secret(admin_api, namespace, **{"gitopsd.io/git-credentials-for": "http://"})
    core: Any = client.CoreV1Api(admin_api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "tenant"}})
    daemon = operator(daemons, namespace)
    spec = {"repository": {"url": collector.url, "secretRef": {"name": secret}}}

    create(admin_api, namespace, "loot", {**spec, "serviceAccountName": "tenant"})
    refused = wait_ready(admin_api, namespace, "loot", "False", "Forbidden")

    message = condition(refused, "Ready")["message"]
    assert f"Secret {namespace}/{secret} (spec.repository.secretRef): " in message
    assert f'User "system:serviceaccount:{namespace}:tenant" cannot get resource "secrets"' in (
        message
    )
    assert_nothing_disclosed(collector, daemon, admin_api, namespace)


# Smaller holes


@pytest.mark.case("SE-03")
def test_se03_a_deleted_gitsyncs_metric_series_go_with_it(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    """GitSyncs created and deleted again and again leave the exposition as it was."""
    git_repo.commit({"app/a.yaml": config_map_with_value("a")})
    daemon = operator(daemons, namespace)
    spec = {"repository": {"url": git_server.file_url(git_repo)}, "paths": ["app"]}
    objects: Any = client.CustomObjectsApi(admin_api)
    sizes = []
    for cycle in range(6):
        name = f"cycle-{cycle}"
        pruned = {"annotations": {"gitopsd.io/delete-policy": "prune"}}  # the next owns "a"
        create(admin_api, namespace, name, spec, **pruned)
        wait_ready(admin_api, namespace, name, "True", "Succeeded")
        source = f'source="{namespace}/{name}"'
        wait_for(lambda: source in daemon.metrics(), f"{name}'s series")  # noqa: B023
        objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        wait_for(lambda: source not in daemon.metrics(), f"{name}'s series gone")  # noqa: B023
        sizes.append(len(daemon.metrics()))

    assert max(sizes[1:]) - min(sizes[1:]) < 200  # the request tally and timings only


@pytest.mark.case("SE-09")
def test_se09_a_dependency_in_another_namespace_is_refused_without_the_daemons_consent(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    git_repo.commit({"app/a.yaml": config_map_with_value("a")})
    operator(daemons, namespace)
    spec = {
        "repository": {"url": git_server.file_url(git_repo)},
        "dependsOn": [{"name": "db", "namespace": "kube-system"}],
    }

    create(admin_api, namespace, "curious", spec)
    refused = wait_ready(admin_api, namespace, "curious", "False", "InvalidSpec")

    assert (
        "dependsOn: kube-system/db is in another namespace"
        in condition(refused, "Ready")["message"]
    )
    assert "gitSyncs.crossNamespaceRefs: true" in condition(refused, "Ready")["message"]
