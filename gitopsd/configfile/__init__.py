"""The daemon's YAML configuration file (annotated example: config/gitopsd.yaml).

A file that cannot be read, or whose top level is invalid, stops the daemon at start with
an error naming the field. An invalid source is set aside with its error; the others run.

`load` reads the top level here; `sources` reads each source and the `sources:` list,
`fields` each field as its type.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import yaml

from gitopsd.config import Limits, Network
from gitopsd.configfile.clusters import DeclaredCluster, clusters
from gitopsd.configfile.disk import ChartCacheSettings, GitCacheSettings, chart_cache, git_cache
from gitopsd.configfile.fields import (
    address_of,
    boolean,
    count,
    host_port,
    mapping,
    namespace,
    on_loopback,
    positive,
    seconds,
    string,
    strings,
)
from gitopsd.configfile.gitsyncs import GitSyncSettings, git_syncs
from gitopsd.configfile.notifications import NotificationSettings, notifications
from gitopsd.configfile.sandbox import sandbox_bounds
from gitopsd.configfile.sources import (
    SourceConfig,
    cycle_in,
    cycle_through,
    source,
    source_list,
)
from gitopsd.configfile.status_page import StatusPage, status_page
from gitopsd.configfile.tenants import TenantQuota, tenant_quota
from gitopsd.errors import ConfigError, ManifestError
from gitopsd.manifests import parse_file
from gitopsd.names import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    namespace_problem,
    shown,
)
from gitopsd.sandbox_bounds import SandboxBounds
from gitopsd.settings_table import Mode

__all__ = [
    "ChartCacheSettings",
    "DaemonConfig",
    "DeclaredCluster",
    "GitCacheSettings",
    "GitSyncSettings",
    "LeaderElection",
    "Mode",
    "Sharding",
    "SourceConfig",
    "StatusPage",
    "TenantQuota",
    "cycle_in",
    "cycle_through",
    "load",
    "source",
]


@dataclass(frozen=True)
class LeaderElection:
    enabled: bool = False
    namespace: str = "default"
    name: str = "gitopsd"
    lease_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_seconds: float = 2.0


@dataclass(frozen=True)
class Sharding(LeaderElection):
    """Replicas that share the sources, each holding a Lease of its own (NAME-POD-RANDOM, in
    `namespace`): a source belongs to the one that rendezvous-hashes highest with its
    tenant (a GitSync's namespace; the configuration's sources are one tenant)."""


@dataclass(frozen=True)
class DaemonConfig:
    listen: str = "127.0.0.1:9290"
    """host:port of the webhooks, POST /hooks/<source>: what a git host must reach. Not
    9090: Prometheus' port, taken wherever one runs beside gitopsd."""
    probe_listen: str = "127.0.0.1:9092"
    """host:port of /metrics, /healthz and /readyz: a listener of their own, so nothing
    that holds the webhooks' connections starves a probe or a scrape."""
    control_listen: str = "127.0.0.1:9091"
    """host:port of the control API (`gitopsd get`, `gitopsd reconcile`): loopback only."""
    cache_dir: Path = Path("/var/cache/gitopsd")
    kubeconfig: str | None = None
    context: str | None = None
    allow_exec_credentials: bool = False
    insecure_skip_tls_verify: bool = False
    """The API server's certificate is not checked, as asked (so it is not warned of)."""
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    control_namespace: str = "default"
    """Where the file's sources keep their status ConfigMaps: a namespace only admins write."""
    sharding: Sharding = field(default_factory=Sharding)
    object_series_budget: int = 500
    """Most gitopsd_object_drift series; further drifted objects are only counted."""
    shutdown_grace_seconds: float = 25.0
    concurrent_reconciles: int = 8
    """Threads that run the sources' polls (reconciles): at most this many at once,
    however many sources and GitSyncs there are (Flux's --concurrent)."""
    pool_progress_seconds: float = 300.0
    """/readyz fails while polls wait and none has started or ended for this long: every
    thread of the pool is held."""
    network: Network = field(default_factory=Network)
    """What the sources' HTTP fetches may reach, and for how long (every source's)."""
    sources: tuple[SourceConfig, ...] = ()
    git_syncs: GitSyncSettings = field(default_factory=GitSyncSettings)
    tenant_quota: TenantQuota = field(default_factory=TenantQuota)
    """Each namespace's share of the daemon, for its GitSyncs together."""
    invalid_sources: tuple[tuple[str, str], ...] = ()
    """(name, error) of sources set aside at load."""
    sandbox: SandboxBounds = field(default_factory=SandboxBounds)
    """Bounds on health rules and renders, the daemon's whole (`sandbox:`)."""
    chart_cache: ChartCacheSettings = field(default_factory=ChartCacheSettings)
    git_cache: GitCacheSettings = field(default_factory=GitCacheSettings)
    status_page: StatusPage = field(default_factory=StatusPage)
    notifications: NotificationSettings = field(default_factory=NotificationSettings)
    clusters: tuple[DeclaredCluster, ...] = ()
    """The clusters declared beside the daemon's own, which sources may sync into."""

    @property
    def listen_address(self) -> tuple[str, int]:
        return address_of(self.listen)

    @property
    def probe_address(self) -> tuple[str, int]:
        return address_of(self.probe_listen)

    @property
    def control_address(self) -> tuple[str, int]:
        return address_of(self.control_listen)


