"""Sync hooks against the real controllers: the Job controller runs a hook's Job (kwok plays
its pod, which succeeds, or fails when labelled so), and the sync waits for it."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from gitopsd import health, inventory
from gitopsd.health import Status
from gitopsd.objects import ObjectKey
from tests.harness import audit
from tests.harness.cli import Gitopsd, Run
from tests.harness.cluster_reads import config_map_names, jobs_by_name
from tests.harness.commands import UNHEALTHY, drift_of, scope
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import create, wait_ready
from tests.harness.kube import Gate
from tests.harness.manifests import (
    ARGO_WAVE,
    HELLO_CHART,
    config_map_with_data,
    hook_job,
    replica_set,
)
from tests.harness.operators import operator
from tests.harness.status_writer import meanwhile
from tests.harness.waiting import wait_for


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
            "migrate.yaml": hook_job("migrate", {"gitopsd.io/hook": "pre-sync"}),
            "app.yaml": config_map_with_data("app"),
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
    first = jobs_by_name(admin_api, namespace)["migrate"].metadata.uid
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    assert jobs_by_name(admin_api, namespace)["migrate"].metadata.uid != first


def test_a_failed_pre_sync_hook_stops_the_sync_and_runs_the_sync_fail_hooks(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit({"old.yaml": config_map_with_data("old")})
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    git_repo.commit(
        {
            "old.yaml": None,
            "new.yaml": config_map_with_data("new"),
            "migrate.yaml": hook_job("migrate", {"gitopsd.io/hook": "pre-sync"}, fails=True),
            "alarm.yaml": config_map_with_data("alarm", {"argocd.argoproj.io/hook": "SyncFail"}),
        }
    )

    failed = gitopsd("sync", url, *scope(namespace), "--prune")

    assert failed.code == UNHEALTHY, failed.text
    assert f"batch/Job/{namespace}/migrate: pre-sync hook did not succeed" in failed.err
    assert config_map_names(admin_api, namespace) == {"gitopsd-test", "old", "alarm"}


def test_delete_policies_clean_up_and_hooks_are_never_pruned(
    gitopsd: Gitopsd,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(
        {
            "cleaned.yaml": hook_job(
                "cleaned",
                {"gitopsd.io/hook": "post-sync", "gitopsd.io/hook-delete-policy": "hook-succeeded"},
            ),
            "kept.yaml": hook_job("kept", {"helm.sh/hook": "post-install"}),
            "skipped.yaml": config_map_with_data("skipped", {"argocd.argoproj.io/hook": "Skip"}),
            "app.yaml": config_map_with_data("app"),
        }
    )
    url = git_server.file_url(git_repo)
    started = time.time()

    synced = gitopsd("sync", url, *scope(namespace), "--prune")

    assert synced.code == 0, synced.text
    written = writes_in(control_plane, namespace, started)
    assert [shown(w) for w in written] == [
        "patch configmaps/app",
        "patch jobs/cleaned",  # it ran (the post-sync hooks in name order) ...
        "delete jobs/cleaned",  # ... and, once it had succeeded, was deleted
        "patch jobs/kept",  # before-hook-creation, the default: kept until it runs again
    ]
    succeeded = settled(control_plane, namespace, "cleaned", started)
    assert written[1].received < succeeded < written[2].received
    assert set(jobs_by_name(admin_api, namespace)) == {"kept"}
    assert config_map_names(admin_api, namespace) == {"gitopsd-test", "app"}
    git_repo.commit({"kept.yaml": None, "cleaned.yaml": None})
    again = time.time()
    assert gitopsd("sync", url, *scope(namespace), "--prune").code == 0
    assert [shown(w) for w in writes_in(control_plane, namespace, again)] == []
    assert set(jobs_by_name(admin_api, namespace)) == {"kept"}  # a hook's run is not a member


def test_a_failed_hooks_run_is_deleted_under_hook_failed_and_kept_without_it(
    gitopsd: Gitopsd,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """A pre-sync Job that fails stops the sync either way; its run is deleted only when
    its policy names hook-failed (hook-succeeded alone keeps a failed run to be read)."""
    cleaned = {"gitopsd.io/hook": "pre-sync", "gitopsd.io/hook-delete-policy": "hook-failed"}
    git_repo.commit(
        {
            "cleaned.yaml": hook_job("cleaned", cleaned, fails=True),
            "app.yaml": config_map_with_data("app"),
        }
    )
    url = git_server.file_url(git_repo)
    started = time.time()

    failed = gitopsd("sync", url, *scope(namespace))

    assert failed.code == UNHEALTHY, failed.text
    written = writes_in(control_plane, namespace, started)
    assert [shown(w) for w in written] == ["patch jobs/cleaned", "delete jobs/cleaned"]
    failed_at = settled(control_plane, namespace, "cleaned", started, Status.FAILED)
    assert written[0].received < failed_at < written[1].received
    assert jobs_by_name(admin_api, namespace) == {}

    kept = {"gitopsd.io/hook": "pre-sync", "gitopsd.io/hook-delete-policy": "hook-succeeded"}
    git_repo.commit({"cleaned.yaml": None, "kept.yaml": hook_job("kept", kept, fails=True)})
    again = time.time()

    assert gitopsd("sync", url, *scope(namespace)).code == UNHEALTHY
    assert [shown(w) for w in writes_in(control_plane, namespace, again)] == ["patch jobs/kept"]
    [run] = jobs_by_name(admin_api, namespace).values()
    assert run.metadata.name == "kept"
    assert "Failed" in {c.type for c in run.status.conditions or [] if c.status == "True"}


def test_a_charts_helm_hooks_run_in_their_phases_by_weight(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    hooks = {
        "hello/templates/first.yaml": hook_job(
            "{{ .Release.Name }}-first",
            {"helm.sh/hook": "pre-install", "helm.sh/hook-weight": "-1"},
        ),
        "hello/templates/second.yaml": hook_job(
            "{{ .Release.Name }}-second", {"helm.sh/hook": "pre-upgrade,pre-install"}
        ),
        "hello/templates/gone.yaml": hook_job(
            "{{ .Release.Name }}-gone", {"helm.sh/hook": "pre-delete"}
        ),
    }
    git_repo.commit({**HELLO_CHART, **hooks})
    url = git_server.file_url(git_repo)

    synced = gitopsd("sync", url, *scope(namespace), "--path", "hello")

    assert synced.code == 0, synced.text
    ran = [line.split()[1] for line in synced.out.splitlines() if line.strip().startswith("hook")]
    assert ran == [f"batch/Job/{namespace}/hello-first", f"batch/Job/{namespace}/hello-second"]
    assert set(jobs_by_name(admin_api, namespace)) == {"hello-first", "hello-second"}
    assert config_map_names(admin_api, namespace) == {"gitopsd-test", "hello-hello"}


def test_a_generate_name_hook_is_created_afresh_by_each_sync(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    smoke = hook_job("smoke", {"argocd.argoproj.io/hook": "PostSync"}).replace(
        "  name: smoke\n", "  generateName: smoke-\n"
    )
    git_repo.commit({"smoke.yaml": smoke, "app.yaml": config_map_with_data("app")})
    url = git_server.file_url(git_repo)

    for _ in range(2):
        synced = gitopsd("sync", url, *scope(namespace))
        assert synced.code == 0, synced.text
        assert f"hook       batch/Job/{namespace}/smoke-" in synced.out

    runs = jobs_by_name(admin_api, namespace)
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
            "migrate.yaml": hook_job("migrate", {"gitopsd.io/hook": "pre-sync"}),
            "app.yaml": config_map_with_data("app"),
        }
    )
    operator(daemons, namespace)
    create(admin_api, namespace, "app", {"repository": {"url": git_server.file_url(git_repo)}})
    wait_ready(admin_api, namespace, "app", "True", "Succeeded")
    first = jobs_by_name(admin_api, namespace)["migrate"].metadata.uid

    core: Any = client.CoreV1Api(admin_api)
    core.patch_namespaced_config_map("app", namespace, {"data": {"k": "edited"}})
    wait_for(
        lambda: core.read_namespaced_config_map("app", namespace).data == {"k": "v"},
        "the edit healed",
    )
    assert (
        jobs_by_name(admin_api, namespace)["migrate"].metadata.uid == first
    )  # a heal runs no hook

    git_repo.commit({"app.yaml": config_map_with_data("app").replace("k: v", "k: v2")})
    wait_for(
        lambda: core.read_namespaced_config_map("app", namespace).data == {"k": "v2"},
        "the new revision applied",
        deadline_seconds=60,
    )
    assert (
        jobs_by_name(admin_api, namespace)["migrate"].metadata.uid != first
    )  # a new revision does


def test_an_object_of_a_hooks_name_that_is_no_hook_of_the_source_is_never_touched(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    core: Any = client.CoreV1Api(admin_api)
    theirs = {"metadata": {"name": "marker"}, "data": {"owner": "someone else"}}
    core.create_namespaced_config_map(namespace, theirs)
    git_repo.commit(
        {"marker.yaml": config_map_with_data("marker", {"gitopsd.io/hook": "pre-sync"})}
    )

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
            "migrate.yaml": hook_job("migrate", {"gitopsd.io/hook": "pre-sync"}).replace(
                "metadata:\n", in_home, 1
            ),
            "app.yaml": config_map_with_data("app").replace("metadata:\n", in_home, 1),
        }
    )
    core: Any = client.CoreV1Api(admin_api)
    url = git_server.file_url(git_repo)
    try:
        synced = gitopsd("sync", url, *scope(namespace))

        assert synced.code == 0, synced.text
        assert f"hook       batch/Job/{home}/migrate  (pre-sync hook: Current" in synced.out
        assert "2 created" in synced.out
        assert config_map_names(admin_api, home) == {"app"}
        assert drift_of(gitopsd, url, namespace) == []
        parent = core.read_namespaced_config_map("gitopsd-test", namespace)
        record = inventory.recorded(admin_api.sanitize_for_serialization(parent))
        assert ObjectKey("", "Namespace", "", home) in record  # applied first, recorded too
    finally:
        core.delete_namespace(home)


# Sync hooks in the waves of the sync phase, as Argo CD's sync-waves example has them


def sync_waves_example(revision: str, gate: Gate) -> dict[str, str]:
    """argocd-example-apps/sync-waves, as its annotations write it: a PreSync Job named by
    the server; wave 0 (no annotation) a ReplicaSet and a Service; a wave-1 Sync Job (the
    maintenance page up); wave 2 the frontend's ReplicaSet and Service; a wave-3 Sync Job
    (the page down). The backend's pods wait for `gate`; `revision` labels both Services,
    so a new one writes to waves 0 and 2."""
    presync = hook_job("upgrade-sql-schema", {"argocd.argoproj.io/hook": "PreSync"})
    page = {"argocd.argoproj.io/hook": "Sync", HOOK_POLICY: "BeforeHookCreation"}
    return {
        "upgrade-sql-schema.yaml": presync.replace(
            "  name: upgrade-sql-schema\n", "  generateName: upgrade-sql-schema-\n"
        ),
        "backend.yaml": gate.hold(replica_set("backend")) + service("backend", revision),
        "maint-page-up.yaml": hook_job("maint-page-up", {**page, ARGO_WAVE: "1"}),
        "frontend.yaml": replica_set("frontend", "2") + service("frontend", revision, "2"),
        "maint-page-down.yaml": hook_job("maint-page-down", {**page, ARGO_WAVE: "3"}),
    }


HOOK_POLICY = "argocd.argoproj.io/hook-delete-policy"


def service(name: str, revision: str, wave: str = "") -> str:
    annotations = f"\n  annotations: {{{ARGO_WAVE}: '{wave}'}}" if wave else ""
    return f"""---
