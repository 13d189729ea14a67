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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import quote

from deepdiff import DeepDiff
from deepdiff.helper import CannotCompare, notpresent

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
MASK, MASK_CHANGED = "***", "*** (changed)"
TAKEOVER_MANAGERS = (
    "kubectl",
    "kubectl-edit",
    "kubectl-patch",
    "kubectl-label",
    "kubectl-annotate",
    "kubectl-set",
    "kubectl-client-side-apply",
    "kubectl-replace",
    "before-first-apply",
)
"""Managers whose edits are out-of-band by nature: fields they add count as drift, and sync
takes their fields over so that fields git does not declare are removed (as Flux does)."""

Path = tuple[Any, ...]  # dict keys and list indices, from the object's root


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
                    _removal_owner(managed) if old is notpresent else owner(managed, live, leaf)
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


# managedFields: fieldsV1 is a trie of "f:<field>", "k:<json key>", "v:<json value>" and "."


def owner(managed: list[Body], live: Body, path: Path) -> str:
    """The manager owning the field at `path` of `live`; another manager wins a tie with us."""
    best, best_depth = "unknown", -1
    for entry in managed:
        depth = _owned_depth(entry.get("fieldsV1") or {}, live, path)
        manager = str(entry.get("manager", "unknown"))
        if depth > best_depth or (depth == best_depth >= 0 and best == FIELD_MANAGER):
            best, best_depth = manager, depth
    return best


def _owned_depth(fields: Body, live: Any, path: Path) -> int:
    node, value = fields, live
    for depth, segment in enumerate(path):
        raw = _raw_key(node, value, segment)
        if raw is None:
            return depth if depth and node == {} else -1
        node = node[raw]
        value = value[segment]
    return len(path)


def _raw_key(node: Body, value: Any, segment: Any) -> str | None:
    """The fieldsV1 key that stands for `segment` of `value`, if the trie has one."""
    if isinstance(value, dict):
        return f"f:{segment}" if f"f:{segment}" in node else None
    if isinstance(value, list) and isinstance(segment, int) and segment < len(value):
        item = value[segment]
        return next((raw for raw in node if _matches(raw, item)), None)
    return None


def _matches(raw: str, item: Any) -> bool:
    if raw.startswith("k:") and isinstance(item, dict):
        keys = json.loads(raw[2:])
        return all(item.get(name) == wanted for name, wanted in keys.items())
    if raw.startswith("v:"):
        return bool(json.loads(raw[2:]) == item)
    return False


def _removal_owner(managed: list[Body]) -> str:
    """Nobody owns a removed field; the latest other manager that edited the object did it."""
    edits = [
        e for e in managed if e.get("manager") != FIELD_MANAGER and e.get("operation") == "Update"
    ]
    latest = max(edits, key=lambda e: str(e.get("time", "")), default=None)
    return str(latest["manager"]) if latest else "unknown"


def added_out_of_band(managed: list[Body], declared: Body, takeover: Sequence[str]) -> list[Path]:
    """Raw fieldsV1 paths that a takeover manager owns and git does not declare."""
    found: list[Path] = []
    for entry in managed:
        if entry.get("manager") in takeover:
            found.extend(_undeclared(entry.get("fieldsV1") or {}, declared, ()))
    return found


def _undeclared(node: Body, declared: Any, prefix: Path) -> Iterator[Path]:
    for raw, child in node.items():
        if raw == ".":
            continue
        sub = _resolve(declared, raw)
        if sub is notpresent:
            yield (*prefix, raw)
        elif isinstance(child, dict) and child:
            yield from _undeclared(child, sub, (*prefix, raw))


def _resolve(value: Any, raw: str) -> Any:
    """The part of `value` that fieldsV1 key `raw` stands for, or notpresent."""
    if raw.startswith("f:") and isinstance(value, dict):
        return value.get(raw[2:], notpresent)
    if isinstance(value, list):
        return next((item for item in value if _matches(raw, item)), notpresent)
    return notpresent


def remove(body: Body, raw_path: Path) -> None:
    """Deletes the field that a raw fieldsV1 path names, if `body` has it."""
    parent: Any = body
    for raw in raw_path[:-1]:
        parent = _resolve(parent, raw)
        if parent is notpresent:
            return
    last = raw_path[-1]
    if isinstance(parent, dict) and last.startswith("f:"):
        parent.pop(last[2:], None)
    elif isinstance(parent, list):
        parent[:] = [item for item in parent if not _matches(last, item)]


def fields_of(entry: Body) -> set[Path]:
    """The leaf paths one managedFields entry owns, as raw fieldsV1 keys."""
    return set(_leaves(entry.get("fieldsV1") or {}, ()))


def _leaves(node: Body, prefix: Path) -> Iterator[Path]:
    for raw, child in node.items():
        if raw == ".":
            yield prefix
        elif isinstance(child, dict) and child:
            yield from _leaves(child, (*prefix, raw))
        else:
            yield (*prefix, raw)


def render_raw(raw_path: Iterable[str]) -> str:
    """.spec.replicas or .spec.containers[name="app"].image, as the API server writes them."""
    text = ""
    for raw in raw_path:
        kind, _, rest = raw.partition(":")
        text += f".{rest}" if kind == "f" else f"[{rest}]"
    return text


# Secrets: values never leave this module unmasked.


def mask(body: Body) -> Body:
    """A Secret with every value replaced by ***; other kinds unchanged."""
    if body.get("kind") != "Secret":
        return body
    masked = copy.deepcopy(body)
    masked.pop("stringData", None)
    if isinstance(masked.get("data"), dict):
        masked["data"] = dict.fromkeys(masked["data"], MASK)
    return masked


def mask_pair(want: Body, have: Body) -> tuple[Body, Body]:
    """Masks both sides of a Secret; a changed value shows as '*** (changed)' in git's side."""
    if want.get("kind") != "Secret" and have.get("kind") != "Secret":
        return want, have
    wanted, had = want.get("data") or {}, have.get("data") or {}
    masked_want, masked_have = mask(want), mask(have)
    if "data" in masked_want:
        masked_want["data"] = {
            k: MASK if had.get(k) == v else MASK_CHANGED for k, v in wanted.items()
        }
    return masked_want, masked_have


def secret_values(bodies: Iterable[Body]) -> set[str]:
    """Each form a Secret value takes in text: raw, base64, decoded, JSON-escaped, URL-encoded."""
    values: set[str] = set()
    for body in bodies:
        if body.get("kind") != "Secret":
            continue
        for value in (body.get("data") or {}).values():
            values |= {str(value), _decoded(str(value))}
        for value in (body.get("stringData") or {}).values():
            values |= {str(value), base64.b64encode(str(value).encode()).decode()}
    forms = {form for value in values if len(value) >= 3 for form in _forms(value)}
    return forms


def _decoded(value: str) -> str:
    try:
        return base64.b64decode(value, validate=True).decode()
    except ValueError:
        return value


def _forms(value: str) -> set[str]:
    return {value, json.dumps(value)[1:-1], quote(value, safe="")}


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret form replaced by ***, longest first."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
