"""The vocabulary of a reconcile: what it is asked, what is to be sent, what is live, what
was measured, and what came of it. Pure data, shared by the readers and the measure (which
find), the plan (which decides) and the execution (which carries the plan out)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from gitopsd import diff, inventory
from gitopsd.drift_policy import Rule, object_rules
from gitopsd.health import Health
from gitopsd.objects import (
    Body,
    GroupKind,
    Manifest,
    ObjectKey,
    Origin,
    Resource,
    body_version,
    pack,
    unpack,
    wave_of,
)
from gitopsd.sync_options import Option, options_of, unhonoured
from gitopsd.synchooks import SyncHook


@dataclass(init=False, slots=True)
class Target:
    """One desired object, ready to send: labelled as a member, namespace filled in. Its body
    is kept packed (`objects.pack`), as a revision's targets are held for as long as it is
    current; each read of `body` unpacks a copy of its own."""

    key: ObjectKey
    packed: bytes = field(repr=False)
    origin: Origin
    resource: Resource | None  # None while its CRD, created by this sync, is not served yet
    read_from: Manifest | None = field(compare=False, repr=False)
    """The manifest it was resolved from: a later revision whose file is unchanged yields
    that very manifest, and the target is kept as it is."""
    fingerprint: str = field(compare=False, repr=False)
    """The hash of the body (bodies never change after resolve)."""
    wave: int = field(compare=False)
    """Its sync wave (`objects.SYNC_WAVE_ANNOTATION`)."""
    hook: SyncHook | None = field(compare=False)
    """Its hook, if it is one (`gitopsd.synchooks`): then it is no member of the ApplySet."""
    options: frozenset[Option] = field(compare=False)
    """How it is synced (`gitopsd.sync_options`: its annotations, Argo CD's and Flux's)."""
    notices: tuple[str, ...] = field(compare=False)
    """The annotations of other tools it carries that gitopsd does not honour."""
    rules: tuple[Rule, ...] = field(compare=False)
    """Its own drift rules (`gitopsd.drift_policy`), before its source's."""
    version: str = field(compare=False)
    """The version of its apiVersion as git writes it (`v1`), for what reports name it by."""

    def __init__(
        self,
        key: ObjectKey,
        body: Body,
        origin: Origin,
        resource: Resource | None,
        read_from: Manifest | None = None,
        hook: SyncHook | None = None,
    ) -> None:
        self.key, self.packed, self.origin = key, pack(body), origin
        self.resource, self.read_from, self.hook = resource, read_from, hook
        self.fingerprint = diff.fingerprint(body)
        self.wave = wave_of(body)
        self.options, self.notices = options_of(body), unhonoured(body)
        self.rules = object_rules(body)  # checked when its manifest was read
        self.version = body_version(body)

    def writes(self, present: bool) -> bool:
        """A sync writes it: not skipped, and not create-only once it exists."""
        return Option.SKIP not in self.options and not (
            present and Option.CREATE_ONLY in self.options
        )

    @property
    def body(self) -> Body:
        return unpack(self.packed)

    @property
    def served(self) -> Resource:
        if self.resource is None:
            raise AssertionError(f"{self.key}: sent before its kind is served")
        return self.resource


@dataclass
class Live:
    """What a reader found in the cluster for one source."""

    parent: Body | None
    owned: dict[ObjectKey, Body]
    """Live objects that carry this source's ApplySet label (a claim anyone can copy)."""
    desired: dict[ObjectKey, Body | None]
    """The live object for every desired key (None: absent)."""
    recorded: inventory.Record = field(default_factory=dict)
    """What the parent records this source applied; empty when it cannot be read (a sync
    then refuses the parent)."""
    unserved: frozenset[GroupKind] = frozenset()
    """The recorded group-kinds discovery could not resolve: nothing proves them gone."""

    def find(self, key: ObjectKey) -> Body | None:
        """The live object of a desired or an owned key, if it exists."""
        return self.desired.get(key) or self.owned.get(key)

    def proven(self, key: ObjectKey) -> bool:
        """Labelled, and recorded as applied by this source with the uid it has now."""
        body = self.owned.get(key)
        return body is not None and self.recorded.get(key) == inventory.uid_prefix(body)


@dataclass(frozen=True)
class Measurement:
    drifts: list[diff.Drift]
    """Missing, modified and extraneous objects, sorted by key."""
    differing: set[ObjectKey]
    """Present targets an apply would change: a field, or which fields gitopsd owns."""
    immutable: dict[ObjectKey, tuple[str, ...]] = field(default_factory=dict)
    """Present targets whose dry-run git changes fields that cannot change once set, each
    with those fields: replaced, or refused alone."""
    held: list[diff.Drift] = field(default_factory=list)
    """Objects each of whose differing fields a rule accepts or ignores: no drift."""
    compared: int = 0
    """The objects compared with the cluster."""
    dry_run: int = 0
    """Of those, the objects dry-run now: the memo vouched for the others."""
    unchecked: frozenset[ObjectKey] = frozenset()
    """The one object a sync sends without a dry-run: all it writes, so its apply is its
    own all-or-nothing check (`measure.lone_write`)."""


