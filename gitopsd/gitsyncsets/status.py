"""A set's status and Events, pure, from what its last pass did: its Ready condition (True
once every element's GitSync is applied and nothing is refused), the names of the GitSyncs
it generated, and the generation it saw. An Event is worth writing when the condition
changes, or when the pass created or deleted GitSyncs."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from gitopsd.errors import GitopsdError
from gitopsd.gitsync.status import Failure

Document = dict[str, Any]
MAX_MESSAGE = 2000


@dataclass(frozen=True)
class Outcome:
    """What a pass of a set did."""

    reason: str
    """CamelCase: Generated, or why not (DeletionBlocked, NameTaken, a failure's reason)."""
    message: str
    gitsyncs: tuple[str, ...] = ()
    """The GitSyncs the set holds now, by name."""
    created: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()

    @property
    def ready(self) -> bool:
        return self.reason == "Generated"

    @classmethod
    def failed(cls, error: GitopsdError, gitsyncs: tuple[str, ...]) -> Outcome:
        """A pass that could not generate: it wrote nothing, the set holds what it held."""
        return cls(Failure.of(error).reason, str(error), gitsyncs)


@dataclass(frozen=True)
class Event:
    reason: str
    message: str
    type: str


def status_of(generation: int, outcome: Outcome, previous: Document | None) -> Document:
    before = _ready(previous or {})
    state = "True" if outcome.ready else "False"
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    since = before["lastTransitionTime"] if before and before.get("status") == state else now
    return {
        "observedGeneration": generation,
        "conditions": [
            {
                "type": "Ready",
                "status": state,
                "observedGeneration": generation,
                "lastTransitionTime": since,
                "reason": outcome.reason,
                "message": _short(outcome.message),
            }
        ],
        "gitSyncs": sorted(outcome.gitsyncs),
        "total": len(outcome.gitsyncs),
    }


def events(previous: Document | None, status: Document, outcome: Outcome) -> list[Event]:
    """The Events the pass is worth: what it created and deleted, and a new condition."""
    found = []
    if outcome.created or outcome.deleted:
        found.append(Event("GitSyncsChanged", _changes(outcome), "Normal"))
    ready, before = _ready(status) or {}, _ready(previous or {}) or {}
    said = ("status", "reason", "message")
    if [ready.get(k) for k in said] != [before.get(k) for k in said]:
        kind = "Normal" if ready.get("status") == "True" else "Warning"
        found.append(Event(str(ready.get("reason")), str(ready.get("message")), kind))
    return found


def generated_message(count: int) -> str:
    return f"{count} GitSyncs generated" if count != 1 else "1 GitSync generated"


def _changes(outcome: Outcome) -> str:
    parts = [
        f"{verb} {', '.join(names)}"
        for verb, names in (("created", outcome.created), ("deleted", outcome.deleted))
        if names
    ]
    return _short("; ".join(parts))


def _ready(status: Document) -> Document | None:
    found: Document | None = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None
    )
    return found


def _short(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."
