"""The plan: what one reconcile will do, decided before any write, and in which order. Pure.

What a pass does follows from its kind (a `Pass`: a poll or a recheck, observing or
enforcing) and the revision applied last (`step_for`); what it writes follows from what was
measured (`plan_for`). Each target is created, configured or left unchanged, as the drift
measured says; owned objects that left git are pruned or refused by the guards. Apply
order: Namespaces and CRDs, then (after the CRDs are Established) the sync waves, lowest
first (each once the one before is healthy), each in tiers: its cluster-scoped objects
before its namespaced ones, then the sync hooks that name the wave. Deletes come last, in
the reverse order.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum, StrEnum

from gitopsd.changes import SENT, Action, Live, Measurement, Pass, Target
from gitopsd.config import PrunePolicy, Setting, SyncSettings
from gitopsd.diff import FieldChange
from gitopsd.diff import State as DriftState
from gitopsd.inventory import uid_prefix
from gitopsd.objects import Body, GroupKind, ObjectKey, wave_of
from gitopsd.resources import CUSTOM_RESOURCE_DEFINITION, NAMESPACE
from gitopsd.sync_options import SYNC_OPTIONS_ANNOTATION, Option, prune_disabled

DEFINITIONS = frozenset({NAMESPACE, CUSTOM_RESOURCE_DEFINITION})
PROTECTED = DEFINITIONS | {
    GroupKind("", "PersistentVolume"),
    GroupKind("", "PersistentVolumeClaim"),
}


class Step(StrEnum):
    """What a reconcile does after measuring."""

    NONE = "none"
    HEAL = "heal"
    SYNC = "sync"


def step_for(kind: Pass, applied: bool, self_heal: bool) -> Step:
    """A revision not applied yet is synced by a poll, one applied is healed (with
    selfHeal); a recheck never syncs, that is the poll's work. `applied`: the revision read
    is the one applied last."""
    if kind in (Pass.OBSERVE, Pass.RECHECK):
        return Step.NONE
    if not applied:
        return Step.SYNC if kind.polls else Step.NONE
    return Step.HEAL if self_heal else Step.NONE


class Tier(IntEnum):
    """Where an object comes in a wave's apply order."""

    DEFINITIONS = 0  # Namespaces and CRDs: everything else may need them
    CLUSTER = 1
    NAMESPACED = 2


def tier_of(key: ObjectKey) -> Tier:
    if key.group_kind in DEFINITIONS:
        return Tier.DEFINITIONS
    return Tier.NAMESPACED if key.namespace else Tier.CLUSTER


def tiers(keys: Iterable[ObjectKey]) -> list[list[ObjectKey]]:
    """Keys grouped by tier in apply order, sorted within a tier; empty tiers dropped."""
    grouped: dict[Tier, list[ObjectKey]] = {}
    for key in sorted(keys):
        grouped.setdefault(tier_of(key), []).append(key)
    return [grouped[tier] for tier in sorted(grouped)]


@dataclass(frozen=True)
class Wave:
    """Objects applied together, tier by tier, then the sync hooks of the wave, one after
    another (as Argo CD, objects before hooks); the next wave waits until they are healthy.
    `number` None: the Namespaces and CRDs, which go first whatever wave they name."""

    number: int | None
    tiers: list[list[ObjectKey]]
    hooks: list[ObjectKey] = field(default_factory=list)
    """The sync hooks that run in the wave (`hook_waves`), in their order: by key."""

    @property
    def keys(self) -> list[ObjectKey]:
        """Its objects, hooks apart."""
        return [key for tier in self.tiers for key in tier]


def waves(
    keys: Iterable[ObjectKey], wave_of_key: Mapping[ObjectKey, int], hooks: Mapping[ObjectKey, int]
) -> list[Wave]:
    """`keys` in apply order: the definitions, then each sync wave, lowest first, with the
    sync hooks `hooks` puts in it (a wave may hold hooks alone); empty ones dropped."""
    objects = _by_wave((key, _wave_number(key, wave_of_key)) for key in keys)
    ran = _by_wave(hooks.items())
    order = sorted(objects.keys() | ran.keys(), key=lambda n: -math.inf if n is None else n)
    return [Wave(n, tiers(objects.get(n, [])), sorted(ran.get(n, []))) for n in order]


