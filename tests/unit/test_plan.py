"""What a pass does, what it writes, apply order and prune guards, as tables."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import pytest

from gitopsd.changes import Action, Live, Measurement, Pass, Target
from gitopsd.config import PrunePolicy, SyncSettings
from gitopsd.diff import Drift, FieldChange, State
from gitopsd.drift_policy import Decision
from gitopsd.inventory import uid_prefix
from gitopsd.objects import ARGOCD_SYNC_WAVE_ANNOTATION as ARGO_WAVE
from gitopsd.objects import ObjectKey, Origin
from gitopsd.plan import (
    Refusal,
    Step,
    decide_prune,
    hook_waves,
    plan_changes,
    plan_for,
    step_for,
    tiers,
    waves,
)
from gitopsd.sync_options import SYNC_OPTIONS_ANNOTATION as SYNC_OPTIONS
from gitopsd.synchooks import hook_of

NAMESPACE = ObjectKey("", "Namespace", "", "team")
CRD = ObjectKey("apiextensions.k8s.io", "CustomResourceDefinition", "", "widgets.example.com")
CLUSTER_ROLE = ObjectKey("rbac.authorization.k8s.io", "ClusterRole", "", "reader")
DEPLOYMENT = ObjectKey("apps", "Deployment", "team", "web")
CONFIG_MAP = ObjectKey("", "ConfigMap", "team", "config")
WIDGET = ObjectKey("example.com", "Widget", "team", "w")
PVC = ObjectKey("", "PersistentVolumeClaim", "team", "data")


def test_tiers_put_definitions_first_then_cluster_scoped_then_namespaced() -> None:
    keys = [WIDGET, DEPLOYMENT, CLUSTER_ROLE, CONFIG_MAP, CRD, NAMESPACE]
    assert tiers(keys) == [[NAMESPACE, CRD], [CLUSTER_ROLE], [CONFIG_MAP, DEPLOYMENT, WIDGET]]


def test_waves_come_after_the_definitions_lowest_first_each_in_tiers() -> None:
    early, late = ObjectKey("", "ConfigMap", "team", "early"), ObjectKey("", "Secret", "team", "s")
    numbers = {early: -1, CLUSTER_ROLE: 2, late: 2, CRD: 5, NAMESPACE: 7}
    keys = [late, DEPLOYMENT, CLUSTER_ROLE, CRD, early, NAMESPACE, CONFIG_MAP]

    ordered = waves(keys, numbers, {})

    assert [(w.number, w.tiers) for w in ordered] == [
        (None, [[NAMESPACE, CRD]]),  # definitions go first, whatever wave they name
        (-1, [[early]]),
        (0, [[CONFIG_MAP, DEPLOYMENT]]),
        (2, [[CLUSTER_ROLE], [late]]),
    ]
    assert ordered[3].keys == [CLUSTER_ROLE, late]


def test_one_wave_without_definitions_is_one_wave() -> None:
    assert [(w.number, w.tiers) for w in waves([CONFIG_MAP], {}, {})] == [(0, [[CONFIG_MAP]])]
    assert waves([], {}, {}) == []


def job(name: str) -> ObjectKey:
    return ObjectKey("batch", "Job", "team", name)


def test_a_waves_sync_hooks_run_after_its_objects_and_a_wave_may_hold_hooks_alone() -> None:
    """Argo CD's sync-waves example, and the edges: a hook below every object's wave (after
    the definitions, which go first whatever wave they name), and one above them all."""
    backend, frontend = CONFIG_MAP, ObjectKey("", "Service", "team", "frontend")
    numbers = {frontend: 2, NAMESPACE: 5}
    hooks = {
        job("page-up"): 1,
        job("page-down"): 3,
        job("smoke"): 0,
        job("early"): -1,
        job("check-b"): 2,
        job("check-a"): 2,
    }

    ordered = waves([frontend, NAMESPACE, backend, DEPLOYMENT], numbers, hooks)

    assert [(w.number, w.tiers, w.hooks) for w in ordered] == [
        (None, [[NAMESPACE]], []),
        (-1, [], [job("early")]),
        (0, [[backend, DEPLOYMENT]], [job("smoke")]),  # objects first, then hooks
        (1, [], [job("page-up")]),
        (2, [[frontend]], [job("check-a"), job("check-b")]),  # one after another, by key
        (3, [], [job("page-down")]),
    ]
    assert ordered[2].keys == [backend, DEPLOYMENT]  # what the wave waits for: objects


def hook_target(name: str, annotations: dict[str, str]) -> Target:
    body = {"metadata": {"name": name, "annotations": annotations}}
    return Target(job(name), body, Origin("jobs.yaml", 1), None, hook=hook_of(body, "jobs.yaml:1"))


def test_only_sync_hooks_that_name_a_wave_run_within_the_waves() -> None:
    hooks = [
        hook_target("page-up", {"argocd.argoproj.io/hook": "Sync", ARGO_WAVE: "1"}),
        hook_target("after-all", {"argocd.argoproj.io/hook": "Sync"}),
        hook_target("migrate", {"argocd.argoproj.io/hook": "PreSync", ARGO_WAVE: "1"}),
        hook_target("zero", {"gitopsd.io/hook": "sync", "gitopsd.io/sync-wave": "0"}),
    ]

    assert hook_waves(hooks) == {job("page-up"): 1, job("zero"): 0}


def test_prune_deletes_the_highest_wave_first() -> None:
    late, early = config_maps(2)
    everything = owned(NAMESPACE, CLUSTER_ROLE, late, early)
    everything[late]["metadata"]["annotations"] = {"gitopsd.io/sync-wave": "3"}
    everything[early]["metadata"]["annotations"] = {"gitopsd.io/sync-wave": "-2"}
    policy = PrunePolicy(prune_protected=True, allow_mass_prune=True, allow_empty=True)

    decision = decide_prune([], everything, record_of(everything), policy)

    assert decision.delete == (late, CLUSTER_ROLE, early, NAMESPACE)


def test_empty_tiers_are_dropped() -> None:
    assert tiers([CONFIG_MAP]) == [[CONFIG_MAP]]
    assert tiers([]) == []


def owned(*keys: ObjectKey, disabled: tuple[ObjectKey, ...] = ()) -> dict[ObjectKey, Any]:
    """Live objects that carry the label, each with a uid of its own."""

    def live(key: ObjectKey) -> dict[str, Any]:
        annotations = {"gitopsd.io/prune": "disabled"} if key in disabled else {}
        uid = hashlib.sha256(str(key).encode()).hexdigest()[:8] + "-0000-4000-8000-000000000000"
        return {"metadata": {"name": key.name, "annotations": annotations, "uid": uid}}

    return {key: live(key) for key in keys}


def record_of(live: dict[ObjectKey, Any]) -> dict[ObjectKey, str]:
    """The record a source keeps of the objects it applied: their keys and uid prefixes."""
    return {key: uid_prefix(body) for key, body in live.items()}


def config_maps(count: int) -> list[ObjectKey]:
    return [ObjectKey("", "ConfigMap", "team", f"cm{i}") for i in range(count)]


def test_deletes_come_namespaced_first_and_definitions_last() -> None:
    everything = owned(NAMESPACE, CLUSTER_ROLE, CONFIG_MAP, *config_maps(9))
    policy = PrunePolicy(prune_protected=True)
    decision = decide_prune(config_maps(9), everything, record_of(everything), policy)
    assert decision.delete == (CONFIG_MAP, CLUSTER_ROLE, NAMESPACE)
    assert decision.refused == ()


PRUNE_CASES = {
    "nothing left git": (config_maps(4), owned(*config_maps(4)), PrunePolicy(), (), ()),
    "one of four is within the budget": (
        config_maps(3),
        owned(*config_maps(4)),
        PrunePolicy(),
        (config_maps(4)[3],),
        (),
    ),
    "one is always allowed": (
        config_maps(1),
        owned(*config_maps(2)),
        PrunePolicy(),
        (config_maps(2)[1],),
        (),
    ),
    "two of four exceed 25%": (
        config_maps(2),
        owned(*config_maps(4)),
        PrunePolicy(),
        (),
        ((config_maps(4)[2], Refusal.THRESHOLD), (config_maps(4)[3], Refusal.THRESHOLD)),
    ),
    "mass prune allowed": (
        config_maps(2),
        owned(*config_maps(4)),
        PrunePolicy(allow_mass_prune=True),
        tuple(config_maps(4)[2:]),
        (),
    ),
    "a wider budget": (
        config_maps(2),
        owned(*config_maps(4)),
        PrunePolicy(budget_percent=50),
        tuple(config_maps(4)[2:]),
        (),
    ),
    "an empty source": (
        [],
        owned(CONFIG_MAP),
        PrunePolicy(),
        (),
        ((CONFIG_MAP, Refusal.EMPTY_SOURCE),),
    ),
    "an empty source, allowed": (
        [],
        owned(CONFIG_MAP),
        PrunePolicy(allow_empty=True),
        (CONFIG_MAP,),
        (),
    ),
    "SE-17 protected kinds": (
        config_maps(8),
        owned(NAMESPACE, CRD, PVC, *config_maps(8)),
        PrunePolicy(),
        (),
        ((PVC, Refusal.PROTECTED), (NAMESPACE, Refusal.PROTECTED), (CRD, Refusal.PROTECTED)),
    ),
    "protected kinds, opted in": (
        config_maps(8),
        owned(NAMESPACE, PVC, *config_maps(8)),
        PrunePolicy(prune_protected=True),
        (PVC, NAMESPACE),
        (),
    ),
    "system namespaces, even opted in": (
        [CONFIG_MAP],
        owned(CONFIG_MAP, ObjectKey("", "Namespace", "", "kube-system")),
        PrunePolicy(prune_protected=True),
        (),
        ((ObjectKey("", "Namespace", "", "kube-system"), Refusal.PROTECTED),),
    ),
    "the opt-out annotation": (
        config_maps(3),
        owned(*config_maps(4), disabled=(config_maps(4)[3],)),
        PrunePolicy(),
        (),
        ((config_maps(4)[3], Refusal.DISABLED),),
    ),
}


@pytest.mark.parametrize("case", PRUNE_CASES, ids=list(PRUNE_CASES))
def test_prune_guards(case: str) -> None:
    desired, live, policy, delete, refused = PRUNE_CASES[case]
    decision = decide_prune(desired, live, record_of(live), policy)
    assert decision.delete == delete
    assert decision.refused == refused


@pytest.mark.case("LD-04")
def test_ld04_five_thousand_objects_gone_at_once_stay_unless_a_mass_prune_is_allowed() -> None:
    kept, gone = config_maps(6000)[:1000], config_maps(6000)[1000:]
    live = owned(*kept, *gone)

    guarded = decide_prune(kept, live, record_of(live), PrunePolicy())
    allowed = decide_prune(kept, live, record_of(live), PrunePolicy(allow_mass_prune=True))

    assert (guarded.delete, set(guarded.refused)) == ((), {(k, Refusal.THRESHOLD) for k in gone})
    assert (set(allowed.delete), allowed.refused) == (set(gone), ())


FOUR = owned(*config_maps(4))
OWNERSHIP_CASES = {
    # SE-16 (c): a label copied onto an object this source never applied
    "a copied label": ({**FOUR, CONFIG_MAP: owned(CONFIG_MAP)[CONFIG_MAP]}, record_of(FOUR)),
    # the object this source applied was deleted and another one made with its name
    "a recreated object": (
        {**FOUR, CONFIG_MAP: owned(CONFIG_MAP)[CONFIG_MAP]},
        {**record_of(FOUR), CONFIG_MAP: "0badc0de"},
    ),
}


@pytest.mark.parametrize("case", OWNERSHIP_CASES, ids=list(OWNERSHIP_CASES))
def test_only_recorded_objects_with_their_uid_are_pruned(case: str) -> None:
    live, recorded = OWNERSHIP_CASES[case]
    decision = decide_prune(config_maps(4), live, recorded, PrunePolicy())
    assert decision.delete == ()
    assert decision.refused == ((CONFIG_MAP, Refusal.NOT_OWNED),)


def test_labelled_strangers_do_not_widen_the_prune_budget() -> None:
    """25% of the objects this source owns, however many others carry its label."""
    mine = owned(*config_maps(4))
    strangers = owned(*(ObjectKey("", "Secret", "team", f"s{i}") for i in range(40)))
    decision = decide_prune(config_maps(2), {**mine, **strangers}, record_of(mine), PrunePolicy())
    assert decision.delete == ()
    threshold = [key for key, reason in decision.refused if reason == Refusal.THRESHOLD]
    assert threshold == config_maps(4)[2:]


@pytest.mark.case("FA-13", "FA-14")
def test_fa13_fa14_a_recorded_object_of_an_unserved_kind_is_refused_not_forgotten() -> None:
    """Discovery cannot resolve Widget (its CRD is gone, its APIService down): the widget
    cannot be listed, so only the record names it. It is kept; the other kinds prune."""
    live = owned(*config_maps(4))
    recorded = {**record_of(live), WIDGET: "0badc0de"}
    unserved = {WIDGET.group_kind}
    decision = decide_prune(config_maps(3), live, recorded, PrunePolicy(), unserved)
    assert decision.delete == (config_maps(4)[3],)
    assert decision.refused == ((WIDGET, Refusal.DISCOVERY_INCOMPLETE),)


def test_a_labelled_object_of_a_kind_no_longer_served_is_refused() -> None:
    """A cache may still hold an object whose kind discovery lost since."""
    live = owned(WIDGET, *config_maps(8))
    decision = decide_prune(
        config_maps(8), live, record_of(live), PrunePolicy(), {WIDGET.group_kind}
    )
    assert decision.delete == ()
    assert decision.refused == ((WIDGET, Refusal.DISCOVERY_INCOMPLETE),)


def test_an_unserved_kind_still_in_git_is_not_a_prune_candidate() -> None:
    live = owned(*config_maps(2))
    recorded = {**record_of(live), WIDGET: "0badc0de"}
    decision = decide_prune(
        [WIDGET, *config_maps(2)], live, recorded, PrunePolicy(), {WIDGET.group_kind}
    )
    assert decision == decide_prune(config_maps(2), live, record_of(live), PrunePolicy())


def test_a_plan_sends_what_is_absent_or_differs_and_leaves_the_rest() -> None:
    plan = plan_changes(
        scope=[NAMESPACE, DEPLOYMENT, CONFIG_MAP, WIDGET],
        present={NAMESPACE, DEPLOYMENT, CONFIG_MAP},
        differing={DEPLOYMENT},
    )
    assert plan.actions == {
        NAMESPACE: Action.UNCHANGED,
        DEPLOYMENT: Action.CONFIGURED,
        CONFIG_MAP: Action.UNCHANGED,
        WIDGET: Action.CREATED,
    }
    assert plan.sent() == {DEPLOYMENT, WIDGET}
    assert plan.prune is None


def test_a_plan_covers_only_its_scope() -> None:
    """A heal's scope is what drifted: an object outside it is neither sent nor reported."""
    plan = plan_changes(scope=[CONFIG_MAP], present={CONFIG_MAP, DEPLOYMENT}, differing=set())
    assert plan.actions == {CONFIG_MAP: Action.UNCHANGED}
    assert plan.sent() == set()


