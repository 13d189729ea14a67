"""The cluster's own networks, learned for the fence of the tenants' URLs (TA-05): a
GitSync's repository, chart source, dependency or redirect may not reach the cluster's
service and pod networks. An admin may list them (`network.clusterNetworks`); what the
cluster publishes is learned: its ServiceCIDRs (Kubernetes 1.33 and later) and its nodes'
pod CIDRs (where node IPAM assigns them), listed at start and then watched, so a node that
joins is fenced as soon as the API server tells of it, and an idle daemon asks nothing (a
list of a large cluster's Nodes is megabytes, each time). What is learned stays fenced
while the daemon runs (a deleted node's range may be given to the next). What cannot be
read at start is said, and not watched."""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Callable
from dataclasses import replace

from gitopsd.cluster import Cluster
from gitopsd.cluster.cache import Informer
from gitopsd.config import Network
from gitopsd.errors import ClusterError
from gitopsd.objects import Body, ObjectKey, Resource
from gitopsd.resources import NODES, SERVICE_CIDRS

log = logging.getLogger("gitopsd.daemon")
CIDR = ipaddress.IPv4Network | ipaddress.IPv6Network
Read = Callable[[list[Body]], list[str]]


def learning(network: Network, cluster: Cluster, stopping: threading.Event) -> Network:
    """`network`, fencing what `cluster` publishes too: listed now, then watched, each
    resource read at start on a thread of its own until `stopping`."""
    networks = ClusterNetworks(cluster, network.cluster_networks)
    for resource in networks.learn():
        informer = Informer(
            cluster=cluster,
            resource=resource,
            namespace="",
            keep=networks.keeper(READERS[resource]),
            on_change=_nothing,
            stopping=stopping,
            whole=True,  # kept by none: not worth projecting
        )
        name = f"networks-{resource.plural}"
        threading.Thread(target=informer.run, name=name, daemon=True).start()
    return replace(network, learned=networks.current)


class ClusterNetworks:
    """The networks `cluster` publishes that an admin did not list (`listed`), as learned
    until now: `current` is a Network's `learned`."""

    def __init__(self, cluster: Cluster, listed: tuple[str, ...]) -> None:
        self.cluster = cluster
        self.known = {ipaddress.ip_network(cidr) for cidr in listed}
        self.learned: tuple[str, ...] = ()
        self.lock = threading.Lock()

    def current(self) -> tuple[str, ...]:
        return self.learned

    def learn(self) -> list[Resource]:
        """Lists each resource that publishes networks and fences what they hold; returns
        those read. Read projected: a Node's status (its images, addresses, node info) is
        most of it, and a large cluster's would all be held at once."""
        read = []
        for resource, reader in READERS.items():
            try:
                self.add(reader(self.cluster.list_objects(resource, projected=True)))
            except ClusterError as error:
                log.warning(
                    "%s not read, so not fenced unless network.clusterNetworks lists them: %s",
                    resource.plural,
                    error,
                )
            else:
                read.append(resource)
        return read

    def keeper(self, reader: Read) -> Callable[[ObjectKey, Body], bool]:
        """An informer's `keep`: fences what each object it is told of holds, and keeps
        none of them (their networks are all that is wanted of them)."""

        def fence(key: ObjectKey, body: Body) -> bool:
            self.add(reader([body]))
            return False

        return fence

    def add(self, found: list[str]) -> None:
        with self.lock:
            new = sorted({c for c in found if not self._covered(ipaddress.ip_network(c))})
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


def _nothing(key: ObjectKey, previous: Body | None, body: Body | None) -> None:
    """Nothing is kept, so no change is told."""


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


READERS: dict[Resource, Read] = {SERVICE_CIDRS: service_cidrs, NODES: pod_cidrs}
