"""Drift, health and sync reports as text for people, the sources, a source's objects and
its history as tables, and a build's objects as a YAML stream (gitopsd.cli.documents writes them for
programs; gitopsd.cli.progress tells what a sync is doing while it runs)."""

from __future__ import annotations

import difflib
import json
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

import yaml

from gitopsd import diff
from gitopsd.changes import Action
from gitopsd.gitsync.status import Document
from gitopsd.health import Health, unhealthy
from gitopsd.objects import Body, ObjectKey
from gitopsd.reconcile import SyncReport

COLORS = {"+": "\033[32m", "-": "\033[31m", "@": "\033[36m"}
RESET = "\033[0m"


def render_drift(
    drifts: list[diff.Drift],
    origins: dict[Any, str],
    out: TextIO,
    color: bool,
    held: list[diff.Drift] | None = None,
    show_ignored: bool = False,
) -> None:
    """Each drifted object with its fields (and the rule that decided each, if one did),
    then the objects whose differences the drift policy accepts (or, `show_ignored`,
    ignores) whole."""
    for drift in drifts:
        where = f" ({origins[drift.key]})" if drift.key in origins else ""
        print(f"{drift.state} {drift.key}{where}", file=out)
        if drift.reason:
            print(f"  {drift.reason}", file=out)
        for change in _shown_changes(drift, show_ignored):
            print(_change_line(change), file=out)
        for line in unified(drift):
            print(_paint(line, color), file=out)
    if not drifts:
        print("no drift", file=out)
    for drift in held or []:
        changes = _shown_changes(drift, show_ignored)
        if changes:
            where = f" ({origins[drift.key]})" if drift.key in origins else ""
            state = "accepted" if drift.accepted else "ignored"
            print(f"{state} {drift.key}{where}", file=out)
        for change in changes:
            print(_change_line(change), file=out)


def _shown_changes(drift: diff.Drift, show_ignored: bool) -> list[diff.FieldChange]:
    return [*drift.changes, *drift.accepted, *(drift.ignored if show_ignored else ())]


def _change_line(change: diff.FieldChange) -> str:
    decided = f"; {change.decision} by rule {change.rule}" if change.rule else ""
    return (
        f"  {change.path}: {_short(change.live)} -> {_short(change.desired)}"
        f"  (manager: {change.manager}{decided})"
    )


def unified(drift: diff.Drift) -> list[str]:
    live = _yaml(drift.live).splitlines() if drift.live else []
    desired = _yaml(drift.desired).splitlines() if drift.desired else []
    return list(
        difflib.unified_diff(live, desired, f"live/{drift.key}", f"git/{drift.key}", lineterm="")
    )


def render_health(healths: Mapping[ObjectKey, Health], out: TextIO) -> None:
    """Each object that is not Current, Failed ones first, then the counts."""
    for key, health in unhealthy(healths):
        detail = ": ".join(part for part in (health.reason, health.message) if part)
        print(f"  {health.status:<12} {key}  {detail}".rstrip(), file=out)
    counts = Counter(h.status for h in healths.values())
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no objects"
    print(f"health: {summary}", file=out)


def render_report(report: SyncReport, out: TextIO) -> None:
    print(f"revision {report.revision or '(local directory)'}", file=out)
    print(f"  {'ACTION':<10} OBJECT", file=out)
    for outcome in report.changes.outcomes:
        if outcome.action != Action.UNCHANGED:
            detail = f"  ({outcome.detail})" if outcome.detail else ""
            print(f"  {outcome.action:<10} {outcome.key}{detail}", file=out)
    for key, reason in report.refused:
        print(f"  {'skipped':<10} {key}  (prune refused: {reason})", file=out)
    for takeover in report.changes.takeovers:
        print(f"  took over  {takeover}", file=out)
    for held in report.held:
        print(f"  held       {held}", file=out)
    for refusal in report.refusals:
        print(refusal, file=out)
    if report.left_git:
        print(_left_git(report.left_git), file=out)
    counts = {action: report.changes.count(action) for action in Action}
    counts[Action.SKIPPED] += len(report.refused)
    for rare in (Action.HOOK, Action.REPLACED, Action.REFUSED):
        if not counts[rare]:  # a sync without hooks says nothing of them, and so on
            del counts[rare]
    summary = ", ".join(f"{n} {action}" for action, n in counts.items())
    print(f"{summary} (dry run: nothing was changed)" if report.dry_run else summary, file=out)