TOP_KEYS = {
    "listen",
    "probeListen",
    "controlListen",
    "cacheDir",
    "kubeconfig",
    "context",
    "allowExecCredentials",
    "insecureSkipTLSVerify",
    "leaderElection",
    "controlNamespace",
    "sharding",
    "objectSeriesBudget",
    "shutdownGraceSeconds",
    "concurrentReconciles",
    "poolProgressDeadline",
    "network",
    "sources",
    "gitSyncs",
    "sandbox",
    "tenantQuota",
    "chartCache",
    "gitCache",
    "statusPage",
    "notifications",
    "clusters",
}
NETWORK_KEYS = {"fetchDeadline", "gitDeadline", "clusterNetworks"}
LEADER_KEYS = {"enabled", "namespace", "name", "leaseDuration", "renewDeadline", "retryPeriod"}


def load(path: Path) -> DaemonConfig:
    document, text = _document(path)
    top = mapping(document, str(path), TOP_KEYS)
    network = _network(top.get("network"), f"{path}: network")
    sources, invalid = source_list(top.get("sources"), str(path), _source_lines(text))
    sources = [replace(s, spec=replace(s.spec, network=network)) for s in sources]
    declared = clusters(top.get("clusters"), f"{path}: clusters")
    sources, invalid = _targeting(sources, invalid, declared, str(path))
    listen = host_port(top, "listen", str(path), DaemonConfig.listen)
    probe_listen = host_port(top, "probeListen", str(path), DaemonConfig.probe_listen)
    control_listen = host_port(top, "controlListen", str(path), DaemonConfig.control_listen)
    page = status_page(top.get("statusPage"), f"{path}: statusPage")
    if not on_loopback(control_listen):
        raise ConfigError(
            f"{path}: controlListen: {control_listen!r} is not on loopback; the control API "
            "answers local clients only (in a pod: kubectl port-forward)"
        )
    listeners = {"listen": listen, "probeListen": probe_listen, "controlListen": control_listen}
    _apart(path, listeners | ({"statusPage.listen": page.listen} if page.listen else {}))
    leader_election = _leases(LeaderElection, top.get("leaderElection"), f"{path}: leaderElection")
    sharding = _leases(Sharding, top.get("sharding"), f"{path}: sharding")
    if leader_election.enabled and sharding.enabled:
        raise ConfigError(
            f"{path}: leaderElection and sharding are both enabled; with sharding every "
            "replica writes for its own share, fenced by its own Lease: disable leaderElection"
        )
    return DaemonConfig(
        listen=listen,
        probe_listen=probe_listen,
        control_listen=control_listen,
        cache_dir=Path(string(top, "cacheDir", str(path), str(DaemonConfig.cache_dir))),
        kubeconfig=top.get("kubeconfig"),
        context=top.get("context"),
        allow_exec_credentials=boolean(
            top, "allowExecCredentials", str(path), DaemonConfig.allow_exec_credentials
        ),
        insecure_skip_tls_verify=boolean(
            top, "insecureSkipTLSVerify", str(path), DaemonConfig.insecure_skip_tls_verify
        ),
        leader_election=leader_election,
        control_namespace=namespace(
            top, "controlNamespace", str(path), DaemonConfig.control_namespace
        ),
        sharding=sharding,
        object_series_budget=count(
            top, "objectSeriesBudget", str(path), DaemonConfig.object_series_budget
        ),
        shutdown_grace_seconds=seconds(
            top, "shutdownGraceSeconds", str(path), DaemonConfig.shutdown_grace_seconds
        ),
        concurrent_reconciles=positive(
            top, "concurrentReconciles", str(path), DaemonConfig.concurrent_reconciles
        ),
        pool_progress_seconds=seconds(
            top, "poolProgressDeadline", str(path), DaemonConfig.pool_progress_seconds
        ),
        network=network,
        sources=tuple(sources),
        git_syncs=replace(
            git_syncs(top.get("gitSyncs"), f"{path}: gitSyncs"), network=network, clusters=declared
        ),
        tenant_quota=tenant_quota(top.get("tenantQuota"), f"{path}: tenantQuota"),
        invalid_sources=tuple(invalid),
        sandbox=sandbox_bounds(top.get("sandbox"), f"{path}: sandbox"),
        chart_cache=chart_cache(top.get("chartCache"), f"{path}: chartCache"),
        git_cache=git_cache(top.get("gitCache"), f"{path}: gitCache"),
        status_page=page,
        notifications=notifications(top.get("notifications"), f"{path}: notifications"),
        clusters=declared,
    )


