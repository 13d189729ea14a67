"""How one object is synced, from its annotations, pure: gitopsd's `gitopsd.io/sync-options`.

Options are words separated by commas; an unknown one is refused when the manifest is read,
naming its file and line.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

SYNC_OPTIONS_ANNOTATION = "gitopsd.io/sync-options"


class Option(StrEnum):
    REPLACE_ON_IMMUTABLE = "replace-on-immutable"
    """When git changes fields that cannot change once set (a Job's template, a Deployment's
    selector), delete the object, exactly as read, and create it again."""


def annotations_of(body: Mapping[str, Any]) -> Mapping[str, Any]:
    found = (body.get("metadata") or {}).get("annotations")
    return found if isinstance(found, dict) else {}


def options_of(body: Mapping[str, Any]) -> frozenset[Option]:
    """The object's options (an invalid annotation was refused when it was read)."""
    text = annotations_of(body).get(SYNC_OPTIONS_ANNOTATION)
    words = _words(text) if isinstance(text, str) else []
    return frozenset(Option(word) for word in words if word in set(Option))


def problem(body: Mapping[str, Any]) -> str:
    """What is wrong with the object's sync options, or ""."""
    text = annotations_of(body).get(SYNC_OPTIONS_ANNOTATION)
    if text is None:
        return ""
    if not isinstance(text, str):
        return f"annotation {SYNC_OPTIONS_ANNOTATION} must be a string"
    unknown = [word for word in _words(text) if word not in set(Option)]
    if unknown:
        known = ", ".join(option.value for option in Option)
        return (
            f"annotation {SYNC_OPTIONS_ANNOTATION}: unknown option {unknown[0]!r} (known: {known})"
        )
    return ""


def _words(text: str) -> list[str]:
    return [word.strip() for word in text.split(",") if word.strip()]
