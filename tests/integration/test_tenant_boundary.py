"""The tenant boundary of operator mode (issue 27 of the red team): what a tenant edits (its
GitSync, its ApplySet parent, the Secrets it names) never widens what the daemon reads,
watches or discloses beyond the tenant's own rights. The daemon runs as the audited user,
so the API server's audit log holds every request it makes."""

from __future__ import annotations

import base64
import time
from typing import Any

from kubernetes import client

from gitopsd.inventory import RECORD_KEY, ApplySet, decode_record, encode_record
from gitopsd.objects import APPLYSET_PART_OF_LABEL, ObjectKey
from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.controlplane import AUDITED_USER, ControlPlane
from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import create_namespace
from tests.integration.test_gitsync import config_map, create, patch_spec, wait_ready
from tests.integration.test_sync import scope

KINDS = ",".join(
    [
        *("ConfigMap", "Secret", "Deployment.apps", "Role.rbac.authorization.k8s.io"),
        *("ServiceAccount", "Service", "Job.batch", "ClusterRole.rbac.authorization.k8s.io"),
    ]
)


def audited_operator(daemons: Daemons, plane: ControlPlane, namespace: str) -> DaemonProcess:
    """A daemon serving the GitSyncs of `namespace`, as the audited user (cluster-admin)."""
    settings = {"enabled": True, "namespaces": [namespace], "allowInsecure": True}
    return daemons.configure_as(
        AUDITED_USER, plane.audited_token, [], "operator", gitSyncs=settings
    ).start()


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


def test_a_tenant_cannot_steer_what_the_daemon_lists_watches_or_prunes_through_its_parent(
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
    and the revision synced again, prune on."""
    core: Any = client.CoreV1Api(admin_api)
    victim = create_namespace(admin_api)
    git_repo.commit({"app/own.yaml": config_map("own")})
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


FORGED = {"clusterroles", "configmaps", "secrets", "deployments", "roles", "serviceaccounts"}


def recorded(core: Any, applyset: ApplySet) -> dict[ObjectKey, str]:
    parent = core.read_namespaced_config_map(applyset.name, applyset.namespace)
    return decode_record(base64.b64decode(parent.binary_data[RECORD_KEY]))


def test_what_a_source_lists_is_bounded_whatever_its_parent_records(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit({"a.yaml": config_map("a")})
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