def test_a_plan_carries_the_prune_decision() -> None:
    everything = owned(CONFIG_MAP, DEPLOYMENT)
    decision = decide_prune(
        [DEPLOYMENT], everything, record_of(everything), PrunePolicy(budget_percent=50)
    )
    plan = plan_changes([DEPLOYMENT], {DEPLOYMENT}, set(), decision)
    assert plan.prune is not None and plan.prune.delete == (CONFIG_MAP,)


STEP_CASES = {
    # pass, the revision read is the one applied last, selfHeal -> step
    "a poll of a new revision syncs": (Pass.ENFORCE, False, True, Step.SYNC),
    "a poll of a new revision syncs without selfHeal": (Pass.ENFORCE, False, False, Step.SYNC),
    "a poll of the applied revision heals": (Pass.ENFORCE, True, True, Step.HEAL),
    "a poll of the applied revision without selfHeal does nothing": (
        Pass.ENFORCE,
        True,
        False,
        Step.NONE,
    ),
    "a recheck heals the applied revision": (Pass.HEAL, True, True, Step.HEAL),
    "a recheck never syncs a new revision": (Pass.HEAL, False, True, Step.NONE),
    "a recheck without selfHeal does nothing": (Pass.HEAL, True, False, Step.NONE),
    "an observing poll changes nothing": (Pass.OBSERVE, False, True, Step.NONE),
    "an observing poll of the applied revision changes nothing": (
        Pass.OBSERVE,
        True,
        True,
        Step.NONE,
    ),
    "an observing recheck changes nothing": (Pass.RECHECK, True, True, Step.NONE),
}


