"""The status page's front page: every source in one table, each linking to its own page,
pure."""

from __future__ import annotations

from collections.abc import Sequence

from gitopsd.pages.markup import code, document, link, marked, more, table, text
from gitopsd.pages.views import SourceLine

MAX_SOURCES = 5000
"""Sources listed; past it, counted (a fleet of 1,000 GitSyncs renders in a few ms)."""
HEADERS = ("Source", "Kind", "Cluster", "Revision", "Last sync", "Outcome", "Ready", "Health")
HEADERS_AFTER = ("Drift", "Suspended", "Message")
GOOD_OUTCOMES = ("Succeeded",)


def overview(lines: Sequence[SourceLine], refresh_seconds: float) -> str:
    shown = sorted(lines, key=lambda line: line.name)[:MAX_SOURCES]
    ready = sum(1 for line in lines if line.ready == "True")
    body = (
        "<h1>gitopsd</h1>"
        f'<p class="muted">{len(lines)} sources, {ready} ready; '
        f"this page reloads itself every {max(1, round(refresh_seconds))} s.</p>"
        + table(HEADERS + HEADERS_AFTER, (_row(line) for line in shown))
        + more(len(lines) - len(shown), "sources")
    )
    return document("gitopsd: sources", body, refresh_seconds)


def _row(line: SourceLine) -> list[str]:
    # relative: the page may be served under a path of a proxy's
    return [
        link(line.path.removeprefix("/"), line.name),
        text(line.kind),
        text(line.cluster_shown),
        code(line.revision[:12]),
        text(line.last_sync or "never"),
        marked(line.outcome, GOOD_OUTCOMES, (line.outcome,) if line.ready == "False" else ()),
        marked(line.ready, ("True",), ("False",)),
        marked(line.health, ("Current",), ("Failed",)),
        marked(str(line.drifted), ("0",), (str(line.drifted),)),
        text("suspended" if line.suspended else ""),
        text(line.message),
    ]
