"""diff: what differs between git and the cluster, measured by server-side dry-run.

An object is dry-run only when its git body changed since the memo last measured it, or
what a dry-run could find different in the live object (`managed_fields.owned_version`):
a controller's status, or a field or annotation another manager owns, costs none. The
daemon's own writes seed the memo, so they cost no second dry-run. What the memo found in
sync outlives the process as stamps in the ApplySet parent, so that a later `gitopsd diff`
or `sync`, or a daemon starting, dry-runs only what changed since.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from gitopsd import diff, inventory
from gitopsd.changes import Live, Measurement, Target
from gitopsd.cluster import Cluster
from gitopsd.config import SyncSettings
from gitopsd.errors import ApplyError
from gitopsd.failures import Failure, raise_for
from gitopsd.foreign_owners import find_owners
from gitopsd.immutable import changed_fields
from gitopsd.managed_fields import TAKEOVER_MANAGERS, owned_version, same_ownership
from gitopsd.objects import Body, ObjectKey
from gitopsd.ownership import Owner, as_unowned, unowned
from gitopsd.plan import replacing
from gitopsd.sending import dry_run, ready
from gitopsd.sync_options import Option, options_of


def resource_version(key: ObjectKey, live: Body) -> str:
    return str((live.get("metadata") or {}).get("resourceVersion", ""))


@dataclass
class OwnedVersions:
    """Each object's versions as `OWNED@CONTENT` (see DriftMemo): its `owned_version`,
    computed once per resourceVersion (a body read and the same object in a write's answer
    are one state), and its resourceVersion."""

    known: dict[ObjectKey, tuple[str, str]] = field(default_factory=dict)

    def __call__(self, key: ObjectKey, live: Body) -> str:
        version = resource_version(key, live)
        held = self.known.get(key)
        if held is None or held[0] != version:
            held = self.known[key] = (version, owned_version(live))
        return f"{held[1]}@{version}"


@dataclass(frozen=True)
class Measured:
    """One present object as its last dry-run found it."""

    drift: diff.Drift | None
    """The fields that differ, if any."""
    owned_as_declared: bool
    """gitopsd owns exactly the fields it would apply: nothing to take over or give up."""
    immutable: tuple[str, ...] = ()
    """The fields git changes that cannot change once set: the dry-run was refused."""

    @property
    def in_sync(self) -> bool:
        return self.drift is None and self.owned_as_declared


IN_SYNC = Measured(None, owned_as_declared=True)
ABSENT = "absent"
"""The version the memo keeps for an object that does not exist: no resourceVersion is it."""


def stamp(fingerprint: str, version: str) -> bytes:
    """Vouches that the object whose owned version (`managed_fields.owned_version`) is
    `version` was in sync with the git body of `fingerprint`: the server's dry-run of that
    body against that object changed nothing. (Stamps made of resourceVersions, as before,
    match none: each such object is dry-run once more.)"""
    text = f"{fingerprint}@{version}".encode()
    return hashlib.blake2b(
        text, digest_size=inventory.STAMP_BYTES, person=b"gitopsd-in-sync"
    ).digest()


@dataclass
class DriftMemo:
    """The drift found per object, valid while git's body and the live object's version stay
    put: an unchanged object costs no dry-run. `version_of` names the version of the body
    measured (never a newer one the watch has seen since: that edit would pass for measured),
    as `OWNED@CONTENT`: its owned version, which moves only with what a dry-run could find
    different, and a version of everything but its status (the watch cache's; else the
    resourceVersion). In sync holds while the owned version holds; drift found is measured
    again once the content moved too, since it names live values other managers may own."""

    version_of: Callable[[ObjectKey, Body], str] = field(default_factory=OwnedVersions)
    seen: dict[ObjectKey, tuple[str, str, Measured]] = field(default_factory=dict)
    fresh_at: dict[ObjectKey, tuple[tuple[str, str, Measured], str]] = field(default_factory=dict)
    """The entry of `seen` last found fresh, and the resourceVersion it was found fresh at:
    the same entry at the same resourceVersion is fresh without its versions computed (a
    drift check at 10,000 objects asks each of them)."""

    def fresh(self, target: Target, live: Body) -> bool:
        key, entry = target.key, self.seen.get(target.key)
        if entry is None or entry[0] != target.fingerprint:
            return False
        at = resource_version(key, live)
        judged = self.fresh_at.get(key)
        if judged is not None and judged[0] is entry and judged[1] == at and at:
            return True
        fresh = entry[1] == self._version(key, live, entry[2])
        if fresh:
            self.fresh_at[key] = (entry, at)
        return fresh

    def remember(self, target: Target, live: Body, measured: Measured) -> None:
        version = self._version(target.key, live, measured)
        self.seen[target.key] = (target.fingerprint, version, measured)

    def measured_at(self, key: ObjectKey, live: Body) -> str | None:
        """The git fingerprint the object was last measured with, if it was measured at the
        version `live` has now (whatever git says since)."""
        fingerprint, version, measured = self.seen.get(key, ("", "", IN_SYNC))
        return fingerprint if version and version == self._version(key, live, measured) else None

    def measured_all(self, bodies: Mapping[ObjectKey, Body | None]) -> bool:
        """Whether each of `bodies` is there, at the version it was last measured at."""
        return all(b is not None and self.measured_at(k, b) is not None for k, b in bodies.items())

    def _version(self, key: ObjectKey, live: Body, measured: Measured) -> str:
        versions = self.version_of(key, live)
        return versions.partition("@")[0] if measured.in_sync else versions

    def forget(self, key: ObjectKey) -> None:
        self.seen.pop(key, None)
        self.fresh_at.pop(key, None)

    def recall(self, key: ObjectKey) -> Measured:
        return self.seen[key][2] if key in self.seen else IN_SYNC

    def remember_absent(self, target: Target, answer: Body) -> None:
        """An absent target's dry-run, as a create: what the server would store."""
        drift = diff.missing(target.key, answer)
        self.seen[target.key] = (target.fingerprint, ABSENT, Measured(drift, False))

    def missing(self, target: Target) -> diff.Drift | None:
        """What the server would store of an absent target, if its dry-run of this very body
        is remembered."""
        fingerprint, version, measured = self.seen.get(target.key, ("", "", IN_SYNC))
        fresh = (fingerprint, version) == (target.fingerprint, ABSENT)
        return measured.drift if fresh else None

    def stamps(self) -> dict[ObjectKey, bytes]:
        """A stamp for every object last found in sync, for the parent to keep."""
        return {
            key: stamp(fingerprint, version)
            for key, (fingerprint, version, measured) in self.seen.items()
            if measured.in_sync
        }

    def adopt(
        self,
        stamps: Mapping[ObjectKey, bytes],
        targets: Mapping[ObjectKey, Target],
        live: Mapping[ObjectKey, Body | None],
    ) -> None:
        """Remembers as in sync each target that has the git body and live version a stamp
        was made for: anything else changed since, and is measured."""
        for key, made in stamps.items():
            target, body = targets.get(key), live.get(key)
            if target is None or body is None or key in self.seen:
                continue
            version = self.version_of(key, body).partition("@")[0]
            if made == stamp(target.fingerprint, version):
                self.seen[key] = (target.fingerprint, version, IN_SYNC)

    def keep_only(self, keys: Iterable[ObjectKey]) -> None:
        """Forgets objects that left git."""
        for key in self.seen.keys() - keys:
            del self.seen[key]
            self.fresh_at.pop(key, None)