@pytest.mark.parametrize("case", STEP_CASES, ids=list(STEP_CASES))
def test_what_a_pass_does(case: str) -> None:
    kind, applied, self_heal, step = STEP_CASES[case]
    assert step_for(kind, applied, self_heal) == step


@pytest.mark.parametrize(
    ("enforce", "poll", "kind", "polls"),
    [
        (True, True, Pass.ENFORCE, True),
        (False, True, Pass.OBSERVE, True),
        (True, False, Pass.HEAL, False),
        (False, False, Pass.RECHECK, False),
    ],
)
def test_the_pass_of_a_mode_and_a_trigger(
    enforce: bool, poll: bool, kind: Pass, polls: bool
) -> None:
    assert Pass.of(enforce, poll) == kind
    assert kind.polls == polls


def target(key: ObjectKey) -> Target:
    return Target(key, {"metadata": {"name": key.name}}, Origin("app.yaml", 1), None)


GONE = ObjectKey("", "ConfigMap", "team", "gone")
OTHERS = ObjectKey("", "ConfigMap", "team", "others")
TARGETS = {key: target(key) for key in (CONFIG_MAP, DEPLOYMENT, WIDGET, OTHERS)}
LIVE_OBJECTS = owned(CONFIG_MAP, DEPLOYMENT, OTHERS, GONE)
LIVE = Live(
    parent={},
    owned={key: LIVE_OBJECTS[key] for key in (CONFIG_MAP, DEPLOYMENT, GONE)},
    desired={
        CONFIG_MAP: LIVE_OBJECTS[CONFIG_MAP],
        DEPLOYMENT: LIVE_OBJECTS[DEPLOYMENT],
        OTHERS: LIVE_OBJECTS[OTHERS],
        WIDGET: None,
    },
    recorded=record_of({key: LIVE_OBJECTS[key] for key in (CONFIG_MAP, DEPLOYMENT, GONE)}),
)
"""The config map is in sync, the deployment drifted, the widget is missing, a config map
of another tool's is in git, and one this source applied left git."""
MEASURED = Measurement(
    drifts=[
        Drift(DEPLOYMENT, State.MODIFIED),
        Drift(GONE, State.EXTRANEOUS),
        Drift(OTHERS, State.UNOWNED),
        Drift(WIDGET, State.MISSING),
    ],
    differing={DEPLOYMENT, OTHERS},
)
SENT_ON_SYNC = {
    CONFIG_MAP: Action.UNCHANGED,
    DEPLOYMENT: Action.CONFIGURED,
    WIDGET: Action.CREATED,
    OTHERS: Action.CONFIGURED,  # a sync refuses it, with the reason measured
}


