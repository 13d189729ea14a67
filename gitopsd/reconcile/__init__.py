"""The reconcile, told once: getDesired, getCurrent, diff, plan, makeChanges.

Each pass is asked for an `Intent`: its kind (observe or enforce; a poll, or a recheck
after watch events), from which the plan decides what to do, and the caller's say in
whether a new revision may be applied now (its dependencies) and whether it may prune.
`gitopsd diff` observes, `gitopsd sync` enforces, the daemon's worker does either, again
and again, keeping its `State` between runs: a revision already read costs no fetch of its
files, an object measured in the same state costs no dry-run, and its own writes seed the
memo. A fresh `State` (the CLI, a daemon starting) takes what the parent's stamps vouch for
as in sync and measures the rest.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from pathlib import Path

from gitopsd import diff, inventory, manifests
from gitopsd.changes import Intent, Listener, Live, Measurement, Pass, Target
from gitopsd.cluster import Cluster
from gitopsd.config import SourceSpec, SyncSettings
from gitopsd.errors import GitopsdError, ManifestError, Remedy
from gitopsd.health import Assessments, Checks, Health
from gitopsd.objects import Body, ObjectKey
from gitopsd.ownership import Owner
from gitopsd.plan import Step, plan_for, step_for
from gitopsd.reconcile import records
from gitopsd.reconcile.desired import (
    Desired,
    applyset_of,
    empty_warning,
    fetch,
    read_revision,
    variables_of,
)
from gitopsd.reconcile.enforce import SyncReport, make_changes
from gitopsd.reconcile.live import Bounds, CacheReader, ListReader, Reader
from gitopsd.reconcile.measure import IN_SYNC, DriftMemo, measure, with_owners
from gitopsd.reconcile.resolving import BuiltIn, Kinds, Served, resolve
from gitopsd.reconcile.stamping import parent_writer
from gitopsd.resources import CONFIG_MAPS
from gitopsd.source import ChartUser, Revision, Shared
from gitopsd.substitution import Variables


class KnownInvalid(Exception):
    """The revision is one whose manifests were found invalid before: it stays invalid,
    so it is neither read nor reported again until the next revision."""


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
    stamps_wait: bool = False
    """A sync's stamps wait for the next write of the parent (the daemon: its memo lives
    on, and `keep_stamps` writes them at shutdown); else a sync writes them at once."""
    shared: Shared | None = None
    """Its git fetches, shared with the daemon's other sources of the same ref (None:
    each poll fetches)."""
    charts: ChartUser | None = None
    """The charts it holds in the daemon's cache (None: the cache keeps no record)."""


