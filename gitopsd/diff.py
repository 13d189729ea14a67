"""Exact drift: what the server would store for git's manifest, compared with what it stores.

`expected` is the server-side-apply dry-run result (server defaults included, so they are
never false drift); both sides are normalized, and Secret values are masked before anything
can print them. A cheap fingerprint decides *whether* an object drifted; deepdiff explains
*which* fields, and `metadata.managedFields` says *who* owns each drifted field now.
"""

from __future__ import annotations

import base64
import copy
import functools
import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from gitopsd.drift_policy import Decision, Item, Locator, Rule, Segment, deciding
from gitopsd.managed_fields import (
    ABSENT,
    TAKEOVER_MANAGERS,
    Path,
    added_out_of_band,
    owner,
    removal_owner,
    remove,
)
from gitopsd.masking import mask, mask_pair
from gitopsd.objects import FIELD_MANAGER, Body, ObjectKey

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
    place: Locator = field(default=(), compare=False)
    """Where the field is, for the drift policy's paths and for holding it as it is live."""
    decision: Decision = Decision.HEAL
    rule: str = ""
    """The rule that decided (its name, or where it is written); "" when none did."""


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
    accepted: tuple[FieldChange, ...] = ()
    """Fields that differ, accepted by a rule: reported as such, never healed."""
    ignored: tuple[FieldChange, ...] = ()
    """Fields that differ, ignored by a rule: no drift at all (`diff --show-ignored`)."""

    @property
    def reported(self) -> bool:
        """It is drift (exported, evented, a diff's exit code): the policy left a field that
        is, or the whole object differs."""
        return self.state != State.MODIFIED or bool(self.changes) or not self.held_whole

    @property
    def held_whole(self) -> bool:
        """Every field that differs is one the policy accepts or ignores."""
        return not self.changes and bool(self.accepted or self.ignored)

    @property
    def heals(self) -> bool:
        """A heal writes it, unless each field that differs is one the policy holds."""
        if self.state != State.MODIFIED or not (self.changes or self.accepted or self.ignored):
            return True  # no field named: an immutable field, say
        return any(change.decision == Decision.HEAL for change in self.changes)

    @property
    def held(self) -> tuple[FieldChange, ...]:
        """The fields a write sends as they are live."""
        return tuple(c for c in (*self.changes, *self.accepted, *self.ignored) if c.decision.held)


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


def unchangeable(key: ObjectKey, fields: Sequence[str], remedy: str) -> Drift:
    """git changes fields of the live object that cannot change once set; `remedy` says
    how to have it replaced."""
    named = ", ".join(fields) or "a field"
    why = f"git changes {named}, which cannot change once set; {remedy}"
    return Drift(key, State.MODIFIED, reason=why)


def extraneous(key: ObjectKey, live: Body) -> Drift:
    return Drift(key, State.EXTRANEOUS, live=mask(normalize(live)))


def explain(have: Body, want: Body, managed: list[Body], live: Body) -> Iterator[FieldChange]:
    """Each changed field, named by deepdiff, with its owner named by managedFields."""
    tree = _deepdiff().DeepDiff(
        have, want, view="tree", threshold_to_diff_deeper=0, iterable_compare_func=_same_item
    )
    for report, levels in tree.items():
        if report == "iterable_item_moved":
            continue  # the server keeps associative lists in its own order
        for level in levels:
            live_path, git_path = _path_in(level, "t1"), _path_in(level, "t2")
            for suffix, old, new in _leaves_of_change((), _side(level.t1), _side(level.t2)):
                container, path = (have, live_path) if new is ABSENT else (want, git_path)
                manager = (
                    removal_owner(managed)
                    if old is ABSENT
                    else owner(managed, live, (*live_path, *suffix))
                )
                yield FieldChange(
                    path=render_path(container, (*path, *suffix)),
                    live=None if old is ABSENT else old,
                    desired=None if new is ABSENT else new,
                    manager=manager,
                    place=locate(container, (*path, *suffix)),
                )


def _side(value: Any) -> Any:
    """One side of a change deepdiff found, its marker of a missing side read as ABSENT."""
    return ABSENT if value is _deepdiff().helper.notpresent else value


def _path_in(level: Any, side: str) -> Path:
    """`level`'s path in one side ("t1", the live object, or "t2", git's), each list index
    read from where the element is in that side's list: when named elements move, deepdiff
    gives a changed element's indices of the other side."""
    chain = [level]
    while chain[-1].up is not None:
        chain.append(chain[-1].up)
    chain.reverse()  # the root first: chain[n + 1] is what the nth step of the path reaches
    path = list(level.path(output_format="list", use_t2=side == "t2"))
    for step, segment in enumerate(path[: len(chain) - 1]):
        parent, child = getattr(chain[step], side), getattr(chain[step + 1], side)
        if isinstance(segment, int) and isinstance(parent, list):
            path[step] = next((n for n, item in enumerate(parent) if item is child), segment)
    return tuple(path)


def _leaves_of_change(path: Path, old: Any, new: Any) -> Iterator[tuple[Path, Any, Any]]:
    """A change of a whole map, or of a map into nothing, named field by field."""
    maps = [side for side in (old, new) if side is not ABSENT]
    if not maps or not all(isinstance(side, dict) for side in maps):
        yield path, old, new
        return
    old_map = old if isinstance(old, dict) else {}
    new_map = new if isinstance(new, dict) else {}
    for name in sorted(old_map.keys() | new_map.keys()):
        before, after = old_map.get(name, ABSENT), new_map.get(name, ABSENT)
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
    raise _deepdiff().helper.CannotCompare() from None