class Action(StrEnum):
    CREATED = "created"
    CONFIGURED = "configured"
    UNCHANGED = "unchanged"
    PRUNED = "pruned"
    SKIPPED = "skipped"
    HOOK = "hook"
    """A sync hook ran (its detail: the phase, and how it ended)."""
    REPLACED = "replaced"
    """Deleted and created again: git changed fields that cannot change once set."""
    REFUSED = "refused"
    """Not applied: git changed fields that cannot change once set, and replacing it was
    not asked for, or it is not this source's to delete (its detail: which, and why)."""


SENT = (Action.CREATED, Action.CONFIGURED, Action.REPLACED)
"""What a plan writes."""


@dataclass(frozen=True)
class Outcome:
    key: ObjectKey
    action: Action
    detail: str = ""
    version: str = ""
    """The API version it was written or deleted at (`v1`), for reports to name it by."""


@dataclass
class ChangeSet:
    outcomes: list[Outcome] = field(default_factory=list)
    takeovers: list[str] = field(default_factory=list)
    """"<manager> lost <field>" for each field taken over from another manager."""
    applied: dict[ObjectKey, str] = field(default_factory=dict)
    """The uid prefix of each object applied or found unchanged: what the record keeps."""

    def count(self, action: Action) -> int:
        return sum(1 for outcome in self.outcomes if outcome.action == action)


class Pass(StrEnum):
    """What one reconcile is asked to do. A poll fetches the revision; a recheck, after
    watch events, measures the revision read last again."""

    OBSERVE = "observe"
    """A poll that changes nothing: `gitopsd diff`, a source in observe or warn mode."""
    ENFORCE = "enforce"
    """A poll that applies a new revision whole (and prunes), and heals the applied one."""
    RECHECK = "recheck"
    """A recheck that changes nothing."""
    HEAL = "heal"
    """A recheck that heals the applied revision's drift; it never applies a new one."""

    @classmethod
    def of(cls, enforce: bool, poll: bool) -> Pass:
        if poll:
            return cls.ENFORCE if enforce else cls.OBSERVE
        return cls.HEAL if enforce else cls.RECHECK

    @property
    def polls(self) -> bool:
        return self in (Pass.OBSERVE, Pass.ENFORCE)


@dataclass(frozen=True)
class Intent:
    """What one reconcile is asked to do, and the caller's say, while it runs, in whether
    it may go on: asked at the moment it matters, as their answers change meanwhile."""

    kind: Pass
    may_prune: Callable[[], bool] = lambda: True
    """Asked right before pruning starts: a process shutting down says no."""
    dependencies_waiting: Callable[[], str] = lambda: ""
    """Asked before a new revision is applied: why it must wait (the sources it depends on
    are not ready), or "" to go ahead."""

    @property
    def polls(self) -> bool:
        return self.kind.polls


@dataclass
class Listener:
    """What the caller hears of a reconcile while it runs."""

    on_revision: Callable[[str], None] = lambda sha: None
    """A revision was read anew (its sha; "" for a local directory)."""
    on_measured: Callable[[Measurement, Callable[[ObjectKey], Body | None]], None] = (
        lambda measurement, find: None
    )
    """The drift measured, and a lookup of the live objects it was measured against."""
    on_plan: Callable[[int], None] = lambda count: None
    """How many objects the plan covers: one outcome each is to come."""
    on_outcome: Callable[[Outcome], None] = lambda outcome: None
    """Each object of the plan, as it is done (a progress bar, a log line)."""
    on_applied: Callable[[Target, Body], None] = lambda target, result: None
    """Each object the server applied, with its answer, as it comes (on one of the threads
    that send)."""
    on_wave: Callable[[int, int], None] = lambda number, objects: None
    """A sync wave was applied (its number, and how many objects it holds); a later wave
    waits until it is healthy."""
    on_health: Callable[[Mapping[ObjectKey, Health]], None] = lambda healths: None
    """The health of a wave's objects, read again while the next wave waits for it."""
    on_fetched: Callable[[float], None] = lambda seconds: None
    """How long the fetch of the revision took (also when it failed)."""
    on_read: Callable[[int], None] = lambda objects: None
    """A new revision was read, with this many objects, before they are kept: raises to
    refuse them (a daemon's tenant over its share)."""
