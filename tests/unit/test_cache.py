"""How the watch cache takes events: what it keeps, what it reports, and the content
version that status-only updates do not move, and how an informer lives through a broken
watch. Events are fed in directly, or by a scripted stand-in for the cluster: no API."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from gitopsd import health
from gitopsd.cluster import ApiError, Cluster, Resource
from gitopsd.cluster.cache import Informer, LiveCache, content
from gitopsd.cluster.projection import Projection
from gitopsd.errors import ClusterError, ClusterReason
from gitopsd.objects import APPLYSET_PART_OF_LABEL, Body, ObjectKey
from tests.harness.waiting import wait_for

DEPLOYMENTS = Resource("apps", "v1", "Deployment", "deployments", namespaced=True)
WEB = ObjectKey("apps", "Deployment", "n", "web")


def deployment(version: str, replicas: int = 1, ready: int = 0, owner: str = "") -> Body:
    labels = {APPLYSET_PART_OF_LABEL: owner} if owner else {}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "n", "resourceVersion": version, "labels": labels},
        "spec": {"replicas": replicas},
        "status": {"readyReplicas": ready},
    }


def informer(keep: Any = lambda key, body: True) -> tuple[Informer, list[ObjectKey]]:
    changes: list[ObjectKey] = []
    no_cluster = cast(Cluster, None)
    fed = Informer(
        no_cluster, DEPLOYMENTS, "n", keep, lambda key, _: changes.append(key), threading.Event()
    )
    return fed, changes


def test_content_ignores_status_and_bookkeeping_only() -> None:
    assert content(deployment("1")) == content(deployment("2", ready=1))
    assert content(deployment("1")) != content(deployment("2", replicas=3))
    assert content(deployment("1")) != content(deployment("2", owner="applyset-ours-v1"))


def rolled_out(version: str) -> Body:
    """The Deployment once its controller has rolled it out: Current."""
    body = deployment(version, ready=1)
    body["metadata"]["generation"] = 1
    body["status"] |= {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1}
    body["status"]["availableReplicas"] = 1
    body["status"]["conditions"] = [
        {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
        {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
    ]
    return body


def test_a_status_only_update_is_stored_but_neither_reported_nor_versioned() -> None:
    cache, changes = informer()
    cache._record(WEB, deployment("1"))
    cache._record(WEB, deployment("2", ready=1))

    assert changes == [WEB]  # only the first sight of it: its health did not change
    assert cache.store[WEB]["metadata"]["resourceVersion"] == "2"  # newest body kept
    assert cache.content_version(WEB, deployment("2", ready=1)) == "1"

    cache._record(WEB, deployment("3", replicas=5, ready=1))
    assert changes == [WEB, WEB]
    assert cache.content_version(WEB, deployment("3", replicas=5, ready=1)) == "3"


def test_a_status_update_that_changes_health_is_reported_but_not_versioned() -> None:
    """A rollout that completes is measured again (its health), yet costs no dry-run."""
    cache, changes = informer()
    cache._record(WEB, deployment("1"))
    cache._record(WEB, rolled_out("2"))

    assert changes == [WEB, WEB]
    assert health.assess(cache.store[WEB]).status == health.Status.CURRENT
    assert cache.content_version(WEB, rolled_out("2")) == "1"


def test_a_deletion_is_reported_and_forgotten() -> None:
    cache, changes = informer()
    cache._record(WEB, deployment("1"))
    cache._record(WEB, None)

    assert changes == [WEB, WEB] and WEB not in cache.store
    assert cache.content_version(WEB, deployment("1")) is None


def test_objects_no_longer_kept_are_purged_and_reported() -> None:
    wanted = {WEB}
    cache, changes = informer(lambda key, body: key in wanted)
    cache._record(WEB, deployment("1"))
    wanted.clear()

    cache.purge()

    assert WEB not in cache.store and changes == [WEB, WEB]


def test_the_cache_keeps_owned_and_wanted_objects_only() -> None:
    live = LiveCache(cast(Cluster, None), "applyset-ours-v1", lambda key, body: None)
    live.wanted = frozenset({WEB})
    api = ObjectKey("apps", "Deployment", "n", "api")

    assert live._keep(WEB, deployment("1"))
    assert live._keep(api, deployment("1", owner="applyset-ours-v1"))
    assert not live._keep(api, deployment("1", owner="applyset-other-v1"))
    assert not live._keep(api, deployment("1"))


def test_a_body_older_than_the_newest_event_keeps_its_own_version() -> None:
    """A drift check that read version 2 just before event 3 arrived must not be remembered
    as the check of version 3's content."""
    cache, _ = informer()
    cache._record(WEB, deployment("2"))
    older = cache.store[WEB]
    cache._record(WEB, deployment("3", replicas=5))

    assert cache.content_version(WEB, older) is None
    assert cache.content_version(WEB, cache.store[WEB]) == "3"


