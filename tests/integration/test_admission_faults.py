"""The cluster's own admission refusing gitopsd (the catalogue's FA-11 and FA-12), by a
ValidatingAdmissionPolicy on the real API server: a refused dry-run applies nothing and
prunes nothing; a refused delete keeps its object recorded, the rest of the prune goes on,
and the next sync deletes it once the policy is gone. Read from the audit log."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from tests.harness import audit, contract
from tests.harness.admission import dead_webhook, deny, refuses
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_names, config_map_value
from tests.harness.commands import drift_of, scope
from tests.harness.controlplane import ControlPlane, free_port
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.owned_config_maps import versions
from tests.harness.waiting import wait_for

DENY_LABEL = "fault.test/deny"


def config_map(name: str, value: str = "v", labels: str = "") -> dict[str, str]:
    metadata = f"  name: {name}\n" + (f"  labels: {{{labels}}}\n" if labels else "")
    body = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n{metadata}data:\n  k: {value}\n"
    return {f"{name}.yaml": body}


@pytest.mark.case("FA-11")
def test_fa11_a_dry_run_refused_by_admission_applies_nothing_and_prunes_nothing(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit({**config_map("a"), **config_map("b")})
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace), "--prune").code == 0
    labelled = f"!has(object.metadata.labels) || !('{DENY_LABEL}' in object.metadata.labels)"
    remove = deny(admin_api, namespace, "fa11", ["CREATE", "UPDATE"], labelled, "no deny label")
    probe = {"metadata": {"name": "probe", "labels": {DENY_LABEL: "yes"}}}
    core: Any = client.CoreV1Api(admin_api)
    try:
        create = lambda: core.create_namespaced_config_map(namespace, probe, dry_run="All")  # noqa: E731
        wait_for(lambda: refuses(create), "the policy to take effect")
        git_repo.commit(
            {
                **config_map("a", "w"),
                "b.yaml": None,
                **config_map("c"),
                **config_map("d", labels=f"{DENY_LABEL}: 'yes'"),
            }
        )
        before, since = versions(admin_api, namespace), time.time()

        run = gitopsd("sync", url, *scope(namespace), "--prune")
    finally:
        remove()

    assert run.code == 2, run.text
    assert f"ConfigMap/{namespace}/d (d.yaml:1)" in run.err and "no deny label" in run.err
    writes = audit.writes(control_plane, "admin", since)
    assert [w for w in writes if w.namespace == namespace and not w.dry_run] == []
    assert versions(admin_api, namespace) == before
    assert config_map_names(admin_api, namespace) >= {"a", "b"} and "c" not in config_map_names(
        admin_api, namespace
    )


@pytest.mark.case("FA-12")
def test_fa12_a_delete_refused_by_admission_stays_recorded_and_is_retried(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    kept = f"{DENY_LABEL}: 'yes'"
    others = {name: body for n in "adefghij" for name, body in config_map(n).items()}
    git_repo.commit({**others, **config_map("b", labels=kept), **config_map("c")})
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace), "--prune").code == 0
    unlabelled = (
        f"!has(oldObject.metadata.labels) || !('{DENY_LABEL}' in oldObject.metadata.labels)"
    )
    remove = deny(admin_api, namespace, "fa12", ["DELETE"], unlabelled, "b is kept by policy")
    core: Any = client.CoreV1Api(admin_api)
    try:
        delete = lambda: core.delete_namespaced_config_map("b", namespace, dry_run="All")  # noqa: E731
        wait_for(lambda: refuses(delete), "the policy to take effect")
        git_repo.commit({"b.yaml": None, "c.yaml": None})
        run = gitopsd("sync", url, *scope(namespace), "--prune")
        assert run.code == 2, run.text  # the server's answer is 422 Invalid
        assert f"ConfigMap/{namespace}/b: delete failed" in run.err
        assert "b is kept by policy" in run.err
        assert f"pruned     ConfigMap/{namespace}/c" in run.out  # said, though the sync failed
        assert "1 pruned" in run.out
        assert config_map_names(admin_api, namespace) >= {"a", "b"}
        assert "c" not in config_map_names(admin_api, namespace)  # the rest of the prune went on
        [still] = drift_of(gitopsd, url, namespace)  # still recorded as this source's
        assert (contract.named(still["object"]), still["state"]) == (
            f"ConfigMap/{namespace}/b",
            "extraneous",
        )
    finally:
        remove()
    wait_for(lambda: not refuses(delete), "the policy's removal to take effect")

    again = gitopsd("sync", url, *scope(namespace), "--prune")
    assert again.code == 0, again.text
    assert "b" not in config_map_names(admin_api, namespace)
    assert config_map_value(admin_api, namespace, "a") == "v"


@pytest.mark.case("FA-24")
def test_fa24_a_webhook_that_is_down_applies_nothing_prunes_nothing_and_then_recovers(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    others = {name: body for n in "abcdefgh" for name, body in config_map(n).items()}
    git_repo.commit({**others, **config_map("gone")})
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace), "--prune").code == 0
    git_repo.commit({**config_map("a", "w"), "gone.yaml": None, **config_map("new")})
    remove = dead_webhook(admin_api, namespace, free_port())
    core: Any = client.CoreV1Api(admin_api)
    probe = {"metadata": {"name": "probe"}}
    create = lambda: core.create_namespaced_config_map(namespace, probe, dry_run="All")  # noqa: E731
    try:
        wait_for(lambda: refuses(create), "the webhook to be called")
        before, since = versions(admin_api, namespace), time.time()

        run = gitopsd("sync", url, *scope(namespace), "--prune")

        assert run.code == 4, run.text  # the cluster failed, not the input
        assert f"ConfigMap/{namespace}/" in run.err and "failed calling webhook" in run.err
        changes = audit.changes(control_plane, "admin", since)
        assert [w for w in changes if w.namespace == namespace] == []  # dry-runs only
        assert versions(admin_api, namespace) == before
    finally:
        remove()
    wait_for(lambda: not refuses(create), "the webhook's removal to take effect")

    again = gitopsd("sync", url, *scope(namespace), "--prune")
    assert again.code == 0, again.text
    assert "gone" not in config_map_names(admin_api, namespace)
    assert {"new", "a"} <= config_map_names(admin_api, namespace)
    assert config_map_value(admin_api, namespace, "a") == "w"


SPREAD, PER_NAMESPACE, DENIED = 20, 3, 7
CLOSED = "fault.test/closed"
"""The label of the namespaces the LD-03 policy closes: only the denied one has it in git."""


def spread_over_namespaces(prefix: str) -> dict[str, str]:
    """SPREAD Namespaces `prefix`-nNN, each with PER_NAMESPACE ConfigMaps, one file each;
    namespace number DENIED labelled CLOSED."""
    files = {}
    for n in range(SPREAD):
        name = f"{prefix}-n{n:02d}"
        labels = f"  labels: {{{CLOSED}: 'yes'}}\n" if n == DENIED else ""
        files[f"{name}/namespace.yaml"] = (
            f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n{labels}"
        )
        for m in range(PER_NAMESPACE):
            files[f"{name}/c{m}.yaml"] = (
                f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{m}\n"
                f"  namespace: {name}\ndata:\n  k: v\n"
            )
    return files


@pytest.mark.case("LD-03")
def test_ld03_one_namespace_refused_among_many_applies_none_of_their_objects(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """LD-03 at a test's scale (20 new namespaces of 3 objects): the Namespaces go first,
    then one namespace whose objects a policy refuses stops the revision before any object
    of any namespace is written, each refused one named; with the policy gone, one sync
    brings every namespace."""
    core: Any = client.CoreV1Api(admin_api)
    closed, denied, probed = {CLOSED: "yes"}, f"{namespace}-n{DENIED:02d}", f"{namespace}-probe"
    core.create_namespace({"metadata": {"name": probed, "labels": closed}})
    git_repo.commit(spread_over_namespaces(namespace))
    url = git_server.file_url(git_repo)

    def create() -> Any:
        probe = {"metadata": {"name": "probe"}}
        return core.create_namespaced_config_map(probed, probe, dry_run="All")

    remove = deny(admin_api, namespace, "ld03", ["CREATE"], "false", "namespace closed", closed)
    try:
        wait_for(lambda: refuses(create), "the policy to take effect")
        since = time.time()

        run = gitopsd("sync", url, *scope(namespace))
    finally:
        remove()

    assert run.code == 2, run.text
    for m in range(PER_NAMESPACE):
        assert f"ConfigMap/{denied}/c{m}" in run.err, run.err
    assert "namespace closed" in run.err, run.err
    written = [
        w
        for w in audit.writes(control_plane, "admin", since)
        if w.resource == "configmaps" and w.namespace.startswith(f"{namespace}-n") and not w.dry_run
    ]
    assert written == []
    names = {item.metadata.name for item in core.list_namespace().items}
    assert {f"{namespace}-n{n:02d}" for n in range(SPREAD)} <= names  # staged first

    wait_for(lambda: not refuses(create), "the policy to be gone")
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    for n in range(SPREAD):
        assert config_map_names(admin_api, f"{namespace}-n{n:02d}") >= {"c0", "c1", "c2"}
