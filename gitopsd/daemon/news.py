"""What of a source's reconciles is news for people, as notices: a sync that starts and how it
ends, drift detected and healed, health degraded and recovered. Told once each: an idle
source, a failure that repeats, a drift still there, tell nothing new (the history's rule).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from gitopsd.changes import Action, Outcome
from gitopsd.diff import Drift
from gitopsd.health import Health, Status
from gitopsd.notifications import MAX_FIELDS, Item, Kind, Notice, cut, items_of
from gitopsd.objects import ObjectKey
from gitopsd.reconcile import Result, Step

NAMED = (Action.CREATED, Action.CONFIGURED, Action.REPLACED, Action.PRUNED)
"""What a sync's notice names objects for (counted too: unchanged ones are not)."""


@dataclass
class News:
    source: str
    tell: Callable[[Notice], None]
    failure: tuple[str, str] | None = None
    """The (revision, reason) of the failure told last, until a success."""
    drifted: frozenset[ObjectKey] = frozenset()
    """The objects whose drift was told, as measured last."""
    degraded: frozenset[ObjectKey] | None = None
    """The objects told Failed; None before the first assessment."""

    def started(self, revision: str, objects: int) -> None:
        self._tell(Kind.SYNC_STARTED, revision, f"syncing {objects} objects")

    def synced(self, result: Result, outcomes: list[Outcome]) -> None:
        """A sync's or a heal's writes."""
        revision = result.desired.revision.sha
        if result.step == Step.SYNC:
            self.applied(revision, outcomes)
        else:
            self.healed(revision, result.drifts, outcomes)

    def applied(self, revision: str, outcomes: Iterable[Outcome]) -> None:
        """A revision applied whole: its counts and the objects it changed. One that changed
        nothing, and cured no failure, is routine: only a commit status needs it."""
        done = [o for o in outcomes if o.action != Action.UNCHANGED]
        counts = dict(Counter(str(o.action) for o in done))
        said = ", ".join(f"{n} {action}" for action, n in sorted(counts.items())) or "no change"
        named = [Item(f"{o.key} ({o.action})") for o in done if o.action in NAMED]
        routine, self.failure = not done and self.failure is None, None
        summary = f"applied: {said}"
        self._tell(Kind.SYNC_SUCCEEDED, revision, summary, named, counts, routine=routine)

    def recovered(self, revision: str) -> None:
        """A reconcile that succeeded without a sync after a told failure (a transient one,
        or the revision applied already): the failure is over."""
        if self.failure is not None:
            self.failure = None
            self._tell(Kind.SYNC_SUCCEEDED, revision, "reconciled again: nothing to apply")

    def failed(self, revision: str, reason: str, message: str) -> None:
        """A failure (`reason`: stage/reason, as gitopsd_errors_total's labels), unless it
        is the one told last."""
        if self.failure == (revision, reason):
            return
        self.failure = (revision, reason)
        self._tell(Kind.SYNC_FAILED, revision, cut(message), reason=reason)

    def measured(self, revision: str, drifts: Iterable[Drift]) -> None:
        """Drift newly measured: the objects that drifted since it was told last."""
        reported = {d.key: d for d in drifts if d.reported}
        new = [reported[key] for key in sorted(reported.keys() - self.drifted)]
        self.drifted = frozenset(reported)
        if new:
            count = f"{len(new)} object{'s' if len(new) > 1 else ''}"
            self._tell(Kind.DRIFT_DETECTED, revision, f"{count} differ from git", _drifted(new))

    def healed(self, revision: str, drifts: Iterable[Drift], outcomes: Iterable[Outcome]) -> None:
        """The drifted objects a heal wrote back to git's."""
        written = {o.key for o in outcomes if o.action != Action.UNCHANGED}
        healed = [d for d in drifts if d.key in written and d.reported]
        self.drifted -= {d.key for d in healed}
        if healed:
            count = f"{len(healed)} object{'s' if len(healed) > 1 else ''}"
            self._tell(Kind.DRIFT_HEALED, revision, f"{count} set back to git", _drifted(healed))

    def assessed(self, revision: str, healths: Mapping[ObjectKey, Health]) -> None:
        """Degraded once an object fails, recovered once none does."""
        failed = frozenset(k for k, health in healths.items() if health.status == Status.FAILED)
        before, self.degraded = self.degraded, failed
        if failed - (before or frozenset()):
            named = [Item(str(key), health=_health(healths[key])) for key in sorted(failed)]
            count = f"{len(failed)} object{'s' if len(failed) > 1 else ''}"
            self._tell(Kind.HEALTH_DEGRADED, revision, f"{count} failed", named)
        elif before and not failed:
            self._tell(Kind.HEALTH_RECOVERED, revision, "every object is healthy again")

    def _tell(
        self,
        kind: Kind,
        revision: str,
        summary: str,
        named: list[Item] | None = None,
        counts: dict[str, int] | None = None,
        reason: str = "",
        routine: bool = False,
    ) -> None:
        items, more = items_of(named or [])
        said = Notice(kind, self.source, revision, time.time(), summary, items, more)
        self.tell(replace(said, counts=counts or {}, reason=reason, routine=routine))


def _drifted(drifts: list[Drift]) -> list[Item]:
    """Each object with its fields and their managers: never a value."""
    return [
        Item(str(d.key), tuple((c.path, c.manager) for c in d.changes[:MAX_FIELDS]), d.state)
        for d in drifts
    ]


def _health(health: Health) -> str:
    why = f" ({health.reason})" if health.reason else ""
    return cut(f"{health.status}{why}: {health.message}", 300)
