"""A repository written for Argo CD or Flux syncs unedited: each of their annotations that
gitopsd honours does what it does there, against the real API server; one it cannot honour
is said, naming the object."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client

from tests.harness import audit
from tests.harness.cli import Gitopsd, Run
from tests.harness.cluster_reads import job_uid
from tests.harness.commands import scope, sync
from tests.harness.controlplane import ControlPlane
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.manifests import suspended_job


def config_map(name: str, annotations: dict[str, str], value: str = "v") -> str:
    lines = "".join(f"    {key}: '{text}'\n" for key, text in annotations.items())
    annotated = f"  annotations:\n{lines}" if lines else ""
    return (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{annotated}"
        f"data:\n  k: {value}\n"
    )


ARGO = "argocd.argoproj.io/"
FLUX = "kustomize.toolkit.fluxcd.io/"
KEPT = {
    "argo-prune": {ARGO + "sync-options": "Prune=false"},
    "argo-delete": {ARGO + "sync-options": "Delete=false,ServerSideApply=true"},
    "flux-prune": {FLUX + "prune": "disabled"},
    "argo-extraneous": {ARGO + "compare-options": "IgnoreExtraneous"},
}
"""Objects that leave git in the second commit."""


def diff(gitopsd: Gitopsd, url: str, namespace: str) -> Run:
    return gitopsd("diff", url, *scope(namespace))


def data(admin_api: Any, namespace: str, name: str) -> dict[str, str] | None:
    core: Any = client.CoreV1Api(admin_api)
    found = core.list_namespaced_config_map(namespace, field_selector=f"metadata.name={name}")
    return found.items[0].data if found.items else None


def test_argo_cd_and_flux_annotations_are_honoured(
    gitopsd: Gitopsd,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    files = {f"{name}.yaml": config_map(name, notes) for name, notes in KEPT.items()}
    files |= {
        "late.yaml": config_map("late", {ARGO + "sync-wave": "1"}),
        "early.yaml": config_map("early", {ARGO + "sync-wave": "-1"}),
        "ignored.yaml": config_map("ignored", {FLUX + "ssa": "Ignore"}),
        "once.yaml": config_map("once", {FLUX + "ssa": "IfNotPresent"}),
        "merged.yaml": config_map("merged", {FLUX + "ssa": "Merge"}),
        "plain.yaml": config_map("plain", {}),
        "odd.yaml": config_map("odd", {ARGO + "sync-options": "Validate=false"}),
        "job.yaml": suspended_job("migrate", "'true'", f"{FLUX}force: enabled"),
    }
    git_repo.commit(files)
    url = git_server.file_url(git_repo)
    started = time.time()

    first = sync(gitopsd, url, namespace, "--prune")

    assert first.code == 0, first.text
    assert data(admin_api, namespace, "ignored") is None  # ssa: Ignore is never applied
    creates = {
        w.name: w.received
        for w in audit.writes_by_anyone(control_plane, started)
        if w.resource == "configmaps" and w.namespace == namespace and w.verb == "patch"
    }
    assert creates["early"] < creates["plain"] < creates["late"]  # Argo CD's sync waves
    assert (
        f"warning: ConfigMap/{namespace}/odd (odd.yaml:1): annotation "
        f"{ARGO}sync-options: 'Validate=false' is not honoured" in first.err
    )

    # edits by hand: IfNotPresent objects are left alone, Merge keeps what others added
    gitopsd.kubectl("patch", "configmap/once", "-n", namespace, "-p", '{"data":{"k":"mine"}}')
    gitopsd.kubectl("label", "configmap/merged", "-n", namespace, "team=ops")
    gitopsd.kubectl("label", "configmap/plain", "-n", namespace, "team=ops")
    drifted = diff(gitopsd, url, namespace)
    assert f"ConfigMap/{namespace}/plain" in drifted.out
    assert "once" not in drifted.out and "merged" not in drifted.out

    before = job_uid(admin_api, namespace, "migrate")
    kept = {f"{name}.yaml": None for name in KEPT}
    git_repo.commit(
        {**kept, "job.yaml": suspended_job("migrate", "'false'", f"{FLUX}force: enabled")}
    )
    second = sync(gitopsd, url, namespace, "--prune")

    assert second.code == 5, second.text  # prunes refused, as for gitopsd.io/prune: disabled
    assert second.out.count("(prune refused: disabled)") == 3
    assert data(admin_api, namespace, "once") == {"k": "mine"}
    core: Any = client.CoreV1Api(admin_api)
    assert core.read_namespaced_config_map("merged", namespace).metadata.labels["team"] == "ops"
    assert "team" not in (core.read_namespaced_config_map("plain", namespace).metadata.labels)
    for name in ("argo-prune", "argo-delete", "flux-prune"):  # never deleted
        assert data(admin_api, namespace, name) == {"k": "v"}, name
    assert data(admin_api, namespace, "argo-extraneous") is None  # pruned as usual
    assert job_uid(admin_api, namespace, "migrate") not in (None, before)  # Flux's force

    # IgnoreExtraneous: an owned object that left git is no drift
    git_repo.commit({"extra.yaml": config_map("extra", KEPT["argo-extraneous"])})
    assert sync(gitopsd, url, namespace).code == 0
    git_repo.commit({"extra.yaml": None})
    left = diff(gitopsd, url, namespace).out
    assert f"extraneous ConfigMap/{namespace}/argo-delete\n" in left  # kept, not in git
    assert f"ConfigMap/{namespace}/extra\n" not in left