def pruning(budget_percent: int) -> SyncSettings:
    return SyncSettings("app", prune=PrunePolicy(enabled=True, budget_percent=budget_percent))


NOTHING = Measurement([], set())
GONE_TOO = ObjectKey("", "ConfigMap", "team", "gone-too")
LABELLED = owned(CONFIG_MAP, DEPLOYMENT, GONE, GONE_TOO)
UNRECORDED = Live({}, LABELLED, LIVE.desired, record_of(owned(GONE, GONE_TOO)))
"""A parent that lost the record of the objects still in git (applied by a sync whose
record write failed): two gone."""
IN_SYNC = Live({}, {}, {CONFIG_MAP: LIVE_OBJECTS[CONFIG_MAP]}, {})
LOST = Live(LIVE.parent, LIVE.owned, LIVE.desired, LIVE.recorded, frozenset({GONE.group_kind}))
Actions = dict[ObjectKey, Action]
Prune = tuple[tuple[ObjectKey, ...], tuple[tuple[ObjectKey, Refusal], ...]]
PLAN_CASES: dict[str, tuple[Step, SyncSettings, Live, Measurement, Actions | None, Prune | None]]
PLAN_CASES = {
    # step, settings, live, measured -> the actions planned (None: no plan), the prune
    "no step writes nothing": (Step.NONE, pruning(50), LIVE, MEASURED, None, None),
    "a sync sends what differs or is absent, and prunes nothing unless asked": (
        Step.SYNC,
        SyncSettings("app"),
        LIVE,
        MEASURED,
        SENT_ON_SYNC,
        None,
    ),
    "a sync with prune deletes what left git": (
        Step.SYNC,
        pruning(50),
        LIVE,
        MEASURED,
        SENT_ON_SYNC,
        ((GONE,), ()),
    ),
    "a sync counts what it applies towards the prune budget": (
        Step.SYNC,
        pruning(50),  # half of the four it will have applied: two
        UNRECORDED,
        MEASURED,
        SENT_ON_SYNC,
        ((GONE, GONE_TOO), ()),
    ),
    "a dry-run sync counts only what the record holds": (
        Step.SYNC,
        replace(pruning(50), dry_run=True),  # half of the two recorded: one
        UNRECORDED,
        MEASURED,
        SENT_ON_SYNC,
        ((), ((GONE, Refusal.THRESHOLD), (GONE_TOO, Refusal.THRESHOLD))),
    ),
    "a sync of nothing is an empty source": (
        Step.SYNC,
        pruning(100),
        Live({}, LIVE.owned, {}, LIVE.recorded),
        NOTHING,
        {},
        ((), tuple((key, Refusal.EMPTY_SOURCE) for key in (CONFIG_MAP, GONE, DEPLOYMENT))),
    ),
    "a sync refuses to prune a kind discovery lost": (
        Step.SYNC,
        pruning(50),
        LOST,
        MEASURED,
        SENT_ON_SYNC,
        ((), ((GONE, Refusal.DISCOVERY_INCOMPLETE),)),
    ),
    "a heal sends what drifted, never another tool's object, and prunes nothing": (
        Step.HEAL,
        pruning(50),
        LIVE,
        MEASURED,
        {DEPLOYMENT: Action.CONFIGURED, WIDGET: Action.CREATED},
        None,
    ),
    "a heal with nothing drifted writes nothing": (
        Step.HEAL,
        SyncSettings("app"),
        IN_SYNC,
        NOTHING,
        None,
        None,
    ),
}


