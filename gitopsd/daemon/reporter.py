"""What a source's worker tells, as the reconcile's listener: metrics, log lines, Events (in
warn mode) and the `SourceReport` its GitSync status and `gitopsd get` are made of. The
worker decides; the reporter says what happened.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

from gitopsd import diff
from gitopsd.changes import Action, ChangeSet, Listener, Measurement, Outcome
from gitopsd.cluster import Cluster
from gitopsd.configfile import Mode, SourceConfig
from gitopsd.daemon.logs import ContextLog
from gitopsd.daemon.news import News
from gitopsd.drift_policy import Decision
from gitopsd.errors import GitopsdError
from gitopsd.gitsync import history
from gitopsd.gitsync.status import Failure, SourceReport
from gitopsd.health import Checks, Health, Status
from gitopsd.metrics import Recorder
from gitopsd.objects import Body, ObjectKey
from gitopsd.reconcile import Result, State, Step, SyncReport

log = logging.getLogger("gitopsd.source")


@dataclass
class Attempt:
    """A poll or drift check under way, as its history entry will tell it."""

    started_at: float = field(default_factory=time.time)
    clock: float = field(default_factory=time.monotonic)
    revision: str = ""
    outcomes: list[Outcome] = field(default_factory=list)
    failure: Failure | None = None
    ended: float | None = None
    """When its last write or its failure was (monotonic); None while it did nothing."""

    def end(self, revision: str) -> None:
        self.revision, self.ended = revision, time.monotonic()

    def entry(self) -> history.Document:
        failure = (self.failure.reason, self.failure.message) if self.failure else None
        seconds = (self.ended or self.clock) - self.clock
        return history.entry(self.revision, self.started_at, seconds, self.outcomes, failure)


@dataclass
class Reporter:
    config: SourceConfig
    recorder: Recorder
    cluster: Cluster
    """Writes the Events of warn mode."""
    state: State
    """The worker's reconcile state: the revision read, the health assessed."""
    report: SourceReport = field(default_factory=SourceReport)
    """What it saw last (a GitSync's status is made of it)."""
    warned: set[ObjectKey] = field(default_factory=set)
    """The objects an Event said drifted, until they no longer do."""
    noticed: set[str] = field(default_factory=set)
    """What of other tools' annotations gitopsd does not honour, logged once each."""
    decided: dict[ObjectKey, str] = field(default_factory=dict)
    """The Event told of each object whose drift a rule alerts on or accepts, until that
    changes."""
    seen: dict[ObjectKey, float] = field(default_factory=dict)
    """When the first watch event of each key not measured since arrived (wall clock)."""
    attempt: Attempt | None = None
    """The poll or drift check being recorded in the history, if one is."""
    news: News | None = None
    """What it tells people (notifications), if any provider hears of it."""

    def __post_init__(self) -> None:
        self.log = ContextLog(log, {"source": self.config.name})
        self.recorder.serving(self.config.name)

    @property
    def name(self) -> str:
        return self.config.name

    def listener(self, changed: set[ObjectKey]) -> Listener:
        """The listener of one reconcile (`changed`: the keys a drift check was asked for)."""
        return Listener(
            on_fetched=lambda seconds: self.recorder.fetched(self.name, seconds),
            on_revision=self._read,
            on_measured=lambda measured, find: self._measured(measured, find, changed),
            on_plan=self._planned,
            on_outcome=self._log_outcome,
        )

    def changed(self, key: ObjectKey) -> None:
        """A watch event of `key`: the first since it was measured dates its drift."""
        self.seen.setdefault(key, time.time())

    @contextmanager
    def recording(self) -> Iterator[None]:
        """A poll or drift check, recorded in the history if it synced, healed or failed:
        from its start to its last write or its failure."""
        self.attempt = Attempt()
        try:
            yield
        finally:
            attempt, self.attempt = self.attempt, None
            if attempt.ended is not None:
                self.report.history = history.recorded(self.report.history, attempt.entry())

    def failed(self, error: GitopsdError, retry: str) -> None:
        """Counts and logs a failure, with what becomes of it (`retry`)."""
        self.report.failure = Failure.of(error)
        if self.attempt is not None:
            self.attempt.failure = self.report.failure
            self.attempt.end(self.state.fetched_revision or self.report.attempted_revision)
        stage, reason = error.stage, error.reason
        self.recorder.error(self.name, stage, reason)
        if self.news is not None:
            revision = self.state.fetched_revision or self.report.attempted_revision
            self.news.failed(revision, f"{stage}/{reason}", self.report.failure.message)
        self.log.error("%s; %s", error, retry, extra={"stage": stage, "reason": reason})

    def succeeded(self) -> None:
        """A reconcile that succeeded: news in the history only after a failure (a sync's
        success is told by `synced`)."""
        self.report.failure = None
        if self.news is not None:
            self.news.recovered(self.report.attempted_revision)
        attempt = self.attempt
        if attempt is not None and attempt.ended is None and history.failing(self.report.history):
            attempt.end(self.report.attempted_revision)

    def _read(self, sha: str) -> None:
        self.recorder.revision(self.name, sha, self.config.cluster_name)
        self.report.attempted_revision = sha
        targets = self.state.desired.targets if self.state.desired else {}
        self.report.inventory = Counter(key.group_kind for key in targets)
        self.log.info("read revision", extra={"revision": sha, "mode": self.config.mode})
        notices = self.state.desired.notices if self.state.desired else []
        for notice in [n for n in notices if n not in self.noticed]:
            self.log.warning("%s", notice, extra={"revision": sha})
        self.noticed = set(notices)

    def _measured(
        self,
        measured: Measurement,
        find: Callable[[ObjectKey], Body | None],
        changed: set[ObjectKey],
    ) -> None:
        """Drift, exported as metrics (and Events in warn mode); what the drift policy
        accepts or alerts on, as an Event once per object."""
        drifts = measured.drifts
        self.recorder.drift(self.name, drifts)
        self.recorder.drift_policy(self.name, [*drifts, *measured.held])
        self.report.drifts = drifts
        self.report.accepted = [d for d in (*drifts, *measured.held) if d.accepted]
        if changed:
            self._observe_latency(drifts, changed, find)
        if self.config.mode == Mode.WARN:
            self._warn(drifts, find)
        if self.config.mode != Mode.OBSERVE:  # observe mode writes nothing, Events included
            self._tell_decided(drifts, self.report.accepted, find)
        if self.news is not None and self._applied_or_never_applies():
            self.news.measured(self.report.attempted_revision, drifts)

    def _applied_or_never_applies(self) -> bool:
        """Whether drift now is news: what differs from a revision not applied yet is the
        sync to come, not drift (unless the mode never applies)."""
        report = self.report
        return (
            self.config.mode != Mode.ENFORCE or report.attempted_revision == report.applied_revision
        )

    def _tell_decided(
        self,
        drifts: list[diff.Drift],
        accepted: list[diff.Drift],
        find: Callable[[ObjectKey], Body | None],
    ) -> None:
        """An Event on each object whose drift a rule newly alerts on, or accepts (names
        the fields, managers and rules, never values)."""
        told: dict[ObjectKey, str] = {}
        for drift in drifts:
            alerted = [c for c in drift.changes if c.decision == Decision.ALERT]
            if alerted:
                told[drift.key] = _event_line(alerted, "DriftAlert")
        for drift in accepted:
            told.setdefault(drift.key, _event_line(list(drift.accepted), "DriftAccepted"))
        for key, line in told.items():
            body = find(key)
            if self.decided.get(key) != line and body is not None:
                reason, _, message = line.partition(" ")
                kind = "Warning" if reason == "DriftAlert" else "Normal"
                self.cluster.event(body, reason, message, kind)
        self.decided = told

    def waiting(self, reason: str) -> None:
        if reason and reason != self.report.waiting:
            self.log.info("revision not applied: %s", reason)
        self.report.waiting = reason

    def assessed(self, result: Result) -> None:
        """Health, exported as metrics and kept for the status. What a sync just wrote is
        InProgress until its watch event brings its new status; a change of status is
        logged, but not the first assessment of an object, nor of one just applied."""
        healths = result.health(self.state.assessments)
        written = result.report.changes.outcomes if result.report else []
        healths |= {o.key: APPLIED for o in written if o.action in WRITES}
        self._told(healths)

    def reassessed(self, found: Mapping[ObjectKey, Body | None], checks: Checks | None) -> bool:
        """The health of objects whose status alone moved, assessed again; the others' stands
        as the last reconcile assessed it. Says whether any moved (else nothing is told)."""
        before = self.report.health or {}
        mine = {key: body for key, body in found.items() if key in before}
        now = self.state.assessments.again(mine, checks)
        moved = {key: health for key, health in now.items() if health != before[key]}
        if moved:
            self._told({**before, **moved}, moved)
        return bool(moved)

    def _told(
        self, healths: dict[ObjectKey, Health], moved: Mapping[ObjectKey, Health] | None = None
    ) -> None:
        """Exports `healths` and logs what changed: of `moved` only, if given."""
        before = self.report.health or {}
        earlier = None if moved is None else {key: before[key] for key in moved}
        self.recorder.health(self.name, healths, earlier)
        for key, now in (healths if moved is None else moved).items():
            previous = before.get(key)
            if _newsworthy(previous, now):
                level = logging.WARNING if now.status == Status.FAILED else logging.INFO
                was = previous.status if previous else "unassessed"
                self.log.log(level, "health %s -> %s", was, now, extra={"object": str(key)})
        self.report.health = healths
        if self.news is not None:
            self.news.assessed(self.report.attempted_revision, healths)

    def _planned(self, count: int) -> None:
        revision = self.state.desired.revision.sha if self.state.desired else ""
        self.log.info("sync started", extra={"revision": revision, "objects": count})
        if self.news is not None and revision != self.report.applied_revision:
            self.news.started(revision, count)

    def synced(self, result: Result, report: SyncReport) -> None:
        """Reports what a sync or heal did."""
        revision = {"revision": result.desired.revision.sha}
        if result.step == Step.SYNC:
            commit_time = result.desired.revision.commit_time
            self.recorder.applied(self.name, commit_time, time.time())
            self.report.applied_revision = result.desired.revision.sha
            self.report.synced_at = time.time()
            self.report.refused = [f"{key} ({reason})" for key, reason in report.refused]
            self._not_applied(report, revision)
        self._forget_drift_undone(result.drifts, report.changes)
        self.recorder.changes(self.name, report.changes)
        self.recorder.refused(self.name, [str(reason) for _, reason in report.refused])
        for key, reason in report.refused:
            self.log.warning("prune refused (%s)", reason, extra={**revision, "object": str(key)})
        for refusal in report.refusals:
            self.log.warning("%s", refusal, extra=revision)
        for notice in result.notices:
            self.log.info("%s", notice, extra=revision)
        for takeover in report.changes.takeovers:
            self.log.info("took over %s", takeover, extra=revision)
        changed = [o for o in report.changes.outcomes if o.action != Action.UNCHANGED]
        self.log.info("sync finished: %d changed", len(changed), extra=revision)
        if self.attempt is not None and (result.step == Step.SYNC or changed):
            self.attempt.outcomes += changed
            self.attempt.end(result.desired.revision.sha)
        if self.news is not None:
            self.news.synced(result, report.changes.outcomes)

    def _not_applied(self, report: SyncReport, revision: dict[str, str]) -> None:
        """Objects the sync refused alone: counted as an error, logged, and in the status."""
        error = report.not_applied()
        self.report.not_applied = error.failures if error else []
        if error is not None:
            self.recorder.error(self.name, error.stage, error.reason)
            for line in error.failures:
                self.log.warning("not applied: %s", line, extra=revision)

    def _forget_drift_undone(self, drifts: list[diff.Drift], changes: ChangeSet) -> None:
        """Objects the sync created (replaced ones too) or pruned leave the drift gauges now:
        until the watch measures them again (after the poll), a scrape would count existing
        objects as missing. Their ADDED and DELETED events measure them again. A configured
        object stays until then: its write may not have undone its drift."""
        undone = {o.key for o in changes.outcomes if o.action in UNDONE}
        if undone:
            self.recorder.drift(self.name, [d for d in drifts if d.key not in undone])
        # The report takes each write to have undone its object's drift (configured ones too,
        # so that a status does not say "drift" after every sync); the watch measures again.
        written = undone | {o.key for o in changes.outcomes if o.action == Action.CONFIGURED}
        self.report.drifts = [d for d in drifts if d.key not in written]

    def _log_outcome(self, outcome: Outcome) -> None:
        if outcome.action != Action.UNCHANGED:
            detail = f" ({outcome.detail})" if outcome.detail else ""
            self.log.info("%s%s", outcome.action, detail, extra={"object": str(outcome.key)})

    def _warn(self, drifts: list[diff.Drift], find: Callable[[ObjectKey], Body | None]) -> None:
        """An Event on each object that newly drifted (names fields and managers, no values)."""
        current = {d.key for d in drifts}
        for drift in drifts:
            body = find(drift.key)
            if drift.key in self.warned or body is None:
                continue
            fields = ", ".join(f"{c.path} (by {c.manager})" for c in drift.changes) or drift.state
            self.cluster.event(body, "Drift", f"differs from git: {fields}")
        self.warned = current

    def _observe_latency(
        self,
        drifts: list[diff.Drift],
        keys: set[ObjectKey],
        find: Callable[[ObjectKey], Body | None],
    ) -> None:
        seen = {key: self.seen.pop(key) for key in keys if key in self.seen}
        for drift in drifts:
            body = find(drift.key)
            if drift.key in seen and body is not None:
                changed_at = changed_since(body, seen[drift.key])
                self.recorder.detected(self.name, time.time() - changed_at)


