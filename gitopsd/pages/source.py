"""A source's own page: where it stands, each drifted object with its fields (live and git
values, and the manager that changed each), and its last syncs, pure. Secret values come
masked (`gitopsd.masking`, applied by `diff` to everything a Drift holds)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gitopsd.diff import Drift, FieldChange
from gitopsd.pages.markup import code, document, marked, more, table, text
from gitopsd.pages.views import SourceDetail, SourceLine

MAX_OBJECTS = 50
"""Drifted objects shown on a page; the others are counted."""
MAX_FIELDS = 20
"""Fields shown per object; the others are counted."""
MAX_SYNCS = 10
ABSENT = '<span class="muted">(absent)</span>'
FIELD_HEADERS = ("Field", "Live", "Git", "Changed by", "Decision")
HISTORY_HEADERS = ("Started", "Revision", "Outcome", "Duration", "Changes", "Message")


def source_page(detail: SourceDetail, refresh_seconds: float) -> str:
    line = detail.line
    body = (
        '<p><a href="../">All sources</a></p>'  # relative: /sources/NAME is one segment
        f"<h1>{text(line.kind)} {text(line.name)}</h1>"
        + _standing(line)
        + _drift(detail.drifts)
        + _history(detail.history)
    )
    return document(f"gitopsd: {line.name}", body, refresh_seconds)


def _standing(line: SourceLine) -> str:
    rows = [
        ("Cluster", text(line.cluster_shown)),
        ("Revision", code(line.revision or "none yet")),
        ("Last sync", text(line.last_sync or "never")),
        ("Ready", marked(line.ready, ("True",), ("False",))),
        ("Outcome", text(line.outcome)),
        ("Health", marked(line.health, ("Current",), ("Failed",))),
        ("Suspended", text("yes" if line.suspended else "no")),
        ("Message", text(line.message)),
    ]
    return table((), rows)


def _drift(drifts: Sequence[Drift]) -> str:
    if not drifts:
        return '<h2>Drift</h2><p class="good">In sync with git.</p>'
    shown = sorted(drifts, key=lambda drift: drift.key)[:MAX_OBJECTS]
    objects = "".join(_drifted(drift) for drift in shown)
    count = f"{len(drifts)} object" + ("" if len(drifts) == 1 else "s")
    return f"<h2>Drift: {count}</h2>{objects}{more(len(drifts) - len(shown), 'objects')}"


def _drifted(drift: Drift) -> str:
    fields = (*drift.changes, *drift.accepted)
    shown = fields[:MAX_FIELDS]
    heading = f'<h3>{text(str(drift.key))} <span class="bad">{text(str(drift.state))}</span></h3>'
    reason = f"<p>{text(drift.reason)}</p>" if drift.reason else ""
    rows = table(FIELD_HEADERS, (_field(change) for change in shown)) if shown else ""
    return heading + reason + rows + more(len(fields) - len(shown), "fields")


def _field(change: FieldChange) -> list[str]:
    return [
        code(change.path),
        _value(change.live),
        _value(change.desired),
        text(change.manager),
        text(str(change.decision)),
    ]


def _value(value: Any) -> str:
    return ABSENT if value is None else code(value)


def _history(history: Sequence[dict[str, Any]]) -> str:
    if not history:
        return '<h2>History</h2><p class="muted">No sync yet.</p>'
    shown = history[:MAX_SYNCS]
    rows = table(HISTORY_HEADERS, (_sync(entry) for entry in shown))
    return f"<h2>History</h2>{rows}{more(len(history) - len(shown), 'syncs')}"


def _sync(entry: dict[str, Any]) -> list[str]:
    counts = entry.get("counts") or {}
    changes = ", ".join(f"{count} {action}" for action, count in counts.items()) or "none"
    outcome = str(entry.get("outcome", ""))
    return [
        text(entry.get("startedAt", "")),
        code(str(entry.get("revision", ""))[:12]),
        marked(outcome, ("Succeeded",), ("Failed",)),
        text(f"{entry.get('durationSeconds', 0)} s"),
        text(changes),
        text(": ".join(str(entry[k]) for k in ("reason", "message") if entry.get(k))),
    ]
