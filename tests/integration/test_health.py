"""Health and order against the real control plane: `sync --wait`, sync waves, and the
health `diff` reports. The Deployment, ReplicaSet and Job controllers, the scheduler and
kwok's nodes produce every status; a test holds a rollout back with a Gate (no node
matches its pods until it opens) or makes it fail for real (a node selector nothing
matches, past a short progress deadline; a pod that exits 1). Only the custom resource's
Ready condition is written by the test, as its controller would: it has none."""

from __future__ import annotations

import re

import pytest

from tests.harness import contract
from tests.harness.cli import Gitopsd
from tests.harness.commands import UNHEALTHY, scope
from tests.harness.controllers import NOWHERE
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import Gate
from tests.harness.manifests import WIDGETS, deployment, job, under
from tests.harness.status_writer import StatusWriter, meanwhile, ready
from tests.harness.waiting import wait_for


def stuck(name: str, wave: str = "") -> dict[str, str]:
    """A Deployment whose pods no node takes: Failed 3 s after it is applied."""
    return deployment(name, wave, pods_on=NOWHERE, deadline=3)


def config_map(name: str, wave: str = "") -> dict[str, str]:
    annotations = f"\n  annotations: {{gitopsd.io/sync-wave: '{wave}'}}" if wave else ""
    return {
        f"{name}.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}"
        f"{annotations}\ndata:\n  k: v\n"
    }


def healths(gitopsd: Gitopsd, url: str, namespace: str) -> dict[str, dict[str, str]]:
    run = gitopsd("diff", url, *scope(namespace), "-o", "json")
    assert run.code in (0, 1), run.text
    health = run.document("DiffResult")["health"]
    return {contract.named(entry.pop("object")): entry for entry in health}


def exists(gitopsd: Gitopsd, namespace: str, resource: str, name: str) -> bool:
    found = gitopsd.kubectl("get", resource, name, "-n", namespace, "--ignore-not-found")
    return bool(found.strip())


