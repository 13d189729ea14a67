"""How the watch cache takes events: what it keeps, what it reports, and the owned version
that status updates and other managers' fields do not move, how an informer lives through a broken
watch, and how sources share informers without seeing each other's objects. Events are fed
in directly, or by a scripted stand-in for the cluster: no API."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from gitopsd import health
from gitopsd.cluster import ApiError, Cluster, Keep, Listing, Resource
from gitopsd.cluster.cache import Informer, WatchEvents, content
from gitopsd.cluster.projection import Projection
from gitopsd.cluster.watches import LiveCache, Watches
from gitopsd.errors import ClusterError, ClusterReason
from gitopsd.managed_fields import owned_version
from gitopsd.objects import APPLYSET_PART_OF_LABEL, FIELD_MANAGER, Body, ObjectKey, key_of, owner_of
from tests.harness.waiting import wait_for

DEPLOYMENTS = Resource("apps", "v1", "Deployment", "deployments", namespaced=True)
WEB = ObjectKey("apps", "Deployment", "n", "web")


def deployment(
    version: str, replicas: int = 1, ready: int = 0, owner: str = "", key: ObjectKey = WEB
) -> Body:
    """The Deployment as gitopsd applied it: its label and replicas are gitopsd's fields."""
    labels = {APPLYSET_PART_OF_LABEL: owner} if owner else {}
    label: Body = {f"f:{APPLYSET_PART_OF_LABEL}": {}}
    ours: Body = {"f:metadata": {"f:labels": label}, "f:spec": {"f:replicas": {}}}
    applied = {"manager": FIELD_MANAGER, "operation": "Apply", "fieldsV1": ours}
    metadata: Body = {"name": key.name, "namespace": key.namespace, "resourceVersion": version}
    metadata["managedFields"] = [applied]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {**metadata, "labels": labels},
        "spec": {"replicas": replicas},
        "status": {"readyReplicas": ready},
    }


def owned(memo_version: str) -> str:
    """The owned part of a version the drift memo reads (`OWNED@CONTENT`)."""
    return memo_version.partition("@")[0]


