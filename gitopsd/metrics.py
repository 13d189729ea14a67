"""Every Prometheus collector gitopsd exports, behind one `Recorder` with an injected registry.

Metric names are a public contract (docs/metrics.md). Labels are closed enumerations,
except on `gitopsd_object_drift`, whose series are held within a configurable budget.
A source's gauges tell its last state: each measurement replaces them in the source's
snapshot, which the scrape reads (`collectors.LastStates`); its counters and histograms add
up from its start.
"""

from __future__ import annotations

import threading
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

from gitopsd.changes import Action, ChangeSet
from gitopsd.collectors import (
    LastStates,
    Reachability,
    Series,
    Snapshot,
    TalliedCounter,
    ZeroFilled,
)
from gitopsd.diff import Drift, State
from gitopsd.errors import ClusterReason, ConfigReason, ManifestReason, Reason, SourceReason, Stage
from gitopsd.health import Health, Status, overall_status
from gitopsd.objects import ObjectKey
from gitopsd.plan import Refusal
from gitopsd.source_gauges import (
    CLUSTER_INFO,
    DRIFT_OBJECTS,
    DRIFT_POLICY_FIELDS,
    HEALTH_NOW,
    HEALTH_OBJECTS,
    LAST_STATE,
    LAST_SUCCESS,
    OBJECT_DRIFT,
    OBJECT_DRIFT_OVER_BUDGET,
    REVISION_INFO,
)

SOURCE_HEALTH = (Status.CURRENT, Status.IN_PROGRESS, Status.FAILED)
"""The states of a source's health (`health.overall`), one series each."""

RECONCILE_RESULTS = ("success", "failed", "skipped", "waiting", "standby")
"""gitopsd_reconcile_total's results: applied or found in sync; failed; a known-bad revision
skipped; waiting for the sources it depends on; a standby's read-only pass."""
STAGE_REASONS: dict[Stage, type[StrEnum]] = {
    Stage.CONFIG: ConfigReason,
    Stage.MANIFESTS: ManifestReason,
    Stage.SOURCE: SourceReason,
    Stage.CLUSTER: ClusterReason,
}
CLOSED_LABELS: dict[str, tuple[tuple[str, ...], ...]] = {
    "gitopsd_reconcile": tuple((result,) for result in RECONCILE_RESULTS),
    "gitopsd_apply": tuple(
        [(str(action), "success") for action in Action]
        + [(action, str(reason)) for action in ("apply", "prune") for reason in ClusterReason]
    ),
    "gitopsd_errors": tuple(
        (str(stage), str(reason)) for stage, reasons in STAGE_REASONS.items() for reason in reasons
    ),
    "gitopsd_prune_blocked": tuple((str(refusal),) for refusal in Refusal),
}
"""Every value each counter's labels (after `source`) can take: each is exported at 0 from
a source's start, so that rate() and increase() see its first event (a series born at its
first increment has no earlier sample to rise from)."""

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)
LAG_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600)


