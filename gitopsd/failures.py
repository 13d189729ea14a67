"""What one object's failed request says: the object, its file, the server's words (no
Secret value), and where many failed for one cause (a namespace that does not exist), that
cause once, with its remedy."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from gitopsd.changes import Target
from gitopsd.cluster import ApiError
from gitopsd.config import Setting, SyncSettings
from gitopsd.errors import ApplyError, ClusterError, ClusterReason
from gitopsd.masking import redact, secret_values
from gitopsd.objects import Body, ObjectKey


class Failure(NamedTuple):
    """One object's failed request: a line naming the object and its file, and why."""

    key: ObjectKey
    message: str
    reason: ClusterReason
    immutable: tuple[str, ...] = ()
    """The fields the server refused to change because they cannot change once set."""
    missing_namespace: str = ""
    """The namespace the object goes to, which does not exist ("" for other failures)."""
    changeable: tuple[str, ...] = ()
    """Of the `immutable` fields' own fields, those the server said may change."""


MISSING_NAMESPACE = re.compile(r'^namespaces "([^"]+)" not found')
SHOWN_IN_NAMESPACE = 3
"""Objects named of those a missing namespace refused; the rest are counted."""


def error_of(failures: list[Failure], settings: SyncSettings) -> ApplyError | None:
    """One error naming every failure, or None; the objects of a namespace that does not
    exist are said once, with the namespace and the remedy."""
    if not failures:
        return None
    homeless: dict[str, list[ObjectKey]] = {}
    for failure in failures:
        if failure.missing_namespace:
            homeless.setdefault(failure.missing_namespace, []).append(failure.key)
    lines = [f.message for f in failures if not f.missing_namespace]
    lines += [_no_namespace(ns, keys, settings) for ns, keys in sorted(homeless.items())]
    return ApplyError(lines, failures[0].reason)


def _no_namespace(namespace: str, keys: list[ObjectKey], settings: SyncSettings) -> str:
    named = ", ".join(str(key) for key in sorted(keys)[:SHOWN_IN_NAMESPACE])
    more = len(keys) - SHOWN_IN_NAMESPACE
    objects = f"{named} and {more} more" if more > 0 else named
    remedy = "create it, or add the Namespace to the revision"
    if namespace == settings.default_namespace:
        remedy += f", or give {settings.say(Setting.CREATE_NAMESPACE)}"
    return (
        f"namespace {namespace} does not exist, and this revision does not create it: "
        f"{len(keys)} of its objects {'goes' if len(keys) == 1 else 'go'} there ({objects}); "
        f"{remedy}"
    )


def raise_for(failures: list[Failure], settings: SyncSettings) -> None:
    error = error_of(failures, settings)
    if error is not None:
        raise error


def _missing_namespace(error: ClusterError) -> str:
    """The namespace a request's object was to go to, if the server found no such one."""
    homeless = MISSING_NAMESPACE.match(str(error)) if isinstance(error, ApiError) else None
    return homeless[1] if homeless and isinstance(error, ApiError) and error.status == 404 else ""


def attempted(target: Target, call: Callable[[Target], Body]) -> Body | Failure:
    """The answer, or the failure: the object, its file, the API's message and reason."""
    try:
        return call(target)
    except ClusterError as error:
        message = redact(str(error), secret_values([target.body]))
        api = error if isinstance(error, ApiError) else None
        immutable, changeable = (api.immutable, api.changeable) if api else ((), ())
        line = f"{target.key} ({target.origin}): {message}"
        missing = _missing_namespace(error)
        return Failure(target.key, line, error.reason, immutable, missing, changeable)
