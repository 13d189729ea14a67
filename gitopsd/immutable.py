"""Fields that cannot change once set: which of them git changes. Pure.

The API server names the whole field it guards (a StatefulSet's `spec`: "updates to
statefulset spec for fields other than 'replicas', 'template', … are forbidden"; a Job's
`spec.template`); the person reading the refusal wants the field their commit changed
under it (the storage of a volumeClaimTemplate). Read from git's manifest against the live
object, as the server's dry-run was refused and answered nothing to compare.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from gitopsd.diff import render_path
from gitopsd.managed_fields import Path
from gitopsd.objects import Body


def changed_fields(
    declared: Body, live: Body, guarded: Sequence[str], changeable: Sequence[str] = ()
) -> tuple[str, ...]:
    """The fields under those the server `guarded` (refused to change once set) whose value
    git declares and the live object does not have, but those the server said may change
    (`changeable`, right under a guarded field): what an immutable-field refusal is about.
    The guarded fields themselves where git changes nothing there it can name."""
    found: list[str] = []
    for guarded_field in guarded:
        path = _server_path(guarded_field)
        for changed in _differing(_value_at(declared, path), _value_at(live, path), path):
            if len(changed) > len(path) and changed[len(path)] in changeable:
                continue
            found.append(render_path(declared, changed))
    return tuple(dict.fromkeys(found)) or tuple(guarded)


SERVER_PATH = re.compile(r"[^.\[\]]+|\[(\d+)\]")


def _server_path(field: str) -> Path:
    """A field as the API server names it (`spec.volumeClaimTemplates[0].spec`) as a path."""
    return tuple(int(m[1]) if m[1] else m[0] for m in SERVER_PATH.finditer(field))


def _value_at(body: Any, path: Path) -> Any:
    for segment in path:
        if isinstance(segment, int):
            body = body[segment] if isinstance(body, list) and segment < len(body) else None
        else:
            body = body.get(segment) if isinstance(body, dict) else None
    return body


def _differing(mine: Any, theirs: Any, path: Path) -> Iterator[Path]:
    """The leaves of `mine` (git's) that `theirs` (live) does not hold; list elements are
    matched by name where they have one, else by position."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        for key, value in mine.items():
            yield from _differing(value, theirs.get(key), (*path, key))
    elif isinstance(mine, list) and isinstance(theirs, list):
        for index, item in enumerate(mine):
            yield from _differing(item, _counterpart(item, theirs, index), (*path, index))
    elif mine != theirs and str(mine) != str(theirs):  # 80 and "80" are one port
        yield path


def _counterpart(item: Any, others: list[Any], index: int) -> Any:
    name = item.get("name") if isinstance(item, dict) else None
    if name is not None:
        return next((o for o in others if isinstance(o, dict) and o.get("name") == name), None)
    return others[index] if index < len(others) else None
