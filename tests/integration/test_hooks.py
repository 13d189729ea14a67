"""Sync hooks against the real controllers: the Job controller runs a hook's Job (kwok plays
its pod, which succeeds, or fails when labelled so), and the sync waits for it."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client

from gitopsd import health
from gitopsd.health import Status
from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.controllers import FAILING_POD_LABEL
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.waiting import wait_for
from tests.integration.test_gitsync import create, operator, wait_ready
from tests.integration.test_helm import HELLO_CHART
from tests.integration.test_prune import config_maps
from tests.integration.test_sync import drift_of, scope

UNHEALTHY = 6


def job(name: str, annotations: dict[str, str], fails: bool = False) -> str:
    """A hook Job of one pod, which succeeds, or fails when `fails` (kwok's chaos stage)."""
    labels = f"\n    metadata: {{labels: {{{FAILING_POD_LABEL}: 'true'}}}}" if fails else ""
    shown = "".join(f"\n    {key}: {value!r}" for key, value in annotations.items())
    return f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  annotations:{shown}
spec:
  backoffLimit: 0
  template:{labels}
    spec:
      restartPolicy: Never
      containers: [{{name: run, image: "busybox:1.36", command: ["true"]}}]
"""


def config_map(name: str, annotations: dict[str, str] | None = None) -> str:
    shown = "".join(f"\n    {key}: {value!r}" for key, value in (annotations or {}).items())
    notes = f"\n  annotations:{shown}" if shown else ""
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}{notes}\ndata:\n  k: v\n"


def jobs(api: Any, namespace: str) -> dict[str, Any]:
    batch: Any = client.BatchV1Api(api)
    return {j.metadata.name: j for j in batch.list_namespaced_job(namespace).items}


def test_a_pre_sync_job_runs_to_completion_before_anything_else_is_applied(
    gitopsd: Gitopsd,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(
        {
            "migrate.yaml": job("migrate", {"gitopsd.io/hook": "pre-sync"}),
            "app.yaml": config_map("app"),
        }
    )
    url = git_server.file_url(git_repo)
    started = time.time()

    synced = gitopsd("sync", url, *scope(namespace))

    assert synced.code == 0, synced.text
    assert f"hook       batch/Job/{namespace}/migrate  (pre-sync hook: Current" in synced.out
    assert "1 created" in synced.out and "1 hook" in synced.out
    written = audit.writes_by_anyone(control_plane, started)
    succeeded = min(  # SuccessCriteriaMet, or Complete: the write that made it Current
        w.received
        for w in written
        if w.uri.startswith(f"/apis/batch/v1/namespaces/{namespace}/jobs/migrate/status")
        and health.assess(dict(w.answer or {})).status == Status.CURRENT
    )
    applied = min(
        w.received
        for w in written
        if w.uri.startswith(f"/api/v1/namespaces/{namespace}/configmaps/app?")
    )
    assert applied > succeeded
    # a hook is no member: never drift, never in the record, and (before-hook-creation, the
    # default) run afresh by the next sync
    assert drift_of(gitopsd, url, namespace) == []
    first = jobs(admin_api, namespace)["migrate"].metadata.uid
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    assert jobs(admin_api, namespace)["migrate"].metadata.uid != first


def test_a_failed_pre_sync_hook_stops_the_sync_and_runs_the_sync_fail_hooks(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit({"old.yaml": config_map("old")})
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    git_repo.commit(
        {
            "old.yaml": None,
            "new.yaml": config_map("new"),
            "migrate.yaml": job("migrate", {"gitopsd.io/hook": "pre-sync"}, fails=True),
            "alarm.yaml": config_map("alarm", {"argocd.argoproj.io/hook": "SyncFail"}),
        }
    )

    failed = gitopsd("sync", url, *scope(namespace), "--prune")

    assert failed.code == UNHEALTHY, failed.text
    assert f"batch/Job/{namespace}/migrate: pre-sync hook did not succeed" in failed.err
    assert config_maps(admin_api, namespace) == {"gitopsd-test", "old", "alarm"}


def test_delete_policies_clean_up_and_hooks_are_never_pruned(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(
        {
            "cleaned.yaml": job(
                "cleaned",
                {"gitopsd.io/hook": "post-sync", "gitopsd.io/hook-delete-policy": "hook-succeeded"},
            ),
            "kept.yaml": job("kept", {"helm.sh/hook": "post-install"}),
            "skipped.yaml": config_map("skipped", {"argocd.argoproj.io/hook": "Skip"}),
            "app.yaml": config_map("app"),
        }
    )
    url = git_server.file_url(git_repo)

    synced = gitopsd("sync", url, *scope(namespace), "--prune")

    assert synced.code == 0, synced.text
    assert set(jobs(admin_api, namespace)) == {"kept"}
    assert config_maps(admin_api, namespace) == {"gitopsd-test", "app"}
    git_repo.commit({"kept.yaml": None, "cleaned.yaml": None})
    assert gitopsd("sync", url, *scope(namespace), "--prune").code == 0
    assert set(jobs(admin_api, namespace)) == {"kept"}  # a hook's run is not a member


def test_a_charts_helm_hooks_run_in_their_phases_by_weight(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    hooks = {
        "hello/templates/first.yaml": job(
            "{{ .Release.Name }}-first",
            {"helm.sh/hook": "pre-install", "helm.sh/hook-weight": "-1"},
        ),
        "hello/templates/second.yaml": job(
            "{{ .Release.Name }}-second", {"helm.sh/hook": "pre-upgrade,pre-install"}
        ),
        "hello/templates/gone.yaml": job(
            "{{ .Release.Name }}-gone", {"helm.sh/hook": "pre-delete"}
        ),
    }
    git_repo.commit({**HELLO_CHART, **hooks})
    url = git_server.file_url(git_repo)

    synced = gitopsd("sync", url, *scope(namespace), "--path", "hello")

    assert synced.code == 0, synced.text
    ran = [line.split()[1] for line in synced.out.splitlines() if line.strip().startswith("hook")]
    assert ran == [f"batch/Job/{namespace}/hello-first", f"batch/Job/{namespace}/hello-second"]
    assert set(jobs(admin_api, namespace)) == {"hello-first", "hello-second"}
    assert config_maps(admin_api, namespace) == {"gitopsd-test", "hello-hello"}


def test_a_generate_name_hook_is_created_afresh_by_each_sync(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    smoke = job("smoke", {"argocd.argoproj.io/hook": "PostSync"}).replace(
        "  name: smoke\n", "  generateName: smoke-\n"
    )
    git_repo.commit({"smoke.yaml": smoke, "app.yaml": config_map("app")})
    url = git_server.file_url(git_repo)

    for _ in range(2):
        synced = gitopsd("sync", url, *scope(namespace))
        assert synced.code == 0, synced.text
        assert f"hook       batch/Job/{namespace}/smoke-" in synced.out

    runs = jobs(admin_api, namespace)
    assert len(runs) == 2 and all(name.startswith("smoke-") for name in runs), runs
    assert all(succeeded(job) for job in runs.values())


def succeeded(job: Any) -> bool:
    """As gitopsd's health rule reads a Job: SuccessCriteriaMet comes before Complete."""
    conditions = job.status.conditions or []
    return any(c.type in SUCCESS and c.status == "True" for c in conditions)


SUCCESS = ("Complete", "SuccessCriteriaMet")


def test_a_gitsync_runs_its_hooks_for_each_new_revision_and_never_for_a_heal(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    git_repo.commit(
        {
            "migrate.yaml": job("migrate", {"gitopsd.io/hook": "pre-sync"}),
            "app.yaml": config_map("app"),
        }
    )
    operator(daemons, namespace)
    create(admin_api, namespace, "app", {"repository": {"url": git_server.file_url(git_repo)}})
    wait_ready(admin_api, namespace, "app", "True", "Succeeded")
    first = jobs(admin_api, namespace)["migrate"].metadata.uid

    core: Any = client.CoreV1Api(admin_api)
    core.patch_namespaced_config_map("app", namespace, {"data": {"k": "edited"}})
    wait_for(
        lambda: core.read_namespaced_config_map("app", namespace).data == {"k": "v"},
        "the edit healed",
    )
    assert jobs(admin_api, namespace)["migrate"].metadata.uid == first  # a heal runs no hook

    git_repo.commit({"app.yaml": config_map("app").replace("k: v", "k: v2")})
    wait_for(
        lambda: core.read_namespaced_config_map("app", namespace).data == {"k": "v2"},
        "the new revision applied",
        deadline_seconds=60,
    )
    assert jobs(admin_api, namespace)["migrate"].metadata.uid != first  # a new revision does


def test_an_object_of_a_hooks_name_that_is_no_hook_of_the_source_is_never_touched(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    core: Any = client.CoreV1Api(admin_api)
    theirs = {"metadata": {"name": "marker"}, "data": {"owner": "someone else"}}
    core.create_namespaced_config_map(namespace, theirs)
    git_repo.commit({"marker.yaml": config_map("marker", {"gitopsd.io/hook": "pre-sync"})})

    refused = gitopsd("sync", git_server.file_url(git_repo), *scope(namespace))

    assert refused.code == 4, refused.text
    assert f"ConfigMap/{namespace}/marker: is a pre-sync hook of source test" in refused.err
    assert core.read_namespaced_config_map("marker", namespace).data == {"owner": "someone else"}


def test_a_pre_sync_hook_runs_in_a_namespace_its_own_revision_creates(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    home = f"{namespace}-app"  # as Helm's --create-namespace: the hook's home goes first
    in_home = f"metadata:\n  namespace: {home}\n"
    git_repo.commit(
        {
            "namespace.yaml": f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {home}\n",
            "migrate.yaml": job("migrate", {"gitopsd.io/hook": "pre-sync"}).replace(
                "metadata:\n", in_home, 1
            ),
            "app.yaml": config_map("app").replace("metadata:\n", in_home, 1),
        }
    )
    core: Any = client.CoreV1Api(admin_api)
    url = git_server.file_url(git_repo)
    try:
        synced = gitopsd("sync", url, *scope(namespace))

        assert synced.code == 0, synced.text
        assert f"hook       batch/Job/{home}/migrate  (pre-sync hook: Current" in synced.out
        assert "2 created" in synced.out
        assert config_maps(admin_api, home) == {"app"}
        assert drift_of(gitopsd, url, namespace) == []
    finally:
        core.delete_namespace(home)
