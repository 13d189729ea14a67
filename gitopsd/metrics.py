"""Every Prometheus collector gitopsd exports, behind one `Recorder` with an injected registry.

Metric names are a public contract (docs/metrics.md). Labels are closed enumerations,
except on `gitopsd_object_drift`, whose series are held within a configurable budget.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

from gitopsd.changes import Action, ChangeSet
from gitopsd.collectors import ApiRequests, ZeroFilled
from gitopsd.diff import Drift, State
from gitopsd.errors import (
    ClusterReason,
    ConfigReason,
    ManifestReason,
    Reason,
    SourceReason,
    Stage,
)
from gitopsd.health import Health, Status, overall
from gitopsd.objects import ObjectKey
from gitopsd.plan import Refusal

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
        self._series_lock = threading.Lock()
        self._object_series: dict[str, set[tuple[str, ...]]] = {}
        self._count_series: dict[str, set[tuple[str, str]]] = {}
        self._policy_series: dict[str, set[tuple[str, str]]] = {}
        self._health_series: dict[str, set[tuple[str, str]]] = {}
        self._revisions: dict[str, str] = {}
        self._series: dict[str, set[tuple[MetricWrapperBase, tuple[str, ...]]]] = {}
        """Every labelled series made for each source, so `forget` can remove them all."""
        self._sources: set[str] = set()
        """The sources served now: their counters' closed label sets are exported at 0."""
        self._define_drift(registry)
        self._define_health(registry)
        self._define_reconcile(registry)
        self._define_source(registry)
        self._define_process(registry)

    def _define_drift(self, registry: CollectorRegistry) -> None:
        self.drift_objects = Gauge(
            "gitopsd_drift_objects",
            "Objects that differ from git, by state and group/kind.",
            ["source", "group_kind", "state"],
            registry=registry,
        )
        self.object_drift = Gauge(
            "gitopsd_object_drift",
            "1 for each drifted object, with the field manager that drifted it (budgeted).",
            ["source", "group_kind", "namespace", "name", "manager"],
            registry=registry,
        )
        self.policy_fields = Gauge(
            "gitopsd_drift_policy_fields",
            "Fields that differ from git as a drift rule decides, by rule and action (fields "
            "it ignores are not exported).",
            ["source", "rule", "action"],
            registry=registry,
        )
        self.object_drift_over_budget = Gauge(
            "gitopsd_object_drift_over_budget",
            "Drifted objects left out of gitopsd_object_drift by its series budget.",
            ["source"],
            registry=registry,
        )
        self.detection = Histogram(
            "gitopsd_drift_detection_seconds",
            "From a live change (its managedFields time, or its watch event's arrival when the "
            "change stamped none) to gitopsd detecting the drift.",
            ["source"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )

    def _define_health(self, registry: CollectorRegistry) -> None:
        self.health_objects = Gauge(
            "gitopsd_health_objects",
            "Objects of the source's revision by health status (Current, InProgress, Failed, "
            "Terminating, NotFound, Unknown) and group/kind.",
            ["source", "group_kind", "status"],
            registry=registry,
        )
        self.source_health = Gauge(
            "gitopsd_source_health",
            "1 for the source's health now (Current when every object is, Failed when one is, "
            "else InProgress), 0 for the others.",
            ["source", "status"],
            registry=registry,
        )

    def _define_reconcile(self, registry: CollectorRegistry) -> None:
        self.reconciles = self._counter(
            registry,
            "gitopsd_reconcile_total",
            "Reconciles by result (success, failed, skipped, waiting for dependencies, "
            "standby: a replica without the lease only read).",
            ["source", "result"],
        )
        self.reconcile_seconds = Histogram(
            "gitopsd_reconcile_duration_seconds",
            "Duration of one reconcile, by result.",
            ["source", "result"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
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
        self.last_success = Gauge(
            "gitopsd_last_success_timestamp_seconds",
            "When the source last reconciled cleanly.",
            ["source"],
            registry=registry,
        )

    def _define_source(self, registry: CollectorRegistry) -> None:
        self.revision_info = Gauge(
            "gitopsd_source_revision_info",
            "The revision of the source read last (value 1).",
            ["source", "revision"],
            registry=registry,
        )
        self.commit_to_applied = Histogram(
            "gitopsd_commit_to_applied_seconds",
            "From a commit's time to its successful apply.",
            ["source"],
            buckets=LAG_BUCKETS,
            registry=registry,
        )
        self.fetch_seconds = Histogram(
            "gitopsd_git_fetch_duration_seconds",
            "Duration of one git fetch.",
            ["source"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
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

    def _counter(
        self, registry: CollectorRegistry, name: str, help_text: str, labels: list[str]
    ) -> Counter:
        """A counter by source and closed labels, exported at 0 where it has not counted."""
        counter = Counter(name, help_text, labels, registry=None)
        closed = CLOSED_LABELS[name.removesuffix("_total")]
        registry.register(ZeroFilled(counter, labels, closed, self._served))
        return counter

    def _served(self) -> list[str]:
        with self._lock:
            return sorted(self._sources)

    def serving(self, source: str) -> None:
        """`source` runs from now: its counters are exported at 0 until they count."""
        with self._lock:
            self._sources.add(source)

    def _of(self, metric: MetricWrapperBase, source: str, *labels: str) -> Any:
        """The series of `metric` for `source` and `labels`, remembered for `forget`."""
        with self._series_lock:
            self._series.setdefault(source, set()).add((metric, (source, *labels)))
        return metric.labels(source, *labels)

    def _drop(self, metric: MetricWrapperBase, source: str, *labels: str) -> None:
        """Removes a series `_of` made (series that come and go, as drifted objects do, are
        not remembered after)."""
        metric.remove(source, *labels)
        with self._series_lock:
            self._series.get(source, set()).discard((metric, (source, *labels)))

    def forget(self, source: str) -> None:
        """Removes every series of `source` (a deleted GitSync), whatever the metric."""
        with self._lock, self._series_lock:
            for metric, labels in self._series.pop(source, set()):
                with contextlib.suppress(KeyError):  # removed already, as drift replaces
                    metric.remove(*labels)
            for series in (
                self._object_series,
                self._count_series,
                self._policy_series,
                self._health_series,
            ):
                series.pop(source, None)
            self._revisions.pop(source, None)
            self._sources.discard(source)

    # Drift

    def drift(self, source: str, drifts: Iterable[Drift]) -> None:
        """Replaces the source's drift gauges with the current drift."""
        drifts = list(drifts)
        counts = Tally((str(d.key.group_kind), str(d.state)) for d in drifts)
        with self._lock:
            self._set_counts(self.drift_objects, self._count_series, source, counts)
            self._set_object_series(source, drifts)

    def drift_policy(self, source: str, drifts: Iterable[Drift]) -> None:
        """Replaces the source's count of the fields each drift rule decides now."""
        counts = Tally(
            (c.rule, str(c.decision))
            for drift in drifts
            for c in (*drift.changes, *drift.accepted)
            if c.rule
        )
        with self._lock:
            self._set_counts(self.policy_fields, self._policy_series, source, counts)

    def _set_counts(
        self,
        gauge: Gauge,
        series: dict[str, set[tuple[str, str]]],
        source: str,
        counts: Tally[tuple[str, str]],
    ) -> None:
        for labels in series.get(source, set()) - set(counts):
            self._drop(gauge, source, *labels)
        for labels, count in counts.items():
            self._of(gauge, source, *labels).set(count)
        series[source] = set(counts)

    def _set_object_series(self, source: str, drifts: list[Drift]) -> None:
        wanted = {_object_labels(source, d) for d in drifts}
        kept = set(sorted(wanted)[: self.budget])
        for labels in self._object_series.get(source, set()) - kept:
            self._drop(self.object_drift, *labels)
        for labels in kept:
            self._of(self.object_drift, *labels).set(1)
        self._object_series[source] = kept
        self._of(self.object_drift_over_budget, source).set(len(wanted) - len(kept))

    def detected(self, source: str, seconds: float) -> None:
        self._of(self.detection, source).observe(max(seconds, 0.0))

    # Health

    def health(self, source: str, healths: Mapping[ObjectKey, Health]) -> None:
        """Replaces the source's health gauges with the health of its objects now."""
        counts = Tally((str(key.group_kind), str(h.status)) for key, h in healths.items())
        now = overall(healths.values())
        with self._lock:
            for group_kind, status in self._health_series.get(source, set()) - set(counts):
                self._drop(self.health_objects, source, group_kind, status)
            for (group_kind, status), count in counts.items():
                self._of(self.health_objects, source, group_kind, status).set(count)
            self._health_series[source] = set(counts)
            for status in SOURCE_HEALTH:
                self._of(self.source_health, source, str(status)).set(1 if status == now else 0)

    # Reconcile

    def reconciled(self, source: str, result: str, seconds: float, now: float) -> None:
        self._of(self.reconciles, source, result).inc()
        self._of(self.reconcile_seconds, source, result).observe(seconds)
        if result == "success":
            self._of(self.last_success, source).set(now)

    def changes(self, source: str, changes: ChangeSet) -> None:
        for action in Action:
            count = changes.count(action)
            if count:
                self._of(self.applies, source, str(action), "success").inc(count)

    def apply_failed(self, source: str, action: str, reason: ClusterReason, count: int) -> None:
        self._of(self.applies, source, action, reason).inc(count)

    def error(self, source: str, stage: Stage, reason: Reason) -> None:
        self._of(self.errors, source, stage, reason).inc()

    def refused(self, source: str, reasons: Iterable[str]) -> None:
        for reason, count in Tally(reasons).items():
            self._of(self.prune_blocked, source, reason).inc(count)

    # Source

    def revision(self, source: str, sha: str) -> None:
        """The revision now read; "local" for a directory source."""
        revision = sha or "local"
        with self._lock:
            previous = self._revisions.get(source)
            if previous not in (None, revision):
                self._drop(self.revision_info, source, previous)
            self._of(self.revision_info, source, revision).set(1)
            self._revisions[source] = revision

    def applied(self, source: str, commit_time: float | None, now: float) -> None:
        """A revision applied in full, `now - commit_time` after it was committed."""
        if commit_time is not None:
            self._of(self.commit_to_applied, source).observe(max(now - commit_time, 0.0))

    def fetched(self, source: str, seconds: float) -> None:
        self._of(self.fetch_seconds, source).observe(seconds)

    # Process

    def count_api_requests(self, tally: Callable[[], dict[tuple[str, int], int]]) -> None:
        """Exports the cluster client's own request tally, read at each scrape."""
        self.registry.register(ApiRequests(tally))

    def set_leader(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)

    def set_shard_members(self, count: int) -> None:
        self.replicas.set(count)


def _object_labels(source: str, drift: Drift) -> tuple[str, ...]:
    key: ObjectKey = drift.key
    managers = sorted({c.manager for c in drift.changes}) or [_default_manager(drift.state)]
    return (source, str(key.group_kind), key.namespace, key.name, ",".join(managers))


def _default_manager(state: State) -> str:
    return "deleted" if state == State.MISSING else "unknown"
