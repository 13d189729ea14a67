"""The clusters an admin declares (`clusters:`), beside the one the daemon runs in: each
with its kubeconfig and the tenant namespaces whose GitSyncs may target it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitopsd.configfile.fields import boolean, mapping, namespaces, path, string
from gitopsd.errors import ConfigError
from gitopsd.names import DNS1123_LABEL, shown

KEYS = {"name", "kubeconfig", "context", "allowExecCredentials", "namespaces"}
HOME = "in-cluster"
"""The name of the cluster the daemon runs in (or its kubeconfig names), as Argo CD calls
it: on metrics and in status, and taken by no declared cluster."""
EVERY_NAMESPACE = "*"


@dataclass(frozen=True)
class DeclaredCluster:
    name: str
    kubeconfig: Path
    """The admin's kubeconfig file for it (a mounted Secret): its credentials never leave
    the daemon's file system."""
    context: str | None = None
    allow_exec: bool = False
    """Its kubeconfig may run an exec or auth-provider credential plugin (a cloud's)."""
    namespaces: tuple[str, ...] = ()
    """The namespaces whose GitSyncs may target it ("*": every one); none: only the
    configuration's own sources."""

    def allows(self, namespace: str) -> bool:
        """Whether GitSyncs of `namespace` may sync into it."""
        return names(self.namespaces, namespace)


def names(listed: tuple[str, ...], namespace: str) -> bool:
    """Whether a list of namespaces ("*": every one) names `namespace`."""
    return EVERY_NAMESPACE in listed or namespace in listed


def clusters(value: Any, where: str) -> tuple[DeclaredCluster, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list of clusters")
    declared = tuple(_cluster(item, f"{where}[{n}]") for n, item in enumerate(value))
    names = [cluster.name for cluster in declared]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"{where}: two clusters are named {', '.join(twice)}")
    return declared


def _cluster(item: Any, where: str) -> DeclaredCluster:
    raw = mapping(item, where, KEYS)
    name = string(raw, "name", where, None)
    problem = DNS1123_LABEL.problem(name)
    if problem or name == HOME:
        why = problem or "is the name of the cluster gitopsd runs in"
        raise ConfigError(f"{where}: name: {shown(name)} {why}")
    allowed = namespaces(raw, "namespaces", where, (), EVERY_NAMESPACE)
    kubeconfig = path(raw, "kubeconfig", where)
    if kubeconfig is None:
        raise ConfigError(f"{where}: kubeconfig: the file of its credentials is required")
    context = raw.get("context")
    return DeclaredCluster(
        name=name,
        kubeconfig=kubeconfig,
        context=string(raw, "context", where, None) if context is not None else None,
        allow_exec=boolean(raw, "allowExecCredentials", where, DeclaredCluster.allow_exec),
        namespaces=allowed,
    )