def test_without_an_informer_the_content_version_is_the_resource_version() -> None:
    live = LiveCache(cast(Cluster, None), "applyset-ours-v1", lambda key, body: None)

    assert live.content_version(WEB, deployment("7")) == "7"


def test_a_snapshot_keeps_its_own_version_when_an_edit_arrives_while_it_is_measured() -> None:
    """Else a drift measured on the snapshot would be remembered as that of the edit, and
    the edit, once its key is taken from the queue, never measured."""
    live = LiveCache(cast(Cluster, None), "applyset-ours-v1", lambda key, body: None)
    fed, _ = informer()
    live.informers[(WEB.group_kind, "n")] = fed
    fed._record(WEB, deployment("1"))
    fed._record(WEB, deployment("2", ready=1))  # status only
    snapshot = live.objects()[WEB]
    assert live.content_version(WEB, snapshot) == "1"

    fed._record(WEB, deployment("3", replicas=5))

    assert live.content_version(WEB, snapshot) == "2"
    assert live.content_version(WEB, live.objects()[WEB]) == "3"


def test_an_informer_whose_scope_nothing_needs_any_more_is_retired() -> None:
    live = LiveCache(cast(Cluster, None), "applyset-ours-v1", lambda key, body: None)
    stale, _ = informer()
    live.informers[(WEB.group_kind, "n")] = stale

    live.ensure({}, wanted=[])

    assert live.informers == {} and stale.retired.is_set()


Step = Exception | list[Body | Exception]


@dataclass
class ScriptedCluster:
    """Lists return version "10"; each watch plays the next step: an error to raise when it
    opens, or events (an error among them breaks the stream there). When the script runs
    out, the watch stays open until the test ends."""

    script: list[Step]
    stopping: threading.Event
    list_errors: list[Exception] = field(default_factory=list)
    """Raised by the first lists, one each."""
    projection: Projection = field(default_factory=Projection)
    lists: int = 0
    projected: list[bool] = field(default_factory=list)
    """Whether each list asked for projections."""
    watched_from: list[str] = field(default_factory=list)

    def list_with_version(
        self, resource: Resource, namespace: str, projected: bool
    ) -> tuple[list[Body], str]:
        self.lists += 1
        self.projected.append(projected)
        if self.list_errors:
            raise self.list_errors.pop(0)
        return [], "10"

    def watch(self, resource: Resource, namespace: str, version: str) -> Iterator[Body]:
        self.watched_from.append(version)
        if not self.script:
            return self._open_until_stopped()
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return self._play(step)

    def _play(self, events: list[Body | Exception]) -> Iterator[Body]:
        for event in events:
            if isinstance(event, Exception):
                raise event
            yield event

    def _open_until_stopped(self) -> Iterator[Body]:
        self.stopping.wait()
        yield from ()


def run_informer(
    script: list[Step], list_errors: list[Exception] | None = None
) -> tuple[Informer, ScriptedCluster]:
    stopping = threading.Event()
    cluster = ScriptedCluster(script, stopping, list_errors or [])
    fed = Informer(
        cast(Cluster, cluster), DEPLOYMENTS, "n", lambda k, b: True, lambda k, b: None, stopping
    )
    threading.Thread(target=fed.run, daemon=True).start()
    return fed, cluster


def added(version: str) -> Body:
    return {"type": "ADDED", "object": deployment(version)}