@pytest.mark.parametrize("case", PLAN_CASES, ids=list(PLAN_CASES))
def test_what_a_pass_writes(case: str) -> None:
    step, settings, live, measured, actions, prune = PLAN_CASES[case]
    targets = {key: TARGETS[key] for key in live.desired}
    plan = plan_for(settings, step, targets, live, measured)
    assert (None if plan is None else plan.actions) == actions
    decision = plan.prune if plan else None
    assert (None if decision is None else (decision.delete, decision.refused)) == prune


IMMUTABLE = replace(MEASURED, immutable={CONFIG_MAP: ("data",), DEPLOYMENT: ("spec.selector",)})
"""The config map (immutable) and the deployment (a new selector) cannot be applied."""


def test_an_immutable_change_is_refused_alone_and_holds_back_the_prune_of_its_kind() -> None:
    plan = plan_for(pruning(50), Step.SYNC, TARGETS, LIVE, IMMUTABLE)

    assert plan is not None
    assert plan.actions[CONFIG_MAP] == plan.actions[DEPLOYMENT] == Action.REFUSED
    assert plan.actions[WIDGET] == Action.CREATED  # the rest is applied
    assert "spec.selector" in plan.refused[DEPLOYMENT]
    assert "gitopsd.io/sync-options: replace-on-immutable" in plan.refused[DEPLOYMENT]
    assert plan.prune is not None and plan.prune.refused == ((GONE, Refusal.HELD_BACK),)
    assert plan.sent() == {WIDGET, OTHERS}