apiVersion: v1
kind: Service
metadata:
  name: {name}
  labels: {{revision: '{revision}'}}{annotations}
spec:
  selector: {{tier: {name}}}
  ports: [{{port: 80}}]
"""


def writes_in(plane: ControlPlane, namespace: str, since: float) -> list[audit.Write]:
    """What gitopsd wrote to the namespace's objects (its ApplySet parent apart), in the
    order the API server received it."""
    written = audit.changes(plane, "admin", since)
    mine = [w for w in written if w.namespace == namespace and w.name != "gitopsd-test"]
    return sorted(mine, key=lambda w: w.received)


def reported(run: Run) -> list[str]:
    """Each line of a sync's report, as "hook Job/maint-page-up", in its order."""
    rows = [line.split()[:2] for line in run.out.splitlines() if line.startswith("  ")]
    return [f"{action} {key.split('/')[-3]}/{key.split('/')[-1]}" for action, key in rows[1:]]


def shown(write: audit.Write) -> str:
    """As "patch jobs/maint-page-up"; a create names no object (the server names it)."""
    return f"{write.verb} {write.resource}/{write.name}"


def settled(
    plane: ControlPlane, namespace: str, name: str, since: float, status: Status = Status.CURRENT
) -> float:
    """When the Job controller wrote the status that made Job `name` Current (complete), or
    `status` (Failed)."""
    return min(
        w.received
        for w in audit.writes_by_anyone(plane, since)
        if w.uri.startswith(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}/status")
        and health.assess(dict(w.answer or {})).status == status
    )