@dataclass
class State:
    """What a reconcile keeps for the next one."""

    memo: DriftMemo = field(default_factory=DriftMemo)
    parse_cache: manifests.ParseCache = field(default_factory=manifests.ParseCache)
    desired: Desired | None = None
    """The revision read last, resolved."""
    fetched_revision: str = ""
    """The revision fetched last, read or not (a revision that fails to read is not
    `desired`'s)."""
    failed_revision: str | None = None
    """A revision whose manifests are invalid: it stays invalid, so it is not read again."""
    failed_variables: str = ""
    """The digest of the variables `failed_revision` was expanded with."""
    applied_revision: str | None = None
    """The revision last applied whole; None makes the next enforcing reconcile sync."""
    assessments: Assessments = field(default_factory=Assessments)
    owners: dict[str, Owner | None] = field(default_factory=dict)
    """The gitopsd parent found for each ApplySet id that objects of others carry (None:
    none found): looked up once, not at every drift check."""
    looked_for_earlier: bool = False
    """Whether a record an earlier gitopsd kept elsewhere was looked for (once a state)."""
    earlier: records.Move | None = None
    """That record, until a sync moved it into the source's parent."""

    def known(self, revision: Revision, variables: str = "") -> Desired | None:
        """The revision as read before, if it is the one read last with the same variables
        (their digest); raises KnownInvalid if it is one found invalid with them."""
        read = (revision.sha, variables)
        desired = self.desired
        if desired and revision.sha and read == (desired.revision.sha, desired.variables):
            return desired
        if revision.sha and read == (self.failed_revision, self.failed_variables):
            raise KnownInvalid(revision.sha)
        return None

    def read(self, desired: Desired) -> Desired:
        self.desired = desired
        return desired

    def invalid(self, revision: Revision, variables: str, error: ManifestError) -> None:
        """A revision's manifests failed to read: unless the cluster can cure it (a CRD
        installed later), it is not read again with the same variables."""
        if error.remedy == Remedy.NEW_REVISION:
            self.failed_revision, self.failed_variables = revision.sha, variables

    def trust_stamps(self, desired: Desired, live: Live, refresh: bool) -> None:
        """A fresh state takes what the parent's stamps vouch for as in sync (unless asked
        to refresh); the first measure dry-runs the rest."""
        if not self.memo.seen and not refresh:
            stamps = inventory.stamps_of(live.parent, live.recorded)
            self.memo.adopt(stamps, desired.targets, live.desired)

    def is_applied(self, desired: Desired) -> bool:
        return self.applied_revision is not None and desired.revision.sha == self.applied_revision

    def done(self, desired: Desired, step: Step) -> None:
        """Changes were made: a sync's revision is the one applied now."""
        if step == Step.SYNC:
            self.applied_revision = desired.revision.sha


@dataclass
class Result:
    desired: Desired
    live: Live
    drifts: list[diff.Drift] = field(default_factory=list)
    step: Step = Step.NONE
    waiting: str = ""
    """Why the new revision was not applied (its source's dependencies), or ""."""
    held: list[diff.Drift] = field(default_factory=list)
    """Objects whose differences the drift policy accepts or ignores whole: no drift."""
    checks: Checks | None = None
    """The source's own health rules."""
    report: SyncReport | None = None
    """What a sync or heal did."""
    notices: list[str] = field(default_factory=list)
    """What the caller should tell people of the reconcile (a record moved)."""

    def health(self, memo: Assessments | None = None) -> dict[ObjectKey, Health]:
        """The health of every desired object, as the live objects read show it (NotFound:
        absent); `memo` spares objects assessed before at the same resourceVersion. After a
        sync, those are the objects as they were before it."""
        return (memo or Assessments()).of(self.live.desired, self.desired.synced, self.checks)


def reconcile_once(
    source: Source,
    cluster: Cluster,
    reader: Reader,
    state: State,
    intent: Intent,
    listener: Listener | None = None,
) -> Result:
    """One pass of the story. Raises KnownInvalid for a revision that failed before."""
    listener = listener or Listener()
    desired = get_desired(source, cluster, state, listener, fetch=intent.polls)
    step, waiting = _step(intent, state.is_applied(desired), source.self_heal)
    settings, desired, notices = _record_of(source, cluster, reader, state, desired, step)
    live = reader.read(applyset_of(settings), desired.targets)
    state.trust_stamps(desired, live, source.refresh)
    measured = _measure(cluster, settings, desired, live, state, step)
    listener.on_measured(measured, live.find)
    result = Result(desired, live, measured.drifts, step, waiting, measured.held, settings.checks)
    result.notices = notices
    plan = plan_for(settings, step, desired.targets, live, measured)
    if plan is not None:
        listener.on_plan(len(plan.actions) + len(plan.prune.delete if plan.prune else ()))
        restamp = step == Step.SYNC and not source.stamps_wait
        parent = parent_writer(cluster, settings, live.parent, state.memo, reader.written, restamp)
        seeding = _seeding(listener, state.memo, plan.held)
        result.report = make_changes(
            desired, plan, live, seeding, parent, step == Step.SYNC, intent.may_prune
        )
        state.done(desired, step)
    return result


