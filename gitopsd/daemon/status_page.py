"""What the status page shows, gathered from the running sources as the control API gathers
them (gitopsd.daemon.control): each source's line of `gitopsd get`, a source's drift as
measured last and its history; rendered by gitopsd.pages, served on `statusPage.listen`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitopsd.configfile import StatusPage as Settings
from gitopsd.daemon.control import Control
from gitopsd.daemon.http import StatusPage
from gitopsd.diff import Drift
from gitopsd.pages import SourceDetail, SourceLine

log = logging.getLogger("gitopsd.http")


def serving(settings: Settings, control: Control) -> StatusPage | None:
    """The page `settings` ask for, if any: behind the token of `tokenFile`, if given."""
    if settings.listen is None:
        return None
    token = token_reader(settings.token_file) if settings.token_file else None
    return StatusPage(StatusSources(control), settings.refresh_seconds, token)


@dataclass(frozen=True)
class StatusSources:
    control: Control

    def lines(self) -> list[SourceLine]:
        """Every source: those running, the suspended configured ones, those set aside."""
        return [_line(summary) for summary in self.control.sources()]

    def detail(self, name: str) -> SourceDetail | None:
        """Source `name`'s page, by its metrics' `source` label; None if no such source."""
        line = next((line for line in self.lines() if line.name == name), None)
        if line is None:
            return None
        status, history = self.control.history(name)
        return SourceDetail(
            line, self._drifts(name), history.get("history", []) if status == 200 else []
        )

    def _drifts(self, name: str) -> list[Drift]:
        worker = next((w for w in self.control.workers() if w.name == name), None)
        files = self.control.files
        if worker is not None:
            report = worker.report
        elif files is not None and files.knows(name):  # suspended: what it saw last
            report = files.report_of(name)
        else:
            return []
        return list(report.drifts or [])


def _line(summary: dict[str, Any]) -> SourceLine:
    return SourceLine(
        name=summary["name"],
        cluster=summary.get("cluster", ""),
        revision=summary["revision"],
        last_sync=summary["lastSyncTime"],
        ready=summary["ready"],
        outcome=summary["reason"],
        health=summary["health"],
        drifted=summary["drift"],
        suspended=summary["suspended"],
        message=summary["message"],
    )


def token_reader(path: Path) -> Callable[[], bytes | None]:
    """Reads the bearer token from `path` at each request, so a rotated Secret takes effect
    at once; None when it cannot be read or is empty (no one is let in). The token is never
    logged, nor is the file's content."""

    def token() -> bytes | None:
        try:
            found = path.read_bytes().strip()
        except OSError as error:
            log.warning("statusPage.tokenFile %s: cannot read: %s", path, error.strerror)
            return None
        return found or None

    return token