def test_an_immutable_change_is_replaced_when_asked_and_provably_owned() -> None:
    settings = replace(SyncSettings("app"), replace_on_immutable=True)
    plan = plan_for(settings, Step.SYNC, TARGETS, LIVE, IMMUTABLE)

    assert plan is not None
    assert plan.actions[CONFIG_MAP] == plan.actions[DEPLOYMENT] == Action.REPLACED
    assert plan.sent() == {CONFIG_MAP, DEPLOYMENT, WIDGET, OTHERS}


def test_an_object_asking_to_be_replaced_is_replaced_alone() -> None:
    asked = Target(
        DEPLOYMENT,
        {"metadata": {"name": "web", "annotations": {SYNC_OPTIONS: "replace-on-immutable"}}},
        Origin("app.yaml", 1),
        None,
    )
    plan = plan_for(SyncSettings("app"), Step.SYNC, {**TARGETS, DEPLOYMENT: asked}, LIVE, IMMUTABLE)

    assert plan is not None
    assert (plan.actions[DEPLOYMENT], plan.actions[CONFIG_MAP]) == (Action.REPLACED, Action.REFUSED)


def test_an_object_without_a_record_of_its_uid_is_never_replaced() -> None:
    settings = replace(SyncSettings("app"), replace_on_immutable=True)
    others = replace(IMMUTABLE, immutable={OTHERS: ("spec.selector",)})
    plan = plan_for(settings, Step.SYNC, TARGETS, LIVE, others)

    assert plan is not None and plan.actions[OTHERS] == Action.REFUSED
    assert plan.refused[OTHERS] == (
        "not replaced: git changes spec.selector, which cannot change once set, and this "
        "source has no record of applying the object it finds (rule: not_owned)"
    )