def measure(
    cluster: Cluster,
    settings: SyncSettings,
    targets: Mapping[ObjectKey, Target],
    live: Live,
    memo: DriftMemo,
    validate_missing: bool = False,
    syncing: bool = False,
) -> Measurement:
    """Dry-runs every present target the memo has not measured in its current state, and
    every absent one that can be, as a create (`validate_missing`, a pass that may write:
    each of them, as a sync sends nothing unless all pass; else those whose body the memo
    has not dry-run), then names what differs, as the drift policy decides: a missing
    object as the server would store it. Targets a sync never writes (skip, or create-only
    once present) are not measured; nor, `syncing`, the sync's lone write (`lone_write`)."""
    present = {
        key: body
        for key, body in live.desired.items()
        if body is not None and targets[key].resource and targets[key].writes(present=True)
    }
    stale = [targets[key] for key, body in present.items() if not memo.fresh(targets[key], body)]
    ready_absent = _ready_absent(targets, live)
    absent = ready_absent
    if not validate_missing:
        absent = [target for target in absent if memo.missing(target) is None]
    lone = lone_write(settings, targets, live, memo, present, stale) if syncing else None
    unchecked = frozenset({lone.key} if lone else ())
    stale = [target for target in stale if target.key not in unchecked]
    absent = [target for target in absent if target.key not in unchecked]
    _dry_run(cluster, settings, stale, absent, live, memo)
    memo.keep_only(targets)
    measured = {key: memo.recall(key) for key in present}
    modified = [
        diff.decided(m.drift, (*targets[key].rules, *settings.drift_rules))
        for key, m in measured.items()
        if m.drift
    ]
    drifts = [
        *_missing(targets, live, memo),
        *(d for d in modified if d.reported),
        *_extraneous(targets, live),
    ]
    return Measurement(
        sorted(drifts, key=lambda d: d.key),
        differing={key for key, m in measured.items() if not m.in_sync} | unchecked,
        immutable={key: m.immutable for key, m in measured.items() if m.immutable},
        held=[drift for drift in modified if not drift.reported],
        compared=len(present) + len(ready_absent),
        dry_run=len(stale) + len(absent),
        unchecked=unchecked,
    )


