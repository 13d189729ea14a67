"""Exact drift: what the server would store for git's manifest, compared with what it stores.

`expected` is the server-side-apply dry-run result (server defaults included, so they are
never false drift); both sides are normalized, and Secret values are masked before anything
can print them. A cheap fingerprint decides *whether* an object drifted; deepdiff explains
*which* fields, and `metadata.managedFields` says *who* owns each drifted field now.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from deepdiff import DeepDiff
from deepdiff.helper import CannotCompare, notpresent

from gitopsd.managed_fields import (
    TAKEOVER_MANAGERS,
    Path,
    added_out_of_band,
    owner,
    removal_owner,
    remove,
)
from gitopsd.masking import mask, mask_pair
from gitopsd.objects import Body, ObjectKey

SERVER_METADATA = (
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
)
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


class State(StrEnum):
    MISSING = "missing"
    MODIFIED = "modified"
    EXTRANEOUS = "extraneous"
    UNOWNED = "unowned"
    """It exists, but is not this source's to write (`reason` says whose it is)."""


@dataclass(frozen=True)
class FieldChange:
    path: str
    live: Any  # None when the field is absent live
    desired: Any  # None when git does not declare it
    manager: str  # who owns the field live, per managedFields ("unknown" if nobody)


@dataclass(frozen=True)
class Drift:
    key: ObjectKey
    state: State
    changes: tuple[FieldChange, ...] = ()
    live: Body | None = None  # normalized and masked, for rendering
    desired: Body | None = None
    conflicts: tuple[str, ...] = field(default=())
    reason: str = ""
    """Why an unowned object is not written."""


def normalize(body: Body) -> Body:
    """`body` without status, server-owned metadata and the client-side-apply annotation.
    Only the maps it changes are copied: the rest is shared with `body`, so never edit the
    result in place (copy.deepcopy it first)."""
    normal = {name: value for name, value in body.items() if name != "status"}
    if isinstance(body.get("metadata"), dict):
        metadata = {k: v for k, v in body["metadata"].items() if k not in SERVER_METADATA}
        annotations = {
            k: v for k, v in (metadata.get("annotations") or {}).items() if k != LAST_APPLIED
        }
        if annotations:
            metadata["annotations"] = annotations
        else:
            metadata.pop("annotations", None)
        normal["metadata"] = metadata
    return normal


def fingerprint(body: Body) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def compare(
    key: ObjectKey,
    expected: Body,
    live: Body,
    declared: Body,
    takeover: Sequence[str] = TAKEOVER_MANAGERS,
) -> Drift | None:
    """Drift between the dry-run result `expected` and `live`; None when they agree.

    `declared` is git's manifest: fields that a takeover manager added live and git does not
    declare are drift too, though the dry-run result keeps them (SSA keeps others' fields).
    """
    managed = live.get("metadata", {}).get("managedFields") or []
    want, have = normalize(expected), normalize(live)
    out_of_band = added_out_of_band(managed, _as_stored(declared), takeover)
    if out_of_band:
        want = copy.deepcopy(want)
        for path in out_of_band:
            remove(want, path)
    want, have = mask_pair(want, have)
    if want == have:
        return None
    changes = tuple(explain(have, want, managed, live))
    return Drift(key, State.MODIFIED, changes, live=have, desired=want) if changes else None


def _as_stored(declared: Body) -> Body:
    """The manifest as the server stores it: a Secret's stringData lands in data."""
    string_data = declared.get("stringData")
    if declared.get("kind") != "Secret" or not isinstance(string_data, dict):
        return declared
    encoded = {k: base64.b64encode(str(v).encode()).decode() for k, v in string_data.items()}
    return {**declared, "data": {**(declared.get("data") or {}), **encoded}}


def missing(key: ObjectKey, desired: Body) -> Drift:
    return Drift(key, State.MISSING, desired=mask(normalize(desired)))


def extraneous(key: ObjectKey, live: Body) -> Drift:
    return Drift(key, State.EXTRANEOUS, live=mask(normalize(live)))


# Explaining: deepdiff names each changed field; managedFields names its owner.


def explain(have: Body, want: Body, managed: list[Body], live: Body) -> Iterator[FieldChange]:
    tree = DeepDiff(
        have, want, view="tree", threshold_to_diff_deeper=0, iterable_compare_func=_same_item
    )
    for report, levels in tree.items():
        if report == "iterable_item_moved":
            continue  # the server keeps associative lists in its own order
        for level in levels:
            removed_live = level.t2 is notpresent
            path = tuple(level.path(output_format="list", use_t2=not removed_live))
            for leaf, old, new in _leaves_of_change(path, level.t1, level.t2):
                container = have if new is notpresent else want
                manager = (
                    removal_owner(managed) if old is notpresent else owner(managed, live, leaf)
                )
                yield FieldChange(
                    path=render_path(container, leaf),
                    live=None if old is notpresent else old,
                    desired=None if new is notpresent else new,
                    manager=manager,
                )


def _leaves_of_change(path: Path, old: Any, new: Any) -> Iterator[tuple[Path, Any, Any]]:
    """A change of a whole map, or of a map into nothing, named field by field."""
    maps = [side for side in (old, new) if side is not notpresent]
    if not maps or not all(isinstance(side, dict) for side in maps):
        yield path, old, new
        return
    old_map = old if isinstance(old, dict) else {}
    new_map = new if isinstance(new, dict) else {}
    for name in sorted(old_map.keys() | new_map.keys()):
        before, after = old_map.get(name, notpresent), new_map.get(name, notpresent)
        if before != after:
            yield from _leaves_of_change((*path, name), before, after)


def _same_item(first: Any, second: Any, level: Any = None) -> bool:
    """Lists of named things (containers, env, ports, volumes) match by name, not position."""
    if (
        isinstance(first, dict)
        and isinstance(second, dict)
        and "name" in first
        and "name" in second
    ):
        return bool(first["name"] == second["name"])
    raise CannotCompare() from None


def render_path(body: Any, path: Path) -> str:
    """spec.template.spec.containers[name=app].image, readable and stable."""
    text, node = "", body
    for segment in path:
        if isinstance(segment, int):
            item = node[segment] if isinstance(node, list) and segment < len(node) else None
            name = item.get("name") if isinstance(item, dict) else None
            text += f"[name={name}]" if name is not None else f"[{segment}]"
            node = item
        else:
            text += f".{segment}" if text else str(segment)
            node = node.get(segment) if isinstance(node, dict) else None
    return text