def informer(keep: Any = lambda key, body: True) -> tuple[Informer, list[ObjectKey]]:
    changes: list[ObjectKey] = []
    no_cluster = cast(Cluster, None)
    fed = Informer(
        no_cluster, DEPLOYMENTS, "n", keep, lambda key, *_: changes.append(key), threading.Event()
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
    first = owned_version(deployment("1"))
    assert owned(cache.memo_version(WEB, deployment("2", ready=1))) == first

    cache._record(WEB, deployment("3", replicas=5, ready=1))
    assert changes == [WEB, WEB]
    assert owned(cache.memo_version(WEB, deployment("3", replicas=5, ready=1))) != first


def test_a_controllers_annotation_is_stored_but_neither_reported_nor_versioned() -> None:
    """A rollout's revision annotation is the Deployment controller's field, not gitopsd's:
    no drift check, and the owned version stays."""
    cache, changes = informer()
    cache._record(WEB, deployment("1"))
    annotated = deployment("2")
    annotated["metadata"]["annotations"] = {"deployment.kubernetes.io/revision": "1"}
    theirs: Body = {"f:metadata": {"f:annotations": {"f:deployment.kubernetes.io/revision": {}}}}
    controller = {"manager": "kube-controller-manager", "operation": "Update"}
    annotated["metadata"]["managedFields"].append({**controller, "fieldsV1": theirs})

    cache._record(WEB, annotated)

    assert changes == [WEB] and cache.store[WEB] is annotated
    assert owned(cache.memo_version(WEB, annotated)) == owned_version(deployment("1"))


def test_a_status_update_that_changes_health_is_reported_but_not_versioned() -> None:
    """A rollout that completes is assessed again (its health), yet costs no dry-run: where
    someone hears health alone, a drift check is not asked for."""
    cache, changes = informer()
    cache._record(WEB, deployment("1"))
    cache._record(WEB, rolled_out("2"))

    assert changes == [WEB, WEB]
    assert health.assess(cache.store[WEB]).status == health.Status.CURRENT
    assert owned(cache.memo_version(WEB, rolled_out("2"))) == owned_version(deployment("1"))

    healths: list[ObjectKey] = []
    cache.on_health = lambda key, *_: healths.append(key)
    cache._record(WEB, deployment("3", ready=1))  # no longer Current: a new generation
    cache._record(WEB, deployment("4", replicas=3, ready=1))
    assert (healths, changes) == ([WEB], [WEB, WEB, WEB])


def test_a_view_hears_of_health_alone_apart() -> None:
    live, cluster = view("applyset-ours-v1")
    healths: list[ObjectKey] = []
    live.on_health = healths.append
    try:
        live.ensure({(WEB.group_kind, "n"): DEPLOYMENTS}, [WEB])
        fed = shared_informer(live)
        wait_for(fed.synced.is_set, "the informer to sync")
        fed._record(WEB, deployment("1"))
        fed._record(WEB, rolled_out("2"))

        assert healths == [WEB] and live.held([WEB, A]) == {WEB: fed.store[WEB], A: None}
    finally:
        cluster.stopping.set()


def test_a_deletion_is_reported_and_forgotten() -> None:
    cache, changes = informer()
    cache._record(WEB, deployment("1"))
    cache._record(WEB, None)

    assert changes == [WEB, WEB] and WEB not in cache.store and cache.versions == {}


def test_objects_no_longer_kept_are_forgotten_and_reported() -> None:
    wanted = {WEB}
    cache, changes = informer(lambda key, body: key in wanted)
    cache._record(WEB, deployment("1"))
    cache.forget([WEB])
    assert WEB in cache.store  # still kept
    wanted.clear()

    cache.forget([WEB])

    assert WEB not in cache.store and changes == [WEB, WEB]


def test_the_informer_indexes_what_it_holds_by_applyset_and_namespace() -> None:
    cache, _ = informer()
    cache._record(WEB, deployment("1", owner="applyset-ours-v1"))
    assert cache.owned_by(("applyset-ours-v1", "n")) == {WEB: cache.store[WEB]}

    cache._record(WEB, deployment("2", owner="applyset-other-v1"))  # relabelled
    assert cache.owned_by(("applyset-ours-v1", "n")) == {}
    assert list(cache.owned_by(("applyset-other-v1", "n"))) == [WEB]

    cache._record(WEB, None)
    assert cache.owned == {}


def test_a_body_older_than_the_newest_event_keeps_its_own_version() -> None:
    """A drift check that read version 2 just before event 3 arrived must not be remembered
    as the check of version 3's content."""
    cache, _ = informer()
    cache._record(WEB, deployment("2"))
    older = cache.store[WEB]
    cache._record(WEB, deployment("3", replicas=5))

    assert owned(cache.memo_version(WEB, older)) == owned_version(deployment("2"))
    assert owned(cache.memo_version(WEB, cache.store[WEB])) == owned_version(deployment("3", 5))


def test_without_an_informer_the_owned_version_is_computed_from_the_body() -> None:
    watches = Watches(threading.Event())
    live = LiveCache(watches, cast(Cluster, None), "applyset-ours-v1", lambda key, body: None)

    assert owned(live.memo_version(WEB, deployment("7"))) == owned_version(deployment("7"))


def test_a_snapshot_keeps_its_own_version_when_an_edit_arrives_while_it_is_measured() -> None:
    """Else a drift measured on the snapshot would be remembered as that of the edit, and
    the edit, once its key is taken from the queue, never measured."""
    live, cluster = view("applyset-ours-v1")
    try:
        live.ensure({(WEB.group_kind, "n"): DEPLOYMENTS}, [WEB])
        fed = shared_informer(live)
        wait_for(fed.synced.is_set, "the informer to sync")
        check_snapshot_versions(live, fed)
    finally:
        cluster.stopping.set()


def check_snapshot_versions(live: LiveCache, fed: Informer) -> None:
    fed._record(WEB, deployment("1"))
    fed._record(WEB, deployment("2", ready=1))  # status only
    snapshot = live.objects()[WEB]
    assert live.memo_version(WEB, snapshot) == f"{owned_version(deployment('1'))}@1"

    fed._record(WEB, deployment("3", replicas=5))

    assert live.memo_version(WEB, snapshot) == f"{owned_version(deployment('1'))}@2"
    newest = live.objects()[WEB]
    assert live.memo_version(WEB, newest) == f"{owned_version(deployment('3', 5))}@3"


def test_an_informer_whose_scope_nothing_needs_any_more_is_retired() -> None:
    live, cluster = view("applyset-ours-v1")
    try:
        live.ensure({(WEB.group_kind, "n"): DEPLOYMENTS}, [WEB])
        stale = shared_informer(live)

        live.ensure({}, wanted=[])

        assert live.joined == {} and stale.retired.is_set()
        assert live.watches.informers == {}
    finally:
        cluster.stopping.set()


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
    objects: list[Body] = field(default_factory=list)
    """What lists return, in any namespace."""
    identity: str = ""
    name: str = ""
    """Which cluster it is: the daemon's own."""
    everywhere: bool = True
    """Whether its identity may list and watch in all namespaces."""
    lists: int = 0
    projected: list[bool] = field(default_factory=list)
    """Whether each list asked for projections."""
    watched_from: list[str] = field(default_factory=list)

    def list_with_version(
        self, resource: Resource, namespace: str, projected: bool, keep: Keep | None = None
    ) -> Listing:
        self.projected.append(projected)
        if self.list_errors:
            raise self.list_errors.pop(0)
        self.lists += 1
        found = [o for o in self.objects if namespace in ("", o["metadata"]["namespace"])]
        kept = [o for o in found if keep is None or keep(key_of(o), o)]
        return Listing(kept, {key_of(o) for o in found}, "10")

    def may_watch_everywhere(self, resource: Resource) -> bool:
        return self.everywhere

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
        cast(Cluster, cluster), DEPLOYMENTS, "n", lambda k, b: True, lambda *_: None, stopping
    )
    threading.Thread(target=fed.run, daemon=True).start()
    return fed, cluster


