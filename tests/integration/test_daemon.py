"""`gitopsd run` as a real subprocess against the real control plane and git server; its
metrics are scraped over HTTP and its writes read back from the API server's audit log."""

from __future__ import annotations

import hashlib
import hmac
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.harness import audit
from tests.harness.admission import deny
from tests.harness.canary import Canary
from tests.harness.cli import Gitopsd, example_files
from tests.harness.cluster_reads import config_map_value, replicas
from tests.harness.controlplane import AUDITED_USER, ControlPlane
from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import Gate, unique_name
from tests.harness.manifests import config_map_files_with_data, deployment
from tests.harness.prometheus import Prometheus, PrometheusBinaries
from tests.harness.waiting import wait_for


def sync_as_the_daemon_would(gitopsd: Gitopsd, url: str, namespace: str) -> None:
    """`gitopsd sync` into the ApplySet the daemon's source `app` uses."""
    scope = ["-n", namespace, "--inventory-namespace", namespace, "--name", "app"]
    assert gitopsd("sync", url, "--allow-insecure-source", *scope).code == 0


def quiet_window(daemon: DaemonProcess, reconciles: int = 3) -> dict[str, float]:
    """Waits for `reconciles` reconciles in a row that made no API request at all, and
    returns the request tally at their end. Times out if every window has requests."""
    window: dict[str, tuple[dict[str, float], float]] = {}

    def quiet() -> dict[str, float] | None:
        now = (daemon.requests(), daemon.value("gitopsd_reconcile_total", result="success"))
        start = window.setdefault("start", now)
        if now[0] != start[0]:
            window["start"] = now  # requests happened: start a new window
            return None
        return now[0] if now[1] - start[1] >= reconciles else None

    return wait_for(quiet, f"{reconciles} reconciles without an API request", 60)


def test_a_commit_is_applied_and_the_next_one_follows(
    daemons: Daemons, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(config_map_files_with_data("a"))
    daemon = daemons.start(git_server.file_url(git_repo))
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "v", "the first commit")

    sha = git_repo.commit(config_map_files_with_data("a", value="w"))

    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "w", "the second commit")
    daemon.wait_value(
        "gitopsd_source_revision_info", lambda v: v == 1, "the revision", source="app", revision=sha
    )
    daemon.wait_value(
        "gitopsd_commit_to_applied_seconds_count", lambda v: v >= 2, "two applied commits"
    )
    assert daemon.value("gitopsd_reconcile_total", source="app", result="success") >= 2
    assert daemon.value("gitopsd_apply_total", action="configured", result="success") >= 1
    assert daemon.get("/readyz")[0] == 200
    applied = [
        line for line in daemon.log_lines() if line.get("object") == f"ConfigMap/{namespace}/a"
    ]
    assert {line["message"] for line in applied} >= {"created", "configured"}


def value_is(admin_api: Any, namespace: str, name: str, value: str) -> Callable[[], bool]:
    return lambda: config_map_value(admin_api, namespace, name) == value


def in_app(files: dict[str, str]) -> dict[str, str | None]:
    return {f"app/{path}": body for path, body in files.items()}


