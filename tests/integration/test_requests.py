"""What each object costs in API requests, read from the API server's audit log.

A sync dry-runs each object once and applies only what is absent or differs, but for a
sync whose only write is one object, whose apply is its own check; the CLI lists a kind
per namespace instead of getting each object; the daemon dry-runs and applies only what a
new revision changed, its own writes cost no second dry-run, and the parent it wrote is not
read back. The parent's in-sync stamps spare a later run (CLI or daemon) the dry-runs of
what nothing changed since; the daemon writes them with its record, or when it stops.
What controllers write (a rollout's status and revision annotation) costs neither a dry-run.
"""

from __future__ import annotations

import base64
import contextlib
import os
import time
from collections import Counter
from typing import Any
from urllib.parse import unquote

from kubernetes import client

from gitopsd.gitsync import status_map
from gitopsd.objects import APPLYSET_PART_OF_LABEL
from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.commands import scope
from tests.harness.controlplane import AUDITED_USER, WRITE_VERBS, ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.manifests import deployment
from tests.harness.waiting import wait_for

OBJECTS = 12
FIXED_REQUESTS = 12
BOOKKEEPING = ("gitopsd-app", status_map.map_name("app"))
"""The source's record and status ConfigMap: the daemon's own, not what it syncs."""
"""Requests a sync makes whatever its size: discovery, the parent, a LIST per kind."""


def config_maps(value: str = "v", count: int = OBJECTS) -> dict[str, str]:
    return {
        f"cm{number}.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm{number}\n"
        f"data:\n  k: {value}\n"
        for number in range(count)
    }


def writes_by_name(writes: list[audit.Write], dry_run: bool) -> Counter[str]:
    return Counter(w.name for w in writes if w.dry_run == dry_run and w.resource == "configmaps")


def rolled_out(admin_api: Any, namespace: str, name: str) -> bool:
    """The Deployment controller annotated the Deployment's revision, and its pod is ready."""
    apps: Any = client.AppsV1Api(admin_api)
    try:
        live = apps.read_namespaced_deployment(name, namespace)
    except client.ApiException as error:
        if error.status == 404:
            return False  # not applied yet
        raise
    revision = (live.metadata.annotations or {}).get("deployment.kubernetes.io/revision")
    return bool(revision) and live.status.ready_replicas == 1


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


