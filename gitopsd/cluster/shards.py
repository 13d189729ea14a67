"""Sharding: replicas that share the sources among them, each writing for its own share.

Every replica holds a coordination.k8s.io/v1 Lease of its own, labelled with its group,
renews it every retry period and then lists the group's Leases: the members are the
holders whose record changed within its lease duration, as seen on this replica's own
monotonic clock (never by comparing another machine's timestamps). A key (the tenant of a
source: a GitSync's namespace, "" for the configuration's sources) belongs to the member
that rendezvous-hashes highest with it, so a member that joins or leaves moves only its own
share.

The fence holds per key. A replica writes for a key only while its own Lease was renewed
within the renew deadline, its list of members was read within the renew deadline, and
that list gives it the key. So a member that stopped (or was cut off) stops writing before
the others see its Lease expire, and takes nothing over from a member that expired: that
member fenced itself first. The one hazard is a replica that arrives (starts, or renews
again after it lapsed) while the others still write with lists read before its Lease
existed: such a replica writes nothing for a renew deadline after it arrived, unless the
first list read after its arrival holds no other member (then no list lacks it: every
other member's Lease was written later, and lists it).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from gitopsd.cluster import Cluster
from gitopsd.cluster.api import ApiError
from gitopsd.cluster.lease import now_micro
from gitopsd.errors import ClusterError
from gitopsd.objects import Body
from gitopsd.resources import LEASES

log = logging.getLogger("gitopsd.shards")
GROUP_LABEL = "gitopsd.io/replica-of"
"""On each replica's Lease: the name of its group (sharding.name)."""
ADDRESS_ANNOTATION = "gitopsd.io/hooks-address"
"""On a replica's Lease: host:port where it serves webhooks (forwarded calls reach it)."""
SHARD_LABEL = "sharding.gitopsd.io/key"
"""On a GitSync: the shard that serves it (Flux's sharding.fluxcd.io/key); on a Lease:
the shard its replica serves."""


@dataclass
class Sighting:
    """Another member's Lease as last listed, and when (monotonic) its record last moved."""

    record: tuple[object, ...]
    moved_at: float
    seconds: float
    resource_version: str = ""
    uid: str = ""
    address: str = ""
    """Where its webhooks are served (host:port), as its Lease advertises."""

    @property
    def released(self) -> bool:
        return not self.record[0]

    def alive(self, now: float) -> bool:
        return not self.released and now < self.moved_at + self.seconds


def rank(member: str, key: str) -> bytes:
    """Rendezvous hashing: the member ranked highest for a key owns it."""
    return hashlib.sha256(f"{member}\n{key}".encode()).digest()


