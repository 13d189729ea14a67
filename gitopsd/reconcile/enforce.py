"""makeChanges: carries the plan out. Applies what it sends, records what was applied in
the ApplySet parent (with the in-sync stamps), then prunes what it allows and records that
too.

A parent another tool wrote, or an existing object this source does not own (without
--adopt), stops the sync before any write; every write, the parent's included, carries the
precondition that keeps it to what was read (`gitopsd.ownership`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from gitopsd import inventory
from gitopsd.apply import Applier, write
from gitopsd.changes import Action, ChangeSet, Listener, Live, Outcome, Target
from gitopsd.cluster import Cluster, Resource
from gitopsd.config import SyncSettings
from gitopsd.errors import ApplyError, ClusterReason, GitopsdError
from gitopsd.objects import Body, ObjectKey, body_version
from gitopsd.plan import Plan, PruneDecision, Refusal, Wave
from gitopsd.prune import prune
from gitopsd.reconcile.desired import Desired
from gitopsd.reconcile.live import kinds_of, unserved_kinds
from gitopsd.reconcile.phases import HookRunner
from gitopsd.reconcile.records import parent_annotations
from gitopsd.refusals import explain_refusals
from gitopsd.resources import CONFIG_MAPS, NAMESPACES
from gitopsd.synchooks import Phase
from gitopsd.waiting import HealthWait, not_healthy


@dataclass
class SyncReport:
    revision: str
    changes: ChangeSet = field(default_factory=ChangeSet)
    refused: list[tuple[ObjectKey, Refusal]] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    """Each field of an object written that the drift policy held as it was live, with the
    rule that did: "apps/Deployment/shop/web: spec.replicas (accept by rule hpa)"."""
    refusals: list[str] = field(default_factory=list)
    """One line per prune guard that refused, with its numbers, the objects it kept and
    what overrides it (`plan.explain_refusals`)."""
    left_git: int = 0
    """Objects the source owns that left git, kept because prune is off."""
    dry_run: bool = False
    """Nothing was changed: every write was a server-side dry run."""

    @property
    def prune_blocked(self) -> bool:
        return bool(self.refused)

    def not_applied(self) -> ApplyError | None:
        """The objects refused alone (an immutable field git changes), as one error."""
        lines = [
            f"{o.key}: {o.detail}" for o in self.changes.outcomes if o.action == Action.REFUSED
        ]
        return ApplyError(lines, ClusterReason.IMMUTABLE) if lines else None


@dataclass(kw_only=True)
class ParentWriter:
    """Writes the ApplySet parent: the record, and the stamps of what is in sync now."""

    cluster: Cluster
    settings: SyncSettings
    applyset: inventory.ApplySet
    stamps: Callable[[], Mapping[ObjectKey, bytes]]
    stored_stamps: bytes
    """The stamps the parent holds."""
    restamp: bool
    """Write a parent whose record is current but whose stamps are not: the command line's
    sync does, as its memo ends with it, so the next run measures only what changes. A heal
    does not, nor the daemon's sync, whose memo lives on: their stamps wait for the next
    write of the parent (a record that changes, or the daemon's shutdown: `keep_stamps`),
    and a stamp lost meanwhile (a crash) costs that object a dry-run at the next start."""
    written: Callable[[Body | None], None]
    """Hears of each write of the parent: the parent it answered, None if it failed."""
    live: Body | None
    """The parent as read (None: absent), then as written: each write is preconditioned on
    it, so a parent deleted and made anew by someone else meanwhile is never overwritten."""

    def write(
        self, before: inventory.Record, record: inventory.Record, failed: bool = False
    ) -> None:
        """Writes the parent with `record`, unless it holds that already, and the stamps too
        or no restamp is asked (a sync that changed nothing writes nothing; nor does a first
        sync whose dry-run failed, nor one whose apply `failed` having applied nothing).
        Records are compared, not their encodings: a heal of one object compresses nothing."""
        unchanged = record == before
        # Stamps may wait, the record never does: a record that changed is written at once,
        # and before anything is pruned, so that whatever crash follows, every object
        # applied is recorded and the next sync can prove it owned.
        if self.settings.dry_run or (unchanged and (failed or not self.restamp)):
            return  # a heal hashes no stamps
        if unchanged and self.cluster.stopping():
            return  # a stopping process writes its record, not stamps alone
        stamps = inventory.encode_stamps(record, self.stamps())
        if unchanged and stamps == self.stored_stamps:
            return
        parent = self.applyset.parent(record, stamps, parent_annotations(self.settings))
        answer = None
        try:
            subject = str(self.applyset.key)
            recording = self.cluster.recording()  # even when stopping: what was done
            answer = write(recording, CONFIG_MAPS, parent, self.live, True, subject=subject)
        finally:  # even a failed write may have reached the server
            self.written(answer)
        self.live, self.stored_stamps = answer, stamps


def make_changes(
    desired: Desired,
    plan: Plan,
    live: Live,
    listener: Listener,
    parent: ParentWriter,
    runs_hooks: bool = False,
    may_prune: Callable[[], bool] = lambda: True,
) -> SyncReport:
    """Runs the pre-sync hooks, applies the plan's objects (staged; the sync hooks that name
    a wave run in it, after its objects), records them, runs the other sync hooks, prunes
    (if `may_prune` says so as it starts), then runs the post-sync hooks once every object
    is healthy; a failure on the way runs the sync-fail hooks. Without `runs_hooks` (a
    heal), no hook runs. The report's outcomes come in the order they were done, hooks'
    among objects'."""
    cluster, settings, applyset = parent.cluster, parent.settings, parent.applyset
    _refuse_foreign_parent(applyset, live, settings)
    report = SyncReport(
        desired.revision.sha,
        held=_held(plan),
        left_git=len(plan.left_git),
        dry_run=settings.dry_run,
    )

    def heard(outcome: Outcome) -> None:
        report.changes.outcomes.append(outcome)
        listener.on_outcome(outcome)

    runner = HookRunner(cluster, settings, applyset, desired.hooks if runs_hooks else (), heard)
    first, rest = _hook_namespaces_first(desired, plan) if runs_hooks else (None, plan)
    try:
        if first is not None:
            _apply(desired, first, live, listener, parent, report.changes, runner.run_wave)
        runner.run(Phase.PRE_SYNC)
        in_waves = replace(rest, hooks=runner.in_waves)
        _apply(desired, in_waves, live, listener, parent, report.changes, runner.run_wave)
        runner.run(Phase.SYNC)  # the sync hooks that name no wave
        if plan.prune is not None and may_prune():
            pruning = Pruning(parent, listener.on_outcome)
            pruning.run(live, desired.targets, plan.prune, _record_of(live, report), report)
        if runner.has(Phase.POST_SYNC) and not settings.dry_run:
            gate = WaveGate(
                HealthWait(cluster, settings.concurrency, checks=settings.checks), settings
            )
            so = "its post-sync hooks did not run"
            gate.until_healthy("the revision", list(desired.synced.values()), so)
        runner.run(Phase.POST_SYNC)
    except GitopsdError:
        runner.run_failed()
        raise
    return report


