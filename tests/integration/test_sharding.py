"""Replicas that share the GitSyncs: each holds a Lease of its own, serves the tenants
(namespaces) that rendezvous-hash to it, and writes for nothing else; a replica killed
has its share taken over within the lease duration and two retry periods, one stopped at
once. Who wrote what, and when, is read from the API server's audit log, by each replica's
own ServiceAccount."""

from __future__ import annotations

import hashlib
import hmac
import json
import signal
import socket
import time
import urllib.request
from functools import partial
from typing import Any

from kubernetes import client

from gitopsd.cluster.shards import GROUP_LABEL, SHARD_LABEL, rank
from gitopsd.daemon.http.endpoints import CONTROL_HEADER, SOURCES
from gitopsd.gitsync import FINALIZER
from tests.harness import audit
from tests.harness.cluster_reads import config_map_data_value
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import create, wait_ready
from tests.harness.kube import unique_name
from tests.harness.manifests import config_map_with_value
from tests.harness.waiting import wait_for
from tests.harness.webhooks import PUSH, TOKEN, hook_secret

LEASE_SECONDS, RENEW_DEADLINE_SECONDS, RETRY_SECONDS = 4, 3, 1
TAKEOVER_SECONDS = LEASE_SECONDS + 2 * RETRY_SECONDS
"""The longest a killed replica's share waits for another: the others see its Lease's last
renewal at their next list (a retry period after it, at most), and judge it gone at their
first list a lease duration after that (another retry period, at most)."""
FIRST_RECONCILE_SECONDS = RETRY_SECONDS
"""Then its sources start and are polled at once: a retry period for that and the rounds'
own requests."""


def replicas(
    daemons: Daemons,
    count: int,
    shard: str,
    url: str = "",
    first: int = 0,
    timing: dict[str, str] | None = None,
) -> dict[str, DaemonProcess]:
    """`count` replicas sharing the GitSyncs labelled with `shard` (and, given `url`, a
    file source `app` of it, into the test's namespace), by their Lease names, once each
    sees `first + count` replicas (`first` started before) and writes for its share;
    `timing` overrides the Leases' durations."""
    sharding = {
        "enabled": True,
        "namespace": daemons.namespace,
        "leaseDuration": f"{LEASE_SECONDS}s",
        "renewDeadline": f"{RENEW_DEADLINE_SECONDS}s",
        "retryPeriod": f"{RETRY_SECONDS}s",
        **(timing or {}),
    }
    settings = {"enabled": True, "allowInsecure": True, "shard": shard}
    sources = [daemons.source(url)] if url else []
    started = [
        daemons.start_with(sources, f"replica-{n}", gitSyncs=settings, sharding=sharding).start()
        for n in range(first, first + count)
    ]
    seen = first + count
    for replica in started:
        replica.wait_value("gitopsd_shard_members", lambda v: v == seen, "all replicas seen")
        replica.wait_value("gitopsd_leader", lambda v: v == 1, "the replica to write")
    return {lease_of(daemons, replica): replica for replica in started}


def lease_of(daemons: Daemons, replica: DaemonProcess) -> str:
    """The name of the replica's own Lease (its holder is HOSTNAME_PID)."""
    assert replica.process is not None
    holder = f"{socket.gethostname()}_{replica.process.pid}"
    leases: Any = client.CoordinationV1Api(daemons.admin_api)
    found = leases.list_namespaced_lease(daemons.namespace, label_selector=GROUP_LABEL).items
    name: str = next(lease.metadata.name for lease in found if lease.spec.holder_identity == holder)
    return name


def owner(members: list[str], tenant: str) -> str:
    return max(members, key=lambda member: rank(member, tenant))


def source_in(namespace: str) -> str:
    """The source that writes in a namespace: a tenant's GitSync, or the file source."""
    return f"{namespace}/app" if namespace.startswith("shard-") else "app"


def tenant_of(namespace: str) -> str:
    """Its share's key: the GitSync's namespace, or "" for the configuration's sources."""
    return namespace if namespace.startswith("shard-") else ""


def tenants(admin_api: Any, members: list[str], each: int) -> dict[str, str]:
    """New namespaces, `each` of them owned by each member, with the owner's name."""
    chosen: dict[str, str] = {}
    while len(chosen) < each * len(members):
        name = unique_name("shard")
        held = owner(members, name)
        if sum(1 for m in chosen.values() if m == held) < each:
            chosen[name] = held
    core: Any = client.CoreV1Api(admin_api)
    for name in chosen:
        core.create_namespace({"metadata": {"name": name}})
    return chosen