def added(version: str) -> Body:
    return {"type": "ADDED", "object": deployment(version)}


@pytest.mark.case("FA-03")
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
    live, _ = view("applyset-ours-v1", list_errors=[forbidden, forbidden], everywhere=False)
    live.ensure({(WEB.group_kind, "n"): DEPLOYMENTS}, [WEB])
    fed = shared_informer(live)
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
    live, _ = view("applyset-ours-v1", script=[down] * 100)
    live.ensure({(WEB.group_kind, "n"): DEPLOYMENTS}, [WEB])
    fed = shared_informer(live)
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


def test_each_watch_event_is_counted_by_what_it_came_to() -> None:
    """gitopsd_watch_events_total: a rollout's status and another's object cost an event,
    counted as such; only a change of what gitopsd owns is checked for drift."""
    other = ObjectKey("apps", "Deployment", "n", "other")
    script: list[Body | Exception] = [
        added("11"),
        {"type": "MODIFIED", "object": deployment("12", ready=1)},  # status alone
        {"type": "MODIFIED", "object": rolled_out("13")},  # now Current
        {"type": "MODIFIED", "object": deployment("14", replicas=3)},  # gitopsd's field
        {"type": "ADDED", "object": deployment("15", key=other)},  # no source keeps it
        {"type": "DELETED", "object": deployment("16", key=other)},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "17"}}},
        {"type": "DELETED", "object": deployment("18", replicas=3)},
    ]
    stopping = threading.Event()
    cluster = ScriptedCluster([script], stopping)
    fed = Informer(
        cast(Cluster, cluster), DEPLOYMENTS, "n", lambda k, b: k == WEB, lambda *_: None, stopping
    )
    fed.events = WatchEvents()
    threading.Thread(target=fed.run, daemon=True).start()
    try:
        counted = fed.events.snapshot
        wait_for(lambda: sum(counted().values()) == 7, "the informer to count every event")
        assert counted() == {
            ("deployments.apps", "owned"): 3,  # came, gitopsd's field moved, went
            ("deployments.apps", "ignored"): 1,
            ("deployments.apps", "health"): 1,
            ("deployments.apps", "unkept"): 2,
        }
    finally:
        stopping.set()


def view(
    applyset_id: str,
    watches: Watches | None = None,
    identity: str = "",
    changes: list[tuple[ObjectKey, Body | None]] | None = None,
    **scripted: Any,
) -> tuple[LiveCache, ScriptedCluster]:
    """A source's view through `watches` (new ones unless given), as `identity`: what its
    informers see is scripted; the changes it hears go to `changes`."""
    stopping = watches.stopping if watches else threading.Event()
    cluster = ScriptedCluster(scripted.pop("script", []), stopping, **scripted)
    cluster.identity = identity
    heard = changes if changes is not None else []
    on_change = lambda key, body: heard.append((key, body))  # noqa: E731
    live = LiveCache(watches or Watches(stopping), cast(Cluster, cluster), applyset_id, on_change)
    return live, cluster