def _held(plan: Plan) -> list[str]:
    return [
        f"{key}: {change.path} ({change.decision} by rule {change.rule})"
        for key, changes in sorted(plan.held.items())
        for change in changes
    ]


def _hook_namespaces_first(desired: Desired, plan: Plan) -> tuple[Plan | None, Plan]:
    """The plan split in two when pre-sync hooks live in Namespaces this sync creates or
    changes: those Namespaces first (a hook cannot run in a namespace not there yet, as
    Helm's --create-namespace knows), everything else after the hooks."""
    homes = {t.key.namespace for t in desired.hooks if t.hook and Phase.PRE_SYNC in t.hook.phases}
    namespace_kind = (NAMESPACES.group, NAMESPACES.kind)
    first: dict[ObjectKey, Action] = {
        key: action
        for key, action in plan.actions.items()
        if (key.group, key.kind) == namespace_kind
        and key.name in homes
        and action != Action.UNCHANGED
    }
    if not first:
        return None, plan
    rest = {key: action for key, action in plan.actions.items() if key not in first}
    return Plan(first), replace(plan, actions=rest)


def _apply(
    desired: Desired,
    plan: Plan,
    live: Live,
    listener: Listener,
    parent: ParentWriter,
    changes: ChangeSet,
    run_hooks: Callable[[list[ObjectKey]], None],
) -> None:
    """Applies the plan's objects, wave by wave (with the sync hooks of each, `run_hooks`),
    into `changes`, and records what is applied so far in the parent."""
    cluster, settings, applyset = parent.cluster, parent.settings, parent.applyset
    targets = desired.targets
    applier = Applier(
        cluster,
        settings,
        live.desired,
        applyset,
        lambda key: _served(cluster, targets[key]),
        changes=changes,
        on_outcome=listener.on_outcome,
        on_applied=listener.on_applied,
        await_wave=WaveGate(
            HealthWait(
                cluster,
                settings.concurrency,
                on_progress=listener.on_health,
                checks=settings.checks,
            ),
            settings,
        ),
        on_wave=listener.on_wave,
        run_hooks=run_hooks,
    )
    failed = True
    try:
        applier.run(plan, targets)
        failed = False
    finally:  # what was applied is recorded even when a later object failed
        parent.write(live.recorded, {**live.recorded, **applier.changes.applied}, failed)


