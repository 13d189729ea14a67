"""What each object costs in API requests, read from the API server's audit log.

A sync dry-runs each object once and applies only what is absent or differs; the CLI lists
a kind per namespace instead of getting each object; the daemon dry-runs and applies only
what a new revision changed, and its own writes cost no second dry-run.
"""

from __future__ import annotations

import time
from collections import Counter

from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.controlplane import AUDITED_USER, WRITE_VERBS, ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.integration.test_sync import scope

OBJECTS = 12
FIXED_REQUESTS = 12
"""Requests a sync makes whatever its size: discovery, the parent, a LIST per kind."""


def config_maps(value: str = "v", count: int = OBJECTS) -> dict[str, str]:
    return {
        f"cm{number}.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm{number}\n"
        f"data:\n  k: {value}\n"
        for number in range(count)
    }


def writes_by_name(writes: list[audit.Write], dry_run: bool) -> Counter[str]:
    return Counter(w.name for w in writes if w.dry_run == dry_run and w.resource == "configmaps")


def sync(gitopsd: Gitopsd, control_plane: ControlPlane, url: str, namespace: str) -> str:
    run = gitopsd(
        "sync", url, *scope(namespace), "--kubeconfig", str(control_plane.audited_kubeconfig)
    )
    assert run.code == 0, run.text
    return run.out


def test_a_cold_sync_dry_runs_and_applies_each_object_once_and_gets_none(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_maps())
    since = time.time()

    sync(gitopsd, control_plane, git_server.file_url(git_repo), namespace)

    requests = audit.requests(control_plane, AUDITED_USER, since)
    names = {f"cm{number}" for number in range(OBJECTS)}
    writes = [r for r in requests if r.verb == "patch"]
    assert writes_by_name(writes, dry_run=True) == Counter(dict.fromkeys(names, 1))
    assert writes_by_name(writes, dry_run=False) == Counter(
        {**dict.fromkeys(names, 1), "gitopsd-test": 1}
    )
    assert not [r for r in requests if r.verb == "get" and r.name in names]
    assert len(requests) <= 2 * OBJECTS + FIXED_REQUESTS, Counter(r.verb for r in requests)


def test_a_no_op_sync_dry_runs_each_object_once_and_writes_nothing(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_maps())
    url = git_server.file_url(git_repo)
    sync(gitopsd, control_plane, url, namespace)
    since = time.time()

    sync(gitopsd, control_plane, url, namespace)

    requests = audit.requests(control_plane, AUDITED_USER, since)
    assert [r for r in requests if r.verb in WRITE_VERBS and not r.dry_run] == []
    dry_runs = writes_by_name([r for r in requests if r.verb == "patch"], dry_run=True)
    assert dry_runs == Counter({f"cm{number}": 1 for number in range(OBJECTS)})
    assert len(requests) <= OBJECTS + FIXED_REQUESTS


def test_a_sync_after_a_one_file_commit_applies_that_object_alone(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_maps())
    url = git_server.file_url(git_repo)
    sync(gitopsd, control_plane, url, namespace)
    git_repo.commit({"cm3.yaml": config_maps("changed")["cm3.yaml"]})
    since = time.time()

    out = sync(gitopsd, control_plane, url, namespace)

    writes = audit.changes(control_plane, AUDITED_USER, since)
    assert [(w.resource, w.name) for w in writes] == [("configmaps", "cm3")], out
    assert f"configured ConfigMap/{namespace}/cm3" in " ".join(out.split())


def test_the_daemon_dry_runs_and_applies_only_what_a_commit_changed(
    daemons: Daemons,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    git_repo.commit(config_maps())
    daemon = daemons.start(git_server.file_url(git_repo))
    applied = "gitopsd_apply_total"
    daemon.wait_value(
        applied, lambda v: v == OBJECTS, "the first sync", source="app", action="created"
    )
    since = time.time()

    git_repo.commit({"cm3.yaml": config_maps("changed")["cm3.yaml"]})
    daemon.wait_value(applied, lambda v: v == 1, "the commit", source="app", action="configured")
    polls = daemon.value("gitopsd_reconcile_total", source="app", result="success")
    daemon.wait_value(
        "gitopsd_reconcile_total",
        lambda v: v >= polls + 3,
        "three more polls after the apply",
        source="app",
        result="success",
    )

    writes = audit.writes(control_plane, daemon.user, since)
    objects = [w for w in writes if w.resource == "configmaps" and w.name != "gitopsd-app"]
    assert writes_by_name(objects, dry_run=True) == Counter({"cm3": 1})
    assert writes_by_name(objects, dry_run=False) == Counter({"cm3": 1})