def _wave_number(key: ObjectKey, wave_of_key: Mapping[ObjectKey, int]) -> int | None:
    """None for the definitions: they go first, whatever wave they name."""
    return None if key.group_kind in DEFINITIONS else wave_of_key.get(key, 0)


def _by_wave(
    numbered: Iterable[tuple[ObjectKey, int | None]],
) -> dict[int | None, list[ObjectKey]]:
    grouped: dict[int | None, list[ObjectKey]] = {}
    for key, number in numbered:
        grouped.setdefault(number, []).append(key)
    return grouped


def hook_waves(hooks: Iterable[Target]) -> dict[ObjectKey, int]:
    """The sync hooks that run within the waves, each with its wave: those that name one
    (`SyncHook.sync_wave`). The others run in their phases' own turn."""
    return {t.key: wave for t in hooks if t.hook and (wave := t.hook.sync_wave) is not None}


class Refusal(StrEnum):
    """Why an owned object that left git is not deleted (the prune_blocked reasons)."""

    EMPTY_SOURCE = "empty_source"
    THRESHOLD = "threshold"
    PROTECTED = "protected"
    DISABLED = "disabled"
    NOT_OWNED = "not_owned"
    DISCOVERY_INCOMPLETE = "discovery_incomplete"
    """Its kind is not served now (an APIService down, a CRD gone): nothing proves it gone."""
    HELD_BACK = "held_back"
    """An object of its kind was refused this sync (an immutable field changed): the one
    left in git may be the refused one renamed, so none of the kind is deleted."""


@dataclass(frozen=True)
class PruneDecision:
    delete: tuple[ObjectKey, ...]  # in delete order
    refused: tuple[tuple[ObjectKey, Refusal], ...]
    owned: int = 0
    """Objects this source provably owns: what the budget is a share of."""
    budget: int = 0
    """Most objects the budget lets one sync prune."""


def prune_budget(owned: int, percent: float) -> int:
    """Most of `owned` objects one pass may delete at `percent` of them: one always."""
    return max(1, math.floor(owned * percent / 100))


def decide_prune(
    desired: Iterable[ObjectKey],
    labelled: Mapping[ObjectKey, Body],
    recorded: Mapping[ObjectKey, str],
    policy: PrunePolicy,
    unserved: Collection[GroupKind] = frozenset(),
    held_back: Collection[GroupKind] = frozenset(),
) -> PruneDecision:
    """Which labelled objects that left git to delete, and which to keep, with the rule why.

    Only an object this source recorded as applied, with the uid it has now, is its own;
    a copied label or a recreated object is refused as not owned. A recorded object whose
    kind discovery cannot resolve (`unserved`) cannot be seen, so it is refused too; so is
    one of a kind whose apply was refused this sync (`held_back`)."""
    desired_keys = set(desired)
    visible = {key: live for key, live in labelled.items() if key.group_kind not in unserved}
    decision = _decide(desired_keys, visible, recorded, policy)
    unseen = {key for key in (*recorded, *labelled) if key.group_kind in unserved}
    hidden = _refuse_all(
        sorted(unseen - desired_keys, key=_delete_order), Refusal.DISCOVERY_INCOMPLETE
    )
    held = _refuse_all([k for k in decision.delete if k.group_kind in held_back], Refusal.HELD_BACK)
    delete = tuple(key for key in decision.delete if key.group_kind not in held_back)
    refused = (*decision.refused, *held.refused, *hidden.refused)
    return replace(decision, delete=delete, refused=refused)