class Recorder:
    """Records what the daemon sees and does; one instance per process."""

    def __init__(self, registry: CollectorRegistry, object_series_budget: int = 500) -> None:
        self.registry = registry
        self.budget = object_series_budget
        self._lock = threading.Lock()
        self._snapshots: dict[str, Snapshot] = {}
        self._sources: set[str] = set()
        """The sources served now: their counters' closed label sets are exported at 0."""
        self._health_tallies: dict[str, Tally[tuple[str, Status]]] = {}
        """Each source's objects by group/kind and health, as exported last."""
        self._cumulative: list[MetricWrapperBase] = []
        """The counters and histograms, whose series of a source `forget` removes."""
        registry.register(LastStates(LAST_STATE, self._last_states))
        self._define_reconcile(registry)
        self._define_latencies(registry)
        self._define_process(registry)

    def _define_reconcile(self, registry: CollectorRegistry) -> None:
        self.reconciles = self._counter(
            registry,
            "gitopsd_reconcile_total",
            "Reconciles by result (success, failed, skipped, waiting for dependencies, "
            "standby: a replica without the lease only read).",
            ["source", "result"],
        )
        self.applies = self._counter(
            registry,
            "gitopsd_apply_total",
            "Objects acted on: action created, configured, unchanged, pruned or hook (a sync "
            "hook ran) with result success; action apply or prune with the failure reason as "
            "result.",
            ["source", "action", "result"],
        )
        self.errors = self._counter(
            registry,
            "gitopsd_errors_total",
            "Failures by stage (source, manifests, cluster) and reason.",
            ["source", "stage", "reason"],
        )
        self.prune_blocked = self._counter(
            registry,
            "gitopsd_prune_blocked_total",
            "Objects a prune guard kept, by rule.",
            ["source", "reason"],
        )

    def _define_latencies(self, registry: CollectorRegistry) -> None:
        self.reconcile_seconds = self._histogram(
            registry,
            "gitopsd_reconcile_duration_seconds",
            "Duration of one reconcile, by result.",
            ("source", "result"),
        )
        self.detection = self._histogram(
            registry,
            "gitopsd_drift_detection_seconds",
            "From a live change (its managedFields time, or its watch event's arrival when the "
            "change stamped none) to gitopsd detecting the drift.",
        )
        self.commit_to_applied = self._histogram(
            registry,
            "gitopsd_commit_to_applied_seconds",
            "From a commit's time to its successful apply.",
            buckets=LAG_BUCKETS,
        )
        self.fetch_seconds = self._histogram(
            registry, "gitopsd_git_fetch_duration_seconds", "Duration of one git fetch."
        )

    def _define_process(self, registry: CollectorRegistry) -> None:
        self.leader = Gauge(
            "gitopsd_leader",
            "1 while this process holds the leader lease (with sharding: its own, and writes "
            "for its share).",
            registry=registry,
        )
        self.replicas = Gauge(
            "gitopsd_shard_members",
            "With sharding: the replicas that share the sources, as this one last listed them.",
            registry=registry,
        )
        self.notifications = Counter(
            "gitopsd_notifications_total",
            "Notifications by provider and outcome: sent, failed (refused, fenced, or failing "
            "at every attempt), dropped (a full queue), superseded (by a newer one).",
            ["source", "provider", "outcome"],
            registry=registry,
        )
        self._cumulative.append(self.notifications)

    def _counter(
        self, registry: CollectorRegistry, name: str, help_text: str, labels: list[str]
    ) -> Counter:
        """A counter by source and closed labels, exported at 0 where it has not counted."""
        counter = Counter(name, help_text, labels, registry=None)
        closed = CLOSED_LABELS[name.removesuffix("_total")]
        registry.register(ZeroFilled(counter, labels, closed, self._served))
        self._cumulative.append(counter)
        return counter

    def _histogram(
        self,
        registry: CollectorRegistry,
        name: str,
        help_text: str,
        labels: tuple[str, ...] = ("source",),
        buckets: tuple[float, ...] = LATENCY_BUCKETS,
    ) -> Histogram:
        histogram = Histogram(name, help_text, labels, buckets=buckets, registry=registry)
        self._cumulative.append(histogram)
        return histogram

    def _served(self) -> list[str]:
        with self._lock:
            return sorted(self._sources)

    def _last_states(self) -> dict[str, Snapshot]:
        with self._lock:
            return dict(self._snapshots)

    def _replace(self, source: str, gauges: Snapshot) -> None:
        """Replaces these gauges of the source's snapshot, keeping its others: a new
        snapshot, so a scrape reads the one before or the one after, never half of each."""
        with self._lock:
            self._snapshots[source] = {**self._snapshots.get(source, {}), **gauges}

    def serving(self, source: str) -> None:
        """`source` runs from now: its counters are exported at 0 until they count."""
        with self._lock:
            self._sources.add(source)

    def forget(self, source: str) -> None:
        """Removes every series of `source` (a deleted GitSync), whatever the metric."""
        with self._lock:
            self._snapshots.pop(source, None)
            self._health_tallies.pop(source, None)
            self._sources.discard(source)
        for metric in self._cumulative:
            metric.remove_by_labels({"source": source})

    # Drift

    def drift(self, source: str, drifts: Iterable[Drift]) -> None:
        """Replaces the source's drift gauges with the current drift."""
        drifts = list(drifts)
        objects = sorted({_object_labels(d) for d in drifts})
        kept = objects[: self.budget]
        self._replace(
            source,
            {
                DRIFT_OBJECTS: _tallied((str(d.key.group_kind), str(d.state)) for d in drifts),
                OBJECT_DRIFT: tuple((labels, 1.0) for labels in kept),
                OBJECT_DRIFT_OVER_BUDGET: (((), float(len(objects) - len(kept))),),
            },
        )

    def drift_policy(self, source: str, drifts: Iterable[Drift]) -> None:
        """Replaces the source's count of the fields each drift rule decides now."""
        decided = (
            (c.rule, str(c.decision))
            for drift in drifts
            for c in (*drift.changes, *drift.accepted)
            if c.rule
        )
        self._replace(source, {DRIFT_POLICY_FIELDS: _tallied(decided)})

    def detected(self, source: str, seconds: float) -> None:
        self.detection.labels(source).observe(max(seconds, 0.0))

    # Health

    def health(
        self,
        source: str,
        healths: Mapping[ObjectKey, Health],
        was: Mapping[ObjectKey, Health] | None = None,
    ) -> None:
        """Replaces the source's health gauges with the health of its objects now. Given
        `was`, the health before of the only objects whose health moved since the last call
        (`healths` holds their new one), only those are counted again: a rollout's
        reassessment each second touches a few objects of thousands."""
        with self._lock:
            tally = self._health_tallies.get(source)
        if was is None or tally is None or tally.total() != len(healths):
            tally = Tally((str(key.group_kind), h.status) for key, h in healths.items())
        else:
            tally = tally.copy()
            for key, before in was.items():
                kind = str(key.group_kind)
                tally[(kind, before.status)] -= 1
                tally[(kind, healths[key].status)] += 1
            tally = +tally  # drops the kinds and statuses none has any more
        now = overall_status({status for _, status in tally})
        states = tuple(((str(s),), 1.0 if s == now else 0.0) for s in SOURCE_HEALTH)
        objects = tuple(((kind, str(status)), float(n)) for (kind, status), n in tally.items())
        with self._lock:
            self._health_tallies[source] = tally
        self._replace(source, {HEALTH_OBJECTS: objects, HEALTH_NOW: states})

    # Reconcile

    def reconciled(self, source: str, result: str, seconds: float, now: float) -> None:
        self.reconciles.labels(source, result).inc()
        self.reconcile_seconds.labels(source, result).observe(seconds)
        if result == "success":
            self._replace(source, {LAST_SUCCESS: (((), now),)})

    def changes(self, source: str, changes: ChangeSet) -> None:
        for action in Action:
            count = changes.count(action)
            if count:
                self.applies.labels(source, str(action), "success").inc(count)

    def apply_failed(self, source: str, action: str, reason: ClusterReason, count: int) -> None:
        self.applies.labels(source, action, reason).inc(count)

    def error(self, source: str, stage: Stage, reason: Reason) -> None:
        self.errors.labels(source, stage, reason).inc()

    def notified(self, source: str, provider: str, outcome: str) -> None:
        self.notifications.labels(source, provider, outcome).inc()

    def refused(self, source: str, reasons: Iterable[str]) -> None:
        for reason, count in Tally(reasons).items():
            self.prune_blocked.labels(source, reason).inc(count)

    # Source

    def revision(self, source: str, sha: str, cluster: str) -> None:
        """The revision now read ("local" for a directory source), and where it goes."""
        self._replace(
            source,
            {REVISION_INFO: (((sha or "local",), 1.0),), CLUSTER_INFO: (((cluster,), 1.0),)},
        )

    def applied(self, source: str, commit_time: float | None, now: float) -> None:
        """A revision applied in full, `now - commit_time` after it was committed."""
        if commit_time is not None:
            self.commit_to_applied.labels(source).observe(max(now - commit_time, 0.0))

    def fetched(self, source: str, seconds: float) -> None:
        self.fetch_seconds.labels(source).observe(seconds)

    # Process

    def count_api_requests(self, tally: Callable[[], dict[tuple[str, str, int], int]]) -> None:
        """Exports the cluster clients' own request tally, read at each scrape."""
        requests = "Requests to the API servers by cluster, verb and status code."
        labels = ["cluster", "verb", "code"]
        self.registry.register(TalliedCounter("gitopsd_api_requests", requests, labels, tally))

    def watch_clusters(self, reachable: Callable[[], Mapping[str, bool]]) -> None:
        """Exports whether each cluster answered its last request, read at each scrape."""
        self.registry.register(Reachability(reachable))

    def count_watch_events(self, tally: Callable[[], dict[tuple[str, str], int]]) -> None:
        """Exports the informers' tally of watch events, read at each scrape."""
        events = (
            "Watch events of the sources' informers by resource and what each came to: "
            "unkept (no source keeps the object), ignored (only what gitopsd does not own "
            "moved), health (assessed again), owned (its drift checked)."
        )
        self.registry.register(
            TalliedCounter("gitopsd_watch_events", events, ["resource", "outcome"], tally)
        )

    def set_leader(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)

    def set_shard_members(self, count: int) -> None:
        self.replicas.set(count)


def _tallied(labels: Iterable[tuple[str, ...]]) -> tuple[Series, ...]:
    """A series for each set of labels, valued at how many times it comes."""
    return tuple((each, float(count)) for each, count in Tally(labels).items())


def _object_labels(drift: Drift) -> tuple[str, ...]:
    key: ObjectKey = drift.key
    managers = sorted({c.manager for c in drift.changes}) or [_default_manager(drift.state)]
    return (str(key.group_kind), key.namespace, key.name, ",".join(managers))


def _default_manager(state: State) -> str:
    return "deleted" if state == State.MISSING else "unknown"
