"""Which sources this replica writes for, and the fence each of its writes passes: leader
election or sharding, behind one object.

Without sharding, every source has one gate, the daemon's: set while it leads (always,
without leader election). With sharding, a source's gate and fence are its tenant's (a
GitSync's namespace; "" for the configuration's sources): open only while this replica's
share holds the tenant (`cluster.shards`), so two replicas never write for one source.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

from gitopsd.cluster import Cluster
from gitopsd.cluster.lease import LeaderElector
from gitopsd.cluster.shards import Membership
from gitopsd.configfile import DaemonConfig

WILDCARDS = ("0.0.0.0", "::", "")  # noqa: S104 - recognized, never bound
"""Listen hosts that are every interface: no address another replica can reach."""


@dataclass(frozen=True)
class Shares:
    """What a replica of a sharded daemon was told: its share, or the members, changed."""

    writing: bool
    """It may write for its share now."""
    began: bool
    """It writes, and did not when last told: its share's statuses are written afresh."""
    members: int


class Writers:
    def __init__(
        self,
        config: DaemonConfig,
        cluster: Cluster,
        on_leading: Callable[[bool], None],
        on_shares: Callable[[Shares], None],
    ) -> None:
        """`cluster`: the daemon's client, fenced by the daemon (shutting down, and by
        `leads`). `on_leading` hears that this replica leads or no longer does (leader
        election), `on_shares` that its share changed (sharding)."""
        self.cluster = cluster
        self.leading = threading.Event()
        """Set while this replica leads: every source's gate without sharding."""
        self._on_leading, self._on_shares = on_leading, on_shares
        self._writing = False
        """With sharding: whether this replica wrote for its share when last told."""
        self.elector = self._elector(config)
        self.membership = self._membership(config)

    def start(self) -> None:
        for lease in (self.elector, self.membership):
            if lease:
                lease.start()

    def release(self) -> None:
        """Gives up the lease (shutdown), once the records in flight are written."""
        for lease in (self.elector, self.membership):
            if lease:
                lease.release()

    @property
    def sharded(self) -> bool:
        return self.membership is not None

    def state_known(self) -> bool:
        """Whether this replica knows if it leads (or what its share is)."""
        lease = self.elector or self.membership
        return lease is None or lease.state_known

    def leads(self) -> bool:
        """The daemon's own fence, checked before every write: none without the lease (a
        replica that lost it learns so from its own clock, before writing)."""
        return self.elector is None or self.elector.is_leader()

    def serves(self, tenant: str) -> bool:
        """Whether this replica runs the tenant's sources (with sharding: its share)."""
        return self.membership is None or self.membership.owns(tenant)

    def may_write(self, tenant: str) -> bool:
        """Whether the tenant's sources apply here now (they only read while not)."""
        return self.membership.may_write(tenant) if self.membership else self.leading.is_set()

    def cluster_for(self, tenant: str) -> Cluster:
        """The client for the tenant's writes: fenced by its share too, with sharding."""
        membership = self.membership
        if membership is None:
            return self.cluster
        fence = self.cluster.may_write
        return replace(self.cluster, may_write=lambda: fence() and membership.may_write(tenant))

    def gate_for(self, tenant: str) -> threading.Event:
        """Set while the tenant's sources apply, clear while they only read: the daemon's
        own without sharding, else one of the source's own (kept by `SourceWorker.lead`)."""
        if self.membership is None:
            return self.leading
        gate = threading.Event()
        if self.membership.may_write(tenant):
            gate.set()
        return gate

    def address_of_owner(self, tenant: str) -> str:
        """Where the replica whose share holds `tenant` serves webhooks ("": this one, or
        unknown, or not sharded)."""
        membership = self.membership
        owner = membership.owner(tenant) if membership else None
        if membership is None or owner is None or owner == membership.member:
            return ""
        return membership.address_of(owner)

    def _elector(self, config: DaemonConfig) -> LeaderElector | None:
        election = config.leader_election
        if not election.enabled:
            self.leading.set()  # with sharding, each source's gate is its share's
            return None
        return LeaderElector(
            self.cluster,
            election.namespace,
            election.name,
            f"{socket.gethostname()}_{os.getpid()}",
            election.lease_seconds,
            election.renew_deadline_seconds,
            election.retry_seconds,
            self._leadership,
        )

    def _leadership(self, leading: bool) -> None:
        if leading:
            self.leading.set()
        else:
            self.leading.clear()
        self._on_leading(leading)

    def _membership(self, config: DaemonConfig) -> Membership | None:
        sharding = config.sharding
        if not sharding.enabled:
            return None
        # Unique per process, whatever the host: two replicas of one name would each take
        # the same share (pods on the host's network share its name, and both may be pid 1).
        pod = re.sub(r"[^a-z0-9-]+", "-", socket.gethostname().lower()).strip("-")
        member = f"{sharding.name}-{pod[:180]}-{secrets.token_hex(4)}"  # <= 253 characters
        return Membership(
            cluster=self.cluster,
            namespace=sharding.namespace,
            group=sharding.name,
            shard=config.git_syncs.shard,
            member=member,
            identity=f"{socket.gethostname()}_{os.getpid()}",
            lease_seconds=sharding.lease_seconds,
            renew_deadline_seconds=sharding.renew_deadline_seconds,
            retry_seconds=sharding.retry_seconds,
            address=advertised(config),
            on_change=self._shares_changed,
        )  # its own stop, set by release(): it renews through the grace, so records are written

    def _shares_changed(self) -> None:
        membership = self.membership
        if membership is None:  # only a Membership calls this
            return
        writing, was_writing = membership.writing(), self._writing
        self._writing = writing
        self._on_shares(Shares(writing, writing and not was_writing, len(membership.members)))


def advertised(config: DaemonConfig) -> str:
    """host:port where the other replicas reach this one's webhooks: the pod's IP (POD_IP,
    from the downward API) on the listen port, else the listen address unless it is a
    wildcard ("": none, calls for its share are not forwarded to it)."""
    host, port = config.listen_address
    host = os.environ.get("POD_IP") or host
    if host in WILDCARDS:
        return ""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