def shared_informer(live: LiveCache) -> Informer:
    (informer,) = {id(j.informer): j.informer for j in live.joined.values()}.values()
    return informer


A, B = ObjectKey("apps", "Deployment", "a", "web"), ObjectKey("apps", "Deployment", "b", "web")
IN_A, IN_B = (A.group_kind, "a"), (B.group_kind, "b")


def test_sources_of_one_identity_share_one_watch_of_all_namespaces_yet_see_only_theirs() -> None:
    first, cluster = view("applyset-a-v1")
    second, _ = view("applyset-b-v1", first.watches)
    cluster.objects = [
        deployment("1", owner="applyset-a-v1", key=A),
        deployment("2", owner="applyset-b-v1", key=B),
        deployment("3", owner="applyset-a-v1", key=B),  # a's label, in b's namespace
    ]
    try:
        first.ensure({IN_A: DEPLOYMENTS}, [])
        second.ensure({IN_B: DEPLOYMENTS}, [])
        fed = shared_informer(first)
        wait_for(fed.synced.is_set, "the shared informer to sync")

        assert shared_informer(second) is fed and fed.namespace == ""  # one watch, everywhere
        assert list(first.objects()) == [A]  # not its label's object in b: b is not its scope
        assert second.objects()[B]["metadata"]["resourceVersion"] == "2"
    finally:
        cluster.stopping.set()


def test_each_identity_has_its_own_informers_and_without_rights_everywhere_one_per_namespace() -> (
    None
):
    daemon, cluster = view("applyset-a-v1")
    tenant, _ = view("applyset-b-v1", daemon.watches, identity="system:serviceaccount:b:sync")
    cast(ScriptedCluster, tenant.cluster).everywhere = False
    try:
        daemon.ensure({IN_A: DEPLOYMENTS}, [A])
        tenant.ensure({IN_B: DEPLOYMENTS}, [B])

        assert shared_informer(daemon) is not shared_informer(tenant)
        assert shared_informer(tenant).namespace == "b"
        assert len(daemon.watches.informers) == 2
    finally:
        cluster.stopping.set()


def test_a_source_that_joins_a_running_informer_catches_up_on_what_it_skipped() -> None:
    first, cluster = view("applyset-a-v1")
    second, _ = view("applyset-b-v1", first.watches)
    cluster.objects = [deployment("1", key=A), deployment("2", owner="applyset-b-v1", key=B)]
    try:
        first.ensure({IN_A: DEPLOYMENTS}, [])  # wants nothing yet: A is skipped
        fed = shared_informer(first)
        wait_for(fed.synced.is_set, "the informer to sync")
        assert fed.store == {}

        second.ensure({IN_B: DEPLOYMENTS}, [])
        first.ensure({IN_A: DEPLOYMENTS}, [A])

        assert list(second.objects()) == [B] and list(first.objects()) == [A]
        assert cluster.lists == 3  # the informer's list, then one catch-up each
    finally:
        cluster.stopping.set()


def keeping_everything(cluster: ScriptedCluster) -> Informer:
    """An informer of all namespaces, not started: its catch-ups are run by the test."""
    keep_all, unheard = (lambda key, body: True), (lambda *_: None)
    return Informer(cast(Cluster, cluster), DEPLOYMENTS, "", keep_all, unheard, cluster.stopping)


def keeping_owners_of(cluster: ScriptedCluster, applyset_id: str) -> Informer:
    """An informer of all namespaces keeping one ApplySet's objects, not started."""
    keep = lambda key, body: owner_of(body) == applyset_id  # noqa: E731
    return Informer(
        cast(Cluster, cluster), DEPLOYMENTS, "", keep, lambda *_: None, cluster.stopping
    )


def test_a_list_drops_what_it_read_relabelled_away_though_held_as_kept() -> None:
    """The watch was down while A's label changed: the list, not the body held, decides."""
    _, cluster = view("applyset-a-v1")
    fed = keeping_owners_of(cluster, "applyset-a-v1")
    fed._record(A, deployment("1", owner="applyset-a-v1", key=A))
    cluster.objects = [deployment("9", owner="applyset-b-v1", key=A)]

    fed._relist()

    assert fed.store == {}


