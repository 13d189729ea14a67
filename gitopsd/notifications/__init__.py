"""What gitopsd tells people of a source, pure: a `Notice` (a sync's outcome, drift detected
or healed, health degraded or recovered), the providers it goes to (`providers`), each
provider's request for it (`payloads`), and what waits to be sent (`outbox`).

A notice names objects, fields and the managers that changed them, never a value: nothing
read from a Secret, or from any object, can reach a receiver through one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

MAX_OBJECTS = 20
"""Objects a notice names; the rest are only counted."""
MAX_FIELDS = 10
"""Fields named per object."""
MAX_TEXT = 1000
"""A message (a failure's), cut: receivers show a line, not a report."""


class Topic(StrEnum):
    """What a provider may ask to hear of (its `events`)."""

    SYNC = "sync"
    FAILURE = "failure"
    DRIFT = "drift"
    HEALTH = "health"


class Kind(StrEnum):
    """What happened, as a CloudEvents type ends (io.gitopsd.KIND)."""

    SYNC_STARTED = "sync.started"
    SYNC_SUCCEEDED = "sync.succeeded"
    SYNC_FAILED = "sync.failed"
    DRIFT_DETECTED = "drift.detected"
    DRIFT_HEALED = "drift.healed"
    HEALTH_DEGRADED = "health.degraded"
    HEALTH_RECOVERED = "health.recovered"

    @property
    def topic(self) -> Topic:
        return TOPICS[self]

    @property
    def bad(self) -> bool:
        """Whether it is news of something wrong (an alert fires) rather than of a cure."""
        return self in (Kind.SYNC_FAILED, Kind.DRIFT_DETECTED, Kind.HEALTH_DEGRADED)


TOPICS = {
    Kind.SYNC_STARTED: Topic.SYNC,
    Kind.SYNC_SUCCEEDED: Topic.SYNC,
    Kind.SYNC_FAILED: Topic.FAILURE,
    Kind.DRIFT_DETECTED: Topic.DRIFT,
    Kind.DRIFT_HEALED: Topic.DRIFT,
    Kind.HEALTH_DEGRADED: Topic.HEALTH,
    Kind.HEALTH_RECOVERED: Topic.HEALTH,
}


@dataclass(frozen=True)
class Item:
    """An object a notice names (`apps/Deployment/ns/name`), with what it says of it: its
    drifted fields and their managers, or its health."""

    object: str
    fields: tuple[tuple[str, str], ...] = ()
    """(field path, the manager that changed it)."""
    health: str = ""

    def line(self) -> str:
        if self.fields:
            named = ", ".join(f"{path} (by {manager})" for path, manager in self.fields)
            return f"{self.object}: {named}"
        return f"{self.object}: {self.health}" if self.health else self.object


@dataclass(frozen=True)
class Notice:
    """One thing to tell of one source."""

    kind: Kind
    source: str
    """The source's name: its `source` label on every metric (a GitSync's namespace/name)."""
    revision: str
    time: float
    """When it happened (Unix seconds)."""
    summary: str
    """One line for people."""
    items: tuple[Item, ...] = ()
    more: int = 0
    """Objects not named (past MAX_OBJECTS)."""
    counts: dict[str, int] = field(default_factory=dict)
    """A sync's objects by action (created, configured, pruned...)."""
    reason: str = ""
    """A failure's reason (`stage/reason`)."""
    routine: bool = False
    """A sync that changed nothing and cured no failure: only a commit status needs it (a
    pending status must end), not a chat."""

    @property
    def size(self) -> int:
        """About the bytes it holds: what the outbox's bound counts."""
        named = sum(
            len(i.object) + len(i.health) + sum(len(p) + len(m) for p, m in i.fields)
            for i in self.items
        )
        return 256 + len(self.source) + len(self.revision) + len(self.summary) + named


def merged(older: Notice, newer: Notice) -> Notice:
    """What one message tells of both: drift of one object and then another, not sent yet,
    is told as one notice naming both; any other newer notice replaces the older."""
    if older.kind != newer.kind or older.kind.topic != Topic.DRIFT:
        return newer
    told = {item.object for item in newer.items}
    items, more = items_of([*newer.items, *(i for i in older.items if i.object not in told)])
    return replace(newer, items=items, more=more + older.more + newer.more)


def items_of(named: list[Item]) -> tuple[tuple[Item, ...], int]:
    """The items a notice names, bounded, and how many it leaves out."""
    return tuple(named[:MAX_OBJECTS]), max(len(named) - MAX_OBJECTS, 0)


def cut(text: str, most: int = MAX_TEXT) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."
