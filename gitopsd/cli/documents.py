"""What the commands print for programs (`-o json`, `-o yaml`): one document per command, of
a kind and version a reader can check (docs/schemas/cli/v1 holds a JSON Schema per kind).

The contract, as Kubernetes writes its own: keys in camelCase, objects named by structured
references, booleans as booleans, times in RFC 3339, durations in seconds as numbers. A
change a reader could trip on is a new version, not an edit of this one."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import yaml

from gitopsd import diff
from gitopsd.changes import Action
from gitopsd.errors import GitopsdError
from gitopsd.health import Health
from gitopsd.objects import Body, ObjectKey, body_version
from gitopsd.reconcile import SyncReport
from gitopsd.validation import Problem

API_VERSION = "cli.gitopsd.io/v1"
Document = dict[str, Any]
Versions = Callable[[ObjectKey], str]
"""The version (`v1`) an object is named by; "" when the command did not learn it."""


def document(kind: str, **fields: Any) -> Document:
    return {"apiVersion": API_VERSION, "kind": kind, **fields}


def serialized(found: Document, output: str) -> str:
    """The document as `-o json` or `-o yaml` prints it."""
    if output == "yaml":
        return yaml.safe_dump(found, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return json.dumps(found, indent=2, default=str) + "\n"  # a YAML date in a value, say


def diff_result(
    revision: str | None,
    drifts: list[diff.Drift],
    origins: Mapping[ObjectKey, str],
    healths: Mapping[ObjectKey, Health],
    versions: Versions,
    error: GitopsdError | None,
    held: list[diff.Drift] | None = None,
    show_ignored: bool = False,
) -> Document:
    """`drift`: the drifted objects; `held`: those whose differences the drift policy
    accepts (or ignores, shown only with `show_ignored`) whole."""
    shown_held = [d for d in held or [] if d.accepted or show_ignored]
    return document(
        "DiffResult",
        revision=revision,
        drift=[_drift(d, origins, show_ignored) for d in drifts],
        held=[_drift(d, origins, show_ignored) for d in shown_held],
        health=health_list(healths, versions),
        error=error_of(error),
    )


def _drift(drift: diff.Drift, origins: Mapping[ObjectKey, str], show_ignored: bool) -> Document:
    body = drift.desired or drift.live or {}
    ignored = {"ignored": [_change(c) for c in drift.ignored]} if show_ignored else {}
    return {
        "object": drift.key.reference(body_version(body)),
        "state": str(drift.state),
        "origin": origins.get(drift.key),
        "changes": [_change(c) for c in drift.changes],
        "accepted": [_change(c) for c in drift.accepted],
        **ignored,
        "reason": drift.reason or None,
    }


def _change(change: diff.FieldChange) -> Document:
    return {
        "path": change.path,
        "live": change.live,
        "desired": change.desired,
        "manager": change.manager,
        "decision": str(change.decision),
        "rule": change.rule or None,
    }


def health_list(healths: Mapping[ObjectKey, Health], versions: Versions) -> list[Document]:
    return [
        {
            "object": key.reference(versions(key)),
            "status": str(health.status),
            "reason": health.reason,
            "message": health.message,
        }
        for key, health in sorted(healths.items())
    ]


def sync_result(
    report: SyncReport,
    read: bool,
    healths: Mapping[ObjectKey, Health] | None,
    versions: Versions,
    error: GitopsdError | None,
) -> Document:
    """`read`: a revision was read (else `revision` is null and nothing was done)."""
    outcomes = report.changes.outcomes
    counts = Counter(str(outcome.action) for outcome in outcomes)
    counts[str(Action.SKIPPED)] += len(report.refused)
    return document(
        "SyncResult",
        revision=report.revision if read else None,
        dryRun=report.dry_run,
        counts={str(action): counts[str(action)] for action in Action},
        outcomes=[
            {
                "object": o.key.reference(o.version or versions(o.key)),
                "action": str(o.action),
                "detail": o.detail,
            }
            for o in outcomes
        ],
        pruneRefused=[
            {"object": key.reference(versions(key)), "reason": str(reason)}
            for key, reason in report.refused
        ],
        pruneRefusals=report.refusals,
        leftGit=report.left_git,
        takeovers=report.changes.takeovers,
        held=report.held,
        health=health_list(healths or {}, versions),
        error=error_of(error),
    )


def validate_result(
    objects: int, problems: Iterable[Problem], versions: Versions, error: GitopsdError | None
) -> Document:
    listed = [
        {
            "file": problem.origin.path,
            "line": problem.origin.line,
            "object": problem.key.reference(versions(problem.key)),
            "field": problem.path,
            "message": problem.message,
        }
        for problem in problems
    ]
    return document(
        "ValidateResult",
        valid=error is None and not listed,
        objects=objects,
        problems=listed,
        error=error_of(error),
    )


def build_result(revision: str | None, objects: list[Body], error: GitopsdError | None) -> Document:
    """`objects`: the bodies a sync of `revision` sends, in the order it applies them."""
    return document("BuildResult", revision=revision, objects=objects, error=error_of(error))


def error_of(error: GitopsdError | None) -> Document | None:
    """Why the command failed; a message never carries a Secret value (gitopsd.errors)."""
    if error is None:
        return None
    return {
        "stage": str(error.stage),
        "reason": str(error.reason),
        "message": str(error),
        "exitCode": int(error.exit_code),
    }


def source_reference(kind: str, namespace: str, name: str) -> Document:
    """A daemon's configured source (kind `Source`, no namespace) or a GitSync."""
    return {"kind": kind, "namespace": namespace, "name": name}