def test_sync_hooks_run_in_their_waves_as_in_argo_cds_sync_waves_example(
    gitopsd: Gitopsd,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    gate: Gate,
) -> None:
    git_repo.commit(sync_waves_example("1", gate))
    url = git_server.file_url(git_repo)
    apps: Any = client.AppsV1Api(admin_api)
    hooks_while_wave_0_unhealthy: list[set[str]] = []

    def wave_0_held() -> None:
        wait_for(lambda: apps.list_namespaced_replica_set(namespace).items, "wave 0", 120)
        hooks_while_wave_0_unhealthy.append(set(jobs_by_name(admin_api, namespace)))
        gate.open()

    before = time.time()
    dry = gitopsd("sync", url, *scope(namespace), "--dry-run")

    assert dry.code == 0, dry.text
    assert reported(dry) == [  # the hooks in their waves, none run
        "hook Job/upgrade-sql-schema-",
        "created Service/backend",
        "created ReplicaSet/backend",
        "hook Job/maint-page-up",
        "created Service/frontend",
        "created ReplicaSet/frontend",
        "hook Job/maint-page-down",
    ]
    assert "(sync hook in wave 1, dry run)" in dry.out
    assert writes_in(control_plane, namespace, before) == []

    started = time.time()
    with meanwhile(wave_0_held):
        synced = gitopsd("sync", url, *scope(namespace))

    assert synced.code == 0, synced.text
    [ran] = hooks_while_wave_0_unhealthy  # only the pre-sync hook: wave 1 waits for wave 0
    assert len(ran) == 1 and next(iter(ran)).startswith("upgrade-sql-schema-"), ran
    written = writes_in(control_plane, namespace, started)
    order = [shown(w) for w in written]  # a wave's objects are applied concurrently
    assert order[0] == "create jobs/"  # the PreSync Job, named by the server
    assert sorted(order[1:3]) == ["patch replicasets/backend", "patch services/backend"]
    assert order[3] == "patch jobs/maint-page-up"
    assert sorted(order[4:6]) == ["patch replicasets/frontend", "patch services/frontend"]
    assert order[6:] == ["patch jobs/maint-page-down"]
    page_up = settled(control_plane, namespace, "maint-page-up", started)
    assert written[3].received < page_up < written[4].received  # complete before wave 2

    # a new revision runs every hook again, in the same waves (BeforeHookCreation: the
    # earlier run of a named hook deleted first)
    first_runs = {name: j.metadata.uid for name, j in jobs_by_name(admin_api, namespace).items()}
    git_repo.commit(sync_waves_example("2", gate))
    again = time.time()

    resynced = gitopsd("sync", url, *scope(namespace))

    assert resynced.code == 0, resynced.text
    assert [shown(w) for w in writes_in(control_plane, namespace, again)] == [
        "create jobs/",
        "patch services/backend",
        "delete jobs/maint-page-up",
        "patch jobs/maint-page-up",
        "patch services/frontend",
        "delete jobs/maint-page-down",
        "patch jobs/maint-page-down",
    ]
    second_runs = jobs_by_name(admin_api, namespace)
    assert len(second_runs) == 4  # two runs of the PreSync Job, one of each named one
    for name in ("maint-page-up", "maint-page-down"):
        assert second_runs[name].metadata.uid != first_runs[name]