def lone_write(
    settings: SyncSettings,
    targets: Mapping[ObjectKey, Target],
    live: Live,
    memo: DriftMemo,
    present: Iterable[ObjectKey],
    stale: list[Target],
) -> Target | None:
    """The object a sync would write without a dry-run, where it is all the sync writes
    (nothing else to create or configure, nothing left git to prune) and its dry-run would
    only check it: present as the memo last measured it with a new git body, no drift rule
    to hold its fields and no replace asked for. Its apply is then its own all-or-nothing
    check. An object whose live version moved since it was measured is dry-run: that
    dry-run measures drift, and diff and metrics show it; so is an absent one, whose
    dry-run as a create is what its drift says (what the server would store) and whose
    refusal leaves no drift reported, as for any revision that cannot be applied."""
    if settings.dry_run or any(key not in targets for key in (*live.owned, *live.recorded)):
        return None
    absent = [t for k, t in targets.items() if live.desired[k] is None and t.writes(False)]
    differing = {key for key in present if not memo.recall(key).in_sync}
    writes = {t.key for t in absent} | {t.key for t in stale} | differing
    if len(writes) != 1 or absent or not stale:
        return None
    lone = stale[0]
    held = lone.rules or settings.drift_rules
    replaced = settings.replace_on_immutable or Option.REPLACE_ON_IMMUTABLE in lone.options
    return lone if _new_body(memo, lone, live) and not held and not replaced else None


def _new_body(memo: DriftMemo, target: Target, live: Live) -> bool:
    """Measured last at the live version it has now, with another git body."""
    current = live.desired[target.key]
    measured = memo.measured_at(target.key, current) if current is not None else None
    return measured is not None and measured != target.fingerprint