def source_list(items: list[Document]) -> Document:
    return document("SourceList", items=items, error=None)


def source_item(source: Document, line: Mapping[str, Any]) -> Document:
    """One source as `gitopsd get` lists it, from its status summary
    (`gitsync.status.summary`)."""
    return {
        "source": source,
        "cluster": str(line.get("cluster") or ""),
        "ready": line["ready"] == "True",
        "reason": line["reason"],
        "message": line["message"],
        "revision": line["revision"],
        "drift": line["drift"],
        "health": line["health"],
        "suspended": line["suspended"],
        "failed": line["failed"],
        "lastSyncTime": line.get("lastSyncTime") or None,
        "lastHandledReconcileAt": _request_time(line.get("lastHandledReconcileAt")),
    }


def _request_time(token: Any) -> str | None:
    """A daemon answers requests by a count of nanoseconds, a GitSync by the annotation's
    value (gitopsd writes an RFC 3339 time there; another tool may write anything)."""
    if not token:
        return None
    text = str(token)
    if not text.isdigit():
        return text
    seconds, nanoseconds = divmod(int(text), 1_000_000_000)
    second = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{second}.{nanoseconds:09d}Z"


def object_tree(source: Document, revision: str, objects: list[Document]) -> Document:
    """The objects of a source as its daemon lists them (gitopsd.daemon.control)."""
    return document("ObjectTree", source=source, revision=revision, objects=objects, error=None)


def sync_history(source: Document, entries: list[Document]) -> Document:
    """A source's last syncs, newest first, as its status or its daemon keeps them
    (gitopsd.gitsync.history)."""
    return document("SyncHistory", source=source, history=entries, error=None)


def reconcile_result(source: Document, line: Mapping[str, Any] | None, exit_code: int) -> Document:
    """A reconcile asked for and waited on: how it ended (`line`: the source's summary
    once it answered; None when the command failed before)."""
    return document(
        "ReconcileResult",
        source=source,
        succeeded=exit_code == 0,
        reason=line["reason"] if line else "",
        message=line["message"] if line else "",
        exitCode=exit_code,
        error=None,
    )


def suspend_result(source: Document, suspended: bool) -> Document:
    return document("SuspendResult", source=source, suspended=suspended, error=None)


def check_result(checks: Iterable[tuple[str, bool, str]], error: GitopsdError | None) -> Document:
    """Each check's `name`, whether it passed (`ok`) and what it found (`detail`); `error`:
    the first that failed, whose exit code is the command's."""
    listed = [{"name": name, "ok": ok, "detail": detail} for name, ok, detail in checks]
    return document("CheckResult", checks=listed, error=error_of(error))


def failed(kind: str, error: GitopsdError, source: Document | None = None) -> Document:
    """The document of a command that failed before it had anything else to say."""
    return _FAILED[kind](error, source)


def _unknown(key: ObjectKey) -> str:
    return ""


_FAILED: dict[str, Callable[[GitopsdError, Document | None], Document]] = {
    "DiffResult": lambda error, _: diff_result(None, [], {}, {}, _unknown, error),
    "SyncResult": lambda error, _: sync_result(SyncReport(""), False, None, _unknown, error),
    "ValidateResult": lambda error, _: validate_result(0, [], _unknown, error),
    "BuildResult": lambda error, _: build_result(None, [], error),
    "SourceList": lambda error, _: source_list([]) | {"error": error_of(error)},
    "ReconcileResult": lambda error, source: (
        reconcile_result(source or {}, None, error.exit_code) | {"error": error_of(error)}
    ),
    "ObjectTree": lambda error, source: document(
        "ObjectTree", source=source, revision="", objects=[], error=error_of(error)
    ),
    "SyncHistory": lambda error, source: (
        sync_history(source or {}, []) | {"error": error_of(error)}
    ),
    "SuspendResult": lambda error, source: document(
        "SuspendResult", source=source, suspended=None, error=error_of(error)
    ),
    "CheckResult": lambda error, _: check_result([], error),
}
