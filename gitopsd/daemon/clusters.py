"""The clusters a daemon syncs into: its own, those its configuration declares, and those
GitSyncs bring in a kubeconfig Secret.

A declared cluster is connected once, at start, with the admin's kubeconfig file (a token
rotated in it taken then, `cluster.following`); a source
there acts as it would at home (a GitSync as its ServiceAccount, impersonated there too). A
GitSync's own kubeconfig is read from its Secret as its ServiceAccount at each change of
the GitSync, held to inline credentials (`cluster.kubeconfigs`), and each connection to its
server fenced as the GitSync's fetches are. Every client writes behind the daemon's own fences.
"""

from __future__ import annotations

import hashlib
import ipaddress
import socket
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from gitopsd.cluster import Cluster, Counters
from gitopsd.cluster.connect import api_client
from gitopsd.cluster.following import Followed
from gitopsd.cluster.kubeconfigs import Opener, configuration_of, read_inline
from gitopsd.config import Limits, Network
from gitopsd.configfile import DeclaredCluster, SourceConfig
from gitopsd.configfile.clusters import HOME
from gitopsd.daemon.credentials import secret_values, write_private
from gitopsd.errors import ConfigError, ManifestError
from gitopsd.gitsync.spec import GitSync
from gitopsd.manifests import parse_file
from gitopsd.source.network import Connector, Fence, Fenced, LookupTimedOut, deadline

TENANT_KUBECONFIGS = "gitsync-kubeconfigs"
"""The `cluster` label of requests sent with GitSyncs' own kubeconfigs, together."""
CONNECT_SECONDS = 10.0
"""The most a connection to a tenant's server may take, its lookup included, where the
client gives no timeout."""
FENCED = (
    "its server resolves to loopback, link-local or the cluster's networks, which a GitSync "
    "may not reach unless gitSyncs.allowInsecure"
)
CONNECTIONS = 4
"""Connections kept open to a GitSync's own cluster: one source's requests."""


class Clusters:
    def __init__(
        self, home: Cluster, declared: tuple[DeclaredCluster, ...], fenced: bool, network: Network
    ) -> None:
        """`fenced`: a GitSync's kubeconfig may not reach loopback, link-local or the
        cluster's networks (`network`), as its fetches may not."""
        self.home = home
        self.declared = {cluster.name: _connected(cluster) for cluster in declared}
        self.fenced, self.network = fenced, network
        self.tenant_requests = Counters()
        """The requests of every GitSync's own cluster, counted together: nothing is held
        per kubeconfig a tenant ever gave. (Their reachability, shared with it, is read
        nowhere: gitopsd_cluster_reachable tells of the named clusters only.)"""

    def of_source(self, config: SourceConfig, home: Cluster) -> Cluster:
        """Where a configuration's source syncs, fenced as `home` (its share's client)."""
        return self.declared[config.cluster].fenced_as(home) if config.cluster else home

    def of_gitsync(self, wanted: GitSync, home: Cluster, folder: Path) -> Cluster:
        """Where a GitSync syncs, acting as it may there, fenced as `home`: a declared
        cluster or its home as its ServiceAccount (or the daemon, confined), its own
        kubeconfig as that kubeconfig's user. Its certificates go to `folder`."""
        if wanted.kubeconfig is not None:
            return self._tenant(wanted, folder).fenced_as(home)
        target = self.declared[wanted.cluster].fenced_as(home) if wanted.cluster else home
        return target.impersonating(wanted.user) if wanted.user else target

    def requests(self) -> dict[tuple[str, str, int], int]:
        """Requests sent, by cluster, verb and status code (gitopsd_api_requests_total)."""
        named = [(HOME, self.home.api.counters)]
        named += [(name, cluster.api.counters) for name, cluster in self.declared.items()]
        named += [(TENANT_KUBECONFIGS, self.tenant_requests)]
        return {
            (name, verb, code): count
            for name, counters in named
            for (verb, code), count in counters.snapshot().items()
        }

    def reachable(self) -> dict[str, bool]:
        """Whether each named cluster answered its last request (gitopsd_cluster_reachable)."""
        return {HOME: self.home.api.reachable} | {
            name: cluster.api.reachable for name, cluster in self.declared.items()
        }

    def _tenant(self, wanted: GitSync, folder: Path) -> Cluster:
        assert wanted.kubeconfig is not None  # noqa: S101 - the caller's branch
        secret, key = wanted.kubeconfig
        field = "spec.kubeConfig.secretRef"
        data, where = secret_values(self.home, wanted, secret, field)
        if key not in data:
            raise ConfigError(f"{where} has no key {key}")
        inline = read_inline(kubeconfig_document(data[key], f"{where}, key {key}"), where)
        if self._fences(inline.host):  # an address, known now: refused before any request
            raise ConfigError(f"{where}: {FENCED}")
        opener = opener_for(self.network, self.fenced, where)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        kept = partial(_kept, folder)
        connection = configuration_of(inline, kept, opener, CONNECTIONS)
        digest = hashlib.sha256(data[key]).hexdigest()[:16]  # its credentials, unrevealed
        cluster = Cluster.over(connection, name=f"{wanted.namespace}/{secret}@{digest}")
        return replace(cluster, api=replace(cluster.api, counters=self.tenant_requests))

    def _fences(self, host: str) -> bool:
        """Whether `host` is an address behind the fence (a name is checked as it is
        looked up, at each connection)."""
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return Fence(self.network, self.fenced).fences(address)


def opener_for(network: Network, fenced: bool, where: str) -> Opener:
    """Opens each connection of a GitSync's own cluster as its fetches' are: to an address
    outside the fence (unless GitSyncs may be insecure), its name looked up within the
    connection's timeout; `where` names the kubeconfig in a refusal."""

    def opened(host: str, port: int, timeout: float | None) -> socket.socket:
        with deadline(timeout or CONNECT_SECONDS) as running:
            try:
                return Connector(network, fenced, running).connect(host, port, timeout)
            except Fenced:
                raise OSError(f"{where}: {FENCED}") from None
            except LookupTimedOut:
                raise OSError(f"{where}: its server's name did not resolve in time") from None

    return opened


def _kept(folder: Path, name: str, content: bytes | None) -> Path | None:
    return write_private(folder / name, content)


def kubeconfig_document(data: bytes, where: str) -> Any:
    """A tenant's kubeconfig read as a manifest is: bounded in size, depth and aliases (a
    Secret's alias bomb must not fill the daemon's memory), its errors quoting no line."""
    try:
        documents = parse_file(data, where, Limits())
    except ManifestError as error:
        raise ConfigError(f"not a kubeconfig: {error}") from None
    if len(documents) != 1:
        raise ConfigError(f"{where}: not a kubeconfig (expected one YAML document)")
    return documents[0][1]


def _connected(declared: DeclaredCluster) -> Cluster:
    """A declared cluster's client (its kubeconfig read now: a missing or invalid file stops
    the daemon at start, as an invalid configuration does); each use fences it as the
    client of the source's share (`fenced_as`)."""
    try:
        connection = api_client(str(declared.kubeconfig), declared.context, declared.allow_exec)
    except ConfigError as error:
        raise ConfigError(f"clusters: {declared.name}: {error}") from None
    configuration = connection.client.configuration
    followed = Followed(declared.kubeconfig, declared.context, declared.allow_exec, configuration)
    return Cluster.over(replace(connection, credentials=followed), name=declared.name)
