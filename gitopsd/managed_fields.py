"""managedFields: which manager owns which field of a live object (Server-Side Apply).

fieldsV1 is a trie of "f:<field>", "k:<json key>", "v:<json value>" and ".". Drift names the
owner of each changed field from it; a sync takes over the fields of the takeover managers
(kubectl's edits, as Flux does) and reports what others lost; `owned_version` tells which
changes of a live object a dry-run of gitopsd's apply could find. Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any

from gitopsd.objects import FIELD_MANAGER, Body

Path = tuple[Any, ...]
"""A field's place: dict keys and list indices from the object's root (or, as a raw path,
fieldsV1 keys)."""

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


class _Absent:
    """Where a field is not: unlike None, no value a body can hold."""

    def __repr__(self) -> str:
        return "absent"


ABSENT = _Absent()


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
        keys = _key_value(raw)
        return isinstance(keys, dict) and all(
            item.get(name) == wanted for name, wanted in keys.items()
        )
    if raw.startswith("v:"):
        return bool(_key_value(raw) == item)
    return False


CACHED_KEY_CHARS = 256
"""Longer keys are parsed each time: a tenant's custom resource may key a list by any
string, and the cache holds at most 4,096 keys of at most this size (about 1 MiB)."""


def _key_value(raw: str) -> Any:
    return _parsed(raw) if len(raw) <= CACHED_KEY_CHARS else json.loads(raw[2:])


@lru_cache(maxsize=4096)
def _parsed(raw: str) -> Any:
    """The JSON of a list item's key (`k:{"name":"app"}`) or value: the same few keys come
    in every object of a kind, and each watch event of one that changed matches them again.
    Only compared, never changed: a cached answer is shared."""
    return json.loads(raw[2:])


def removal_owner(managed: list[Body]) -> str:
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
        if sub is ABSENT:
            yield (*prefix, raw)
        elif isinstance(child, dict) and child:
            yield from _undeclared(child, sub, (*prefix, raw))


def _resolve(value: Any, raw: str) -> Any:
    """The part of `value` that fieldsV1 key `raw` stands for, or ABSENT."""
    if raw.startswith("f:") and isinstance(value, dict):
        return value.get(raw[2:], ABSENT)
    if isinstance(value, list):
        return next((item for item in value if _matches(raw, item)), ABSENT)
    return ABSENT


def remove(body: Body, raw_path: Path) -> None:
    """Deletes the field that a raw fieldsV1 path names, if `body` has it."""
    parent: Any = body
    for raw in raw_path[:-1]:
        parent = _resolve(parent, raw)
        if parent is ABSENT:
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


def gitopsd_fields(body: Body) -> set[Path]:
    managed = (body.get("metadata") or {}).get("managedFields") or []
    entries = [
        e for e in managed if e.get("manager") == FIELD_MANAGER and e.get("operation") == "Apply"
    ]
    return set().union(*(fields_of(e) for e in entries))


def same_ownership(expected: Body, live: Body) -> bool:
    """Unchanged means gitopsd already owns exactly the fields the apply would give it."""
    return gitopsd_fields(expected) == gitopsd_fields(live)


def lost_fields(live: Body, result: Body) -> list[str]:
    """'<manager> lost <field>' for each field another manager owned and gitopsd now owns."""
    ours = gitopsd_fields(result)
    lost: list[str] = []
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        if entry.get("manager") == FIELD_MANAGER:
            continue
        for path in sorted(fields_of(entry) & ours):
            lost.append(f"{entry.get('manager')} lost {render_raw(path)}")
    return lost


def takeover_patch(live: Body) -> list[Body] | None:
    """A JSON patch merging takeover managers' entries into gitopsd's Apply entry, if any."""
    metadata = live.get("metadata") or {}
    managed: list[Body] = metadata.get("managedFields") or []
    ours = next(
        (e for e in managed if e.get("manager") == FIELD_MANAGER and e.get("operation") == "Apply"),
        None,
    )
    theirs = [e for e in managed if e.get("manager") in TAKEOVER_MANAGERS]
    if ours is None or not theirs:
        return None
    merged = dict(ours)
    for entry in theirs:
        merged["fieldsV1"] = _merge_fields(
            merged.get("fieldsV1") or {}, entry.get("fieldsV1") or {}
        )
    kept = [merged if e is ours else e for e in managed if e not in theirs]
    return [
        {"op": "test", "path": "/metadata/resourceVersion", "value": metadata["resourceVersion"]},
        {"op": "replace", "path": "/metadata/managedFields", "value": kept},
    ]


def _merge_fields(ours: Body, theirs: Body) -> Body:
    merged = dict(ours)
    for key, child in theirs.items():
        merged[key] = (
            _merge_fields(merged.get(key) or {}, child) if isinstance(child, dict) else child
        )
    return merged


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""kubectl's copy of its manifest: a takeover manager owns it, drift ignores it."""
NOT_THERE = "\x00absent"
"""In a digest, where an owned field is not (any more): a value no JSON document holds."""


def owned_version(body: Body) -> str:
    """A digest of what a dry-run of gitopsd's apply could find different in `body`: the
    fieldsets of gitopsd's and the takeover managers' entries (not when they were written)
    and the values at them, and the uid. A status write, or a field or annotation another
    manager owns, leaves it; a field another manager takes from gitopsd moves gitopsd's
    fieldset, so it moves it. Equal for a whole body and its projection (neither status nor
    kubectl's last-applied copy count: drift ignores both)."""
    metadata = body.get("metadata") or {}
    read = _as_drift_reads(body)
    entries = [
        [str(entry.get(word, "")) for word in ("manager", "operation", "subresource", "apiVersion")]
        + [fields, _owned_values(fields, read)]
        for entry in metadata.get("managedFields") or []
        if _counts(entry) and isinstance(fields := entry.get("fieldsV1"), dict)
    ]
    entries.sort(key=lambda entry: entry[:4])
    text = json.dumps([metadata.get("uid"), entries], sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _counts(entry: Body) -> bool:
    """gitopsd's and the takeover managers' entries, status aside (drift ignores status)."""
    manager = entry.get("manager")
    takes = manager == FIELD_MANAGER or manager in TAKEOVER_MANAGERS
    return takes and entry.get("subresource") != "status"


def _as_drift_reads(body: Body) -> Body:
    """`body` without status and kubectl's last-applied copy: what drift ignores, and a
    projection drops. A Secret's stringData is written into its data and never read back,
    so gitopsd's fields under it read data's values: another manager's change of them
    (which takes no field of gitopsd's) moves the version too."""
    metadata = dict(body.get("metadata") or {})
    annotations = metadata.pop("annotations", None) or {}
    kept = {name: text for name, text in annotations.items() if name != LAST_APPLIED}
    if kept:
        metadata["annotations"] = kept
    reads = {**{name: v for name, v in body.items() if name != "status"}, "metadata": metadata}
    if body.get("kind") == "Secret" and "stringData" not in body:
        reads["stringData"] = body.get("data") or {}
    return reads


def _owned_values(node: Body, value: Any) -> Any:
    """`value` cut down to the fields trie `node` names: a leaf is its whole value, a node
    whose only child is "." its presence (the rest are others' keys)."""
    if not node:
        return value
    found: dict[str, Any] = {}
    for raw, child in node.items():
        if raw == ".":
            continue
        sub = _resolve(value, raw)
        found[raw] = NOT_THERE if sub is ABSENT else _owned_values(child, sub)
    return found if found else type(value).__name__