def test_fa03_after_a_cut_watch_the_informer_watches_again_from_the_last_version() -> None:
    cut = ClusterError("WATCH deployments: Connection broken", ClusterReason.UNREACHABLE)
    fed, cluster = run_informer([[added("11"), added("12"), cut], cut, cut])
    try:
        wait_for(lambda: len(cluster.watched_from) == 4, "the informer to watch a fourth time")
        assert cluster.watched_from == ["10", "12", "12", "12"]  # not back to 10
        assert cluster.lists == 1  # a cut is no reason to list everything again
        assert fed.synced.is_set() and fed.store[WEB]["metadata"]["resourceVersion"] == "12"
    finally:
        fed.stopping.set()


def test_a_failing_informer_reports_unsynced_until_its_watch_is_open_again() -> None:
    down = ClusterError("WATCH deployments: Connection refused", ClusterReason.UNREACHABLE)
    fed, cluster = run_informer([[added("11")], down, down, down])
    try:
        wait_for(lambda: len(cluster.watched_from) >= 3, "the informer to fail twice")
        assert not fed.synced.is_set()
        wait_for(fed.synced.is_set, "the informer to be synced once a watch is open", 60)
        assert cluster.lists == 1
    finally:
        fed.stopping.set()


def test_410_gone_lists_again_and_an_unexpected_error_does_not_end_the_thread() -> None:
    gone = ApiError(410, "too old resource version: 10 (20)")
    fed, cluster = run_informer([gone, [], KeyError("a bug")])
    try:
        wait_for(lambda: len(cluster.watched_from) == 4, "the informer to watch a fourth time")
        assert cluster.lists == 2  # only 410 Gone lists again
        assert fed.synced.is_set()
    finally:
        fed.stopping.set()


def test_a_forbidden_list_fails_the_wait_for_sync_at_once_naming_what_and_where() -> None:
    forbidden = ApiError(403, 'deployments.apps is forbidden: User "u" cannot list resource')
    fed, cluster = run_informer([], list_errors=[forbidden, forbidden])
    live = LiveCache(cast(Cluster, cluster), "applyset-ours-v1", lambda key, body: None)
    live.informers[(WEB.group_kind, "n")] = fed
    try:
        wait_for(lambda: fed.refusal, "the informer to be refused")
        with pytest.raises(ClusterError) as refused:
            live.wait_synced(timeout_seconds=3600)  # not waited out: the refusal is raised
        assert refused.value.reason == ClusterReason.FORBIDDEN
        assert str(refused.value).startswith("watch of deployments in namespace n: deployments")

        wait_for(fed.synced.is_set, "the informer to sync once allowed to list", 60)
        assert fed.refusal is None and live.wait_synced(timeout_seconds=0)
    finally:
        fed.stopping.set()


def test_a_wait_for_sync_ends_at_once_when_the_cache_stops() -> None:
    """SIGTERM during a first reconcile: the informers stop and will never sync."""
    down = ClusterError("WATCH deployments: Connection refused", ClusterReason.UNREACHABLE)
    fed, cluster = run_informer([down] * 100)
    live = LiveCache(cast(Cluster, cluster), "applyset-ours-v1", lambda key, body: None)
    live.informers[(WEB.group_kind, "n")] = fed
    threading.Timer(0.2, live.stop).start()
    try:
        with pytest.raises(ClusterError) as stopped:
            live.wait_synced(timeout_seconds=5)  # not waited out: the stop ends it
        assert stopped.value.reason == ClusterReason.FENCED
    finally:
        fed.stopping.set()


def test_the_informer_keeps_projections_of_what_it_lists_and_watches() -> None:
    managed = [{"manager": "gitopsd", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]
    watched = deployment("11", ready=1)
    watched["metadata"]["managedFields"] = managed
    fed, cluster = run_informer([[{"type": "ADDED", "object": watched}]])
    try:
        wait_for(lambda: WEB in fed.store, "the watched object in the store")
        assert cluster.projected == [True]
        assert fed.store[WEB]["status"] == health.essentials(watched)
        assert fed.store[WEB]["metadata"]["managedFields"] == managed
    finally:
        fed.stopping.set()