@functools.cache
def _deepdiff() -> Any:
    """Imported when a drift is first explained: deepdiff and pydantic cost 0.1 s to import."""
    import deepdiff.helper  # deepdiff itself, with its helper loaded

    return deepdiff


def render_path(body: Any, path: Path) -> str:
    """spec.template.spec.containers[name=app].image, readable and stable; a key with a dot
    or a bracket is quoted: metadata.annotations["example.com/owner"]."""
    text = ""
    for segment in locate(body, path):
        if isinstance(segment, Item):
            text += f"[name={segment.name}]" if segment.name is not None else f"[{segment.index}]"
        elif PLAIN_KEY.match(segment):
            text += f".{segment}" if text else segment
        else:
            text += f"[{json.dumps(segment)}]"
    return text


PLAIN_KEY = re.compile(r'^[^.\[\]"]+$')


def locate(body: Any, path: Path) -> Locator:
    """`path`'s place in `body`: list elements with their names, where they have one."""
    place: list[Segment] = []
    node = body
    for segment in path:
        if isinstance(segment, int):
            item = node[segment] if isinstance(node, list) and segment < len(node) else None
            name = item.get("name") if isinstance(item, dict) else None
            place.append(Item(segment, name if isinstance(name, str) else None))
            node = item
        else:
            place.append(str(segment))
            node = node.get(segment) if isinstance(node, dict) else None
    return tuple(place)


# The drift policy: each field decided by the first rule that matches it.


def decided(drift: Drift, rules: Sequence[Rule]) -> Drift:
    """`drift` with each changed field decided by `rules` (none matching: heal); what is
    ignored leaves the rendered bodies too."""
    if drift.state != State.MODIFIED or not rules:
        return drift
    decided_changes = [_decide(drift.key, change, rules) for change in drift.changes]
    kept = tuple(c for c in decided_changes if c.decision in (Decision.HEAL, Decision.ALERT))
    ignored = tuple(c for c in decided_changes if c.decision == Decision.IGNORE)
    accepted = tuple(c for c in decided_changes if c.decision == Decision.ACCEPT)
    desired = drift.desired
    if ignored and desired is not None and drift.live is not None:
        desired = held_as_live(desired, drift.live, ignored, leave_theirs=False)
    return replace(drift, changes=kept, accepted=accepted, ignored=ignored, desired=desired)


def _decide(key: ObjectKey, change: FieldChange, rules: Sequence[Rule]) -> FieldChange:
    rule = deciding(rules, key, change.place, change.manager)
    return change if rule is None else replace(change, decision=rule.action, rule=rule.label)


def held_as_live(
    body: Body, live: Body, held: Sequence[FieldChange], leave_theirs: bool = True
) -> Body:
    """`body` to send with each held field as it is `live`: absent where it is absent, or
    (`leave_theirs`) left out where another manager, not a person's edit, owns it, so that
    it keeps the field alone; otherwise at its live value."""
    sent = copy.deepcopy(body)
    for change in held:
        value = _at(live, change.place)
        theirs = leave_theirs and change.manager not in (
            FIELD_MANAGER,
            "unknown",
            *TAKEOVER_MANAGERS,
        )
        if value is ABSENT or (theirs and change.desired is not None):
            _remove(sent, change.place)
        else:
            _put(sent, change.place, copy.deepcopy(value))
        if sent.get("kind") == "Secret" and change.place[:1] == ("data",):
            _remove(sent, ("stringData", *change.place[1:]))  # it would win over data
            if sent.get("stringData") == {}:
                del sent["stringData"]
    return sent


def _at(body: Any, place: Locator) -> Any:
    node = body
    for segment in place:
        node = _child(node, segment)
        if node is ABSENT:
            break
    return node


def _child(node: Any, segment: Segment) -> Any:
    if isinstance(segment, str):
        return node.get(segment, ABSENT) if isinstance(node, dict) else ABSENT
    if not isinstance(node, list):
        return ABSENT
    index = _index(node, segment)
    return node[index] if index is not None else ABSENT


def _index(items: list[Any], element: Item) -> int | None:
    if element.name is not None:
        named = (i for i, v in enumerate(items) if isinstance(v, dict) and v.get("name"))
        return next((i for i in named if items[i]["name"] == element.name), None)
    return element.index if element.index < len(items) else None


def _remove(body: Body, place: Locator) -> None:
    parent = _at(body, place[:-1])
    last = place[-1] if place else None
    if isinstance(last, str) and isinstance(parent, dict):
        parent.pop(last, None)
    elif isinstance(last, Item) and isinstance(parent, list):
        index = _index(parent, last)
        if index is not None:
            del parent[index]


def _put(body: Body, place: Locator, value: Any) -> None:
    """Sets the field, making the maps and named elements on the way that are missing."""
    node: Any = body
    for segment, following in zip(place, (*place[1:], None), strict=True):
        empty: Any = [] if isinstance(following, Item) else {}
        if isinstance(segment, str) and isinstance(node, dict):
            if following is None:
                node[segment] = value
                return
            node = node.setdefault(segment, empty)
        elif isinstance(segment, Item) and isinstance(node, list):
            index = _index(node, segment)
            if index is None and segment.name is None:
                return  # an unnamed element that is not there: nothing to hold it in
            if index is None:
                node.append({"name": segment.name})
                index = len(node) - 1
            if following is None:
                node[index] = value
                return
            node = node[index]
        else:
            return