def _targeting(
    sources: list[SourceConfig],
    invalid: list[tuple[str, str]],
    declared: tuple[DeclaredCluster, ...],
    where: str,
) -> tuple[list[SourceConfig], list[tuple[str, str]]]:
    """The sources whose cluster is the daemon's own or a declared one; the others are set
    aside with their error."""
    known = {cluster.name for cluster in declared}
    listed = ", ".join(sorted(known)) or "none"
    good = [s for s in sources if not s.cluster or s.cluster in known]
    bad = [
        (
            s.name,
            f"{where}: source {s.name}: cluster: {shown(s.cluster)} is not declared "
            f"(clusters: {listed})",
        )
        for s in sources
        if s not in good
    ]
    return good, [*invalid, *bad]


def _apart(path: Path, listeners: dict[str, str]) -> None:
    """Each listener on a port of its own: two sharing one would share its connections."""
    by_port: dict[str, str] = {}
    for key, listen in listeners.items():
        port = listen.rpartition(":")[2]
        if port in by_port:
            raise ConfigError(
                f"{path}: {key}: {listen!r} has the port of {by_port[port]}; each listener "
                "needs its own, so that the webhooks' callers cannot hold the probes' connections"
            )
        by_port[port] = key


def _document(path: Path) -> tuple[Any, bytes]:
    """Read as strictly as manifests are: file:line in every error, duplicate keys and
    tags refused (PyYAML would keep the last of two `mode:` keys silently). With the
    document, its text."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror}") from None
    try:
        documents = parse_file(data, str(path), Limits())
    except ManifestError as error:
        raise ConfigError(str(error)) from None
    if len(documents) > 1:
        raise ConfigError(f"{path}:{documents[1][0]}: expected one YAML document, found more")
    return (documents[0][1] if documents else None), data


def _source_lines(text: bytes) -> list[int]:
    """The line each item of `sources:` starts on, for errors that name a source (the text
    was read as a document already: it composes)."""
    top = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(top, yaml.MappingNode):
        return []
    found = next((v for k, v in top.value if k.value == "sources"), None)
    if not isinstance(found, yaml.SequenceNode):
        return []
    return [item.start_mark.line + 1 for item in found.value]


def _network(value: Any, where: str) -> Network:
    raw = mapping(value or {}, where, NETWORK_KEYS)
    networks = strings(raw, "clusterNetworks", where, Network.cluster_networks)
    for cidr in networks:
        try:
            ipaddress.ip_network(cidr)
        except ValueError:
            raise ConfigError(f"{where}: clusterNetworks: {shown(cidr)} is not a CIDR") from None
    return Network(
        fetch_deadline_seconds=seconds(raw, "fetchDeadline", where, Network.fetch_deadline_seconds),
        git_deadline_seconds=seconds(raw, "gitDeadline", where, Network.git_deadline_seconds),
        cluster_networks=networks,
    )


Leases = TypeVar("Leases", bound=LeaderElection)


def _leases(kind: type[Leases], value: Any, where: str) -> Leases:
    """Leader election's or sharding's settings: the same keys, of Leases (sharding's name
    also labels its Leases, so it is a DNS-1123 label)."""
    raw = mapping(value or {}, where, LEADER_KEYS)
    election = kind(
        enabled=boolean(raw, "enabled", where, kind.enabled),
        namespace=string(raw, "namespace", where, kind.namespace),
        name=string(raw, "name", where, kind.name),
        lease_seconds=seconds(raw, "leaseDuration", where, kind.lease_seconds),
        renew_deadline_seconds=seconds(raw, "renewDeadline", where, kind.renew_deadline_seconds),
        retry_seconds=seconds(raw, "retryPeriod", where, kind.retry_seconds),
    )
    rule = DNS1123_LABEL if kind is Sharding else DNS1123_SUBDOMAIN
    problem = rule.problem(election.name)
    if problem:
        raise ConfigError(f"{where}: name: {shown(election.name)} {problem}")
    problem = namespace_problem(election.namespace)
    if problem:
        raise ConfigError(f"{where}: namespace: {shown(election.namespace)} {problem}")
    if not election.retry_seconds < election.renew_deadline_seconds < election.lease_seconds:
        raise ConfigError(f"{where}: need retryPeriod < renewDeadline < leaseDuration")
    return election