APPLIED = Health(Status.IN_PROGRESS, "Applied", "applied; its new status is not read yet")
WRITES = (Action.CREATED, Action.CONFIGURED, Action.REPLACED)
UNDONE = (Action.CREATED, Action.REPLACED, Action.PRUNED)
"""What a sync's write undid whole: the object is as git has it, or gone."""


def _event_line(changes: list[diff.FieldChange], reason: str) -> str:
    """The Event's reason and message: each field, who owns it, and the rule."""
    what = "alerted on" if reason == "DriftAlert" else "accepted"
    fields = ", ".join(f"{c.path} (by {c.manager}; rule {c.rule})" for c in changes[:10])
    return f"{reason} differs from git, {what} by the drift policy: {fields}"


def _newsworthy(previous: Health | None, now: Health) -> bool:
    """A change of status, and a failure however it came."""
    if now.status == Status.FAILED:
        return previous is None or previous.status != Status.FAILED
    return previous not in (None, APPLIED) and previous.status != now.status


def changed_since(body: Body, seen_at: float) -> float:
    """When the change the daemon saw at `seen_at` was made: its managedFields entry's time
    when the newest entry is that change's (second resolution, so up to a second before
    the event), else the moment its watch event arrived. Not every write stamps a time (a
    `kubectl scale` of the scale subresource does not): the other entries' are older."""
    times = [e.get("time") for e in (body.get("metadata") or {}).get("managedFields") or []]
    stamps = [datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in times if t]
    newest = max(stamps, default=0.0)
    return newest if seen_at - 1.0 <= newest <= seen_at else seen_at