def render_manifests(objects: list[Body]) -> str:
    """Objects as a YAML stream, each document after `---`, their keys in git's order and
    no line folded (a long annotation stays on its line)."""
    return yaml.safe_dump_all(
        objects, explicit_start=True, sort_keys=False, width=math.inf, allow_unicode=True
    )


def _left_git(count: int) -> str:
    objects = f"{count} object{'s' if count != 1 else ''} this source applied"
    return f"{objects} left git and {'were' if count != 1 else 'was'} kept: --prune deletes them"


def emit(text: str) -> None:
    """Writes a command's output. A reader that stopped reading (`| head -1`) ends the
    output, not the command: the rest is dropped quietly, as other command lines do, and
    the exit code still says what happened."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit: let that write go nowhere, silently.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _yaml(body: Any) -> str:
    return yaml.safe_dump(body, sort_keys=True, default_flow_style=False)


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _paint(line: str, color: bool) -> str:
    if not color or line.startswith(("+++", "---")):
        return line
    start = COLORS.get(line[:1])
    return f"{start}{line}{RESET}" if start else line


COLUMNS = (
    "NAME",
    "CLUSTER",
    "READY",
    "REASON",
    "REVISION",
    "SYNCED",
    "DRIFT",
    "HEALTH",
    "SUSPENDED",
    "MESSAGE",
)


def object_table(name: str, found: Document) -> str:
    revision = str(found["revision"])[:12] or "none applied yet"
    rows = [("KIND", "NAMESPACE", "NAME", "HEALTH", "DRIFT")] + [
        (
            "/".join(part for part in (line["object"]["group"], line["object"]["kind"]) if part),
            line["object"]["namespace"] or "-",
            line["object"]["name"],
            line["health"]["status"] or "-",
            _drift_cell(line),
        )
        for line in found["objects"]
    ]
    return f"{name} at revision {revision}\n" + _columns(rows)


def _drift_cell(line: Document) -> str:
    if not line["drift"]:
        return "-"
    fields = ", ".join(line["fields"])
    return f"{line['drift']}: {fields}" if fields else str(line["drift"])


def source_table(lines: list[Document], now: float | None = None) -> str:
    """The sources as `kubectl get` shows objects: the revision by its first 12 characters
    (JSON has it whole), the last sync as its age, the last outcome as Ready's reason."""
    now = time.time() if now is None else now
    rows = [COLUMNS] + [
        (
            line["name"],
            line.get("cluster") or "-",
            line["ready"],
            line["reason"] or "-",
            line["revision"][:12] or "-",
            _age(line.get("lastSyncTime") or "", now),
            str(line["drift"]),
            line["health"],
            str(line["suspended"]).lower(),
            line["message"] if line["ready"] != "True" else "",
        )
        for line in lines
    ]
    return _columns(rows)


HISTORY_COLUMNS = (
    "REVISION",
    "STARTED",
    "DURATION",
    "OUTCOME",
    "CREATED",
    "CONFIGURED",
    "PRUNED",
    "MESSAGE",
)


def history_table(entries: list[Document], now: float | None = None) -> str:
    """A source's syncs, newest first: the revision by its first 12 characters, the start
    as its age, the objects by action, and why a failed one failed."""
    now = time.time() if now is None else now
    rows = [HISTORY_COLUMNS] + [
        (
            entry["revision"][:12] or "-",
            _age(entry["startedAt"], now),
            f"{entry['durationSeconds']:.1f}s",
            entry["outcome"],
            *(
                str(entry["counts"].get(action, 0))
                for action in ("created", "configured", "pruned")
            ),
            f"{entry['reason']}: {entry['message']}" if entry.get("reason") else "",
        )
        for entry in entries
    ]
    return _columns(rows)


def _columns(rows: list[tuple[str, ...]]) -> str:
    """Rows as `kubectl get` aligns them: each column as wide as its widest cell."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        + "\n"
        for row in rows
    )


def _age(stamp: str, now: float) -> str:
    """How long ago an RFC 3339 time was, as kubectl's AGE says it; "-" for never."""
    if not stamp:
        return "-"
    then = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    seconds = max(int(now - then), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