def test_a_heal_leaves_an_immutable_change_to_the_next_sync() -> None:
    plan = plan_for(SyncSettings("app"), Step.HEAL, TARGETS, LIVE, IMMUTABLE)

    assert plan is not None and DEPLOYMENT not in plan.actions


def test_refused_objects_of_an_unserved_kind_come_in_delete_order() -> None:
    """Namespaced before cluster-scoped, as their deletes would go, not by name."""
    everywhere = ObjectKey("example.com", "Widget", "", "everywhere")
    recorded = {everywhere: "0badc0de", WIDGET: "0badc0de"}
    policy = PrunePolicy(allow_empty=True)

    decision = decide_prune([], {}, recorded, policy, {WIDGET.group_kind})

    unseen = Refusal.DISCOVERY_INCOMPLETE
    assert decision.refused == ((WIDGET, unseen), (everywhere, unseen))


def test_a_decision_counts_what_the_source_owns_and_the_budget_it_gives() -> None:
    live = owned(*config_maps(8))

    within = decide_prune(config_maps(6), live, record_of(live), PrunePolicy())
    over = decide_prune(config_maps(5), live, record_of(live), PrunePolicy())

    assert (within.owned, within.budget, len(within.delete)) == (8, 2, 2)
    assert (over.owned, over.budget, over.delete) == (8, 2, ())


