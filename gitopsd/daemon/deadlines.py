"""A source's timeout: when the reconcile or drift check in flight must stop writing, and
the failure one that crawled past it ends with."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gitopsd.errors import ClusterError, ClusterReason, GitopsdError


@dataclass
class Deadline:
    seconds: float
    """The source's timeout."""
    at: float | None = None
    """When the reconcile or drift check in flight must stop writing (monotonic seconds)."""

    @contextmanager
    def running(self) -> Iterator[None]:
        """Past the source's timeout the fence says no, so a reconcile or drift check that
        crawls writes nothing more, fails and backs off, instead of holding the source."""
        self.at = time.monotonic() + self.seconds
        try:
            yield
        finally:
            self.at = None

    def passed(self) -> bool:
        at = self.at
        return at is not None and time.monotonic() > at

    def explained(self, error: GitopsdError) -> GitopsdError:
        """A failure past the deadline is the timeout's, whatever request it broke."""
        if not self.passed():
            return error
        cause = str(error).splitlines()[0][:300]
        return ClusterError(
            f"did not finish within its timeout of {self.seconds:g} s: {cause}",
            ClusterReason.TIMEOUT,
        )
