"""The daemon in operator mode, serving the GitSyncs of a test's namespaces only (other
tests' stay theirs): as the admin, inside the Deployment's memory limit, or as the audited
user whose every request the audit log keeps."""

from __future__ import annotations

from typing import Any

from tests.harness.controlplane import AUDITED_USER, ControlPlane
from tests.harness.daemon import DaemonProcess, Daemons

MEMORY_LIMIT_MIB = 1024
"""The Deployment's limit."""


def operator(daemons: Daemons, namespace: str, **git_syncs: Any) -> DaemonProcess:
    """A daemon serving the GitSyncs of `namespace` only (other tests' stay theirs)."""
    settings = {"enabled": True, "namespaces": [namespace], "allowInsecure": True, **git_syncs}
    return daemons.start_with([], "operator", gitSyncs=settings).start()


def tenant_operator(
    daemons: Daemons, namespaces: list[str], top: dict[str, Any] | None = None
) -> DaemonProcess:
    """A daemon serving the GitSyncs of `namespaces`, in the Deployment's memory limit."""
    settings = {"enabled": True, "namespaces": namespaces, "allowInsecure": True}
    daemon = daemons.start_with([], "operator", gitSyncs=settings, **(top or {}))
    daemon.memory_limit_mib = MEMORY_LIMIT_MIB
    return daemon.start()


def audited_operator(daemons: Daemons, plane: ControlPlane, namespace: str) -> DaemonProcess:
    """A daemon serving the GitSyncs of `namespace`, as the audited user (cluster-admin)."""
    settings = {"enabled": True, "namespaces": [namespace], "allowInsecure": True}
    return daemons.configure_as(
        AUDITED_USER, plane.audited_token, [], "operator", gitSyncs=settings
    ).start()
