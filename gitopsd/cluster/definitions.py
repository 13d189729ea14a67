"""CRDs a sync created, waited for: until each is Established and its kind is served. The
API server adds a kind to discovery a moment after it sets Established; a sync that looked
in between found no resource for its custom resources and could not apply them."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gitopsd.errors import ClusterError, ClusterReason
from gitopsd.objects import Body, GroupKind
from gitopsd.resources import CUSTOM_RESOURCE_DEFINITIONS

if TYPE_CHECKING:
    from gitopsd.cluster import Cluster

PAUSE_SECONDS = 0.1


def wait_served(cluster: Cluster, crd_names: list[str], timeout_seconds: float) -> None:
    """Returns once every CRD of `crd_names` is Established and discovery serves its kind;
    raises ClusterError (timeout) naming those that are not after `timeout_seconds`."""
    deadline = time.monotonic() + timeout_seconds
    pending, kinds = list(crd_names), list[GroupKind]()
    while pending:
        found = {name: cluster.get(CUSTOM_RESOURCE_DEFINITIONS, "", name) for name in pending}
        kinds += [_kind_of(crd) for crd in found.values() if _established(crd)]
        pending = [name for name, crd in found.items() if not _established(crd)]
        _pause(deadline, pending, timeout_seconds, "Established")
    cluster.discovery.refresh()
    while unserved := [kind for kind in kinds if cluster.discovery.preferred(kind) is None]:
        _pause(deadline, [str(kind) for kind in unserved], timeout_seconds, "served")
        cluster.discovery.refresh()


def _pause(deadline: float, pending: list[str], timeout_seconds: float, what: str) -> None:
    """A short pause while something is `pending`; past the deadline, a timeout naming it."""
    if pending and time.monotonic() > deadline:
        names = ", ".join(pending)
        raise ClusterError(
            f"CRDs not {what} after {timeout_seconds:.0f} s: {names}", ClusterReason.TIMEOUT
        )
    if pending:
        time.sleep(PAUSE_SECONDS)


def _kind_of(crd: Body | None) -> GroupKind:
    spec = (crd or {}).get("spec") or {}
    return GroupKind(str(spec.get("group", "")), str((spec.get("names") or {}).get("kind", "")))


def _established(crd: Body | None) -> bool:
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
