"""The cluster's own networks, learned for the fence of the tenants' URLs (TA-05): a
GitSync's repository, chart source, dependency or redirect may not reach the cluster's
service and pod networks. An admin may list them (`network.clusterNetworks`); what the
cluster publishes is added at start: its ServiceCIDRs (Kubernetes 1.33 and later) and its
nodes' pod CIDRs (where node IPAM assigns them). What cannot be read is said, not guessed."""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import replace

from gitopsd.cluster import Cluster
from gitopsd.config import Network
from gitopsd.errors import ClusterError
from gitopsd.objects import Body
from gitopsd.resources import NODES, SERVICE_CIDRS

log = logging.getLogger("gitopsd.daemon")


def with_cluster_networks(network: Network, cluster: Cluster) -> Network:
    """`network` with the networks `cluster` publishes added to those an admin listed.
    Read projected: a Node's status (its images, addresses, node info) is most of it, and
    a large cluster's would all be held at once at start."""
    learned: list[str] = []
    for resource, read in ((SERVICE_CIDRS, service_cidrs), (NODES, pod_cidrs)):
        try:
            learned += read(cluster.list_objects(resource, projected=True))
        except ClusterError as error:
            log.warning(
                "%s not read, so not fenced unless network.clusterNetworks lists them: %s",
                resource.plural,
                error,
            )
    known = {ipaddress.ip_network(cidr) for cidr in network.cluster_networks}
    added = sorted({cidr for cidr in learned if ipaddress.ip_network(cidr) not in known})
    if added:
        log.info("fenced for the GitSyncs' fetches: %s", ", ".join(added))
    return replace(network, cluster_networks=(*network.cluster_networks, *added))


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