def _record_of(
    source: Source, cluster: Cluster, reader: Reader, state: State, desired: Desired, step: Step
) -> tuple[SyncSettings, Desired, list[str]]:
    """The settings and members to reconcile with, and what to tell of them: the source's
    own, unless an earlier gitopsd kept its record elsewhere (`records`). A pass that writes
    moves it first; any other pass reads it where it is."""
    settings = source.settings
    if not state.looked_for_earlier:
        state.earlier = records.find(cluster, settings, desired.targets)
        state.looked_for_earlier = True
    move = state.earlier
    if move is None:
        return settings, desired, []
    if step != Step.NONE and not settings.dry_run:
        moved = records.carry_out(cluster, move, settings, Bounds.of(settings, source.spec.limits))
        reader.written(None)  # the parent is read anew
        state.earlier = None
        return settings, desired, [moved]
    if move.resumed:
        return settings, desired, [move.note]
    return move.read_as_earlier(settings), desired.members_of(move.earlier), [move.note]


def read_only(
    source: Source, cluster: Cluster, reader: Reader, state: State, listener: Listener, fetch: bool
) -> None:
    """getDesired and getCurrent only: a standby keeps its caches warm."""
    desired = get_desired(source, cluster, state, listener, fetch)
    reader.read(applyset_of(source.settings), desired.targets)


def get_desired(
    source: Source, cluster: Cluster, state: State, listener: Listener, fetch: bool = True
) -> Desired:
    """The revision to reconcile (without `fetch`, the one read last): only a new revision
    is read and resolved again (and reported to `listener.on_revision`). The live objects of
    the kinds the source has health rules of its own for are read with their whole status,
    which those rules may read."""
    cluster.keep_whole_status(source.settings.checks)
    if not fetch and state.desired is not None:
        return state.desired
    revision = _fetch(source, listener)
    state.fetched_revision = revision.sha
    settings = source.settings
    variables = variables_of(source.spec.substitution, cluster, settings.inventory_namespace)
    known = state.known(revision, variables.digest)
    if known is not None:
        return known
    kinds = Served(cluster.discovery)
    try:
        desired = _read(source, revision, cluster, kinds, state, listener, variables)
    except ManifestError as error:
        state.invalid(revision, variables.digest, error)
        raise
    state.read(desired)
    listener.on_revision(revision.sha)
    return desired


def build(source: Source, cluster: Cluster | None) -> Desired:
    """The revision as a sync of `source` would send it, read without reading or writing a
    single object (`gitopsd build`): with `cluster`, its charts rendered for the cluster's
    capabilities and its kinds resolved against those it serves, as a sync does; without,
    offline: charts rendered with helm's defaults, kinds resolved against the built-in ones
    and the revision's CRDs."""
    kinds = Served(cluster.discovery) if cluster else BuiltIn()
    variables = variables_of(source.spec.substitution, cluster, source.settings.inventory_namespace)
    revision = _fetch(source, Listener())
    return _read(source, revision, cluster, kinds, State(), Listener(), variables)


def _read(
    source: Source,
    revision: Revision,
    cluster: Cluster | None,
    kinds: Kinds,
    state: State,
    listener: Listener,
    variables: Variables,
) -> Desired:
    """`revision` read (only the files `state` has not parsed), expanded with `variables`,
    and resolved against `kinds`, keeping what it can of the targets `state` resolved last."""
    found = read_revision(
        revision,
        source.spec,
        source.cache_dir,
        state.parse_cache,
        namespace=source.settings.default_namespace,
        cluster=cluster,
        empty_allowed=source.settings.prune.allow_empty,
        charts=source.charts,
        tenant=source.settings.inventory_namespace,
        variables=variables,
    )
    _may_keep(state, listener, len(found))
    previous = state.desired.targets if state.desired else None
    targets = resolve(found, kinds, source.settings, previous)
    desired = Desired.of(revision, targets, empty_warning(found, source.spec))
    return replace(desired, variables=variables.digest)