@dataclass
class Membership:
    cluster: Cluster
    namespace: str
    group: str
    """The replicas that share the sources: the value of their Leases' GROUP_LABEL."""
    shard: str | None
    """The shard they serve (their Leases carry SHARD_LABEL), None: unlabelled ones."""
    member: str
    """This replica's Lease name, unique in the namespace."""
    identity: str
    lease_seconds: float
    renew_deadline_seconds: float
    retry_seconds: float
    address: str = ""
    """Where this replica serves webhooks for the others to forward calls to (host:port);
    "": it cannot be reached."""
    on_change: Callable[[], None] = lambda: None
    """Hears that the members, or whether this replica may write, changed."""
    stopping: threading.Event = field(default_factory=threading.Event)
    members: tuple[str, ...] = ()
    """The members as last listed, this one among them even while its own Lease lapsed (it
    writes nothing then, but keeps its share's sources warm for when it renews)."""
    _renewed_at: float | None = None  # monotonic start of the last successful renewal
    _listed_at: float | None = None  # monotonic start of the last successful list
    _arrived_at: float | None = None  # when its renewals last resumed after a lapse
    _holding_until: float = float("inf")  # no writes before this (monotonic)
    _lease: Body | None = None  # its own Lease as last written
    _sightings: dict[str, Sighting] = field(default_factory=dict)
    _known: threading.Event = field(default_factory=threading.Event)
    _told: tuple[object, ...] = ()

    @property
    def state_known(self) -> bool:
        """True once the first round told whether this replica is a member."""
        return self._known.is_set()

    def owner(self, key: str) -> str | None:
        members = self.members
        return max(members, key=lambda member: rank(member, key)) if members else None

    def address_of(self, member: str) -> str:
        """Where another live member serves webhooks, as its Lease says ("": unknown)."""
        seen = self._sightings.get(member)
        return seen.address if seen is not None and seen.alive(time.monotonic()) else ""

    def owns(self, key: str) -> bool:
        """The last list gives it `key` (it may still be holding back its writes)."""
        return self.owner(key) == self.member

    def may_write(self, key: str) -> bool:
        """The fence, checked before each write for `key`."""
        return self.writing() and self.owns(key)

    def writing(self) -> bool:
        now = time.monotonic()
        deadline = self.renew_deadline_seconds
        renewed, listed = self._renewed_at, self._listed_at
        return (
            renewed is not None
            and listed is not None
            and now - renewed < deadline
            and now - listed < deadline
            and now >= self._holding_until
        )

    def start(self) -> None:
        threading.Thread(target=self._run, name="shard-membership", daemon=True).start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            self.round()
            self.stopping.wait(self.retry_seconds)

    def round(self) -> None:
        """Renews its own Lease, then lists the group's; tells `on_change` what moved."""
        try:
            self._renew()
            self._list()
        except ClusterError as error:
            log.warning("sharding lease %s/%s: %s", self.namespace, self.member, error)
        self._known.set()
        self._tell()

    def _renew(self) -> None:
        """Renews its Lease. A renewal a lease duration after the last one is an arrival:
        the others may have seen its Lease expire meanwhile."""
        started, previous = time.monotonic(), self._renewed_at
        self._lease = self._write_lease()
        self._renewed_at = started
        if previous is None or time.monotonic() - previous >= self.lease_seconds:
            self._arrived_at, self._holding_until = time.monotonic(), float("inf")
            log.info("joined the replicas of %s as %s", self.group, self.member)

    def _write_lease(self) -> Body:
        """Its Lease, renewed over the version last written (or read, once); changed by
        another (deleted as expired after a long pause), it is read again next round."""
        lease = self._lease or self.cluster.get(LEASES, self.namespace, self.member)
        try:
            if lease is None:
                path, method = LEASES.path(self.namespace), "POST"
            else:
                path, method = LEASES.path(self.namespace, self.member), "PUT"
            written: Body = self.cluster.api.request(method, path, (), self._body(lease))
        except ApiError as error:
            if error.status in (404, 409):
                self._lease = None
            raise
        return written

    def _body(self, lease: Body | None) -> Body:
        labels = {GROUP_LABEL: self.group}
        if self.shard is not None:
            labels[SHARD_LABEL] = self.shard
        metadata: Body = {"name": self.member, "namespace": self.namespace, "labels": labels}
        if self.address:
            metadata["annotations"] = {ADDRESS_ANNOTATION: self.address}
        if lease is not None:
            metadata["resourceVersion"] = lease["metadata"]["resourceVersion"]
        return {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_seconds),
                "renewTime": now_micro(),
            },
        }

    def _list(self) -> None:
        started = time.monotonic()
        leases = self.cluster.list_objects(LEASES, self.namespace, self._selector())
        self._see(leases, started)
        self._listed_at = started
        others = tuple(name for name, seen in self._sightings.items() if seen.alive(started))
        self.members = tuple(sorted((*others, self.member)))
        arrived = self._arrived_at
        if self._holding_until == float("inf") and arrived is not None and started >= arrived:
            self._holding_until = arrived + self.renew_deadline_seconds if others else arrived
        self._collect(started)

    def _selector(self) -> str:
        shard = f"{SHARD_LABEL}={self.shard}" if self.shard is not None else f"!{SHARD_LABEL}"
        return f"{GROUP_LABEL}={self.group},{shard}"

    def _see(self, leases: list[Body], now: float) -> None:
        """Records each other Lease's record, and when it last moved. A Lease gone from the
        list keeps its last sighting until that expires (deleted, its holder may still
        write until then)."""
        for lease in leases:
            name = str(lease["metadata"]["name"])
            if name == self.member:
                continue
            spec = lease.get("spec") or {}
            duration = spec.get("leaseDurationSeconds")
            valid = isinstance(duration, int) and duration > 0
            seconds = float(cast(int, duration)) if valid else self.lease_seconds
            record = (spec.get("holderIdentity"), spec.get("renewTime"), duration)
            seen = self._sightings.get(name)
            if seen is None or seen.record != record:
                seen = self._sightings[name] = Sighting(record, now, seconds)
            metadata = lease["metadata"]
            seen.resource_version = str(metadata.get("resourceVersion", ""))
            seen.uid = str(metadata.get("uid", ""))
            seen.address = str((metadata.get("annotations") or {}).get(ADDRESS_ANNOTATION, ""))

    def _collect(self, now: float) -> None:
        """Deletes the Leases of members that stopped a lease duration ago (a replica's
        Lease is named after its process: each restart leaves one behind). The delete is
        conditional on the version seen: a Lease renewed meanwhile stays."""
        for name, seen in list(self._sightings.items()):
            if now < seen.moved_at + seen.seconds:
                continue
            del self._sightings[name]
            if seen.uid:
                self._delete(name, seen)

    def _delete(self, name: str, seen: Sighting) -> None:
        """Exactly the Lease seen: one renewed (or replaced) since stays (409)."""
        try:
            self.cluster.delete(LEASES, self.namespace, name, seen.uid, seen.resource_version)
        except ApiError as error:
            if error.status != 409:
                raise

    def _tell(self) -> None:
        told = (self.members, self.writing())
        if told != self._told:
            self._told = told
            log.info(
                "replicas of %s: %s; this one (%s) %s",
                self.group,
                ", ".join(self.members) or "none",
                self.member,
                "writes for its share" if told[1] else "writes nothing",
            )
            self.on_change()

    def release(self) -> None:
        """At shutdown (its writes already fenced): marks its Lease released, so the others
        take its share over at their next list, not a lease duration later."""
        self.stopping.set()
        self._renewed_at = None
        lease = self._lease
        if lease is None:
            return
        body = self._body(lease)
        body["spec"] = {**body["spec"], "holderIdentity": ""}
        try:
            self.cluster.api.request("PUT", LEASES.path(self.namespace, self.member), (), body)
        except ClusterError as error:
            log.warning("sharding lease %s/%s not released: %s", self.namespace, self.member, error)