def _dry_run(
    cluster: Cluster,
    settings: SyncSettings,
    stale: list[Target],
    absent: list[Target],
    live: Live,
    memo: DriftMemo,
) -> None:
    """Dry-runs the stale targets (and checks the absent ones), and remembers what each
    stale one measured: its drift, or the fields git changes that cannot change. Any other
    failure fails them all."""
    chosen = {target.key: target for target in (*stale, *absent)}
    sent = dry_run(cluster, settings, chosen.values())
    refused = {f.key: _changed(f, chosen[f.key], live) for f in sent.failures if f.immutable}
    raise_for([f for f in sent.failures if not f.immutable], settings)
    expected = sent.answers
    for target in absent:
        if target.key in expected:
            memo.remember_absent(target, expected.pop(target.key))
    for target in stale:
        current = live.desired[target.key]
        assert current is not None  # noqa: S101 - only present targets are stale
        fields = refused.pop(target.key, ())
        if fields:
            drift = diff.unchangeable(target.key, fields, replacing(settings))
            memo.remember(target, current, Measured(drift, False, fields))
            continue
        answer = expected.pop(target.key)
        current = _as_the_dry_run_saw_it(cluster, target, current, answer, live)
        takeover = () if Option.MERGE in target.options else TAKEOVER_MANAGERS
        found = diff.compare(target.key, answer, current, target.body, takeover)
        memo.remember(target, current, Measured(found, same_ownership(answer, current)))
    if refused:  # an absent object cannot have a field that cannot change: say so
        raise ApplyError(
            [f"{key}: refused: {', '.join(fields)}" for key, fields in refused.items()]
        )


def _changed(refused: Failure, target: Target, live: Live) -> tuple[str, ...]:
    """The fields git changes of those the server refused to change: the server names the
    whole field it guards (a StatefulSet's `spec`), the diff names what git changes under it
    (its volumeClaimTemplates' storage)."""
    current = live.desired.get(target.key) or {}
    return changed_fields(target.body, current, refused.immutable, refused.changeable)


def _as_the_dry_run_saw_it(
    cluster: Cluster, target: Target, read: Body, answer: Body, live: Live
) -> Body:
    """The live object the dry-run was made on. A dry-run answers with the version the
    server holds; another means the object changed after it was read (a heal of the
    daemon's own, whose watch event has not arrived yet), and comparing with what was read
    would find drift that is gone: it is read again, and the newer body stands in."""
    key = target.key
    if resource_version(key, answer) == resource_version(key, read):
        return read
    newer = cluster.get(target.served, key.namespace, key.name, projected=True)
    if newer is None:  # deleted since: its event follows, and the next check sees it gone
        return read
    live.desired[key] = newer
    return newer


def _missing(targets: Mapping[ObjectKey, Target], live: Live, memo: DriftMemo) -> list[diff.Drift]:
    """Each absent target as the server would store it, where it could be dry-run; as git
    has it where not yet (its namespace or CRD comes with the sync)."""
    return [
        memo.missing(target) or diff.missing(key, target.body)
        for key, target in targets.items()
        if live.desired[key] is None and target.writes(present=False)
    ]


def _extraneous(targets: Mapping[ObjectKey, Target], live: Live) -> list[diff.Drift]:
    """What this source provably applied and git no longer holds (unless it asks not to be
    reported once it left git)."""
    return [
        diff.extraneous(key, body)
        for key, body in live.owned.items()
        if key not in targets
        and live.proven(key)
        and Option.IGNORE_EXTRANEOUS not in options_of(body)
    ]


def with_owners(
    cluster: Cluster,
    settings: SyncSettings,
    applyset: inventory.ApplySet,
    targets: Mapping[ObjectKey, Target],
    live: Live,
    measurement: Measurement,
    known: dict[str, Owner | None],
) -> Measurement:
    """`measurement` with every present object a sync would write that is not this source's
    reported as unowned, with the reason a sync would give for refusing it (one it never
    writes, create-only once it exists, it never refuses); owners are looked up once
    (`known`), and only where the source may look (a confined one: its namespace)."""
    written = [key for key, body in live.desired.items() if body and targets[key].writes(True)]
    foreign = list(unowned(applyset, written, live.desired, live.desired, settings.adopt))
    if not foreign:
        return measurement
    owners = find_owners(cluster, foreign, settings.confined_to or "", known)
    return replace(measurement, drifts=as_unowned(measurement.drifts, foreign, owners, settings))


def _ready_absent(targets: Mapping[ObjectKey, Target], live: Live) -> list[Target]:
    """The absent targets a dry-run can check now (see sending.ready)."""
    desired = live.desired
    return [
        t
        for k, t in targets.items()
        if desired[k] is None and t.writes(present=False) and ready(t, targets, desired)
    ]