def sync_each(admin_api: Any, owned: dict[str, str], url: str, shard: str) -> None:
    labels = {SHARD_LABEL: shard}
    for namespace in owned:
        create(admin_api, namespace, "app", {"repository": {"url": url}}, labels=labels)
    for namespace in owned:
        wait_ready(admin_api, namespace, "app", "True", "Succeeded")


def writers(
    plane: ControlPlane,
    members: dict[str, DaemonProcess],
    owned: dict[str, str],
    since: float = 0.0,
) -> dict[str, set[str]]:
    """Which replicas wrote in each tenant's namespace (its objects, its GitSync's status
    and finalizer, its Events), by Lease name."""
    by_user = {replica.user: member for member, replica in members.items()}
    found: dict[str, set[str]] = {namespace: set() for namespace in owned}
    for write in audit.writes_by_anyone(plane, since):
        if write.namespace in found and write.user in by_user and write.resource != "leases":
            found[write.namespace].add(by_user[write.user])
    return found


def first_writes(
    plane: ControlPlane, members: dict[str, DaemonProcess], owners: dict[str, str], since: float
) -> dict[str, float]:
    """When each namespace first received a write from the replica that owns it now (its
    objects, its GitSync's status, its Events), at or after `since`."""
    users = {namespace: members[member].user for namespace, member in owners.items()}
    first: dict[str, float] = {}
    for write in audit.writes_by_anyone(plane, since):
        if users.get(write.namespace) == write.user and write.resource != "leases":
            first.setdefault(write.namespace, write.received)
    return first


def running(replica: DaemonProcess) -> set[str]:
    """The sources the replica runs, as its control API (`gitopsd get`) lists them."""
    url, header = f"{replica.control_url}{SOURCES}", {CONTROL_HEADER: "1"}
    asking = urllib.request.Request(url, headers=header)  # noqa: S310 - http to loopback
    with urllib.request.urlopen(asking, timeout=5) as answer:  # noqa: S310
        return {line["name"] for line in json.load(answer)}


def runs(replica: DaemonProcess, member: str, owned: dict[str, str]) -> bool:
    """Whether the replica runs exactly the sources of its share."""
    return running(replica) == {source_in(ns) for ns, m in owned.items() if m == member}


def applied(admin_api: Any, owned: dict[str, str], value: str, deadline: float = 60) -> None:
    def everywhere() -> bool:
        return all(config_map_data_value(admin_api, ns, "a") == value for ns in owned)

    wait_for(everywhere, f"ConfigMap a = {value} in every tenant", deadline)


