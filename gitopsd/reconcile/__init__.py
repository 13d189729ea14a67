"""The reconcile, told once: getDesired, getCurrent, diff, plan, makeChanges.

`gitopsd diff` observes, `gitopsd sync` enforces, the daemon's worker does either, again and
again, keeping its `State` between runs: a revision already read costs no fetch of its
files, an object measured in the same state costs no dry-run, and its own writes seed the
memo. A fresh `State` (the CLI, a daemon starting) takes what the parent's stamps vouch for as in
sync and measures the rest.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from gitopsd import diff, inventory, manifests
from gitopsd.changes import Hooks, Target
from gitopsd.cluster import Cluster
from gitopsd.config import SourceSpec, SyncSettings
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.health import Assessments, Health
from gitopsd.objects import Body, ObjectKey
from gitopsd.plan import Plan, PruneDecision, decide_prune, plan_changes
from gitopsd.reconcile.desired import Desired, applyset_of, fetch, read_revision, resolve
from gitopsd.reconcile.enforce import ParentWriter, SyncReport, make_changes, unserved_kinds
from gitopsd.reconcile.live import CONFIG_MAPS, Bounds, CacheReader, ListReader, Live, Reader
from gitopsd.reconcile.measure import IN_SYNC, DriftMemo, Measurement, measure, with_owners
from gitopsd.source import Revision

RETRIED_MANIFEST_REASONS = frozenset({ManifestReason.UNKNOWN_KIND})
"""Manifest errors the cluster can cure (a CRD installed later): retried, where other
manifest errors wait for a new revision."""


class KnownInvalid(Exception):
    """The revision is one whose manifests were found invalid before: it stays invalid,
    so it is neither read nor reported again until the next revision."""


class Mode(StrEnum):
    READ = "read"
    """getDesired and getCurrent only: a standby keeps its caches warm."""
    OBSERVE = "observe"
    """Measure drift; change nothing."""
    ENFORCE = "enforce"
    """Apply a new revision whole (and prune); heal drift of the applied one, if asked."""


class Step(StrEnum):
    """What a reconcile did after measuring."""

    NONE = "none"
    HEAL = "heal"
    SYNC = "sync"


@dataclass(frozen=True)
class Source:
    """One source as a reconcile needs it."""

    spec: SourceSpec
    settings: SyncSettings
    cache_dir: Path
    self_heal: bool = True
    """In enforce mode, re-apply what drifted from the revision applied last."""
    refresh: bool = False
    """Dry-run every object, trusting no in-sync stamp of the parent's."""


@dataclass
class State:
    """What a reconcile keeps for the next one."""

    memo: DriftMemo = field(default_factory=DriftMemo)
    parse_cache: manifests.ParseCache = field(default_factory=manifests.ParseCache)
    desired: Desired | None = None
    failed_revision: str | None = None
    """A revision whose manifests are invalid: it stays invalid, so it is not read again."""
    applied_revision: str | None = None
    """The revision last applied whole; None makes the next enforcing reconcile sync."""
    assessments: Assessments = field(default_factory=Assessments)
    owners: dict[str, inventory.ApplySet | None] = field(default_factory=dict)
    """The gitopsd parent found for each ApplySet id that objects of others carry (None:
    none found): looked up once, not at every drift check."""


@dataclass
class Result:
    desired: Desired
    live: Live
    drifts: list[diff.Drift] = field(default_factory=list)
    step: Step = Step.NONE
    report: SyncReport | None = None
    held: str = ""
    """Why the new revision was not applied (its source's dependencies), or ""."""

    def health(self, memo: Assessments | None = None) -> dict[ObjectKey, Health]:
        """The health of every desired object, as the live objects read show it (NotFound:
        absent); `memo` spares objects assessed before at the same resourceVersion. After a
        sync, those are the objects as they were before it."""
        return (memo or Assessments()).of(self.live.desired, self.desired.targets)


def reconcile_once(
    source: Source,
    cluster: Cluster,
    reader: Reader,
    state: State,
    mode: Mode,
    hooks: Hooks | None = None,
    recheck: bool = False,
) -> Result:
    """One pass of the story. `recheck` measures the revision held again (after watch
    events): it heals, never syncs. Raises KnownInvalid for a revision that failed before."""
    hooks = hooks or Hooks()
    desired = get_desired(source, cluster, state, hooks, refetch=not recheck)
    applyset = applyset_of(source.settings)
    result = Result(desired, reader.read(applyset, desired.targets))
    if mode == Mode.READ:
        return result
    if not state.memo.seen and not source.refresh:
        stamps = inventory.stamps_of(result.live.parent, result.live.recorded)
        state.memo.adopt(stamps, desired.targets, result.live.desired)
    step = _step(source, state, mode, desired, recheck)
    if step == Step.SYNC:
        result.held = hooks.sync_held()
        step = Step.NONE if result.held else step
    measured = measure(
        cluster, source.settings, desired.targets, result.live, state.memo, step != Step.NONE
    )
    measured = with_owners(cluster, source.settings, applyset, result.live, measured, state.owners)
    result.drifts, result.step = measured.drifts, step
    hooks.on_measured(measured.drifts, result.live.find)
    if step == Step.NONE:
        return result
    plan = plan_for(cluster, source.settings, step, desired, result.live, measured)
    if step == Step.HEAL and not plan.sent():
        return result
    hooks.on_plan(len(plan.actions))
    parent = ParentWriter(
        cluster,
        source.settings,
        applyset,
        state.memo.stamps,
        inventory.stored_stamps(result.live.parent),
        restamp=step == Step.SYNC,
        written=reader.written,
        live=result.live.parent,
    )
    seeded = _seeding(hooks, state.memo)
    result.report = make_changes(desired, plan, result.live, seeded, parent)
    if step == Step.SYNC:
        state.applied_revision = desired.revision.sha
    return result