def _decide(
    desired_keys: set[ObjectKey],
    labelled: Mapping[ObjectKey, Body],
    recorded: Mapping[ObjectKey, str],
    policy: PrunePolicy,
) -> PruneDecision:
    owned = {key for key, live in labelled.items() if recorded.get(key) == uid_prefix(live)}
    candidates = sorted(
        set(labelled) - desired_keys, key=lambda key: _delete_order(key, labelled[key])
    )
    if candidates and not desired_keys and not policy.allow_empty:
        return _refuse_all(candidates, Refusal.EMPTY_SOURCE)
    refused = [
        (key, reason) for key in candidates if (reason := _kept(key, labelled[key], owned, policy))
    ]
    kept = {key for key, _ in refused}
    deletable = [key for key in candidates if key not in kept]
    budget = prune_budget(len(owned), policy.budget_percent)
    if len(deletable) > budget and not policy.allow_mass_prune:
        over = _refuse_all(deletable, Refusal.THRESHOLD).refused
        return PruneDecision((), (*refused, *over), len(owned), budget)
    return PruneDecision(tuple(deletable), tuple(refused), len(owned), budget)


def _kept(key: ObjectKey, live: Body, owned: set[ObjectKey], policy: PrunePolicy) -> Refusal | None:
    if key not in owned:
        return Refusal.NOT_OWNED
    if prune_disabled(live):
        return Refusal.DISABLED
    system = key.group_kind == NAMESPACE and key.name in policy.protected_namespaces
    if system or (key.group_kind in PROTECTED and not policy.prune_protected):
        return Refusal.PROTECTED
    return None


def _refuse_all(keys: Iterable[ObjectKey], reason: Refusal) -> PruneDecision:
    return PruneDecision((), tuple((key, reason) for key in keys))


def _delete_order(key: ObjectKey, live: Body | None = None) -> tuple[int, int, int, ObjectKey]:
    """Apply order reversed: the highest wave first, the definitions last."""
    definition = key.group_kind in DEFINITIONS
    wave = 0 if definition or live is None else wave_of(live)
    return (definition, -wave, -tier_of(key), key)


@dataclass(frozen=True)
class Plan:
    """The writes one reconcile makes, each with its reason."""

    actions: dict[ObjectKey, Action]
    """Every target in scope: CREATED (absent), CONFIGURED (differs) or UNCHANGED."""
    prune: PruneDecision | None = None
    """What to delete and what to keep; None: this reconcile prunes nothing."""
    held: Mapping[ObjectKey, tuple[FieldChange, ...]] = field(default_factory=dict)
    """The fields of objects sent that the drift policy holds as they are live."""
    refused: Mapping[ObjectKey, str] = field(default_factory=dict)
    """Why each REFUSED object is not applied."""
    left_git: tuple[ObjectKey, ...] = ()
    """Objects this source provably owns that left git, kept since prune is off."""
    hooks: Mapping[ObjectKey, int] = field(default_factory=dict)
    """The sync hooks that run within its waves, each with its wave (`hook_waves`): a sync
    that runs hooks puts them in."""
    unchecked: frozenset[ObjectKey] = frozenset()
    """The object sent without a dry-run (`Measurement.unchecked`): refused alone when the
    server finds that git changes a field of it that cannot change, as its dry-run would."""

    def sent(self) -> set[ObjectKey]:
        """The targets to write: created, configured or replaced."""
        return {key for key, action in self.actions.items() if action in SENT}


def plan_changes(
    scope: Iterable[ObjectKey],
    present: Collection[ObjectKey],
    differing: Collection[ObjectKey],
    prune: PruneDecision | None = None,
) -> Plan:
    """`scope`: the targets this reconcile may write; `present`: those that exist;
    `differing`: those whose dry-run differs from the live object, in a field or in which
    fields gitopsd owns. Only what is absent or differs is sent."""
    actions = {
        key: Action.CREATED
        if key not in present
        else Action.CONFIGURED
        if key in differing
        else Action.UNCHANGED
        for key in scope
    }
    return Plan(actions, prune)