def test_gitsyncs_spread_over_replicas_and_a_killed_ones_share_moves_within_the_lease(
    control_plane: ControlPlane,
    admin_api: Any,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    git_repo.commit({"a.yaml": config_map_with_value("a")})
    url = git_server.file_url(git_repo)
    shard = unique_name("s")
    members = replicas(daemons, 3, shard, url)
    joined_at = time.time()  # the first to start wrote for everything until then
    owned = tenants(admin_api, list(members), each=2)
    sync_each(admin_api, owned, url, shard)
    owned[daemons.namespace] = owner(list(members), "")  # the file source's share
    applied(admin_api, owned, "one")

    found = writers(control_plane, members, owned, since=joined_at)
    assert all(found[ns] == {m} for ns, m in owned.items() if ns != daemons.namespace)
    assert found[daemons.namespace] <= {owned[daemons.namespace]}  # no drift: the first applied
    for member, replica in members.items():  # and runs nothing of the others' shares
        assert runs(replica, member, owned)

    killed = owned[daemons.namespace]  # a share of two tenants and the file source
    killed_at = time.time()
    members[killed].signal(signal.SIGKILL)
    git_repo.commit({"a.yaml": config_map_with_value("a", value="two")})

    survivors = [member for member in members if member != killed]
    applied(admin_api, owned, "two")
    moved = {ns: owner(survivors, tenant_of(ns)) for ns in owned}
    assert writers(control_plane, members, owned, since=killed_at) == {
        ns: {m} for ns, m in moved.items()
    }
    assert all(moved[ns] == m for ns, m in owned.items() if m != killed)  # only its share moved
    taken = first_writes(control_plane, members, moved, since=killed_at)
    waited = {ns: taken[ns] - killed_at for ns, m in owned.items() if m == killed}
    assert max(waited.values()) <= TAKEOVER_SECONDS + FIRST_RECONCILE_SECONDS, waited
    for member in survivors:
        runs_its_share = partial(runs, members[member], member, moved)
        wait_for(runs_its_share, f"{member} to run its new share")
    leases: Any = client.CoordinationV1Api(admin_api)

    def collected() -> bool:  # a lease duration after it expired, the survivors delete it
        found = leases.list_namespaced_lease(daemons.namespace, label_selector=GROUP_LABEL)
        return {lease.metadata.name for lease in found.items} == set(survivors)

    wait_for(collected, "the killed replica's Lease deleted", 30)


def test_a_stopped_replica_hands_its_share_over_at_once(
    control_plane: ControlPlane,
    admin_api: Any,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    git_repo.commit({"a.yaml": config_map_with_value("a")})
    shard = unique_name("s")
    long_lease = {"leaseDuration": "120s", "renewDeadline": "5s"}
    members = replicas(daemons, 2, shard, timing=long_lease)
    owned = tenants(admin_api, list(members), each=1)
    sync_each(admin_api, owned, git_server.file_url(git_repo), shard)

    stopping = owned[next(iter(owned))]
    staying = next(member for member in members if member != stopping)
    assert members[stopping].stop() == 0
    stopped_at = time.time()
    git_repo.commit({"a.yaml": config_map_with_value("a", value="two")})

    # Released, not expired: taken over long before the 120 s lease would run out.
    applied(admin_api, owned, "two", deadline=30)
    assert writers(control_plane, members, owned, since=stopped_at) == {
        ns: {staying} for ns in owned
    }


def test_a_replica_that_joins_takes_its_share_after_its_hold_and_the_other_lets_it_go(
    control_plane: ControlPlane,
    admin_api: Any,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    git_repo.commit({"a.yaml": config_map_with_value("a")})
    shard = unique_name("s")
    members = replicas(daemons, 1, shard)
    (alone,) = members
    owned = tenants(admin_api, [alone], each=12)  # one in 4,096 would all stay with it
    sync_each(admin_api, owned, git_server.file_url(git_repo), shard)

    members |= replicas(daemons, 1, shard, first=1)  # a scale-up: its share moves to it
    joined_at = time.time()
    moved = {ns: owner(list(members), ns) for ns in owned}
    (joined,) = set(members) - {alone}
    for member, replica in members.items():
        wait_for(partial(runs, replica, member, moved), f"{member} to run its share")
    members[alone].wait_value("gitopsd_shard_members", lambda v: v == 2, "the new replica seen")
    git_repo.commit({"a.yaml": config_map_with_value("a", value="two")})

    applied(admin_api, moved, "two")
    assert joined in moved.values()
    assert writers(control_plane, members, moved, since=joined_at) == {
        ns: {m} for ns, m in moved.items()
    }
    for namespace in moved:  # what it took over: finalizer kept, status of the new commit
        gitsync = wait_ready(admin_api, namespace, "app", "True", "Succeeded")
        assert FINALIZER in gitsync["metadata"]["finalizers"]


def test_a_webhook_call_on_another_replica_is_forwarded_to_the_one_that_serves_it(
    admin_api: Any,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    git_repo.commit({"a.yaml": config_map_with_value("a")})
    shard = unique_name("s")
    members = replicas(daemons, 2, shard)
    owned = tenants(admin_api, list(members), each=1)
    core: Any = client.CoreV1Api(admin_api)
    spec = {
        "repository": {"url": git_server.file_url(git_repo)},
        "interval": "1h",  # hourly: whatever is applied within the test was announced
        "webhook": {"secretRef": {"name": "hook"}},
    }
    for namespace in owned:
        hook_secret(core, namespace)
        create(admin_api, namespace, "app", spec, labels={SHARD_LABEL: shard})
    for namespace in owned:
        wait_ready(admin_api, namespace, "app", "True", "Succeeded")
    git_repo.commit({"a.yaml": config_map_with_value("a", value="two")})
    tenant, served_by = next(iter(owned.items()))
    other = members[next(member for member in members if member != served_by)]
    path = f"/hooks/gitsyncs/{tenant}/app"

    forged = {"X-Hub-Signature-256": "sha256=" + "0" * 64}
    assert other.post(path, PUSH, forged) == 202  # forwarded: the token is not known here
    wait_for(lambda: "answered 401" in other.logs(), "the serving replica's refusal, logged")
    assert other.post(path, PUSH, {**signed(PUSH), "X-Gitopsd-Forwarded": "1"}) == 404  # once
    assert config_map_data_value(admin_api, tenant, "a") == "one"

    assert other.post(path, PUSH, signed(PUSH)) == 202
    wait_for(lambda: config_map_data_value(admin_api, tenant, "a") == "two", "the announced commit")
    assert TOKEN.decode() not in other.logs()


def signed(body: bytes) -> dict[str, str]:
    return {"X-Hub-Signature-256": "sha256=" + hmac.new(TOKEN, body, hashlib.sha256).hexdigest()}