def test_within_a_wave_objects_go_before_its_hooks_and_hooks_that_name_no_wave_last(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    in_wave = {"gitopsd.io/hook": "sync", "gitopsd.io/sync-wave": "1"}
    git_repo.commit(
        {
            "settings.yaml": config_map_with_data("settings", {"gitopsd.io/sync-wave": "1"}),
            "check.yaml": hook_job("check", in_wave),
            "late.yaml": config_map_with_data("late", {"gitopsd.io/sync-wave": "2"}),
            "after-all.yaml": hook_job("after-all", {"gitopsd.io/hook": "sync"}),
        }
    )
    started = time.time()

    synced = gitopsd("sync", git_server.file_url(git_repo), *scope(namespace))

    assert synced.code == 0, synced.text
    assert [shown(w) for w in writes_in(control_plane, namespace, started)] == [
        "patch configmaps/settings",
        "patch jobs/check",
        "patch configmaps/late",
        "patch jobs/after-all",
    ]


def test_a_failed_hook_of_a_wave_holds_back_later_waves_and_prune(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit({"old.yaml": config_map_with_data("old")})
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    git_repo.commit(
        {
            "old.yaml": None,
            "check.yaml": hook_job(
                "check", {"argocd.argoproj.io/hook": "Sync", ARGO_WAVE: "1"}, fails=True
            ),
            "late.yaml": config_map_with_data("late", {ARGO_WAVE: "2"}),
        }
    )

    failed = gitopsd("sync", url, *scope(namespace), "--prune")

    assert failed.code == UNHEALTHY, failed.text
    assert config_map_names(admin_api, namespace) == {"gitopsd-test", "old"}  # no wave 2, no prune
    assert f"batch/Job/{namespace}/check: sync hook in wave 1 did not succeed" in failed.err


@pytest.mark.case("SE-16")
def test_a_hook_of_a_later_wave_never_takes_an_object_made_at_its_name_while_a_wave_waits(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    gate: Gate,
) -> None:
    """The hook is read right before it is written, not when the sync began (SE-16)."""
    marker = config_map_with_data("marker", {"argocd.argoproj.io/hook": "Sync", ARGO_WAVE: "1"})
    git_repo.commit({"backend.yaml": gate.hold(replica_set("backend")), "marker.yaml": marker})
    apps: Any = client.AppsV1Api(admin_api)
    core: Any = client.CoreV1Api(admin_api)

    def someone_makes_it_while_wave_0_waits() -> None:
        wait_for(lambda: apps.list_namespaced_replica_set(namespace).items, "wave 0", 120)
        theirs = {"metadata": {"name": "marker"}, "data": {"owner": "someone else"}}
        core.create_namespaced_config_map(namespace, theirs)
        gate.open()

    with meanwhile(someone_makes_it_while_wave_0_waits):
        refused = gitopsd("sync", git_server.file_url(git_repo), *scope(namespace))

    assert refused.code == 4, refused.text
    assert f"ConfigMap/{namespace}/marker: is a sync hook of source test" in refused.err
    theirs = core.read_namespaced_config_map("marker", namespace)
    assert theirs.data == {"owner": "someone else"} and not theirs.metadata.labels
