"""What the status page shows, as plain data the daemon gathers from its sources (pure):
a line per source for the overview, and a source's drift and history for its own page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from gitopsd.configfile.clusters import HOME
from gitopsd.diff import Drift

SOURCES_PATH = "/sources/"


@dataclass(frozen=True)
class SourceLine:
    """One source as `gitopsd get` tells it (`gitsync.status.summary`'s words)."""

    name: str
    """The `source` label of its metrics: a configured source's name, a GitSync's
    namespace/name."""
    cluster: str = HOME
    """Where it syncs (in-cluster, a declared cluster, secret/NAME); "" when unknown."""
    revision: str = ""
    last_sync: str = ""
    """When a revision was last applied whole (RFC 3339); "" if never."""
    ready: str = "Unknown"
    outcome: str = ""
    """Why it is Ready or not (Succeeded, DriftDetected, Suspended, a failure's reason)."""
    health: str = "Unknown"
    drifted: int = 0
    suspended: bool = False
    message: str = ""

    @property
    def cluster_shown(self) -> str:
        return self.cluster or "unknown"

    @property
    def kind(self) -> str:
        return "GitSync" if "/" in self.name else "source"

    @property
    def path(self) -> str:
        """Its page: what a Grafana data link makes of the `source` label, URL-quoted."""
        return SOURCES_PATH + quote(self.name, safe="")


@dataclass(frozen=True)
class SourceDetail:
    line: SourceLine
    drifts: Sequence[Drift] = ()
    """Its drift measured last, Secret values masked (`gitopsd.masking`, by `diff`)."""
    history: Sequence[dict[str, Any]] = field(default_factory=list)
    """Its last syncs, newest first (`gitsync.history`)."""
