"""A source's last syncs, newest first and bounded: what a GitSync's `status.history` and
`gitopsd history` show, pure.

An entry is a sync that did something: one that applied a revision or changed objects, a
heal that wrote, a failed reconcile. A sync that changed nothing at the revision of the
newest entry (a success) adds nothing, nor does a failure the newest entry already tells:
an idle source's history, like its status, does not change.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from gitopsd.changes import Action, Outcome

Document = dict[str, Any]

MAX_SYNCS = 10
"""Entries kept."""
MAX_NAMED = 10
"""Objects an entry names per action; the rest are only counted."""
MAX_MESSAGE = 300
"""A failure's message, cut: the Ready condition carries it whole."""
NAMED = (Action.CREATED, Action.CONFIGURED, Action.PRUNED)
SUCCEEDED, FAILED = "Succeeded", "Failed"


def entry(
    revision: str,
    started_at: float,
    seconds: float,
    outcomes: Iterable[Outcome] = (),
    failure: tuple[str, str] | None = None,
) -> Document:
    """One sync: `outcomes` what it did, `failure` its (reason, message) if it failed. The
    counts name only the actions it took (a missing action is 0)."""
    done = [o for o in outcomes if o.action != Action.UNCHANGED]
    counts = Counter(str(o.action) for o in done)
    found: Document = {
        "revision": revision,
        "startedAt": timestamp(started_at),
        "durationSeconds": round(max(seconds, 0.0), 3),
        "outcome": FAILED if failure else SUCCEEDED,
    }
    if failure is not None:
        reason, message = failure
        found |= {"reason": reason, "message": _short(message)}
    found["counts"] = {str(action): counts[str(action)] for action in Action if counts[str(action)]}
    found["objects"] = {str(action): _named(done, action) for action in NAMED}
    return found


def recorded(history: list[Document], new: Document) -> list[Document]:
    """`history` with `new` in front, unless the newest entry already says it."""
    newest = history[0] if history else None
    if newest is not None and _repeats(newest, new):
        return history
    return [new, *history][:MAX_SYNCS]


def merged(current: list[Document], previous: list[Document]) -> list[Document]:
    """A GitSync's history: its source's (`current`, since the source started) after those
    its status kept from before (`previous`, written by an earlier source or replica). An
    entry the earlier history already tells (a restart's sync that changed nothing) is not
    told twice."""
    oldest = current[-1]["startedAt"] if current else None
    history = [e for e in previous if oldest is None or e.get("startedAt", "") < oldest]
    for new in reversed(current):
        history = recorded(history, new)
    return history


def in_status(history: list[Document]) -> list[Document]:
    """The entries as a status keeps them: without the objects they named. A status is
    rewritten at each change, and at a fleet's scale the names cost about a seventh of the
    time 1,000 GitSyncs take to be Ready (make bench: 58-66 s without, 71-83 s with); the
    daemon that ran the syncs names them (`gitopsd history NAME`, its control API)."""
    return [{key: value for key, value in entry.items() if key != "objects"} for entry in history]


def failing(history: list[Document]) -> bool:
    """Whether the newest entry is a failure: a success then is news, though idle."""
    return bool(history) and history[0].get("outcome") == FAILED


def _repeats(newest: Document, new: Document) -> bool:
    """A success that changed nothing at the newest success's revision, or the failure
    the newest entry is (same revision, same reason)."""
    same = (newest.get("revision"), newest.get("outcome")) == (new["revision"], new["outcome"])
    if new["outcome"] == FAILED:
        return same and newest.get("reason") == new["reason"]
    return same and not new["counts"]


def _named(outcomes: list[Outcome], action: Action) -> list[Document]:
    keys = sorted({(o.key, o.version) for o in outcomes if o.action == action})
    return [key.reference(version) for key, version in keys[:MAX_NAMED]]


def timestamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _short(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."
