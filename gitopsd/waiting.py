"""Waits until objects are healthy: reads their live status again and again, until every
one is Current, one Failed, the time is up, or the cluster is fenced (a stop, a lost lease,
a source past its deadline).

It polls, one GET per object still pending, and never the ones already Current: a wave or
a `sync --wait` is short-lived, and a poll needs no watch to be opened and torn down. The
GETs go out concurrently; the health of what they read is assessed on the waiting thread,
one object after another, since a source's own health rules may wait for their turn in
the daemon's evaluator (its namespace's share of it): the fan-out threads every source
shares are never parked there, and the deadline and the fence are looked at between
objects.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from gitopsd import health
from gitopsd.changes import Target
from gitopsd.cluster import Cluster, run_concurrently
from gitopsd.errors import ClusterError
from gitopsd.health import Health, Status
from gitopsd.objects import Body, ObjectKey

POLL_SECONDS = 1.0
STEP_SECONDS = 0.2
"""How often a wait between polls looks at the fence, so that a stop ends it at once."""

Healths = dict[ObjectKey, Health]
NOT_ASSESSED = Health(Status.IN_PROGRESS, "NotAssessed", "the wait ended before it was assessed")


@dataclass
class HealthWait:
    cluster: Cluster
    concurrency: int = 16
    on_progress: Callable[[Mapping[ObjectKey, Health]], None] = lambda healths: None
    """Hears the health of every object after each poll (a progress line, a log)."""
    checks: health.Checks | None = None
    """The source's own health rules."""
    runs: Mapping[ObjectKey, str] = field(default_factory=dict)
    """The uid an object must keep (a hook's run): another object that took its name is
    Failed, never judged in its place."""

    def until_healthy(self, targets: Iterable[Target], timeout_seconds: float) -> Healths:
        """The health of each target when all are Current, one Failed, `timeout_seconds`
        passed or the cluster was fenced, whichever comes first."""
        pending = {target.key: target for target in targets}
        healths: Healths = {}
        deadline = time.monotonic() + timeout_seconds
        while True:
            healths |= self._read(list(pending.values()), deadline)
            self.on_progress(healths)
            pending = {k: t for k, t in pending.items() if not healths[k].healthy}
            failed = any(healths[key].status == Status.FAILED for key in pending)
            if not pending or failed or not self._pause(deadline):
                return healths

    def _read(self, targets: list[Target], deadline: float) -> Healths:
        lives = run_concurrently(targets, self._live_of, self.concurrency)
        healths: Healths = {}
        for target, live in zip(targets, lives, strict=True):
            if isinstance(live, Health):
                healths[target.key] = live
            elif time.monotonic() >= deadline or not self.cluster.writable():
                healths[target.key] = NOT_ASSESSED
            else:
                healths[target.key] = health.assess(live, self.checks)
        return healths

    def _live_of(self, target: Target) -> Body | Health | None:
        """The live object of `target`, or its health when there is none to assess."""
        if target.resource is None:
            return Health(Status.UNKNOWN, "NotServed", "its kind is not served")
        key = target.key
        try:
            live = self.cluster.get(target.resource, key.namespace, key.name)
        except ClusterError as error:  # the next poll may read it; the verdict says why not
            return Health(Status.UNKNOWN, "ReadFailed", str(error).splitlines()[0][:300])
        run = self.runs.get(key)
        if run and live is not None and live["metadata"].get("uid") != run:
            return Health(Status.FAILED, "Replaced", "another object took its name")
        return live

    def _pause(self, deadline: float) -> bool:
        """Waits until the next poll; False when the deadline comes first or the cluster is
        fenced meanwhile."""
        next_poll = time.monotonic() + POLL_SECONDS
        while self.cluster.writable():
            now = time.monotonic()
            if now >= deadline:
                return False
            if now >= next_poll:
                return True
            time.sleep(min(STEP_SECONDS, next_poll - now, deadline - now))
        return False


def not_healthy(healths: Mapping[ObjectKey, Health]) -> list[str]:
    """Each object that is not Current as "<object>: <health>", Failed ones first."""
    return [f"{key}: {h}" for key, h in health.unhealthy(healths)]
