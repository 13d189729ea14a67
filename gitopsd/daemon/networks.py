"""The cluster's own networks, learned for the fence of the tenants' URLs (TA-05): a
GitSync's repository, chart source, dependency or redirect may not reach the cluster's
service and pod networks. An admin may list them (`network.clusterNetworks`); what the
cluster publishes is learned at start and again every `network.clusterNetworksInterval`:
its ServiceCIDRs (Kubernetes 1.33 and later) and its nodes' pod CIDRs (where node IPAM
assigns them), so a node that joins is fenced within that interval. What is learned stays
fenced while the daemon runs (a deleted node's range may be given to the next). What cannot
be read is said, once, not guessed."""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import replace

from apscheduler.schedulers.base import BaseScheduler

from gitopsd.cluster import Cluster
from gitopsd.config import Network
from gitopsd.errors import ClusterError
from gitopsd.objects import Body
from gitopsd.resources import NODES, SERVICE_CIDRS

log = logging.getLogger("gitopsd.daemon")
CIDR = ipaddress.IPv4Network | ipaddress.IPv6Network


def learning(network: Network, cluster: Cluster, scheduler: BaseScheduler) -> Network:
    """`network`, fencing what `cluster` publishes too: read now, and again each interval by
    the scheduler's `cluster` executor (a large cluster's Nodes take seconds to list, and
    no poll waits for them)."""
    networks = ClusterNetworks(cluster, network.cluster_networks)
    networks.learn()
    every = network.learn_seconds
    scheduler.add_job(networks.learn, "interval", seconds=every, executor="cluster")
    return replace(network, learned=networks.current)


class ClusterNetworks:
    """The networks `cluster` publishes that an admin did not list (`listed`), as last read:
    `current` is a Network's `learned`, `learn` its job."""

    def __init__(self, cluster: Cluster, listed: tuple[str, ...]) -> None:
        self.cluster = cluster
        self.known = {ipaddress.ip_network(cidr) for cidr in listed}
        self.learned: tuple[str, ...] = ()
        self.unread: set[str] = set()
        """The resources whose reading failed, said once until they are read."""

    def current(self) -> tuple[str, ...]:
        return self.learned

    def learn(self) -> None:
        """Reads the networks again and fences those not seen before. Read projected: a
        Node's status (its images, addresses, node info) is most of it, and a large
        cluster's would all be held at once."""
        found: list[str] = []
        for resource, read in ((SERVICE_CIDRS, service_cidrs), (NODES, pod_cidrs)):
            try:
                found += read(self.cluster.list_objects(resource, projected=True))
            except ClusterError as error:
                self._unread(resource.plural, error)
            else:
                self.unread.discard(resource.plural)
        new = sorted({cidr for cidr in found if not self._covered(ipaddress.ip_network(cidr))})
        if new:
            log.info("fenced for the GitSyncs' fetches: %s", ", ".join(new))
            self.known |= {ipaddress.ip_network(cidr) for cidr in new}
            self.learned = (*self.learned, *new)

    def _covered(self, network: CIDR) -> bool:
        """Fenced already: a node's range inside a listed cluster-wide pod network adds
        nothing the fence must check at every fetch."""
        return any(
            network.version == known.version and network.subnet_of(known)  # type: ignore[arg-type]
            for known in self.known
        )

    def _unread(self, plural: str, error: ClusterError) -> None:
        if plural not in self.unread:
            self.unread.add(plural)
            log.warning(
                "%s not read, so not fenced unless network.clusterNetworks lists them: %s",
                plural,
                error,
            )


def service_cidrs(objects: list[Body]) -> list[str]:
    return [cidr for cidrs in objects for cidr in _valid((cidrs.get("spec") or {}).get("cidrs"))]


def pod_cidrs(nodes: list[Body]) -> list[str]:
    return [cidr for node in nodes for cidr in _valid((node.get("spec") or {}).get("podCIDRs"))]


def _valid(cidrs: object) -> list[str]:
    """The CIDRs of a list that parse (an object of a newer or odd server is skipped)."""
    found = []
    for cidr in cidrs if isinstance(cidrs, list) else []:
        try:
            found.append(str(ipaddress.ip_network(str(cidr), strict=False)))
        except ValueError:
            log.warning("not a network, not fenced: %r", cidr)
    return found