def test_two_sources_on_one_url_each_apply_exactly_their_own_ref(
    daemons: Daemons,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """Both read app/ of one repository, polled concurrently with prune and no budget: had
    either read the other's tree (or half of one), the audit log would show its DELETEs."""
    mine = in_app(config_map_files_with_data(*(f"m{n}" for n in range(10))))
    git_repo.commit(mine)
    git_repo.commit(
        {
            **dict.fromkeys(mine),
            **in_app(config_map_files_with_data(*(f"o{n}" for n in range(10)))),
        },
        branch="other",
    )
    sources = [
        daemons.source(
            git_server.file_url(git_repo),
            name=ref,
            ref=ref,
            paths=["app"],
            prune=True,
            guards={"allowMassPrune": True},
        )
        for ref in ("main", "other")
    ]
    daemon = daemons.start_with(sources, "daemon").start()
    for value in ("r1", "r2", "r3", "r4", "r5"):
        git_repo.commit(in_app(config_map_files_with_data("m0", value=value)))
        git_repo.commit(in_app(config_map_files_with_data("o0", value=value)), branch="other")
        for name in ("m0", "o0"):
            wait_for(value_is(admin_api, namespace, name, value), f"{name}: {value}")

    assert [w for w in audit.changes(control_plane, daemon.user) if w.verb == "delete"] == []
    names = [f"m{n}" for n in range(10)] + [f"o{n}" for n in range(10)]
    assert all(config_map_value(admin_api, namespace, name) for name in names)


def test_drift_is_measured_with_the_manager_that_caused_it(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(example_files("app"))
    daemon = daemons.start(git_server.file_url(git_repo), selfHeal=False, interval="1h")
    wait_for(lambda: replicas(admin_api, namespace) == 2, "the app to be applied")

    gitopsd.kubectl("scale", "deployment/web", "--replicas=5", "-n", namespace)

    daemon.wait_value(
        "gitopsd_object_drift",
        lambda v: v == 1,
        "the per-object drift series",
        10,
        source="app",
        group_kind="Deployment.apps",
        namespace=namespace,
        name="web",
        manager="kubectl",
    )
    assert daemon.value("gitopsd_drift_objects", source="app", state="modified") == 1
    assert daemon.value("gitopsd_drift_detection_seconds_count", source="app") >= 1
    assert replicas(admin_api, namespace) == 5  # selfHeal is off: only measured

    gitopsd.kubectl("scale", "deployment/web", "--replicas=2", "-n", namespace)
    daemon.wait_value("gitopsd_drift_objects", lambda v: v == 0, "drift to clear", 10)
    assert daemon.value("gitopsd_object_drift", source="app") == 0


def test_detection_latency_of_a_scale_is_measured_from_the_change_not_an_older_write(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """`kubectl scale` writes the scale subresource, whose managedFields entry has no time:
    the apply's entry, seconds older, must not be taken for the change's."""
    git_repo.commit(example_files("app"))
    daemon = daemons.start(git_server.file_url(git_repo), selfHeal=False, interval="1h")
    wait_for(lambda: replicas(admin_api, namespace) == 2, "the app to be applied")
    applied_at = time.time()
    wait_for(lambda: time.time() - applied_at >= 5, "the apply's managedFields time to age")
    count = daemon.value("gitopsd_drift_detection_seconds_count", source="app")
    total = daemon.value("gitopsd_drift_detection_seconds_sum", source="app")

    scaled_at = time.time()
    gitopsd.kubectl("scale", "deployment/web", "--replicas=5", "-n", namespace)
    daemon.wait_value(
        "gitopsd_drift_detection_seconds_count",
        lambda v: v > count,
        "the drift detected",
        30,
        source="app",
    )
    elapsed = time.time() - scaled_at

    new = daemon.value("gitopsd_drift_detection_seconds_count", source="app") - count
    latency = (daemon.value("gitopsd_drift_detection_seconds_sum", source="app") - total) / new
    assert 0 <= latency <= elapsed + 1.0, (latency, elapsed)  # +1: managedFields has seconds


def test_self_heal_undoes_out_of_band_edits_at_once(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(example_files("app"))
    daemon = daemons.start(git_server.file_url(git_repo), interval="1h")
    wait_for(lambda: replicas(admin_api, namespace) == 2, "the app to be applied")

    gitopsd.kubectl("scale", "deployment/web", "--replicas=5", "-n", namespace)
    gitopsd.kubectl("delete", "configmap/web-config", "-n", namespace)
    gitopsd.kubectl("label", "service/web", "touched=by-hand", "-n", namespace)

    wait_for(lambda: replicas(admin_api, namespace) == 2, "the scale to be undone", 10)
    wait_for(
        lambda: config_map_value(admin_api, namespace, "web-config", "GREETING") == "hello",
        "the deleted ConfigMap to return",
        10,
    )
    core: Any = client.CoreV1Api(admin_api)
    wait_for(
        lambda: "touched" not in (core.read_namespaced_service("web", namespace).metadata.labels),
        "the added label to be removed",
        10,
    )
    daemon.wait_value("gitopsd_drift_objects", lambda v: v == 0, "drift to clear", 10)
    assert daemon.value("gitopsd_reconcile_total", source="app") == 1  # healed by watch, not poll


MANY = [f"cm-{i:02d}" for i in range(80)]


def config_map_values(admin_api: Any, namespace: str) -> dict[str, str | None]:
    """The value of key k of every ConfigMap in `namespace`, read from the API server."""
    core: Any = client.CoreV1Api(admin_api)
    items = core.list_namespaced_config_map(namespace).items
    return {cm.metadata.name: (cm.data or {}).get("k") for cm in items if cm.metadata.name in MANY}


def edit(admin_api: Any, namespace: str, name: str, value: str) -> None:
    """An out-of-band edit, as `kubectl patch` makes it."""
    core: Any = client.CoreV1Api(admin_api)
    core.patch_namespaced_config_map(name, namespace, {"data": {"k": value}})


def drifted_names(daemon: DaemonProcess) -> set[str]:
    """The objects in the per-object drift series of /metrics."""
    return {
        dict(labels)["name"]
        for (metric, labels), value in daemon.samples().items()
        if metric == "gitopsd_object_drift" and value == 1
    }


def edit_many_in_quick_succession(admin_api: Any, namespace: str, healed: bool) -> None:
    """Out-of-band edits of 50 objects: a burst (ten objects edited twice, while the first
    heals are in flight), then rounds in which an object is edited right after the heal (or
    the revert) of its previous edit, as its own write is being measured, and another object
    at once too."""
    for name in MANY[:30] + MANY[:10]:
        edit(admin_api, namespace, name, "burst")
    for index, name in enumerate(MANY[30:50]):
        edit(admin_api, namespace, name, "first")
        if healed:
            wait_for(value_is(admin_api, namespace, name, "v"), f"{name} to be healed", 30)
        else:
            edit(admin_api, namespace, name, "v")  # back to git's value: no drift for a moment
        edit(admin_api, namespace, name, "again")
        edit(admin_api, namespace, MANY[50 + index], "meanwhile")


def test_self_heal_heals_every_one_of_many_quick_out_of_band_edits(
    daemons: Daemons, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(config_map_files_with_data(*MANY))
    daemon = daemons.start(git_server.file_url(git_repo), interval="1h")  # heals by watch only
    in_git = dict.fromkeys(MANY, "v")
    wait_for(lambda: config_map_values(admin_api, namespace) == in_git, "the ConfigMaps", 60)

    edit_many_in_quick_succession(admin_api, namespace, healed=True)

    def all_healed() -> bool:
        return config_map_values(admin_api, namespace) == in_git

    wait_for(all_healed, "every out-of-band edit to be healed", 60)
    daemon.wait_value("gitopsd_drift_objects", lambda v: v == 0, "drift to clear", 10)
    assert daemon.value("gitopsd_reconcile_total", source="app") == 1  # healed by watch, not poll


def test_observe_mode_exports_every_one_of_many_quick_out_of_band_edits(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    url = git_server.file_url(git_repo)
    git_repo.commit(config_map_files_with_data(*MANY))
    sync_as_the_daemon_would(gitopsd, url, namespace)
    daemon = daemons.start(url, mode="observe", interval="1h")  # measures by watch only
    daemon.wait_value("gitopsd_reconcile_total", lambda v: v == 1, "the first poll", source="app")

    edit_many_in_quick_succession(admin_api, namespace, healed=False)

    values = config_map_values(admin_api, namespace)
    edited = {name for name, value in values.items() if value != "v"}
    assert len(edited) == 70  # the edits are still there: observe mode never writes
    wait_for(lambda: drifted_names(daemon) == edited, "every edited object in the drift series", 30)
    assert daemon.value("gitopsd_drift_objects", state="modified") == len(edited)
    assert config_map_values(admin_api, namespace) == values


def test_objects_a_sync_created_are_not_exported_as_missing_once_it_finished(
    daemons: Daemons, git_server: GitServer, git_repo: GitRepo
) -> None:
    """The first poll measures every object missing, then creates them. The drift it
    measured must not outlive the sync: the watch measures the objects again only after the
    poll, and a scrape in between would count existing objects as missing."""
    git_repo.commit(config_map_files_with_data(*MANY))
    daemon = daemons.start(git_server.file_url(git_repo), interval="1h")

    def missing_once_created() -> tuple[float] | None:
        samples = daemon.samples()  # one scrape: both values from the same moment

        def total(metric: str, label: tuple[str, str]) -> float:
            return sum(v for (name, ls), v in samples.items() if name == metric and label in ls)

        created = total("gitopsd_apply_total", ("action", "created"))
        return (total("gitopsd_drift_objects", ("state", "missing")),) if created else None

    [missing] = wait_for(missing_once_created, "the first sync to finish", 60)
    assert missing == 0


def refuse_git_values(admin_api: Any, namespace: str) -> Callable[[], None]:
    """Refuses, in `namespace`, any ConfigMap update to git's value (dry-runs too)."""
    expression = "object.data.k != 'v'"
    return deny(admin_api, namespace, "refuse-git-values", ["UPDATE"], expression, "refused")


def refused(admin_api: Any, namespace: str, name: str, value: str) -> bool:
    try:
        edit(admin_api, namespace, name, value)
    except client.ApiException as error:
        return bool(error.status in (400, 403, 422))
    return False


def test_a_heal_that_fails_is_retried_after_its_backoff(
    daemons: Daemons, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(config_map_files_with_data("a", "b"))
    daemon = daemons.start(git_server.file_url(git_repo), interval="1h")  # heals by watch only
    wait_for(value_is(admin_api, namespace, "b", "v"), "the ConfigMaps")
    remove_policy = refuse_git_values(admin_api, namespace)
    try:
        edit(admin_api, namespace, "b", "edited")
        wait_for(
            lambda: refused(admin_api, namespace, "b", "v"), "the policy to refuse git's value"
        )
        edit(admin_api, namespace, "a", "edited")  # its heal is refused too
        daemon.wait_value("gitopsd_errors_total", lambda v: v >= 1, "a refused heal")
    finally:
        remove_policy()

    wait_for(value_is(admin_api, namespace, "a", "v"), "the refused heal to be retried", 60)
    wait_for(value_is(admin_api, namespace, "b", "v"), "the other edit to be healed", 60)
    assert daemon.value("gitopsd_reconcile_total", source="app") == 1  # retried by the watch path


@pytest.mark.case("FA-15")
def test_fa15_self_heal_goes_on_while_git_is_unreachable_and_nothing_is_pruned(
    daemons: Daemons,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_map_files_with_data("a"))
    daemon = daemons.start(git_server.file_url(git_repo), prune=True)
    wait_for(value_is(admin_api, namespace, "a", "v"), "the ConfigMap")
    gone = git_repo.bare.rename(git_repo.bare.with_suffix(".gone"))
    try:
        failed = daemon.wait_value(
            "gitopsd_errors_total", lambda v: v >= 4, "fetches to back off", 60, stage="source"
        )
        edit(admin_api, namespace, "a", "edited")

        wait_for(value_is(admin_api, namespace, "a", "v"), "the edit to be healed", 30)
    finally:
        gone.rename(git_repo.bare)
    # Healed by the watch while the polls wait out their backoff, not after it ended. The
    # daemon logs a write once the API server answered it: the test may see the value first.
    wait_for(lambda: "configured" in daemon.logs(), "the heal to be logged", 30)
    lines = daemon.log_lines()
    [healed] = [line["time"] for line in lines if line["message"] == "configured"]
    fetches = [line for line in lines if line.get("stage") == "source" and line["time"] < healed]
    assert len(fetches) == failed
    retry = re.search(r"retrying in ([0-9.]+) s", fetches[-1]["message"])
    assert retry is not None
    backoff_ends = moment(fetches[-1]["time"]) + float(retry.group(1))
    assert moment(healed) < backoff_ends
    assert audit.deletes(control_plane, namespace) == []


def moment(logged: str) -> float:
    """A log line's time as a POSIX timestamp."""
    return datetime.fromisoformat(logged.replace("Z", "+00:00")).timestamp()


def test_observe_mode_never_writes(
    daemons: Daemons,
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    url = git_server.file_url(git_repo)
    git_repo.commit({**config_map_files_with_data("a", "b"), **deployment("web")})
    sync_as_the_daemon_would(gitopsd, url, namespace)
    git_repo.commit(
        {
            **config_map_files_with_data("a", value="w"),
            "b.yaml": None,
            **config_map_files_with_data("c"),
        }
    )
    gitopsd.kubectl("scale", "deployment/web", "--replicas=3", "-n", namespace)
    daemon = daemons.start(url, mode="observe", prune=True)

    daemon.wait_value("gitopsd_drift_objects", lambda v: v == 4, "all four kinds of drift")
    quiet_window(daemon)

    assert {
        state: daemon.value("gitopsd_drift_objects", state=state)
        for state in ("missing", "modified", "extraneous")
    } == {"missing": 1, "modified": 2, "extraneous": 1}
    assert audit.changes(control_plane, daemon.user) == []
    assert config_map_value(admin_api, namespace, "a") == "v"
    assert config_map_value(admin_api, namespace, "b") == "v"
    assert config_map_value(admin_api, namespace, "c") is None


def test_warn_mode_records_an_event_and_changes_nothing_else(
    daemons: Daemons,
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    url = git_server.file_url(git_repo)
    git_repo.commit(config_map_files_with_data("a"))
    sync_as_the_daemon_would(gitopsd, url, namespace)
    daemon = daemons.start(url, mode="warn")
    gitopsd.kubectl("patch", "configmap/a", "-n", namespace, "-p", '{"data":{"k":"edited"}}')

    core: Any = client.CoreV1Api(admin_api)
    [event] = wait_for(lambda: core.list_namespaced_event(namespace).items, "a Drift event")
    assert (event.reason, event.type, event.involved_object.name) == ("Drift", "Warning", "a")
    assert "data.k (by kubectl-patch)" in event.message and "edited" not in event.message
    assert config_map_value(admin_api, namespace, "a") == "edited"
    assert {w.resource for w in audit.changes(control_plane, daemon.user)} == {"events"}


def test_a_bad_commit_keeps_the_last_good_state_and_waits_for_a_new_one(
    daemons: Daemons,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_map_files_with_data("a", "b"))
    daemon = daemons.start(git_server.file_url(git_repo), prune=True)
    wait_for(lambda: config_map_value(admin_api, namespace, "b") == "v", "the first commit")

    bad = {
        **config_map_files_with_data("a", value="w"),
        "b.yaml": None,
        "broken.yaml": "kind: [unclosed\n",
    }
    git_repo.commit(bad)

    daemon.wait_value(
        "gitopsd_errors_total",
        lambda v: v == 1,
        "the manifest error",
        source="app",
        stage="manifests",
        reason="syntax",
    )
    daemon.wait_value(
        "gitopsd_reconcile_total",
        lambda v: v >= 3,
        "polls of the same bad revision",
        source="app",
        result="skipped",
    )
    assert daemon.value("gitopsd_errors_total", source="app", stage="manifests") == 1
    assert config_map_value(admin_api, namespace, "a") == "v"
    assert config_map_value(admin_api, namespace, "b") == "v"  # left out, and prune is on
    assert audit.deletes(control_plane, namespace) == []
    [error] = [line for line in daemon.log_lines() if line["level"] == "error"]
    assert re.match(r"broken\.yaml:\d+:\d+: .*; waiting for a new revision$", error["message"])
    assert (error["reason"], error["stage"]) == ("syntax", "manifests")

    git_repo.commit({"broken.yaml": None})
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "w", "the fixed commit")
    wait_for(lambda: config_map_value(admin_api, namespace, "b") is None, "b pruned then")


@pytest.mark.case("BI-06")
def test_bi06_a_kind_the_cluster_lacks_is_retried_until_its_crd_appears_pruning_nothing(
    daemons: Daemons,
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    """A revision that holds a custom resource of a kind the cluster does not serve yet, and
    leaves out b (applied before, prune on), fails with reason unknown_kind and is retried
    after its backoff, not left for a new revision: a CRD may come. Meanwhile nothing of it
    is applied and nothing pruned (the audit log). Once the CRD is created out of band, a
    retry applies the revision whole: the custom resource, a's new value, b pruned."""
    group = f"{unique_name('g')}.example.com"
    git_repo.commit(config_map_files_with_data("a", "b"))
    daemon = daemons.start(git_server.file_url(git_repo), prune=True)
    daemon.wait_value("gitopsd_reconcile_total", bool, "the first sync", result="success")
    assert config_map_value(admin_api, namespace, "b") == "v"
    since, polls = time.time(), daemon.value("gitopsd_reconcile_total")
    bob = f"apiVersion: {group}/v1\nkind: Bob\nmetadata:\n  name: bob\n"
    git_repo.commit({**config_map_files_with_data("a", value="w"), "b.yaml": None, "bob.yaml": bob})

    def written_since() -> list[audit.Write]:
        return [
            w for w in audit.changes(control_plane, daemon.user, since) if w.resource != "events"
        ]

    daemon.wait_value("gitopsd_reconcile_total", lambda v: v >= polls + 3, "three polls", 60)
    assert written_since() == []  # nothing of the revision applied, nothing pruned
    daemon.wait_value(
        "gitopsd_errors_total",
        lambda v: v >= 2,
        "the unknown kind, retried",
        source="app",
        stage="manifests",
        reason="unknown_kind",
    )
    assert written_since() == []

    crd = tmp_path / "crd.yaml"
    crd.write_text(bob_definition(group))
    gitopsd.kubectl("apply", "-f", str(crd))

    custom: Any = client.CustomObjectsApi(admin_api)

    def bobs() -> list[Any] | None:
        try:
            found: list[Any] = custom.list_namespaced_custom_object(group, "v1", namespace, "bobs")[
                "items"
            ]
        except client.ApiException as error:
            if error.status == 404:  # the new kind is not served yet: not Established
                return None
            raise
        return found

    wait_for(bobs, "the Bob, once its kind is served", 90)
    wait_for(lambda: config_map_value(admin_api, namespace, "b") is None, "b pruned then")
    assert config_map_value(admin_api, namespace, "a") == "w"


def bob_definition(group: str) -> str:
    return f"""apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: bobs.{group}
spec:
  group: {group}
  names: {{kind: Bob, plural: bobs, singular: bob}}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema: {{openAPIV3Schema: {{type: object}}}}
"""


def test_a_webhook_needs_a_valid_signature(
    daemons: Daemons,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    secret_file = tmp_path / "hook-secret"
    secret_file.write_text("s3cret\n")
    git_repo.commit(config_map_files_with_data("a"))
    daemon = daemons.start(
        git_server.file_url(git_repo), interval="1h", webhookSecretFile=str(secret_file)
    )
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "v", "the first commit")
    git_repo.commit(config_map_files_with_data("b"))
    payload = b'{"ref": "refs/heads/main"}'
    good = "sha256=" + hmac.new(b"s3cret", payload, hashlib.sha256).hexdigest()
    wrong_key = "sha256=" + hmac.new(b"guess", payload, hashlib.sha256).hexdigest()

    assert daemon.post("/hooks/app", payload, {"X-Hub-Signature-256": wrong_key}) == 401
    assert daemon.post("/hooks/app", payload, {}) == 401
    assert daemon.post("/hooks/app", payload, {"X-Hub-Signature-256": "sha256=\u00e9"}) == 401
    assert daemon.post("/hooks/other", payload, {"X-Hub-Signature-256": good}) == 404
    assert daemon.post("/hooks/app", b"x" * (1024 * 1024 + 1), {"X-Hub-Signature-256": good}) == 413
    assert daemon.value("gitopsd_reconcile_total", source="app") == 1
    assert config_map_value(admin_api, namespace, "b") is None

    assert daemon.post("/hooks/app", payload, {"X-Hub-Signature-256": good}) == 202
    wait_for(lambda: config_map_value(admin_api, namespace, "b") == "v", "the hook's sync", 15)
    assert daemon.get("/debug")[0] == 404
    assert "s3cret" not in daemon.logs() + daemon.metrics()


@pytest.mark.case("SE-20")
def test_se20_signed_replays_during_a_fetch_cost_one_more_fetch_and_no_threads(
    daemons: Daemons,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    (tmp_path / "hook-secret").write_text("s3cret")
    (tmp_path / "git-password").write_text(git_server.password)
    credentials = {"username": git_server.username, "passwordFile": str(tmp_path / "git-password")}
    git_repo.commit(config_map_files_with_data("a"))
    daemon = daemons.start(
        git_server.http_url(git_repo),
        interval="1h",
        webhookSecretFile=str(tmp_path / "hook-secret"),
        credentials=credentials,
    )
    fetches = "gitopsd_git_fetch_duration_seconds_count"
    daemon.wait_value(fetches, lambda v: v == 1, "the first fetch", source="app")
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "v", "the first commit")
    idle_threads = daemon.threads()
    git_repo.commit(config_map_files_with_data("b"))
    payload = b'{"ref": "refs/heads/main"}'
    signed = {
        "X-Hub-Signature-256": "sha256=" + hmac.new(b"s3cret", payload, hashlib.sha256).hexdigest()
    }

    with git_server.holding():  # the first hook's fetch waits: every replay lands during it
        assert {daemon.post("/hooks/app", payload, signed) for _ in range(200)} == {202}
        # the poll, and the timer bounding its git (the HTTP server keeps its one thread)
        assert daemon.threads() <= idle_threads + 2

    wait_for(lambda: config_map_value(admin_api, namespace, "b") == "v", "the hook's sync", 30)
    daemon.wait_value(
        "gitopsd_reconcile_total", lambda v: v >= 3, "the poll the replays asked for", source="app"
    )
    assert daemon.value(fetches, source="app") == 3  # the first, the held one, one more


def test_sigusr1_writes_every_threads_stack_to_the_log_and_the_daemon_goes_on(
    daemons: Daemons, git_server: GitServer, git_repo: GitRepo
) -> None:
    """How a daemon that hangs says where (the harness asks before it kills one)."""
    git_repo.commit(config_map_files_with_data("a"))
    daemon = daemons.start(git_server.file_url(git_repo))
    asked = 0

    def main_thread_seen_waiting() -> bool:
        """/healthz answers before the main thread reaches its wait, so a dump may show
        it still starting the scheduler: once a dump is written, ask for another."""
        nonlocal asked
        logs = daemon.logs()
        if "_wait_for_a_signal" in logs:
            return True
        if logs.count("stack of thread MainThread") == asked:
            daemon.signal(signal.SIGUSR1)
            asked += 1
        return False

    wait_for(main_thread_seen_waiting, "the main thread's stack")
    assert daemon.get("/healthz")[0] == 200
    assert daemon.stop() == 0
    # SIGTERM may come while the first reconcile waits for its watches to sync: that wait
    # ends with the watches (tests/unit/test_cache.py), and nothing is retried.
    assert "retrying" not in daemon.logs().split('"shutting down"')[-1]


def test_sigterm_mid_sync_stops_the_applies_and_never_starts_a_prune(
    daemons: Daemons,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_map_files_with_data("victim", *[f"cm{i}" for i in range(10)]))
    daemon = daemons.start(
        git_server.file_url(git_repo), prune=True, guards={"allowMassPrune": True}
    )
    wait_for(lambda: config_map_value(admin_api, namespace, "victim") == "v", "the first sync")
    new = [f"new{i}" for i in range(600)]
    second_commit = time.time()
    git_repo.commit({"victim.yaml": None, **config_map_files_with_data(*new)})

    def creating() -> bool:
        created = [
            w
            for w in audit.changes(control_plane, daemon.user, second_commit)
            if w.verb == "patch" and w.name.startswith("new")
        ]
        return len(created) >= 20

    wait_for(creating, "the second sync to be applying")
    daemon.signal(signal.SIGTERM)

    assert daemon.process is not None and daemon.process.wait(60) == 0
    assert config_map_value(admin_api, namespace, "victim") == "v"  # not pruned
    deletes = [w for w in audit.changes(control_plane, daemon.user) if w.verb == "delete"]
    assert deletes == []
    applied = [
        w
        for w in audit.changes(control_plane, daemon.user, second_commit)
        if w.verb == "patch" and w.name.startswith("new")
    ]
    assert len(applied) < len(new)  # it stopped taking work
    messages = [line["message"] for line in daemon.log_lines()]
    assert "shutting down" in messages and messages[-1] == "stopped"


@pytest.mark.case("LD-02")
def test_a_no_op_reconcile_makes_no_api_request(
    daemons: Daemons,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """Judged by the API server: the daemon runs as the user whose every request the audit
    log records, reads and watches included."""
    git_repo.commit(
        {**example_files("app"), **config_map_files_with_data(*[f"cm{i}" for i in range(30)])}
    )
    source = daemons.source(git_server.file_url(git_repo))
    token = control_plane.audited_token
    daemon = daemons.configure_as(AUDITED_USER, token, [source], "daemon").start()
    wait_for(lambda: replicas(admin_api, namespace) == 2, "the app to be applied")
    quiet_window(daemon)  # its own tally says it settled

    started = time.time()
    polls = daemon.value("gitopsd_reconcile_total", result="success")
    daemon.wait_value(
        "gitopsd_reconcile_total", lambda v: v >= polls + 5, "5 polls", result="success"
    )
    ended = time.time()

    sent = [r for r in audit.requests(control_plane, AUDITED_USER, started) if r.received < ended]
    assert sent == [], [(r.verb, r.resource, r.name) for r in sent]


def test_status_only_updates_are_ignored(
    daemons: Daemons,
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    gate: Gate,
) -> None:
    web = deployment("web", pods_on=gate.node_selector)
    git_repo.commit({**web, **deployment("api", pods_on=gate.node_selector)})
    daemon = daemons.start(git_server.file_url(git_repo), selfHeal=False)
    quiet_window(daemon, reconciles=2)
    since = time.time()

    gate.open()  # the Deployment controller writes web's and api's status as they roll out
    wait_for(lambda: ready_replicas(gitopsd, namespace, "web") == "1", "web rolled out", 60)
    gitopsd.kubectl("label", "deployment/api", "-n", namespace, "touched=yes")

    daemon.wait_value("gitopsd_object_drift", lambda v: v == 1, "the label on api", 10, name="api")
    assert daemon.value("gitopsd_object_drift", name="web") == 0
    # One dry-run, for api: the status the controller wrote, seen on the same watch, cost
    # nothing (the source's own status, whose health the rollout changed, is written).
    dry_runs = [w.name for w in audit.writes(control_plane, daemon.user, since) if w.dry_run]
    assert dry_runs == ["api"]


def ready_replicas(gitopsd: Gitopsd, namespace: str, name: str) -> str:
    jsonpath = "jsonpath={.status.readyReplicas}"
    return gitopsd.kubectl("get", "deployment", name, "-n", namespace, "-o", jsonpath)


@pytest.mark.case("BI-20")
def test_an_invalid_config_is_a_clear_error_at_start(tmp_path: Path) -> None:
    """BI-20."""
    config = tmp_path / "gitopsd.yaml"
    config.write_text("listen: 127.0.0.1:9290\nsources:\n  - name: app\n    mode: sometimes\n")

    done = subprocess.run(
        [sys.executable, "-m", "gitopsd", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 2, done.stderr
    assert "source app: repository: expected a non-empty string" in done.stderr
    assert "no source can run" in done.stderr


@pytest.mark.case("BI-20")
def test_one_invalid_source_never_stops_the_others(
    daemons: Daemons,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    canary: Canary,
) -> None:
    """BI-20: one bad source is set aside, the others run."""
    git_repo.commit(config_map_files_with_data("a"))
    url = git_server.file_url(git_repo)
    sources = [
        daemons.source(url, name="broken", interval="forever"),
        daemons.source(f"https://user:{canary.url_encoded}@git.example.com/r.git", name="leaky"),
        daemons.source(url),
    ]
    daemon = daemons.start_with(sources, "daemon").start()

    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "v", "the good source")
    assert daemon.value("gitopsd_errors_total", source="broken", stage="config") == 1
    assert daemon.value("gitopsd_errors_total", source="leaky", stage="config") == 1
    set_aside = {
        line["source"]: line["message"]
        for line in daemon.log_lines()
        if line["message"].startswith("set aside")
    }
    assert "interval: expected a duration" in set_aside["broken"]
    assert "not in the URL" in set_aside["leaky"]
    canary.assert_absent(daemon.logs(), "the logs")
    canary.assert_absent(daemon.metrics(), "/metrics")


@pytest.fixture
def silent_git_host() -> Iterator[str]:
    """A host whose kernel completes the TCP handshake but that never answers: git hangs."""
    with socket.create_server(("127.0.0.1", 0), backlog=32) as listener:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_ten_hung_sources_never_delay_an_eleventh(
    daemons: Daemons,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    silent_git_host: str,
) -> None:
    """Each hung source holds a poll for the git timeout (60 s), more of them than the
    pool's turns (concurrentReconciles: 4); the good source's next commit arrives only
    through its own scheduled poll, which must still run."""
    git_repo.commit(config_map_files_with_data("a"))
    hung = [daemons.source(f"{silent_git_host}/r{n}.git", name=f"hung-{n}") for n in range(10)]
    good = daemons.source(git_server.file_url(git_repo))
    sources = [*hung, good]  # polled first come, first served: the hung ones first
    daemons.start_with(sources, "daemon", shutdownGraceSeconds=1, concurrentReconciles=4).start()
    wait_for(value_is(admin_api, namespace, "a", "v"), "the first commit, read at start", 60)

    git_repo.commit(config_map_files_with_data("a", value="w"))

    wait_for(value_is(admin_api, namespace, "a", "w"), "the next scheduled poll", 20)


def series(
    server: Prometheus, promql: str, labels: tuple[str, ...], value: bool = False
) -> list[tuple[str, ...]]:
    """The label values (and the value, if asked) of every series `promql` returns, sorted."""
    found = server.query(promql)
    return sorted(
        tuple(s["metric"][k] for k in labels) + ((s["value"][1],) if value else ()) for s in found
    )


def test_prometheus_scrapes_the_drift_and_who_caused_it(
    daemons: Daemons,
    prometheus_binaries: PrometheusBinaries,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    git_repo.commit(example_files("app"))
    daemon = daemons.start(git_server.file_url(git_repo), selfHeal=False, interval="1h")
    wait_for(lambda: replicas(admin_api, namespace) == 2, "the app to be applied")
    exposition = daemon.metrics()
    lint = subprocess.run(
        [str(prometheus_binaries.promtool), "check", "metrics"],
        input=exposition,
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    server = Prometheus(
        prometheus_binaries, tmp_path / "prometheus", [daemon.config["probeListen"]]
    )
    try:
        server.start()
        wait_for(lambda: server.query('up{job="gitopsd"} == 1'), "Prometheus to scrape gitopsd")

        gitopsd.kubectl("scale", "deployment/web", "--replicas=5", "-n", namespace)

        labels = ("group_kind", "namespace", "name", "manager")
        drifted = [("Deployment.apps", namespace, "web", "kubectl")]
        wait_for(
            lambda: series(server, 'gitopsd_object_drift{source="app"} == 1', labels) == drifted,
            "exactly the drifted object, with who drifted it, in Prometheus",
        )
        by_state = 'sum by (state) (gitopsd_drift_objects{source="app"})'
        wait_for(
            lambda: series(server, by_state, ("state",), value=True) == [("modified", "1")],
            "exactly one modified object in Prometheus",
        )
    finally:
        server.stop()
