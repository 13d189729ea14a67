"""Where a source's record is: its own parent, or one an earlier gitopsd kept elsewhere.

Before targets were told apart (`gitopsd.target_identity`), a CLI sync named a source it
was given no name for after its source and paths only, and every source kept its parent in
`default` unless told otherwise. So a record may lie where gitopsd no longer looks
(`SyncSettings.earlier`, made of the source's own settings, never of anything a tenant can
edit). It is looked for once per `State`, while the source's own parent does not exist,
and taken only when it is this target's: always for a source the user named (the name is
the source), otherwise when `target_identity.claims` says so. A record another target
wrote stays where it is, and its objects stay that target's: this one reports them as
owned by another target and changes nothing of them.

A pass that writes moves the record into the source's own parent, in three steps, each
safe to cut short (the next pass carries on, told by the new parent's annotation):
1. the new parent is created, only if it is still absent, holding the earlier record and
   naming where it came from;
2. each object the earlier record proves its own (its label, and its recorded uid) is
   relabelled into the new set, under a test of that uid;
3. the earlier parent is deleted, under its uid and resourceVersion.
A pass that does not write (`gitopsd diff`, a daemon source in observe mode) reads the
earlier record where it is, as the source's own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from gitopsd import inventory
from gitopsd.apply import write
from gitopsd.cluster import ApiError, Cluster, run_concurrently
from gitopsd.config import EarlierRecord, SyncSettings
from gitopsd.errors import ClusterError, ClusterReason
from gitopsd.objects import APPLYSET_PART_OF_LABEL, Body, ObjectKey
from gitopsd.reconcile.desired import applyset_of
from gitopsd.reconcile.live import Bounds, ListReader
from gitopsd.resources import CONFIG_MAPS
from gitopsd.target_identity import TARGET_ANNOTATION, claims, identity_of

MOVED_FROM_ANNOTATION = "gitopsd.io/moved-from"
"""On a parent a move created: namespace/name of the parent its record came from."""
_LABEL_PATH = "/metadata/labels/" + APPLYSET_PART_OF_LABEL.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True)
class Move:
    """A record an earlier gitopsd kept elsewhere, to be moved into the source's parent."""

    earlier: inventory.ApplySet
    parent: Body
    """The earlier parent, as read."""
    into: inventory.ApplySet
    resumed: bool
    """The source's parent exists already: a move cut short, to be carried on."""

    def read_as_earlier(self, settings: SyncSettings) -> SyncSettings:
        """`settings` naming the earlier parent: a pass that does not write reads it."""
        name = self.earlier.source_name
        return replace(settings, name=name, inventory_namespace=self.earlier.namespace)

    @property
    def note(self) -> str:
        earlier, into = self.earlier.key, self.into.key
        return (
            f"this source's record is {earlier}, where an earlier gitopsd kept it; a sync "
            f"moves it to {into} (docs/cli.md, Records kept by earlier versions)"
        )


def parent_annotations(settings: SyncSettings) -> dict[str, str]:
    """What a parent says of its source beside the ApplySet's own: its target's identity."""
    identity = settings.identity
    return {TARGET_ANNOTATION: identity.annotation()} if identity else {}


def find(cluster: Cluster, settings: SyncSettings, desired: Iterable[ObjectKey]) -> Move | None:
    """The record to move into the source's parent, if an earlier gitopsd kept it elsewhere
    and it is this target's (or a move of it was cut short); None when there is none."""
    if not settings.earlier:
        return None
    into = applyset_of(settings)
    own = _read(cluster, into)
    if own is not None:
        return _cut_short(cluster, settings, into, own)
    for earlier in settings.earlier:
        found = _claimed(cluster, earlier, settings, desired)
        if found is not None:
            return Move(*found, into, resumed=False)
    return None