def create_only(key: ObjectKey) -> Target:
    annotations = {SYNC_OPTIONS: "create-only"}
    body = {"metadata": {"name": key.name, "annotations": annotations}}
    return Target(key, body, Origin("app.yaml", 1), None)


def test_a_create_only_object_is_created_when_absent_and_never_written_once_it_exists() -> None:
    targets = {**TARGETS, CONFIG_MAP: create_only(CONFIG_MAP), WIDGET: create_only(WIDGET)}

    plan = plan_for(SyncSettings("app"), Step.SYNC, targets, LIVE, MEASURED)

    assert plan is not None
    assert CONFIG_MAP not in plan.actions
    assert plan.actions[WIDGET] == Action.CREATED


def test_an_immutable_change_of_an_object_not_written_leaves_the_others_decided() -> None:
    targets = {**TARGETS, CONFIG_MAP: create_only(CONFIG_MAP)}

    plan = plan_for(SyncSettings("app"), Step.SYNC, targets, LIVE, IMMUTABLE)

    assert plan is not None
    assert CONFIG_MAP not in plan.actions
    assert plan.actions[DEPLOYMENT] == Action.REFUSED


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        (("spec.selector", "spec.template.metadata"), "spec.selector, spec.template.metadata"),
        ((), "a field"),
    ],
)
def test_a_refusal_names_the_immutable_fields_git_changes(
    fields: tuple[str, ...], named: str
) -> None:
    immutable = replace(MEASURED, immutable={DEPLOYMENT: fields})

    plan = plan_for(SyncSettings("app"), Step.SYNC, TARGETS, LIVE, immutable)

    assert plan is not None
    said = f"not applied: git changes {named}, which cannot change once set; to delete"
    assert plan.refused[DEPLOYMENT].startswith(said)


def test_a_sync_without_prune_names_what_it_provably_owns_that_left_git() -> None:
    """A labelled object it has no record of is not its own to name."""
    stranger = ObjectKey("", "ConfigMap", "team", "stranger")
    live = replace(LIVE, owned={**LIVE.owned, **owned(stranger)})

    plan = plan_for(SyncSettings("app"), Step.SYNC, TARGETS, live, MEASURED)

    assert plan is not None and plan.left_git == (GONE,)


ACCEPTED = FieldChange(
    "spec.replicas", 5, 3, "kube-controller-manager", ("spec", "replicas"), Decision.ACCEPT
)
EDITED = FieldChange("spec.paused", True, None, "kubectl-edit", ("spec", "paused"))


@pytest.mark.parametrize("step", [Step.SYNC, Step.HEAL])
def test_what_the_drift_policy_holds_is_held_in_the_objects_sent_only(step: Step) -> None:
    """The config map differs only where a rule accepts it: it is not sent, nothing held."""
    drifted = Drift(DEPLOYMENT, State.MODIFIED, (EDITED,), accepted=(ACCEPTED,))
    accepted = Drift(CONFIG_MAP, State.MODIFIED, accepted=(ACCEPTED,))
    measured = replace(MEASURED, drifts=[drifted, *MEASURED.drifts[1:]], held=[accepted])

    plan = plan_for(SyncSettings("app"), step, TARGETS, LIVE, measured)

    assert plan is not None and plan.held == {DEPLOYMENT: (ACCEPTED,)}
