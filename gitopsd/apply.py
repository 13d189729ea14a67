"""Carries a plan's applies out: tier by tier, wave by wave, what it sends.

Every object sent has passed its dry-run first, but a sync's lone write, whose apply is
its own check (`measure.lone_write`); each write carries the precondition that
keeps it to what was read (`gitopsd.ownership`), and goes out through the fan-out the
dry-run shares (`gitopsd.sending`). Deletes are `gitopsd.prune`'s.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gitopsd.backoff import jittered
from gitopsd.changes import SENT, Action, ChangeSet, Outcome, Target
from gitopsd.cluster import ApiError, Cluster, Resource, run_concurrently
from gitopsd.config import SyncSettings
from gitopsd.diff import FieldChange, held_as_live
from gitopsd.errors import ApplyError, ClusterError, ClusterReason
from gitopsd.failures import Failure, error_of, raise_for
from gitopsd.foreign_owners import find_owners
from gitopsd.immutable import changed_fields
from gitopsd.inventory import ApplySet, uid_prefix
from gitopsd.managed_fields import lost_fields, takeover_patch
from gitopsd.objects import Body, ObjectKey
from gitopsd.ownership import guarded, refusal, unowned, why
from gitopsd.plan import DEFINITIONS, Plan, Wave, not_applied, waves
from gitopsd.sending import dry_run, ready, send_each
from gitopsd.sync_options import Option

TAKEOVER_ATTEMPTS = 4
"""Tries of a takeover that a controller's writes to the same object keep outdating."""


