"""Each tenant's share of the daemon (operator mode): what the GitSyncs of one namespace may
take together, whatever each one's own limits allow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gitopsd.configfile.fields import mapping, positive


@dataclass(frozen=True)
class TenantQuota:
    """Bounds per namespace, on the GitSyncs of each one together. The configuration's own
    sources (the admin's) are not held to them."""

    objects: int = 10_000
    """Objects the revisions its GitSyncs read last may hold in the daemon's memory together
    (measured: about 3 KiB an object: its manifest, its drift memo and, once it
    exists, its live copy in the watch cache; six GitSyncs of 49,000 ConfigMaps took the
    daemon from 124 MB to 974 MB). A revision that would take the namespace past it is
    refused; what its GitSync held before stays."""
    git_syncs: int = 25
    """GitSyncs served at once: a later one is refused until one of these goes."""
    threads: int = 2
    """Threads of the pool (concurrentReconciles) its polls and drift checks may hold at
    once, those stalled on a host that hangs included: the others wait their turn, so a
    namespace of many GitSyncs, or of slow ones, takes at most this much of the pool's time."""
    requests_per_second: int = 50
    """API requests its GitSyncs send together, a second, once the burst is spent (watches
    are the daemon's, not counted): a revision of 9,500 objects in observe mode, committed
    to every 5 s, sent 600 dry-runs a second and doubled another tenant's heal latency."""
    request_burst: int = 300
    """Requests sent at once before the pace holds: client-go's QPS and burst, as Flux's
    controllers set them (50 and 300), for each namespace rather than the whole daemon."""
    health_rule_seconds_per_minute: int = 10
    """Seconds of the health rules' evaluator its GitSyncs' rules may take a minute (a
    sixth of it; all at once after a minute unused), so rules of almost
    sandbox.expressionTimeout each, one after another, are in another tenant's way at most
    once per that long; a rule of the usual kind takes well under a millisecond."""
    git_sync_sets: int = 5
    """GitSyncSets passed over at once, the oldest first: each pass holds the GitSyncs it
    makes (up to 16 MiB of them) and reads the set's repositories; a later one waits until
    one of these goes."""


KEYS = {
    "objects",
    "gitSyncs",
    "gitSyncSets",
    "threads",
    "requestsPerSecond",
    "requestBurst",
    "healthRuleSecondsPerMinute",
}


def tenant_quota(value: Any, where: str) -> TenantQuota:
    raw = mapping(value or {}, where, KEYS)
    return TenantQuota(
        objects=positive(raw, "objects", where, TenantQuota.objects),
        git_syncs=positive(raw, "gitSyncs", where, TenantQuota.git_syncs),
        git_sync_sets=positive(raw, "gitSyncSets", where, TenantQuota.git_sync_sets),
        threads=positive(raw, "threads", where, TenantQuota.threads),
        requests_per_second=positive(
            raw, "requestsPerSecond", where, TenantQuota.requests_per_second
        ),
        request_burst=positive(raw, "requestBurst", where, TenantQuota.request_burst),
        health_rule_seconds_per_minute=positive(
            raw,
            "healthRuleSecondsPerMinute",
            where,
            TenantQuota.health_rule_seconds_per_minute,
        ),
    )