def carry_out(cluster: Cluster, move: Move, settings: SyncSettings, bounds: Bounds) -> str:
    """Moves the record (see the module's docstring) and says what it did; raises
    ClusterError if a step fails, and the next pass carries on from there. An earlier parent
    this identity may not delete is left, owning nothing any more, and said."""
    if not move.resumed:
        _create(cluster, move, settings)
    _relabel(cluster, move, settings, bounds)
    moved = f"moved {move.earlier.key} to {move.into.key}"
    metadata, earlier = move.parent["metadata"], move.earlier
    try:
        cluster.delete(
            CONFIG_MAPS,
            earlier.namespace,
            earlier.name,
            metadata["uid"],
            metadata["resourceVersion"],
        )
    except ClusterError as error:
        if error.reason != ClusterReason.FORBIDDEN:
            raise
        return f"{moved}; the earlier parent, which now owns nothing, is yours to delete ({error})"
    return moved


def _claimed(
    cluster: Cluster, earlier: EarlierRecord, settings: SyncSettings, desired: Iterable[ObjectKey]
) -> tuple[inventory.ApplySet, Body] | None:
    """The earlier parent and its ApplySet, if it is gitopsd's, was written by a gitopsd that
    kept no target identity, and is this target's."""
    applyset = inventory.ApplySet.of_source(earlier.name, earlier.namespace)
    parent = _read(cluster, applyset)
    if parent is None or applyset.foreign(parent) or identity_of(parent) is not None:
        return None
    ours = earlier.named or claims(inventory.recorded(parent), desired, settings.default_namespace)
    return (applyset, parent) if ours else None


def _cut_short(
    cluster: Cluster, settings: SyncSettings, into: inventory.ApplySet, own: Body
) -> Move | None:
    """The move the source's parent says it came from, if that is one of the source's own
    earlier places and the earlier parent is still there."""
    came_from = ((own.get("metadata") or {}).get("annotations") or {}).get(MOVED_FROM_ANNOTATION)
    for earlier in settings.earlier:
        applyset = inventory.ApplySet.of_source(earlier.name, earlier.namespace)
        if came_from != f"{applyset.namespace}/{applyset.name}":
            continue
        parent = _read(cluster, applyset)
        if parent is not None and not applyset.foreign(parent):
            return Move(applyset, parent, into, resumed=True)
    return None


def _create(cluster: Cluster, move: Move, settings: SyncSettings) -> None:
    """The source's parent, holding the earlier record: created only while absent."""
    earlier = move.earlier
    annotations = {
        **parent_annotations(settings),
        MOVED_FROM_ANNOTATION: f"{earlier.namespace}/{earlier.name}",
    }
    parent = move.into.parent(inventory.recorded(move.parent), b"", annotations)
    write(cluster, CONFIG_MAPS, parent, None, True, subject=str(move.into.key))


def _relabel(cluster: Cluster, move: Move, settings: SyncSettings, bounds: Bounds) -> None:
    """Relabels every object the earlier record proves its own into the new set; one
    replaced or gone since it was read is left alone (its uid no longer passes the test)."""
    live = ListReader(cluster, settings.concurrency, bounds).read(move.earlier, {})
    proven = [(key, body) for key, body in live.owned.items() if live.proven(key)]

    def relabel(member: tuple[ObjectKey, Body]) -> None:
        key, body = member
        resource = cluster.discovery.preferred(key.group_kind)
        if resource is None:
            return  # not served now: it stays recorded, and is relabelled by a later move
        uid = body["metadata"]["uid"]
        operations = [
            {"op": "test", "path": "/metadata/uid", "value": uid},
            {"op": "replace", "path": _LABEL_PATH, "value": move.into.id},
        ]
        try:
            cluster.patch(resource, key.namespace, key.name, operations)
        except ApiError as error:
            if error.status not in (404, 422):
                raise ClusterError(f"{key}: not moved into {move.into.key}: {error}") from None

    run_concurrently(proven, relabel, settings.concurrency)


def _read(cluster: Cluster, applyset: inventory.ApplySet) -> Body | None:
    """The parent, or None when it is absent or this identity may not read it (a user with
    rights in one namespace only reads no record kept in `default`)."""
    try:
        return cluster.get(CONFIG_MAPS, applyset.namespace, applyset.name)
    except ClusterError as error:
        if error.reason == ClusterReason.FORBIDDEN:
            return None
        raise
