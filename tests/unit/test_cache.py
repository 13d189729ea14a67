"""How the watch cache takes events: what it keeps, what it reports, and the content
version that status-only updates do not move. Events are fed in directly: no API."""

from __future__ import annotations

import threading
from typing import Any, cast

from gitopsd.cluster import Cluster, Resource
from gitopsd.cluster.cache import Informer, LiveCache, content
from gitopsd.objects import APPLYSET_PART_OF_LABEL, Body, ObjectKey

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


def test_a_status_only_update_is_stored_but_neither_reported_nor_versioned() -> None:
    cache, changes = informer()
    cache._record(WEB, deployment("1"))
    cache._record(WEB, deployment("2", ready=1))

    assert changes == [WEB]  # only the first sight of it
    assert cache.store[WEB]["metadata"]["resourceVersion"] == "2"  # newest body kept
    assert cache.content_version(WEB, deployment("2", ready=1)) == "1"

    cache._record(WEB, deployment("3", replicas=5, ready=1))
    assert changes == [WEB, WEB]
    assert cache.content_version(WEB, deployment("3", replicas=5, ready=1)) == "3"


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

    live.ensure(resources=[], namespaces=["n"], wanted=[])

    assert live.informers == {} and stale.retired.is_set()