def test_sync_wait_returns_once_the_deployment_rolled_out(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit({**deployment("web"), **config_map("settings")})
    url = git_server.file_url(git_repo)

    run = gitopsd("sync", url, *scope(namespace), "--wait", "--timeout", "2m")

    assert run.code == 0, run.text
    assert "health: 2 Current" in run.out
    assert healths(gitopsd, url, namespace)[f"apps/Deployment/{namespace}/web"] == {
        "status": "Current",
        "reason": "MinimumReplicasAvailable",
        "message": "Deployment has minimum availability.",
    }


def test_sync_wait_names_a_deployment_stuck_past_its_progress_deadline(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit({**stuck("web"), **config_map("settings")})
    url = git_server.file_url(git_repo)

    run = gitopsd("sync", url, *scope(namespace), "--wait", "--timeout", "2m")

    assert run.code == UNHEALTHY, run.text
    failed = f"apps/Deployment/{namespace}/web: Failed: ProgressDeadlineExceeded: "
    assert re.search(re.escape(failed) + 'ReplicaSet "web-[a-z0-9]+" has timed out', run.err)
    assert f"ConfigMap/{namespace}/settings" not in run.err  # healthy: not named
    assert "health: 1 Current, 1 Failed" in run.out


def test_sync_wait_passes_a_job_that_completes_and_names_one_that_failed(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit({**job("migrate"), **job("seed", fails=True)})
    url = git_server.file_url(git_repo)

    run = gitopsd("sync", url, *scope(namespace), "--wait", "--timeout", "2m")

    assert run.code == UNHEALTHY, run.text
    failure = run.err.partition("gitopsd: error:")[2]  # after the progress lines
    assert f"batch/Job/{namespace}/seed: Failed: BackoffLimitExceeded" in failure
    assert f"batch/Job/{namespace}/migrate" not in failure
    found = healths(gitopsd, url, namespace)
    assert found[f"batch/Job/{namespace}/migrate"]["status"] == "Current"


def test_a_custom_resource_is_healthy_once_its_ready_condition_is_true(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(WIDGETS)
    url = git_server.file_url(git_repo)
    gauge = f"health.example.com/Gauge/{namespace}/pressure"
    controller = StatusWriter(gitopsd.kubectl, namespace)  # Gauges have no controller
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    provisioning = ready("False", "Provisioning", "waiting for a volume")
    controller.write("gauges.health.example.com", "pressure", provisioning)

    waited = gitopsd("sync", url, *scope(namespace), "--wait", "--timeout", "3s")

    assert waited.code == UNHEALTHY, waited.text
    assert f"{gauge}: InProgress: Provisioning: waiting for a volume" in waited.err
    assert "within 3 s" in waited.err
    controller.write("gauges.health.example.com", "pressure", ready("True", "Provisioned", "ok"))
    assert healths(gitopsd, url, namespace)[gauge]["status"] == "Current"
    again = gitopsd("sync", url, *scope(namespace), "--wait", "--timeout", "1m")
    assert again.code == 0, again.text


def test_diff_reports_the_health_of_every_object(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str, gate: Gate
) -> None:
    git_repo.commit({**deployment("web", pods_on=gate.node_selector), **config_map("settings")})
    url = git_server.file_url(git_repo)
    web, settings = f"apps/Deployment/{namespace}/web", f"ConfigMap/{namespace}/settings"

    assert {k: v["status"] for k, v in healths(gitopsd, url, namespace).items()} == {
        web: "NotFound",
        settings: "NotFound",
    }
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    after = healths(gitopsd, url, namespace)
    assert after[settings]["status"] == "Current"
    assert after[web]["status"] == "InProgress"  # its pod waits for the gate
    text = gitopsd("diff", url, *scope(namespace))
    assert f"InProgress   {web}" in text.out and "health: 1 Current, 1 InProgress" in text.out
    gate.open()
    wait_for(lambda: healths(gitopsd, url, namespace)[web]["status"] == "Current", "rollout")


def test_a_sync_wave_waits_until_the_wave_before_is_healthy(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str, gate: Gate
) -> None:
    db = deployment("db", wave="-1", pods_on=gate.node_selector)
    git_repo.commit({**db, **config_map("app", wave="1")})
    url = git_server.file_url(git_repo)
    seen: list[bool] = []

    def database_first() -> None:
        wait_for(lambda: exists(gitopsd, namespace, "deployment", "db"), "db", 120)
        seen.append(exists(gitopsd, namespace, "configmap", "app"))
        gate.open()

    with meanwhile(database_first):
        run = gitopsd("sync", url, *scope(namespace))

    assert run.code == 0, run.text
    assert seen == [False]  # wave 1 was not applied while wave -1 was not healthy
    assert exists(gitopsd, namespace, "configmap", "app")


def test_a_wave_that_does_not_become_healthy_holds_back_later_waves_and_prune(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(config_map("old"))
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    git_repo.commit({"old.yaml": None, **stuck("db"), **config_map("app", wave="1")})

    run = gitopsd("sync", url, *scope(namespace), "--prune")

    assert run.code == UNHEALTHY, run.text
    assert "sync wave 0 is not healthy" in run.err
    assert f"apps/Deployment/{namespace}/db: Failed: ProgressDeadlineExceeded" in run.err
    assert not exists(gitopsd, namespace, "configmap", "app")
    assert exists(gitopsd, namespace, "configmap", "old")  # nothing pruned
    assert exists(gitopsd, namespace, "deployment", "db")  # FA-26: nor rolled back


@pytest.mark.case("FA-26")
def test_sync_as_json_says_what_it_applied_before_a_wave_timed_out(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    """FA-26: a health wait that times out rolls nothing back."""
    # No node matches: db stays InProgress past the timeout.
    git_repo.commit({**deployment("db", pods_on=NOWHERE), **config_map("app", wave="1")})

    url = git_server.file_url(git_repo)
    run = gitopsd("sync", url, *scope(namespace), "--timeout", "3s", "-o", "json")

    assert run.code == UNHEALTHY, run.text
    document = run.document("SyncResult")
    assert document["revision"] == git_repo.head()
    created = {(contract.named(o["object"]), o["action"]) for o in document["outcomes"]}
    assert created == {(f"apps/Deployment/{namespace}/db", "created")}
    assert document["outcomes"][0]["object"]["version"] == "v1"
    assert document["error"]["reason"] == "unhealthy"
    assert "sync wave 0 is not healthy" in document["error"]["message"]
    assert not exists(gitopsd, namespace, "configmap", "app")
    assert exists(gitopsd, namespace, "deployment", "db")  # kept as applied, not rolled back


def test_an_invalid_sync_wave_is_refused_before_anything_is_applied(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit({**config_map("first"), **config_map("app", wave="soon")})

    run = gitopsd("sync", git_server.file_url(git_repo), *scope(namespace))

    assert run.code == 2, run.text
    assert (
        "app.yaml:1: document 1: annotation gitopsd.io/sync-wave must be a whole number" in run.err
    )
    assert not exists(gitopsd, namespace, "configmap", "first")


# The daemon: health as metrics and logs, and sources that wait for others


def test_a_source_applies_its_revision_only_once_the_one_it_depends_on_is_healthy(
    daemons: Daemons,
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    gate: Gate,
) -> None:
    gated_db = deployment("db", pods_on=gate.node_selector)
    git_repo.commit({**under("db", gated_db), **under("app", config_map("app"))})
    url = git_server.file_url(git_repo)
    sources = [
        daemons.source(url, name="db", paths=["db"]),
        daemons.source(url, name="app", paths=["app"], dependsOn=["db"]),
    ]
    daemon = daemons.start_with(sources, "daemon").start()
    daemon.wait_value(
        "gitopsd_health_objects",
        lambda v: v == 1,
        "db rolling out",
        source="db",
        group_kind="Deployment.apps",
        status="InProgress",
    )
    daemon.wait_value(
        "gitopsd_reconcile_total", lambda v: v >= 2, "app waiting", source="app", result="waiting"
    )
    assert not exists(gitopsd, namespace, "configmap", "app")
    assert daemon.value("gitopsd_source_health", source="db", status="InProgress") == 1
    gate.open()

    wait_for(lambda: exists(gitopsd, namespace, "configmap", "app"), "app, once db is healthy")
    daemon.wait_value(
        "gitopsd_source_health", lambda v: v == 1, "db healthy", source="db", status="Current"
    )
    daemon.wait_value(  # app's health is read after its apply: it may lag db's
        "gitopsd_source_health", lambda v: v == 1, "app healthy", source="app", status="Current"
    )
    db = f"apps/Deployment/{namespace}/db"
    logged = [line["message"] for line in daemon.log_lines() if line.get("object") == db]
    assert any(m.startswith("health InProgress -> Current: ") for m in logged), logged
    held = [line for line in daemon.log_lines() if line.get("source") == "app"]
    assert any("revision not applied: source db: " in line["message"] for line in held)