def _may_keep(state: State, listener: Listener, objects: int) -> None:
    """Asks whether a new revision's objects may be kept; one refused leaves nothing
    behind, not even its parses (the revision read before stays)."""
    try:
        listener.on_read(objects)
    except GitopsdError:
        state.parse_cache = manifests.ParseCache()
        raise


def _fetch(source: Source, listener: Listener) -> Revision:
    started = time.monotonic()
    try:
        return fetch(source.spec, source.cache_dir, source.shared, source.charts)
    finally:
        listener.on_fetched(time.monotonic() - started)


def _step(intent: Intent, applied: bool, self_heal: bool) -> tuple[Step, str]:
    """The step, and why a sync must wait (its source's dependencies), or ""."""
    step = step_for(intent.kind, applied, self_heal)
    waiting = intent.dependencies_waiting() if step == Step.SYNC else ""
    return (Step.NONE if waiting else step), waiting


def _measure(
    cluster: Cluster,
    settings: SyncSettings,
    desired: Desired,
    live: Live,
    state: State,
    step: Step,
) -> Measurement:
    """Drift, with what is not this source's to write reported as unowned. A pass that may
    write checks the absent targets by dry-run too: a sync sends nothing unless all pass,
    save its lone write, whose apply is its own check (a sync that runs hooks has none)."""
    syncing = step == Step.SYNC and not desired.hooks
    writes = step != Step.NONE
    measured = measure(cluster, settings, desired.targets, live, state.memo, writes, syncing)
    applyset = applyset_of(settings)
    return with_owners(cluster, settings, applyset, desired.targets, live, measured, state.owners)


def withdraw(source: Source, cluster: Cluster) -> SyncReport:
    """Prunes everything the source applied, as if git now held nothing: its GitSync was
    deleted with delete-policy prune. The empty-source guard and the budget stand aside
    (deleting it asks for exactly this); ownership, protected kinds and protected namespaces
    hold. The parent goes too, unless a guard kept something it still records."""
    policy = replace(source.settings.prune, enabled=True, allow_empty=True, allow_mass_prune=True)
    settings = replace(source.settings, prune=policy)
    applyset = applyset_of(settings)
    bounds = Bounds.of(settings, source.spec.limits)
    reader = ListReader(cluster, settings.concurrency, bounds)
    live = reader.read(applyset, {})
    if live.parent is None:
        return SyncReport("")
    nothing = Desired(Revision("", None, source.spec.url), {})
    plan = plan_for(settings, Step.SYNC, {}, live, Measurement([], set()))
    assert plan is not None  # noqa: S101 - a sync always plans
    parent = parent_writer(cluster, settings, live.parent, DriftMemo(), reader.written, False)
    report = make_changes(nothing, plan, live, Listener(), parent)
    if not report.refused:
        uid = live.parent["metadata"]["uid"]  # its record was emptied: any version
        cluster.delete(CONFIG_MAPS, applyset.namespace, applyset.name, uid)
    return report


def _seeding(listener: Listener, memo: DriftMemo, held: Collection[ObjectKey] = ()) -> Listener:
    """The server's answer to an apply is the object as git wants it: remembered as in sync,
    so that the watch event of the daemon's own write costs no dry-run. Not so where the
    drift policy held a field as it was live: that object is measured again."""
    on_applied = listener.on_applied

    def seeded(target: Target, answer: Body) -> None:
        if target.key in held:
            memo.forget(target.key)
        else:
            memo.remember(target, answer, IN_SYNC)
        on_applied(target, answer)

    return replace(listener, on_applied=seeded)


__all__ = [
    "Bounds",
    "CacheReader",
    "Desired",
    "Intent",
    "KnownInvalid",
    "ListReader",
    "Listener",
    "Live",
    "Pass",
    "Reader",
    "Result",
    "Source",
    "State",
    "Step",
    "SyncReport",
    "build",
    "get_desired",
    "read_only",
    "reconcile_once",
    "withdraw",
]