def test_a_list_keeps_what_someone_began_to_keep_and_caught_up_on_while_it_ran() -> None:
    _, cluster = view("applyset-a-v1")
    kept: set[ObjectKey] = set()
    fed = Informer(
        cast(Cluster, cluster),
        DEPLOYMENTS,
        "",
        lambda k, b: k in kept,
        lambda *_: None,
        cluster.stopping,
    )
    cluster.objects = [deployment("1", key=A)]
    listed = cluster.list_with_version

    def caught_up_during_the_list(
        resource: Resource, namespace: str, projected: bool, keep: Keep | None = None
    ) -> Listing:
        found = listed(resource, namespace, projected, keep)  # A is no one's yet
        kept.add(A)
        fed._record(A, deployment("1", key=A))  # the catch-up of whoever keeps it now
        return found

    cluster.list_with_version = caught_up_during_the_list  # type: ignore[method-assign]
    fed._relist()

    assert list(fed.store) == [A]


def test_a_catch_up_leaves_what_the_watch_recorded_since_it_began() -> None:
    """The list may be older than an event the watch delivered meanwhile."""
    _, cluster = view("applyset-a-v1")
    cluster.objects = [deployment("1", owner="applyset-a-v1", key=A)]
    fed = keeping_everything(cluster)
    listed = cluster.list_with_version

    def event_during_the_list(
        resource: Resource, namespace: str, projected: bool, keep: Keep | None = None
    ) -> Listing:
        found = listed(resource, namespace, projected, keep)
        fed._record(A, deployment("5", replicas=3, owner="applyset-a-v1", key=A))
        return found

    cluster.list_with_version = event_during_the_list  # type: ignore[method-assign]
    fed.catch_up("a")

    assert fed.store[A]["metadata"]["resourceVersion"] == "5"


def test_a_source_that_leaves_drops_what_only_it_kept_and_the_last_stops_the_informer() -> None:
    first, cluster = view("applyset-a-v1")
    second, _ = view("applyset-b-v1", first.watches)
    cluster.objects = [deployment("1", key=A), deployment("2", key=B)]
    try:
        first.ensure({IN_A: DEPLOYMENTS, IN_B: DEPLOYMENTS}, [A, B])
        second.ensure({IN_B: DEPLOYMENTS}, [B])
        fed = shared_informer(first)
        wait_for(lambda: len(fed.store) == 2, "both objects held")

        first.stop()
        assert set(fed.store) == {B} and not fed.retired.is_set()  # second still wants B

        second.stop()
        assert fed.retired.is_set() and fed.store == {} and first.watches.informers == {}
    finally:
        cluster.stopping.set()


def test_a_relabelled_object_leaves_one_source_and_reaches_the_other() -> None:
    heard_a: list[tuple[ObjectKey, Body | None]] = []
    heard_b: list[tuple[ObjectKey, Body | None]] = []
    first, cluster = view("applyset-a-v1", changes=heard_a)
    second, _ = view("applyset-b-v1", first.watches, changes=heard_b)
    try:
        first.ensure({IN_A: DEPLOYMENTS}, [])
        second.ensure({IN_A: DEPLOYMENTS}, [])
        fed = shared_informer(first)
        fed._record(A, deployment("1", owner="applyset-a-v1", key=A))
        fed._record(A, deployment("2", owner="applyset-b-v1", key=A))

        assert [body is not None for _, body in heard_a] == [True, False]
        assert [body is not None for _, body in heard_b] == [True]
        assert list(second.objects()) == [A] and first.objects() == {}
    finally:
        cluster.stopping.set()


def test_catch_ups_at_once_each_end_on_their_own() -> None:
    """Two sources joining at once catch up with equal (empty) sets of keys seen."""
    _, cluster = view("applyset-a-v1")
    fed = keeping_everything(cluster)
    listed = cluster.list_with_version
    nested: list[bool] = []

    def another_catch_up_meanwhile(
        resource: Resource, namespace: str, projected: bool, keep: Keep | None = None
    ) -> Listing:
        if not nested:
            nested.append(True)
            fed.catch_up("b")  # begins and ends within the first one
            fed._record(A, deployment("7", key=A))  # an event the first one must see
        return listed(resource, namespace, projected, keep)

    cluster.list_with_version = another_catch_up_meanwhile  # type: ignore[method-assign]
    fed.catch_up("a")

    assert fed.catching_up == []
    assert fed.store[A]["metadata"]["resourceVersion"] == "7"  # not the list's older body