def get_desired(
    source: Source, cluster: Cluster, state: State, hooks: Hooks, refetch: bool = True
) -> Desired:
    """The revision to reconcile: only a new revision is read and resolved again (and
    reported to `hooks.on_revision`)."""
    if not refetch and state.desired is not None:
        return state.desired
    started = time.monotonic()
    try:
        revision = fetch(source.spec, source.cache_dir)
    finally:
        hooks.on_fetched(time.monotonic() - started)
    held = state.desired
    if held and revision.sha and revision.sha == held.revision.sha:
        return held
    if revision.sha and revision.sha == state.failed_revision:
        raise KnownInvalid(revision.sha)
    try:
        found = read_revision(revision, source.spec, source.cache_dir, state.parse_cache)
        previous = held.targets if held else None
        targets = resolve(found, cluster, source.settings, previous)
    except ManifestError as error:
        if error.reason not in RETRIED_MANIFEST_REASONS:
            state.failed_revision = revision.sha
        raise
    state.desired = Desired(revision, targets)
    hooks.on_revision(revision.sha)
    return state.desired


def _step(source: Source, state: State, mode: Mode, desired: Desired, recheck: bool) -> Step:
    """A revision not applied yet is synced, one applied is healed (with selfHeal). A
    recheck never syncs: that is the poll's work."""
    if mode != Mode.ENFORCE:
        return Step.NONE
    applied = state.applied_revision is not None and desired.revision.sha == state.applied_revision
    if not applied:
        return Step.NONE if recheck else Step.SYNC
    return Step.HEAL if source.self_heal else Step.NONE


def plan_for(
    cluster: Cluster,
    settings: SyncSettings,
    step: Step,
    desired: Desired,
    live: Live,
    measured: Measurement,
) -> Plan:
    """A sync sends every target that is absent or differs, and prunes; a heal sends the
    ones that drifted, and prunes nothing."""
    targets = desired.targets
    present = {key for key, body in live.desired.items() if body is not None}
    if step == Step.HEAL:
        # an unowned object is not this source's to heal: a sync refuses it likewise
        unowned = diff.State.UNOWNED
        drifted = {d.key for d in measured.drifts if d.key in targets and d.state != unowned}
        return plan_changes(drifted, present, measured.differing)
    prune = _prune_decision(cluster, settings, targets, live) if settings.prune.enabled else None
    return plan_changes(targets, present, measured.differing, prune)


def _prune_decision(
    cluster: Cluster, settings: SyncSettings, targets: dict[ObjectKey, Target], live: Live
) -> PruneDecision:
    """The guards' verdict, against the record as it will be once every target is applied
    (applying never changes an existing object's uid)."""
    record = dict(live.recorded)
    if not settings.dry_run:
        record |= {k: inventory.uid_prefix(b) for k, b in live.desired.items() if b is not None}
    unserved = unserved_kinds(cluster, record)
    return decide_prune(targets, live.owned, record, settings.prune, unserved)


def withdraw(source: Source, cluster: Cluster) -> SyncReport:
    """Prunes everything the source applied, as if git now held nothing: its GitSync was
    deleted with delete-policy prune. The empty-source guard and the budget stand aside
    (deleting it asks for exactly this); ownership, protected kinds and protected namespaces
    hold. The parent goes too, unless a guard kept something it still records."""
    policy = replace(source.settings.prune, enabled=True, allow_empty=True, allow_mass_prune=True)
    settings = replace(source.settings, prune=policy)
    applyset = applyset_of(settings)
    bounds = Bounds.of(settings, source.spec.limits)
    live = ListReader(cluster, settings.concurrency, bounds).read(applyset, {})
    nothing = Desired(Revision("", None, source.spec.url), {})
    if live.parent is None:
        return SyncReport("")
    plan = plan_changes({}, set(), set(), _prune_decision(cluster, settings, {}, live))
    parent = ParentWriter(cluster, settings, applyset, dict, b"", False, lambda: None, live.parent)
    report = make_changes(nothing, plan, live, Hooks(), parent)
    if not report.refused:
        uid = live.parent["metadata"]["uid"]  # its record was emptied: any version
        cluster.delete(CONFIG_MAPS, applyset.namespace, applyset.name, uid)
    return report


def _seeding(hooks: Hooks, memo: DriftMemo) -> Hooks:
    """The server's answer to an apply is the object as git wants it: remembered as in sync,
    so that the watch event of the daemon's own write costs no dry-run."""
    on_applied = hooks.on_applied

    def seeded(target: Target, answer: Body) -> None:
        memo.remember(target, answer, IN_SYNC)
        on_applied(target, answer)

    return replace(hooks, on_applied=seeded)


__all__ = [
    "RETRIED_MANIFEST_REASONS",
    "Bounds",
    "CacheReader",
    "Desired",
    "Hooks",
    "KnownInvalid",
    "ListReader",
    "Live",
    "Mode",
    "Reader",
    "Result",
    "Source",
    "State",
    "Step",
    "SyncReport",
    "get_desired",
    "reconcile_once",
    "withdraw",
]
