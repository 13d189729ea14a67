"""Which sources this replica writes for, and the fence each of its writes passes.

Without sharding, every source has one gate, the daemon's: set while it leads (always,
without leader election). With sharding, a source's gate and fence are its tenant's (a
GitSync's namespace; "" for the configuration's sources): open only while this replica's
share holds the tenant (`cluster.shards`), so two replicas never write for one source.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

from gitopsd.cluster import Cluster
from gitopsd.cluster.shards import Membership


@dataclass(frozen=True)
class Writers:
    cluster: Cluster
    """The daemon's client, fenced by the daemon (shutting down, the leader lease lost)."""
    leading: threading.Event
    """Set while this replica leads: every source's gate without sharding."""
    membership: Membership | None = None

    def serves(self, tenant: str) -> bool:
        """Whether this replica runs the tenant's GitSyncs (with sharding: its share)."""
        return self.membership is None or self.membership.owns(tenant)

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
