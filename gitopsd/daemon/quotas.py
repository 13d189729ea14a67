"""What each tenant (a namespace's GitSyncs together) holds of the daemon, against its share
(tenantQuota): the objects of the revisions its sources read last. A revision that would
take its tenant past the share is refused with QuotaExceeded, naming the bound; what its
source held before stays held, and every other tenant goes on as before."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping

from gitopsd.cluster.pacing import Pace
from gitopsd.configfile import TenantQuota
from gitopsd.errors import ConfigError, ConfigReason
from gitopsd.objects import Body, ObjectKey


class Holdings:
    """The objects each tenant's sources hold, by holder: the id of the source's worker, so
    a retired worker's count goes with it, whatever its successor of the same name holds."""

    def __init__(self, quota: TenantQuota | None = None) -> None:
        self.quota = quota or TenantQuota()
        self._held: defaultdict[str, dict[int, int]] = defaultdict(dict)
        self._paces: dict[str, Pace] = {}
        self._lock = threading.Lock()

    def hold(self, tenant: str, holder: int, name: str, objects: int) -> None:
        """Counts `objects` for `holder` in place of what it held, or raises QuotaExceeded
        (what it held stays counted: its source keeps its previous revision). The
        configuration's own sources, tenant "", are the admin's: not counted."""
        if not tenant:
            return
        with self._lock:
            held = self._held[tenant]
            others = sum(count for source, count in held.items() if source != holder)
            if others + objects > self.quota.objects:
                raise _objects_over(tenant, name, objects, others, self.quota.objects)
            held[holder] = objects

    def pace(self, tenant: str) -> Pace | None:
        """The pace of `tenant`'s API requests, shared by its GitSyncs (None for the
        configuration's own sources: the admin's)."""
        if not tenant:
            return None
        with self._lock:
            if tenant not in self._paces:
                quota = self.quota
                self._paces[tenant] = Pace(quota.requests_per_second, quota.request_burst)
            return self._paces[tenant]

    def release(self, tenant: str, holder: int) -> None:
        """`holder` holds nothing any more (its source retired)."""
        with self._lock:
            self._held[tenant].pop(holder, None)
            if not self._held[tenant]:
                del self._held[tenant]


def _objects_over(tenant: str, name: str, objects: int, others: int, share: int) -> ConfigError:
    return ConfigError(
        f"namespace {tenant} may hold {share:,} objects in the daemon (tenantQuota.objects); "
        f"its other GitSyncs hold {others:,}, and this revision of {name} has {objects:,}: "
        "not kept (its last revision stays). Shrink or delete a GitSync of the namespace, or "
        "ask the daemon's admin to raise tenantQuota.objects",
        ConfigReason.QUOTA_EXCEEDED,
    )


def check_git_syncs(quota: TenantQuota, served: set[ObjectKey], key: ObjectKey) -> None:
    """Raises QuotaExceeded for GitSync `key` if its namespace has its share of `served`
    GitSyncs already: it waits (retried with backoff) until one of them goes."""
    count = sum(other.namespace == key.namespace for other in served - {key})
    if count >= quota.git_syncs:
        raise ConfigError(
            f"namespace {key.namespace} may have {quota.git_syncs:,} GitSyncs served "
            f"(tenantQuota.gitSyncs) and has {count:,}: GitSync {key.namespace}/{key.name} "
            "waits until one of them is deleted (or the daemon's admin raises "
            "tenantQuota.gitSyncs)",
            ConfigReason.QUOTA_EXCEEDED,
        )


def check_git_sync_sets(quota: TenantQuota, sets: Mapping[ObjectKey, Body], key: ObjectKey) -> None:
    """Raises QuotaExceeded for GitSyncSet `key` unless it is among the first
    tenantQuota.gitSyncSets of its namespace's `sets`, oldest first (by name within a
    second): a later one waits until one of them goes."""
    mine = sorted((k for k in sets if k.namespace == key.namespace), key=lambda k: _age(sets, k))
    if key in mine[: quota.git_sync_sets]:
        return
    raise ConfigError(
        f"namespace {key.namespace} may have {quota.git_sync_sets:,} GitSyncSets passed over "
        f"(tenantQuota.gitSyncSets), older than GitSyncSet {key.name}: it waits until one of "
        "them is deleted (or the daemon's admin raises tenantQuota.gitSyncSets)",
        ConfigReason.QUOTA_EXCEEDED,
    )


def _age(sets: Mapping[ObjectKey, Body], key: ObjectKey) -> tuple[str, str]:
    return str(sets[key].get("metadata", {}).get("creationTimestamp", "")), key.name
