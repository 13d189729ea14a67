"""Who owns the objects a sync refuses as not its own: the gitopsd source whose ApplySet
holds each, found by its parent ConfigMap, so the refusal can name it."""

from __future__ import annotations

from collections.abc import Iterable

from gitopsd.cluster import Cluster
from gitopsd.errors import ClusterError
from gitopsd.inventory import gitopsd_parent
from gitopsd.objects import APPLYSET_ID_LABEL
from gitopsd.ownership import Foreign, Owner
from gitopsd.resources import CONFIG_MAPS
from gitopsd.target_identity import identity_of


def find_owners(
    cluster: Cluster,
    foreign: Iterable[Foreign],
    namespace: str = "",
    known: dict[str, Owner | None] | None = None,
) -> dict[str, Owner]:
    """The gitopsd parents of the ApplySets that `foreign` objects belong to, as far as this
    identity may list ConfigMaps in `namespace` ("" for all): one LIST per set, only for an
    object refused, and none for a set in `known` (what earlier calls found, kept there)."""
    known = {} if known is None else known
    wanted = {f.owner for f in foreign if f.owner and not f.appeared}
    for applyset_id in wanted - known.keys():
        known[applyset_id] = _parent(cluster, applyset_id, namespace)
    return {i: parent for i in wanted if (parent := known[i]) is not None}


def _parent(cluster: Cluster, applyset_id: str, namespace: str) -> Owner | None:
    try:
        bodies = cluster.list_objects(CONFIG_MAPS, namespace, f"{APPLYSET_ID_LABEL}={applyset_id}")
    except ClusterError:
        return None  # not allowed, or not answered: the message gives the id alone
    for body in bodies:
        applyset = gitopsd_parent(body, applyset_id)
        if applyset is not None:
            return Owner(applyset, identity_of(body))
    return None