def _record_of(live: Live, report: SyncReport) -> inventory.Record:
    """The record once the plan's objects are applied."""
    return {**live.recorded, **report.changes.applied}


@dataclass(frozen=True)
class WaveGate:
    """Lets the next sync wave go once this one is healthy, within the health timeout."""

    wait: HealthWait
    settings: SyncSettings

    def __call__(self, wave: Wave, targets: list[Target]) -> None:
        self.until_healthy(
            f"sync wave {wave.number}",
            targets,
            "later waves were not applied and nothing was pruned",
        )

    def until_healthy(self, what: str, targets: list[Target], so: str = "") -> None:
        """Raises ApplyError (unhealthy) naming `what`, and `so` (what did not happen), when
        the targets are not healthy in time."""
        limit = self.settings.health_timeout_seconds
        started = time.monotonic()
        failing = not_healthy(self.wait.until_healthy(targets, limit))
        if failing:
            waited = f"{time.monotonic() - started:.0f} s of at most {limit:g} s"
            first = f"{what} is not healthy after {waited}, so {so}: {failing[0]}"
            rest = [f"{what}: {line}" for line in failing[1:]]
            raise ApplyError([first, *rest], ClusterReason.UNHEALTHY)


@dataclass(frozen=True)
class Pruning:
    """A sync's last step: deletes what the plan's decision allows, then records what is
    gone. Each delete is told to `on_outcome` as it is done: a prune that fails part-way
    still says what it deleted."""

    parent: ParentWriter
    on_outcome: Callable[[Outcome], None] = lambda outcome: None

    def run(
        self,
        live: Live,
        members: Mapping[ObjectKey, Target],
        decision: PruneDecision,
        record: inventory.Record,
        report: SyncReport,
    ) -> None:
        """Deletes what the decision allows, then records what is gone."""
        report.refused.extend(decision.refused)
        settings = self.parent.settings
        try:
            self._delete(live, members, decision, record, report)
        finally:
            report.refusals = explain_refusals(report.refused, decision, settings)

    def _delete(
        self,
        live: Live,
        members: Mapping[ObjectKey, Target],
        decision: PruneDecision,
        record: inventory.Record,
        report: SyncReport,
    ) -> None:
        if self.parent.settings.dry_run:
            dry = [Outcome(k, Action.PRUNED, "dry run", _version(live, k)) for k in decision.delete]
            report.changes.outcomes += dry
            for outcome in dry:
                self.on_outcome(outcome)
            return
        cluster, applyset = self.parent.cluster, self.parent.applyset
        unserved = unserved_kinds(cluster, kinds_of(record))
        resource_of = cluster.discovery.preferred
        result = prune(cluster, applyset, decision, record, resource_of, self.on_outcome)
        report.changes.outcomes += result.pruned
        report.refused.extend(result.refused)
        # What is gone leaves the record; an object that failed to delete stays, to be
        # retried, and so does one of a kind not served now, which cannot be seen to be gone.
        gone = {o.key for o in result.pruned}
        gone |= {
            key
            for key in record
            if key not in members and not live.proven(key) and key.group_kind not in unserved
        }
        remaining = {key: uid for key, uid in record.items() if key not in gone}
        self.parent.write(record, remaining)
        if result.error is not None:
            raise result.error


def _refuse_foreign_parent(
    applyset: inventory.ApplySet, live: Live, settings: SyncSettings
) -> None:
    """A parent another tool or source wrote is neither trusted nor overwritten."""
    reason = applyset.foreign(live.parent)
    if reason:
        raise ApplyError(
            [
                f"{applyset.key}: exists but is not the ApplySet parent of source "
                f"{settings.name}: {reason}; nothing was applied or pruned"
            ],
            ClusterReason.CONFLICT,
        )


def _served(cluster: Cluster, target: Target) -> Resource | None:
    api_version = target.body["apiVersion"]
    return cluster.discovery.find(api_version, target.key.kind)


def _version(live: Live, key: ObjectKey) -> str:
    """The version an owned object is served at, as the cluster answered it."""
    body = live.find(key)
    return body_version(body)
