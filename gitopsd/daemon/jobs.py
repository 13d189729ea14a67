"""A source's jobs in the scheduler: the polls of its interval, and the one-off runs after
a backoff or an announced push."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.base import BaseScheduler

ONCE = ("retry", "check", "announce")
"""The kinds of a source's one-off jobs: a failed poll's retry, a failed drift check's, a
push announced within a second of the one before."""


@dataclass(frozen=True)
class Jobs:
    """A source's jobs in the scheduler: its interval's polls, and what runs once after a
    backoff: the retry of a failed poll, the drift check after a failed one (at most one of
    each kind pending; a new failure moves it)."""

    scheduler: BaseScheduler
    job_id: str

    def later(self, kind: str, run: Callable[[], None], delay_seconds: float) -> None:
        """Runs `run` once, `delay_seconds` from now, however late the scheduler gets to
        it (a busy scheduler must not drop it: the next try would wait a whole interval)."""
        when = datetime.now(UTC) + timedelta(seconds=max(delay_seconds, 0.0))
        self.scheduler.add_job(
            run,
            "date",
            run_date=when,
            id=self.once_id(kind),
            replace_existing=True,
            misfire_grace_time=None,
        )

    def once_id(self, kind: str) -> str:
        """Its own: a source's successor under the same job id has its own."""
        return f"{self.job_id}/{kind}/{id(self)}"

    def remove(self) -> None:
        for job_id in (self.job_id, *(self.once_id(kind) for kind in ONCE)):
            with suppress(JobLookupError):
                self.scheduler.remove_job(job_id)