@dataclass
class Applier:
    cluster: Cluster
    settings: SyncSettings
    live: dict[ObjectKey, Body | None]
    """Live objects for every desired key (None: absent), read just before; the objects of
    a later wave are read again right before it (the applier keeps a copy of its own)."""
    applyset: ApplySet
    """The set whose objects it may write."""
    pending_resources: Callable[[ObjectKey], Resource | None] = lambda key: None
    """Finds the resource of a kind whose CRD this sync creates, once it is served."""
    changes: ChangeSet = field(default_factory=ChangeSet)
    on_outcome: Callable[[Outcome], None] = lambda outcome: None
    """Called once per object of the plan, e.g. to draw a progress bar."""
    on_applied: Callable[[Target, Body], None] = lambda target, result: None
    """Called with each object the server applied, and its answer (projected), as it comes:
    on one of the threads that send."""
    await_wave: Callable[[Wave, list[Target]], None] = lambda wave, targets: None
    """Returns once a wave's objects are healthy; raises ApplyError when they are not."""
    on_wave: Callable[[int, int], None] = lambda number, objects: None
    """Hears of each sync wave once it is applied (its number, its objects), when a plan
    has more than one."""
    run_hooks: Callable[[list[ObjectKey]], None] = lambda keys: None
    """Runs a wave's sync hooks (`Wave.hooks`), in order; raises ApplyError when one fails."""

    def __post_init__(self) -> None:
        self.read = self.live
        """The live objects as read before the plan: --adopt takes over only those."""
        self.live = dict(self.live)

    def run(self, plan: Plan, targets: Mapping[ObjectKey, Target]) -> ChangeSet:
        """Applies what the plan sends, wave by wave and tier by tier, then runs the wave's
        sync hooks; a wave waits until the one before is healthy, then its objects are read
        again and their ownership checked anew (the Namespaces and CRDs, which go first, are
        waited for only until they are served, so what follows them is not read again).
        Objects that could not be dry-run before (their namespace or CRD comes with this
        sync) are dry-run at their tier, all of a tier before any of it is applied. Every
        write carries its precondition (`ownership`). Raises ApplyError on failure."""
        self._check_owned(plan.actions, targets)  # every object of the plan, before any write
        deferred = {k for k in plan.sent() if not ready(targets[k], targets, self.live)}
        ordered = waves(plan.actions, {key: targets[key].wave for key in plan.actions}, plan.hooks)
        waited = False
        numbered = sum(1 for wave in ordered if wave.number is not None)
        for number, wave in enumerate(ordered, start=1):
            if waited:  # time passed since the read: what this wave writes is read again
                self._read_again([key for key in wave.keys if key in plan.sent()], targets)
            for tier in wave.tiers:
                self._run_tier(tier, plan, targets, deferred)
            self.run_hooks(wave.hooks)  # each read right before it runs, as it is written
            if wave.number is not None and numbered > 1:
                self.on_wave(wave.number, len(wave.keys))
            later = number < len(ordered)
            waited = later and wave.number is not None and not self.settings.dry_run
            if waited:
                self.await_wave(wave, [targets[key] for key in wave.keys])
        return self.changes

    def _check_owned(self, keys: Iterable[ObjectKey], targets: Mapping[ObjectKey, Target]) -> None:
        """An existing object that this source does not own is taken over only with --adopt,
        and only as it was when the plan was made."""
        foreign = list(unowned(self.applyset, keys, self.live, self.read, self.settings.adopt))
        owners = find_owners(self.cluster, foreign, self.settings.confined_to or "")
        lines = [
            f"{f.key} ({targets[f.key].origin}): {why(f, owners, self.settings)}" for f in foreign
        ]
        if lines:
            raise ApplyError(lines, ClusterReason.CONFLICT)

    def _read_again(self, keys: list[ObjectKey], targets: Mapping[ObjectKey, Target]) -> None:
        """Reads the objects a later wave writes afresh (it waited for the wave before), and
        checks their ownership again: what appeared or changed hands meanwhile is refused."""
        chosen = [target for key in keys if (target := self._target(key, targets))]

        def read(target: Target) -> Body | None:
            key = target.key
            return self.cluster.get(target.served, key.namespace, key.name, projected=True)

        found = run_concurrently(chosen, read, self.settings.concurrency)
        self.live.update({target.key: body for target, body in zip(chosen, found, strict=True)})
        self._check_owned(keys, targets)

    def _run_tier(
        self,
        tier: list[ObjectKey],
        plan: Plan,
        targets: Mapping[ObjectKey, Target],
        deferred: set[ObjectKey],
    ) -> None:
        tier_targets = [self._target(key, targets) for key in tier]
        if self.settings.dry_run and any(t is None for t in tier_targets):
            self._skip_unserved(tier, tier_targets, targets)
            return
        unserved = [key for key, target in zip(tier, tier_targets, strict=True) if not target]
        if unserved:  # never skipped silently: the record and --wait would miss them
            why = "its kind is not served, though the CRD this sync applied is Established"
            lines = [f"{key} ({targets[key].origin}): {why}" for key in unserved]
            raise ApplyError(lines, ClusterReason.NOT_FOUND)
        ready_now = [t for t in tier_targets if t is not None]
        self._dry_run_deferred([t for t in ready_now if t.key in deferred])
        changed = [t for t in ready_now if plan.actions[t.key] in SENT]
        failures: list[Failure] = []
        results: dict[ObjectKey, Body] = {}
        if not self.settings.dry_run:
            self._replace([t for t in changed if plan.actions[t.key] == Action.REPLACED])
            self._take_over(changed)
            results, failures = self._apply(changed, plan.held)
        refused = self._refused_unchecked(failures, plan, targets)
        failure = error_of([f for f in failures if f.key not in refused], self.settings)
        for target in ready_now:  # what was applied is recorded, also when others failed
            action = plan.actions[target.key]
            if target.key in refused:
                self._record(target, Action.REFUSED, None, refused[target.key])
            elif action not in SENT or self.settings.dry_run or target.key in results:
                detail = plan.refused.get(target.key, "")
                self._record(target, action, results.get(target.key), detail)
        if failure is not None:
            raise failure
        self._await_definitions(ready_now)

    def _refused_unchecked(
        self, failures: list[Failure], plan: Plan, targets: Mapping[ObjectKey, Target]
    ) -> dict[ObjectKey, str]:
        """The object sent without a dry-run whose apply the server refused because git
        changes fields that cannot change: refused alone, saying which, as its dry-run
        would have had it (it is all the sync writes)."""
        refused = {}
        for failure in failures:
            live = self.live.get(failure.key)
            if failure.key in plan.unchecked and failure.immutable and live:
                declared = targets[failure.key].body
                fields = changed_fields(declared, live, failure.immutable, failure.changeable)
                refused[failure.key] = not_applied(fields, self.settings)
        return refused

    def _dry_run_deferred(self, targets: list[Target]) -> None:
        """Objects whose namespace or CRD comes with this sync, dry-run now that it is
        there: all of a tier before any of it is applied, and any failure fails the tier."""
        checked = dry_run(self.cluster, self.settings, targets, keep=False)
        raise_for(checked.failures, self.settings)

    def _target(self, key: ObjectKey, targets: Mapping[ObjectKey, Target]) -> Target | None:
        target = targets[key]
        if target.resource is None:  # a kind whose CRD an earlier tier created
            target.resource = self.pending_resources(key)
        return target if target.resource else None

    def _skip_unserved(
        self,
        tier: list[ObjectKey],
        served: Sequence[Target | None],
        targets: Mapping[ObjectKey, Target],
    ) -> None:
        """A dry run cannot send what a CRD of the same sync would make served."""
        for key, target in zip(tier, served, strict=True):
            if target is None:
                detail = "would be created after its CRD (not dry-run)"
                version = targets[key].version
                self.changes.outcomes.append(Outcome(key, Action.CREATED, detail, version))

    def _replace(self, targets: list[Target]) -> None:
        """Deletes each object whose immutable fields git changes, exactly as read (its uid
        and resourceVersion), and waits until it is gone; the apply then creates it anew."""

        def delete(target: Target) -> Body:
            key, live = target.key, self.live[target.key]
            metadata = (live or {}).get("metadata") or {}
            uid, version = str(metadata.get("uid", "")), str(metadata.get("resourceVersion", ""))
            try:
                self.cluster.delete(target.served, key.namespace, key.name, uid, version)
            except ApiError as error:
                if error.status != 409:
                    raise
                raise ClusterError(
                    "not replaced: it changed since this sync read it", ClusterReason.CONFLICT
                ) from None
            self._await_gone(target, uid)
            self.live[key] = None
            return {}

        deleted = send_each(self.cluster, targets, delete, self.settings.concurrency)
        raise_for(deleted.failures, self.settings)

    def _await_gone(self, target: Target, uid: str) -> None:
        key, deadline = target.key, time.monotonic() + self.settings.crd_timeout_seconds
        for attempt in itertools.count():
            pause = jittered(0.1, 1.0, attempt)
            found = self.cluster.get(target.served, key.namespace, key.name)
            if found is None or (found.get("metadata") or {}).get("uid") != uid:
                return
            if time.monotonic() + pause > deadline:
                why = f"not replaced: still there {self.settings.crd_timeout_seconds:g} s after"
                raise ClusterError(f"{why} its delete (finalizers?)", ClusterReason.TIMEOUT)
            time.sleep(pause)

    def _take_over(self, targets: list[Target]) -> None:
        """Moves fields that kubectl-style edits own to gitopsd, so the apply can remove them."""
        for target in targets:
            if Option.MERGE not in target.options:
                self._take_over_fields(target)

    def _take_over_fields(self, target: Target) -> None:
        """The takeover is written under the resourceVersion read: an object a controller
        wrote meanwhile (its status) is read again and its takeover made anew; one that was
        replaced is left to the apply, which refuses it by uid."""
        key, live = target.key, self.live.get(target.key)
        for attempt in range(TAKEOVER_ATTEMPTS):
            operations = takeover_patch(live) if live else None
            if not operations:
                return
            try:
                self.cluster.patch(target.served, key.namespace, key.name, operations)
                return
            except ClusterError as error:
                if error.reason != ClusterReason.CONFLICT or attempt == TAKEOVER_ATTEMPTS - 1:
                    raise
            now = self.cluster.get(target.served, key.namespace, key.name, projected=True)
            if now is None or _uid(now) != _uid(live or {}):
                return
            self.live[key] = live = now

    def _apply(
        self, targets: list[Target], held: Mapping[ObjectKey, Sequence[FieldChange]]
    ) -> tuple[dict[ObjectKey, Body], list[Failure]]:
        """The objects applied, and the failures of the others; the fields the drift
        policy holds are sent as they are live. A tier's answers are held until it ends, so
        each is kept as small as what reads it: projected, as live objects are, and for an
        object created only its identity (the record reads its uid; only a configured one
        has fields to lose). `on_applied` (the drift memo) hears each answer whole first."""
        force = self.settings.force_conflicts

        def apply(target: Target) -> Body:
            live = self.live.get(target.key)
            body = target.body
            if live and target.key in held:
                body = held_as_live(body, live, held[target.key])
            answer = write(self.cluster, target.served, body, live, force, projected=True)
            self.on_applied(target, answer)
            return answer if live else _identity(answer)

        sent = send_each(self.cluster, targets, apply, self.settings.concurrency)
        return sent.answers, sent.failures

    def _record(
        self, target: Target, action: Action, result: Body | None, detail: str = ""
    ) -> None:
        """Notes the outcome; `result` is the apply's answer (None: not sent)."""
        live = self.live.get(target.key)
        if live and result and action == Action.CONFIGURED:
            lost = lost_fields(live, result)
            self.changes.takeovers.extend(f"{target.key}: {loss}" for loss in lost)
        now = result or live
        if not self.settings.dry_run and now is not None:
            self.changes.applied[target.key] = uid_prefix(now)
        outcome = Outcome(target.key, action, detail, target.version)
        self.changes.outcomes.append(outcome)
        self.on_outcome(outcome)

    def _await_definitions(self, targets: list[Target]) -> None:
        crds = [
            t.key.name
            for t in targets
            if t.key.group_kind in DEFINITIONS and t.key.kind != "Namespace"
        ]
        if crds and not self.settings.dry_run:
            self.cluster.wait_established(crds, self.settings.crd_timeout_seconds)


def write(
    cluster: Cluster,
    resource: Resource,
    body: Body,
    live: Body | None,
    force: bool,
    projected: bool = False,
    subject: str = "",
) -> Body:
    """Server-side apply of `body` under the precondition `live` asks for (`ownership`): the
    API's answer. A refused precondition is said as what it means (after `subject`, if
    given); other errors are raised as they are."""
    try:
        return cluster.apply(
            resource, guarded(body, live), dry_run=False, force=force, projected=projected
        )
    except ApiError as error:
        why = refusal(error.status, str(error), live)
        if why is None:
            raise
        raise ClusterError(
            f"{subject}: {why}" if subject else why, ClusterReason.CONFLICT
        ) from None


def _uid(body: Body) -> str:
    return str((body.get("metadata") or {}).get("uid", ""))


def _identity(answer: Body) -> Body:
    metadata = answer.get("metadata") or {}
    return {"metadata": {k: metadata[k] for k in ("uid", "resourceVersion") if k in metadata}}