def plan_for(
    settings: SyncSettings,
    step: Step,
    targets: Mapping[ObjectKey, Target],
    live: Live,
    measured: Measurement,
) -> Plan | None:
    """A sync sends every target that is absent or differs, and prunes (if enabled); a heal
    sends the ones that drifted, and prunes nothing. None: nothing to write (no step, or a
    heal that finds nothing to send; a sync always writes, if only the parent's stamps)."""
    if step == Step.NONE:
        return None
    present = {key for key, body in live.desired.items() if body is not None}
    if step == Step.HEAL:
        # an unowned object is not this source's to heal: a sync refuses it likewise; nor is
        # a field the drift policy holds; nor an immutable field (a new revision's sync
        # replaces or refuses it)
        unowned = DriftState.UNOWNED
        immutable = measured.immutable
        drifted = {
            d.key
            for d in measured.drifts
            if d.key in targets and d.state != unowned and d.heals and d.key not in immutable
        }
        plan = _holding(plan_changes(drifted, present, measured.differing), measured)
        return plan if plan.sent() else None
    written = [key for key, target in targets.items() if target.writes(key in present)]
    plan = replace(plan_changes(written, present, measured.differing), unchecked=measured.unchecked)
    plan = _replacing(plan, settings, targets, live, measured)
    if settings.prune.enabled:
        held_back = {key.group_kind for key in plan.refused}
        plan = replace(plan, prune=_prune_decision(settings, targets, live, held_back))
    else:
        left = tuple(sorted(key for key in live.owned if key not in targets and live.proven(key)))
        plan = replace(plan, left_git=left)
    return _holding(plan, measured)


def _replacing(
    plan: Plan,
    settings: SyncSettings,
    targets: Mapping[ObjectKey, Target],
    live: Live,
    measured: Measurement,
) -> Plan:
    """Objects whose immutable fields git changes are replaced where that is asked for (the
    object's sync option, or the source's) and the source provably owns them; the others
    are refused alone, saying why, and the rest of the revision is applied."""
    actions, refused = dict(plan.actions), {}
    for key, fields in measured.immutable.items():
        if key not in actions:
            continue
        asked = settings.replace_on_immutable or (
            Option.REPLACE_ON_IMMUTABLE in targets[key].options
        )
        why = _not_replaced(fields, asked, live.proven(key), settings)
        actions[key] = Action.REFUSED if why else Action.REPLACED
        if why:
            refused[key] = why
    return replace(plan, actions=actions, refused=refused)


def _not_replaced(fields: tuple[str, ...], asked: bool, owned: bool, settings: SyncSettings) -> str:
    named = ", ".join(fields) or "a field"
    if not asked:
        return not_applied(fields, settings)
    if not owned:
        return (
            f"not replaced: git changes {named}, which cannot change once set, and this "
            "source has no record of applying the object it finds (rule: not_owned)"
        )
    return ""


def not_applied(fields: tuple[str, ...], settings: SyncSettings) -> str:
    """Why an object whose immutable fields git changes is refused when no replace is asked."""
    named = ", ".join(fields) or "a field"
    return f"not applied: git changes {named}, which cannot change once set; {replacing(settings)}"


def replacing(settings: SyncSettings) -> str:
    """How to have an object whose immutable fields git changes deleted and made again, in
    the words of the place the source's settings are written."""
    return (
        f"to delete and create it again, give {settings.say(Setting.REPLACE_ON_IMMUTABLE)} "
        f"or annotate it {SYNC_OPTIONS_ANNOTATION}: {Option.REPLACE_ON_IMMUTABLE}"
    )


def _holding(plan: Plan, measured: Measurement) -> Plan:
    """`plan`, holding what the drift policy holds of each object it sends."""
    sent = plan.sent()
    held = {d.key: d.held for d in (*measured.drifts, *measured.held) if d.key in sent and d.held}
    return replace(plan, held=held)


def _prune_decision(
    settings: SyncSettings,
    targets: Mapping[ObjectKey, Target],
    live: Live,
    held_back: Collection[GroupKind],
) -> PruneDecision:
    """The guards' verdict, against the record as it will be once every target is applied
    (applying never changes an existing object's uid)."""
    record = dict(live.recorded)
    if not settings.dry_run:
        record |= {k: uid_prefix(b) for k, b in live.desired.items() if b is not None}
    return decide_prune(targets, live.owned, record, settings.prune, live.unserved, held_back)
