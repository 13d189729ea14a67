"""Operator mode's settings (`gitSyncs:`): which GitSync objects the daemon serves, with
whose rights, and what their sources may reach."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gitopsd.config import Network
from gitopsd.configfile.clusters import EVERY_NAMESPACE, DeclaredCluster, names
from gitopsd.configfile.fields import boolean, mapping, namespaces, string
from gitopsd.errors import ConfigError
from gitopsd.names import DNS1123_SUBDOMAIN, LABEL_VALUE, shown

GITSYNC_KEYS = {
    "enabled",
    "namespaces",
    "defaultServiceAccount",
    "allowInsecure",
    "crossNamespaceRefs",
    "shard",
    "kubeConfigNamespaces",
    "sets",
}


@dataclass(frozen=True)
class GitSyncSettings:
    """Operator mode: which GitSync objects the daemon serves, and with whose rights."""

    enabled: bool = False
    namespaces: tuple[str, ...] = ()
    """The namespaces whose GitSyncs are served; none listed: all."""
    default_service_account: str | None = None
    """The ServiceAccount (of its own namespace) a GitSync without serviceAccountName
    impersonates; None: such a GitSync acts with the daemon's rights, confined to its own
    namespace (Flux's --default-service-account)."""
    allow_insecure: bool = False
    """Permit GitSyncs to read file:// and plain http:// repositories (local use and tests:
    file:// reads the daemon's own file system)."""
    cross_namespace_refs: bool = False
    """Permit a GitSync's dependsOn to name a GitSync of another namespace (Flux's
    --no-cross-namespace-refs, inverted): its status would tell one tenant the state of
    another's GitSync, so it is off."""
    shard: str | None = None
    """Serve only the GitSyncs labelled sharding.gitopsd.io/key=SHARD (Flux's
    sharding.fluxcd.io/key); None: only those without the label."""
    sets: bool = False
    """Also serve GitSyncSets (docs/gitsyncsets.md): off unless asked, as their CRD and the
    rights to write GitSyncs may not be installed."""
    network: Network = field(default_factory=Network)
    """What their fetches may reach, and for how long: the top level's `network`."""
    clusters: tuple[DeclaredCluster, ...] = ()
    """The declared clusters (the top level's `clusters`), each allowing some namespaces."""
    kubeconfig_namespaces: tuple[str, ...] = ()
    """The namespaces whose GitSyncs may bring their own kubeconfig in a Secret
    (spec.kubeConfig, as Flux's); "*": every one. None by default: a tenant targets only
    the clusters an admin declared for it."""

    def allows_kubeconfig(self, namespace: str) -> bool:
        return names(self.kubeconfig_namespaces, namespace)


def git_syncs(value: Any, where: str) -> GitSyncSettings:
    raw = mapping(value or {}, where, GITSYNC_KEYS)
    account = raw.get("defaultServiceAccount")
    return GitSyncSettings(
        enabled=boolean(raw, "enabled", where, GitSyncSettings.enabled),
        namespaces=namespaces(raw, "namespaces", where, GitSyncSettings.namespaces),
        default_service_account=None if account is None else _account(raw, where),
        allow_insecure=boolean(raw, "allowInsecure", where, GitSyncSettings.allow_insecure),
        cross_namespace_refs=boolean(
            raw, "crossNamespaceRefs", where, GitSyncSettings.cross_namespace_refs
        ),
        shard=_shard(raw, where),
        kubeconfig_namespaces=namespaces(raw, "kubeConfigNamespaces", where, (), EVERY_NAMESPACE),
        sets=boolean(raw, "sets", where, GitSyncSettings.sets),
    )


def _shard(raw: dict[str, Any], where: str) -> str | None:
    if "shard" not in raw:
        return None
    shard = string(raw, "shard", where, "")
    problem = LABEL_VALUE.problem(shard)
    if problem:
        raise ConfigError(f"{where}: shard: {shown(shard)} {problem}")
    return shard


def _account(raw: dict[str, Any], where: str) -> str:
    name = string(raw, "defaultServiceAccount", where, None)
    problem = DNS1123_SUBDOMAIN.problem(name)
    if problem:
        raise ConfigError(f"{where}: defaultServiceAccount: {shown(name)} {problem}")
    return name
