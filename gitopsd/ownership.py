"""Ownership at the moment of the write (docs/ARCHITECTURE.md, Trust boundaries). Pure.

A sync reads the cluster, plans, and writes, sometimes minutes later: a sync wave waits
for the one before it to be healthy. What was read may have changed by then: an object
absent when read may have been created by someone else, and an object this source owned
may have been deleted and made anew. So every write carries a precondition that the API
server itself checks, and an object is never taken because it appeared at the wrong time:

- an object absent when read is created by server-side apply under resourceVersion "1",
  which no stored object has (etcd's revisions start at 1 and its first write moves past
  it): if the object exists by then, the server answers 409 Conflict and changes nothing;
- an object present when read is written under the uid it had then: if it was deleted
  since, the server finds none (409), and if it was made anew, it refuses the changed uid
  (422: metadata.uid is immutable).

Before each later wave the objects it writes are read again and their ownership checked
once more (`unowned`), so a label taken off meanwhile is seen too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gitopsd.config import Setting, SyncSettings
from gitopsd.diff import Drift, State
from gitopsd.inventory import ApplySet
from gitopsd.objects import Body, ObjectKey, owner_of
from gitopsd.target_identity import Tool, described, same_place

ABSENT_VERSION = "1"
"""The resourceVersion that makes a server-side apply create-only (see above)."""


def guarded(body: Body, live: Body | None) -> Body:
    """`body` with the precondition that keeps its write to what was read: create-only
    when `live` is None, else only the object with `live`'s uid."""
    metadata = body["metadata"]
    if live is None:
        return {**body, "metadata": {**metadata, "resourceVersion": ABSENT_VERSION}}
    uid = (live.get("metadata") or {}).get("uid")
    return {**body, "metadata": {**metadata, "uid": uid}} if uid else body


CREATED_MEANWHILE = (
    "not created: it did not exist when this sync read the cluster and exists now, so "
    "someone else created it meanwhile; gitopsd never takes an object it did not create or "
    "own (rule: not_owned, checked at the write)"
)


def refusal(status: int, message: str, live: Body | None) -> str | None:
    """What a refused precondition means, or None when the failure is another one (an API
    error for the write `guarded(…, live)` made)."""
    if live is None and status == 409 and "has been modified" in message:
        return CREATED_MEANWHILE
    if live is not None and status == 409 and "uid mismatch" in message:
        return "not written: it was deleted since this sync read it (rule: not_owned)"
    if live is not None and status == 422 and "metadata.uid" in message:
        return (
            "not written: it was deleted and created anew since this sync read it, by "
            "someone else; gitopsd writes only the object whose ownership it checked "
            "(rule: not_owned, checked at the write)"
        )
    return None


@dataclass(frozen=True)
class Foreign:
    """An object of the revision that is not this source's to write."""

    key: ObjectKey
    owner: str | None
    """The ApplySet id its label names; None when it names none."""
    appeared: bool = False
    """It did not exist when the plan was made."""


def unowned(
    applyset: ApplySet,
    keys: Iterable[ObjectKey],
    live: Mapping[ObjectKey, Body | None],
    read: Mapping[ObjectKey, Body | None],
    adopt: bool,
) -> Iterator[Foreign]:
    """Each object of `keys` that exists in `live` and is not this source's to write: it
    carries another set's label or none. With `adopt` an object is taken over as it was
    `read` when the plan was made (the same uid), never one that appeared since."""
    for key in keys:
        body = live.get(key)
        if body is None or applyset.owns(body):
            continue
        before = read.get(key)
        if before is None:
            yield Foreign(key, owner_of(body), appeared=True)
        elif not (adopt and _same_object(body, before)):
            yield Foreign(key, owner_of(body))


@dataclass(frozen=True)
class Owner:
    """The gitopsd source another object's ApplySet label names, as its parent says."""

    applyset: ApplySet
    identity: Mapping[str, Any] | None = None
    """The target its parent records (`target_identity.identity_of`); None when its parent
    keeps none (an earlier gitopsd wrote it)."""


def why(foreign: Foreign, owners: Mapping[str, Owner], settings: SyncSettings) -> str:
    """Why `foreign` is not written, in the same words for `diff` and `sync`, and with
    remedies in the words of the place `settings` come from; `owners` are the gitopsd
    parents found for ApplySet ids. Taking an object over from another gitopsd source is
    advised only where that source is a `gitopsd sync` of this very target."""
    if foreign.appeared:
        return CREATED_MEANWHILE
    adopt = settings.say(Setting.ADOPT)
    if settings.tool == Tool.CLI:
        adopt = f"sync {adopt}"  # said by diff too
    if foreign.owner is None:
        return f"exists and no gitopsd source manages it; {adopt} takes it over (rule: not_owned)"
    owner = owners.get(foreign.owner)
    if owner is None:
        return (
            f"exists and belongs to ApplySet {foreign.owner}, whose parent is no gitopsd "
            "source this identity can read (rule: not_owned)"
        )
    parent = owner.applyset
    where = f"ConfigMap {parent.namespace}/{parent.name}"
    if _recorded_by_cli_here(owner, settings):
        return (
            f"is recorded by a `gitopsd sync` of the same repository, paths and namespace "
            f"(its parent: {where}); to take its objects over, set {adopt} (rule: not_owned)"
        )
    recorded = f", {described(owner.identity)}" if owner.identity else ""
    return (
        f"exists and is owned by another target: gitopsd source {parent.source_name} (its "
        f"parent: {where}{recorded}); {_same_target_remedy(parent, settings)}, else remove "
        "the object from that source first (rule: not_owned)"
    )


def _recorded_by_cli_here(owner: Owner, settings: SyncSettings) -> bool:
    """A daemon source or GitSync meets what a CLI sync of its own target applied."""
    identity = owner.identity
    return (
        identity is not None
        and identity.get("tool") == Tool.CLI
        and settings.tool != Tool.CLI
        and settings.identity is not None
        and same_place(identity, settings.identity)
    )


def _same_target_remedy(parent: ApplySet, settings: SyncSettings) -> str:
    """How to sync as the target that owns the object, where settings can say so."""
    if settings.tool == Tool.GITSYNC:
        return f"if it is this GitSync's target, set {settings.say(Setting.ADOPT)}"
    name = settings.say(Setting.NAME)
    return f"if this sync is that target, give it {name} {parent.source_name}"


def as_unowned(
    drifts: Iterable[Drift],
    foreign: Iterable[Foreign],
    owners: Mapping[str, Owner],
    settings: SyncSettings,
) -> list[Drift]:
    """`drifts` with each foreign object reported as unowned, and why, as a sync would
    refuse it (whether or not its fields differ)."""
    reasons = {f.key: why(f, owners, settings) for f in foreign}
    kept = [d for d in drifts if d.key not in reasons]
    marked = [
        replace(d, state=State.UNOWNED, reason=reasons.pop(d.key))
        for d in drifts
        if d.key in reasons
    ]
    marked += [Drift(key, State.UNOWNED, reason=reason) for key, reason in reasons.items()]
    return sorted(kept + marked, key=lambda d: d.key)


def _same_object(body: Body, seen: Body | None) -> bool:
    uid = (body.get("metadata") or {}).get("uid")
    return seen is not None and uid is not None and (seen.get("metadata") or {}).get("uid") == uid