def test_a_first_sync_lists_nothing_by_label_and_a_later_one_does(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """Without a parent nothing is owned, so nothing is listed for being owned: a lone
    desired object is got, several are listed without a selector."""
    lone = {"lone.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: lone\n"}
    git_repo.commit({**config_maps(), **lone})
    url = git_server.file_url(git_repo)

    def labelled_lists(since: float) -> list[str]:
        requests = audit.requests(control_plane, AUDITED_USER, since)
        lists = [unquote(r.uri) for r in requests if r.verb == "list"]
        return [uri for uri in lists if APPLYSET_PART_OF_LABEL in uri]

    since = time.time()
    sync(gitopsd, control_plane, url, namespace)
    assert labelled_lists(since) == []

    since = time.time()
    sync(gitopsd, control_plane, url, namespace)  # the parent exists now: owned are listed
    assert [uri.partition("?")[0] for uri in labelled_lists(since)] == [
        f"/api/v1/namespaces/{namespace}/secrets"
    ]


def test_a_namespace_git_creates_is_not_listed_before_it_exists(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    new = f"{namespace}-new"
    inside = {
        f"in-new-{name}.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
        f"  namespace: {new}\n"
        for name in ("a", "b", "c")
    }
    declared = f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {new}\n"
    git_repo.commit({**config_maps(), **inside, "ns.yaml": declared})
    url = git_server.file_url(git_repo)
    since = time.time()
    try:
        sync(gitopsd, control_plane, url, namespace)

        requests = audit.requests(control_plane, AUDITED_USER, since)
        assert [r.uri for r in requests if r.verb == "list" and r.namespace == new] == []
        patched = {(r.resource, r.name) for r in requests if r.verb == "patch"}
        assert {("configmaps", name) for name in "abc"} <= patched
        # what follows the Namespace is not read again: only a sync wave waits long enough
        got = [r.name for r in requests if r.verb == "get" and r.resource == "configmaps"]
        assert got == ["gitopsd-test"]  # the parent, once
        since = time.time()
        sync(gitopsd, control_plane, url, namespace)  # now it exists, and is listed
        lists = [r for r in audit.requests(control_plane, AUDITED_USER, since) if r.verb == "list"]
        assert [r.resource for r in lists if r.namespace == new] == ["configmaps"]
    finally:
        with contextlib.suppress(client.ApiException):  # not created if the sync failed
            client.CoreV1Api(admin_api).delete_namespace(new)


def dry_runs(control_plane: ControlPlane, since: float) -> Counter[str]:
    requests = audit.requests(control_plane, AUDITED_USER, since)
    return writes_by_name([r for r in requests if r.verb == "patch"], dry_run=True)


def test_a_no_op_sync_sends_no_dry_run_and_writes_nothing(
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
    assert [r for r in requests if r.verb in WRITE_VERBS] == []  # the stamps vouch for all
    assert len(requests) <= FIXED_REQUESTS


def test_diff_dry_runs_only_what_changed_since_the_stamps_and_refresh_dry_runs_all(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_maps())
    url = git_server.file_url(git_repo)
    sync(gitopsd, control_plane, url, namespace)
    core: Any = client.CoreV1Api(admin_api)
    core.patch_namespaced_config_map("cm1", namespace, {"data": {"k": "edited"}})
    git_repo.commit({"cm2.yaml": config_maps("changed")["cm2.yaml"]})
    audited = ["--kubeconfig", str(control_plane.audited_kubeconfig)]
    since = time.time()

    run = gitopsd("diff", url, *scope(namespace), *audited)

    assert run.code == 1, run.text
    assert "ConfigMap/" + namespace + "/cm1" in run.out and "edited" in run.out, run.out
    assert "ConfigMap/" + namespace + "/cm2" in run.out, run.out
    assert dry_runs(control_plane, since) == Counter({"cm1": 1, "cm2": 1})
    since = time.time()

    assert gitopsd("diff", url, *scope(namespace), *audited, "--refresh").code == 1
    assert dry_runs(control_plane, since) == Counter({f"cm{n}": 1 for n in range(OBJECTS)})


def test_stamps_that_do_not_match_vouch_for_nothing(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """Stamps written by someone else (or an older gitopsd's record without them) cost
    dry-runs, never a missed drift; the parent stays this source's."""
    git_repo.commit(config_maps())
    url = git_server.file_url(git_repo)
    sync(gitopsd, control_plane, url, namespace)
    core: Any = client.CoreV1Api(admin_api)
    forged = base64.b64encode(os.urandom(8 * OBJECTS)).decode()
    core.patch_namespaced_config_map("gitopsd-test", namespace, {"binaryData": {"in-sync": forged}})
    since = time.time()

    assert (
        gitopsd(
            "diff", url, *scope(namespace), "--kubeconfig", str(control_plane.audited_kubeconfig)
        ).code
        == 0
    )
    assert dry_runs(control_plane, since) == Counter({f"cm{n}": 1 for n in range(OBJECTS)})

    core.patch_namespaced_config_map("gitopsd-test", namespace, {"binaryData": {"in-sync": "AAAA"}})
    since = time.time()
    sync(gitopsd, control_plane, url, namespace)  # measures all, and stamps them again
    assert dry_runs(control_plane, since) == Counter({f"cm{n}": 1 for n in range(OBJECTS)})
    since = time.time()
    sync(gitopsd, control_plane, url, namespace)
    assert dry_runs(control_plane, since) == Counter()


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
    changed = [("configmaps", "cm3"), ("configmaps", "gitopsd-test")]  # cm3, then its stamp
    assert [(w.resource, w.name) for w in writes] == changed, out
    assert f"configured ConfigMap/{namespace}/cm3" in " ".join(out.split())


def test_the_daemon_applies_a_one_file_commit_alone_and_keeps_its_stamp_until_it_stops(
    daemons: Daemons,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    """A commit whose only write is one object costs that apply: no dry-run (the apply is
    its own check) and no write of the parent (its record holds the object already; the
    new stamp waits). The daemon writes the stamp when it stops, so the next one dry-runs
    nothing."""
    git_repo.commit(config_maps())
    url = git_server.file_url(git_repo)
    daemon = daemons.start(url)
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
    objects = [w for w in writes if w.resource == "configmaps" and w.name not in BOOKKEEPING]
    assert writes_by_name(objects, dry_run=True) == Counter()
    assert writes_by_name(objects, dry_run=False) == Counter({"cm3": 1})
    requests = audit.requests(control_plane, daemon.user, since)
    assert [r.verb for r in requests if r.name == "gitopsd-app"] == []
    stopping = time.time()

    assert daemon.stop() == 0
    parent = [r for r in audit.requests(control_plane, daemon.user, stopping)]
    assert [(r.verb, r.name) for r in parent if r.resource == "configmaps"] == [
        ("patch", "gitopsd-app")
    ]
    since = time.time()
    again = daemons.start(url, name="again")
    again.wait_value("gitopsd_reconcile_total", lambda v: v >= 1, "its first sync", source="app")
    writes = audit.writes(control_plane, again.user, since)
    objects = [w for w in writes if w.resource == "configmaps" and w.name not in BOOKKEEPING]
    assert objects == []  # the stamps vouch for every object: no dry-run, no apply


def test_a_lone_invalid_change_is_refused_by_its_apply_and_nothing_else_is_written(
    daemons: Daemons,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """A commit that makes one live object invalid, and changes nothing else: the daemon
    sends its apply without a dry-run, the server refuses it as it would the dry-run, the
    error names the object and the field, and nothing else is written, the parent
    included."""
    git_repo.commit(config_maps())
    daemon = daemons.start(git_server.file_url(git_repo))
    daemon.wait_value(
        "gitopsd_apply_total", lambda v: v == OBJECTS, "the first sync", action="created"
    )
    since = time.time()

    bad = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm0\ndata:\n  k: v\nbogus: 1\n"
    git_repo.commit({"cm0.yaml": bad})
    daemon.wait_value(
        "gitopsd_errors_total", lambda v: v >= 1, "the refusal", stage="cluster", reason="invalid"
    )

    writes = audit.writes(control_plane, daemon.user, since)
    objects = [w for w in writes if w.resource == "configmaps" and w.name not in BOOKKEEPING]
    assert [(w.name, w.dry_run) for w in objects] == [("cm0", False)]  # its apply, refused
    assert objects[0].code >= 400
    assert [w for w in writes if w.name == BOOKKEEPING[0]] == []  # the parent is not written
    core: Any = client.CoreV1Api(admin_api)
    assert core.read_namespaced_config_map("cm0", namespace).data == {"k": "v"}
    refused = [line for line in daemon.logs().splitlines() if "bogus" in line]
    assert refused and f"ConfigMap/{namespace}/cm0 (cm0.yaml" in refused[0], daemon.logs()


def test_the_daemon_refuses_a_lone_write_of_an_immutable_field_as_its_dry_run_would(
    daemons: Daemons,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """A commit that changes the data of an immutable ConfigMap, and nothing else: its
    apply is refused, and the object is refused alone, naming the field, as its dry-run
    would have had it."""
    frozen = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: frozen\nimmutable: true\n"
    git_repo.commit({**config_maps(), "frozen.yaml": frozen + "data:\n  k: one\n"})
    daemon = daemons.start(git_server.file_url(git_repo))
    daemon.wait_value(
        "gitopsd_apply_total", lambda v: v == OBJECTS + 1, "the first sync", action="created"
    )
    since = time.time()

    git_repo.commit({"frozen.yaml": frozen + "data:\n  k: two\n"})
    daemon.wait_value(
        "gitopsd_errors_total", lambda v: v >= 1, "the refusal", stage="cluster", reason="immutable"
    )

    writes = audit.writes(control_plane, daemon.user, since)
    frozen_writes = [(w.dry_run, w.code) for w in writes if w.name == "frozen"]
    assert frozen_writes[0] == (False, 422)  # its apply, not a dry-run, was refused
    core: Any = client.CoreV1Api(admin_api)
    assert core.read_namespaced_config_map("frozen", namespace).data == {"k": "one"}
    refused = [line for line in daemon.logs().splitlines() if "frozen: not applied" in line]
    assert refused and "git changes data.k, which cannot change once set" in refused[0]


def test_a_daemon_starting_dry_runs_only_what_changed_since_the_last_sync(
    daemons: Daemons,
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_maps())
    url = git_server.file_url(git_repo)
    run = gitopsd("sync", url, *scope(namespace), "--name", "app")
    assert run.code == 0, run.text
    core: Any = client.CoreV1Api(admin_api)
    core.patch_namespaced_config_map("cm5", namespace, {"data": {"k": "edited"}})
    since = time.time()

    daemon = daemons.start(url)
    daemon.wait_value(
        "gitopsd_apply_total", lambda v: v == 1, "cm5 healed", source="app", action="configured"
    )

    writes = audit.writes(control_plane, daemon.user, since)
    objects = [w for w in writes if w.resource == "configmaps" and w.name not in BOOKKEEPING]
    # Only cm5 is dry-run, once: the check after the first poll waits for the heal's event
    # (the initial list queued cm5 before the heal, with the edited body).
    assert writes_by_name(objects, dry_run=True) == Counter({"cm5": 1})
    assert writes_by_name(objects, dry_run=False) == Counter({"cm5": 1})


def test_a_no_op_sync_after_a_rollout_dry_runs_nothing(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """The stamps vouch for what gitopsd owns: the controller's status and revision
    annotation, written since, leave them standing."""
    git_repo.commit({**config_maps(count=2), **deployment("web")})
    url = git_server.file_url(git_repo)
    sync(gitopsd, control_plane, url, namespace)
    wait_for(lambda: rolled_out(admin_api, namespace, "web"), "web rolled out", 60)
    since = time.time()

    sync(gitopsd, control_plane, url, namespace)

    requests = audit.requests(control_plane, AUDITED_USER, since)
    assert [(r.verb, r.name) for r in requests if r.verb in WRITE_VERBS] == []


def test_a_rollout_costs_the_daemon_no_dry_run_and_an_edit_of_its_field_is_healed(
    daemons: Daemons,
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """Polled once an hour, it hears of the rollout's progress through its health alone."""
    git_repo.commit(deployment("web", deadline=60))
    daemon = daemons.start(git_server.file_url(git_repo), interval="1h")
    wait_for(lambda: rolled_out(admin_api, namespace, "web"), "web rolled out", 60)
    daemon.wait_value("gitopsd_source_health", lambda v: v == 1, "web Current", status="Current")

    def web(dry_run: bool) -> list[audit.Write]:
        sent = audit.writes(control_plane, daemon.user)
        return [w for w in sent if w.name == "web" and w.dry_run == dry_run]

    applied = web(dry_run=False)[0].received
    assert [w for w in web(dry_run=True) if w.received > applied] == []
    since = time.time()

    gitopsd.kubectl(
        "patch", "deployment/web", "-n", namespace, "-p", '{"spec":{"progressDeadlineSeconds":30}}'
    )

    wait_for(lambda: deadline_of(admin_api, namespace, "web") == 60, "the edit healed")
    assert [w.received > since for w in web(dry_run=True)].count(True) == 1


def deadline_of(admin_api: Any, namespace: str, name: str) -> int:
    apps: Any = client.AppsV1Api(admin_api)
    return int(apps.read_namespaced_deployment(name, namespace).spec.progress_deadline_seconds)
