"""What a sync is doing while it runs, on stderr, for a person at a terminal and for a CI
log alike: a plain line per phase (fetched, rendered, dry-run, each wave applied), then on a
terminal a bar redrawn in place, and while it waits for health a line with the elapsed
time, redrawn on a terminal and written every 10 s elsewhere, as `kubectl rollout status`
does. `--quiet` prints none of it: the result alone."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TextIO

from gitopsd.changes import Listener, Measurement, Outcome
from gitopsd.health import Health, unhealthy
from gitopsd.objects import Body, ObjectKey

EVERY_SECONDS = 10.0
"""How often a log (not a terminal) hears that a wait goes on."""
WIDTH = 30
LINE = 100


class Progress:
    def __init__(
        self,
        out: TextIO,
        quiet: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out, self.clock = out, clock
        self.terminal = out.isatty()
        self.quiet = quiet
        self.started = clock()
        self.total, self.done_count = 1, 0
        self.fetch_seconds = 0.0
        self.manifests = 0
        self.sha: str | None = None
        """The revision being synced, once read."""
        self.outcomes: list[Outcome] = []
        """Every outcome so far: the report of a sync that was stopped."""
        self.waiting_since: float | None = None
        self.said_at = float("-inf")
        self.drawn = False
        """A line is drawn in place on the terminal, to be cleared before the next."""

    def listener(self) -> Listener:
        """A reconcile's listener that tells this progress."""
        return Listener(
            on_fetched=self.fetched,
            on_read=self.read,
            on_revision=self.revision,
            on_measured=self.measured,
            on_plan=self.planned,
            on_outcome=self.tick,
            on_wave=self.wave,
            on_health=self.waiting,
        )

    def fetched(self, seconds: float) -> None:
        self.fetch_seconds = seconds

    def read(self, manifests: int) -> None:
        self.manifests = manifests

    def revision(self, sha: str) -> None:
        self.sha = sha
        where = f"fetched {sha[:12]}" if sha else "read the directory"
        self._say(f"{where} in {self.fetch_seconds:.1f} s")
        self._say(f"rendered {self.manifests} manifests")

    def measured(self, measurement: Measurement, find: Callable[[ObjectKey], Body | None]) -> None:
        spared = measurement.compared - measurement.dry_run
        since = f" ({spared} unchanged since their last dry-run)" if spared else ""
        self._say(
            f"dry-run {measurement.dry_run} of {measurement.compared} objects{since}: "
            f"{len(measurement.drifts)} drifted"
        )

    def planned(self, count: int) -> None:
        self.total = max(count, 1)
        self._say(f"applying {count} objects")

    def tick(self, outcome: Outcome) -> None:
        """One object done: the bar moves, on a terminal (a log reads the report)."""
        self.outcomes.append(outcome)
        self.done_count += 1
        if self.terminal and not self.quiet:
            filled = min(WIDTH, WIDTH * self.done_count // self.total)
            bar = "#" * filled + "-" * (WIDTH - filled)
            self._draw(f"[{bar}] {self.done_count}/{self.total} {outcome.key}")

    def wave(self, number: int, objects: int) -> None:
        self.waiting_since = None  # the next wait is the next wave's
        self._say(f"wave {number} applied ({objects} objects)")

    def waiting(self, healths: Mapping[ObjectKey, Health]) -> None:
        """Health so far, while a wave or `--wait` waits: how many are Current, the
        slowest (a Failed one first), and for how long it has waited."""
        now = self.clock()
        if self.waiting_since is None:
            self.waiting_since = now
        current = sum(1 for h in healths.values() if h.healthy)
        slowest = next(iter(unhealthy(healths)), None)
        named = f", slowest {slowest[0]}: {_said(slowest[1])}" if slowest else ""
        elapsed = now - self.waiting_since
        line = f"waiting: {current} of {len(healths)} Current after {elapsed:.0f} s{named}"
        if self.terminal:
            if not self.quiet:
                self._draw(line)
        elif now - self.said_at >= EVERY_SECONDS:
            self.said_at = now
            self._say(line)

    def done(self) -> None:
        """Clears the line drawn in place, if any."""
        if self.drawn:
            print("\r" + " " * LINE + "\r", end="", file=self.out, flush=True)
            self.drawn = False

    def elapsed(self) -> float:
        return self.clock() - self.started

    def _say(self, line: str) -> None:
        """A line of its own, below whatever was drawn in place."""
        if self.quiet:
            return
        self.done()
        print(line, file=self.out, flush=True)

    def _draw(self, line: str) -> None:
        print(f"\r{line}"[: LINE + 1].ljust(LINE + 1), end="", file=self.out, flush=True)
        self.drawn = True


def _said(health: Health) -> str:
    return ": ".join(part for part in (str(health.status), health.reason, health.message) if part)
