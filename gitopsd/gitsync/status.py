"""A GitSync's status and Events, from what its source's worker saw: pure.

Conditions follow the Kubernetes API conventions as kstatus reads them (so `kubectl wait
--for=condition=Ready` and Flux's health checks work): Reconciling True while work is
under way or retried, Stalled True when only a person can help (an invalid spec or
revision, a refusal, a blocked prune), Ready True when the revision is applied and nothing
drifts. Messages name objects and fields, never values.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gitopsd.diff import Drift, FieldChange, State
from gitopsd.errors import ConfigError, ConfigReason, ExitCode, GitopsdError, Remedy
from gitopsd.gitsync import history
from gitopsd.gitsync.schema import MAX_DRIFTED_SHOWN
from gitopsd.health import Digest, Health, Status, digest
from gitopsd.objects import Body, GroupKind, ObjectKey

MAX_MESSAGE = 2000
SHOWN_IN_MESSAGE = 5
"""Objects not healthy yet named in a condition's message; the others are counted."""
Document = dict[str, Any]
"""A JSON object: a status, one of its conditions, a line of `gitopsd get`."""


@dataclass(frozen=True)
class Failure:
    reason: str
    """CamelCase, for the condition."""
    message: str
    stalled: bool
    """Only a person can cure it: a new revision or spec, rights, keys."""
    exit_code: int = ExitCode.CLUSTER_FAILED
    """What `gitopsd reconcile` exits with for it."""

    @classmethod
    def of(cls, error: GitopsdError) -> Failure:
        reason = "".join(word.capitalize() for word in str(error.reason).split("_"))
        if isinstance(error, ConfigError) and error.reason == ConfigReason.INVALID:
            reason = "InvalidSpec"
        stalled = error.remedy != Remedy.BACK_OFF
        return cls(reason, _short(str(error)), stalled, error.exit_code)


@dataclass
class SourceReport:
    """What a source's worker saw last: the facts its status is made of."""

    finished: int = 0
    """Reconciles finished (successfully or not)."""
    attempted_revision: str = ""
    applied_revision: str = ""
    synced_at: float | None = None
    """When a revision was last applied whole (Unix seconds)."""
    drifts: list[Drift] | None = None
    """The drift measured last; None before the first measurement."""
    accepted: list[Drift] = field(default_factory=list)
    """The objects with fields the drift policy accepts, measured last."""
    failure: Failure | None = None
    """Why the last reconcile or drift check failed; None once one succeeded."""
    refused: list[str] = field(default_factory=list)
    """Objects the last sync did not prune, each with the guard that refused it."""
    not_applied: list[str] = field(default_factory=list)
    """Objects the last sync refused alone (an immutable field git changes), each with why."""
    inventory: Counter[GroupKind] = field(default_factory=Counter)
    """The revision's objects by group/kind."""
    health: dict[ObjectKey, Health] | None = None
    """The health of the revision's objects, assessed last; None before the first time."""
    waiting: str = ""
    """Why the revision is not applied yet: the dependencies not ready, or ""."""
    handled_request: str = ""
    """The request to reconcile now that the last reconcile answered (see `request`)."""
    history: list[Document] = field(default_factory=list)
    """Its last syncs, newest first (`gitsync.history`)."""


def unready(report: SourceReport) -> str:
    """Why a source that others depend on is not ready for them, or "": it is once it
    applied the revision it read last and every object of it is Current."""
    if report.failure is not None:
        return f"its last reconcile failed ({report.failure.reason})"
    if report.health is None:
        return "it has not reconciled yet"
    if report.waiting:
        return "it waits for its own dependencies"
    if report.applied_revision != report.attempted_revision:
        return f"its revision {report.attempted_revision} is not applied yet"
    brief = digest(report.health, SHOWN_IN_MESSAGE)
    return _health_message(brief) if brief.status != Status.CURRENT else ""


def unready_status(body: Body | None) -> str:
    """As `unready`, for a GitSync another replica serves: read from its status, which
    says Ready=True once its source applied its revision and every object is Current."""
    if body is None:
        return "it does not exist"
    status = body.get("status") or {}
    ready = _condition(status, "Ready") or {}
    if status.get("observedGeneration") != body["metadata"].get("generation"):
        return "its status is not of its latest generation yet"
    if ready.get("status") != "True":
        return f"it is not ready ({ready.get('reason') or 'no status yet'})"
    return ""


@dataclass(frozen=True)
class Event:
    type: str  # Normal or Warning
    reason: str
    message: str


def status_of(
    generation: int,
    report: SourceReport,
    previous: Document | None,
    suspended: bool = False,
    now: float | None = None,
    named: bool = False,
) -> Document:
    """The status to write; conditions keep their transition time while their status holds.
    Its history names the objects of each sync where `named` (a configured source's status
    ConfigMap: a few, so the restart or new leader that reads it names them too); a
    GitSync's only counts them (`history.in_status`)."""
    previous = previous or {}
    conditions = _conditions(report, suspended, _condition(previous, "Ready"))
    stamp = _timestamp(now if now is not None else time.time())
    status: Document = {
        "observedGeneration": generation,
        "conditions": [
            _stamped(kind, state, reason, message, generation, previous, stamp)
            for kind, (state, reason, message) in conditions.items()
        ],
        # a new worker (a changed spec) has read and applied nothing yet: what was, stays
        "lastAttemptedRevision": report.attempted_revision
        or previous.get("lastAttemptedRevision", ""),
        "lastAppliedRevision": report.applied_revision or previous.get("lastAppliedRevision", ""),
        "lastHandledReconcileAt": report.handled_request
        or previous.get("lastHandledReconcileAt", ""),
        "drift": _drift_summary(report.drifts or [], report.accepted),
        "health": _health_summary(report.health),
        "inventory": _inventory(report.inventory),
        "history": _history(report.history, previous.get("history") or [], named),
    }
    if report.synced_at is not None:
        status["lastSyncTime"] = _timestamp(report.synced_at)
    elif previous.get("lastSyncTime"):
        status["lastSyncTime"] = previous["lastSyncTime"]
    return status


def failed_status(
    generation: int, failure: Failure, previous: Document | None, handled: str = ""
) -> Document:
    """The status of a GitSync that cannot run at all (its spec or its secret): no sync
    time, as no source of it runs. A request to reconcile now (`handled`) is answered by
    this failure."""
    report = SourceReport(failure=failure, handled_request=handled)
    status = status_of(generation, report, previous)
    status.pop("lastSyncTime", None)
    return status


def summary(name: str, status: Document, suspended: bool) -> Document:
    """One line of `gitopsd get`, for a GitSync (its status) or a daemon's source (the
    status its report would make): the same words either way."""
    ready = _condition(status, "Ready") or {}
    stalled = (_condition(status, "Stalled") or {}).get("status") == "True"
    retrying = (_condition(status, "Reconciling") or {}).get("reason") == "ProgressingWithRetry"
    return {
        "name": name,
        "ready": ready.get("status", "Unknown"),
        "reason": ready.get("reason", ""),
        "revision": status.get("lastAppliedRevision", ""),
        "drift": (status.get("drift") or {}).get("total", 0),
        "health": (status.get("health") or {}).get("status", "Unknown"),
        "suspended": suspended,
        "failed": stalled or retrying,
        "message": ready.get("message", ""),
        "lastHandledReconcileAt": status.get("lastHandledReconcileAt", ""),
        "lastSyncTime": status.get("lastSyncTime", ""),
    }


Conditions = dict[str, tuple[str, str, str]]
"""type: (status, reason, message)."""


def _conditions(report: SourceReport, suspended: bool, ready: Document | None) -> Conditions:
    if suspended:
        last = (ready or {}).get("status", "Unknown")  # kept while suspended
        return {"Ready": (last, "Suspended", "reconciliation is suspended (spec.suspend)")}
    failure = report.failure
    if failure is not None and failure.stalled:
        return {
            "Ready": ("False", failure.reason, failure.message),
            "Stalled": ("True", failure.reason, failure.message),
        }
    if failure is not None:
        return {
            "Ready": ("False", failure.reason, failure.message),
            "Reconciling": ("True", "ProgressingWithRetry", failure.message),
        }
    if report.finished == 0:
        message = "reconciling for the first time since this generation"
        return {
            "Ready": ("Unknown", "Progressing", message),
            "Reconciling": ("True", "Progressing", message),
        }
    if report.not_applied:
        return _stalled("ApplyRefused", "not applied", report.not_applied)
    if report.refused:
        return _stalled("PruneBlocked", "not pruned", report.refused)
    if report.waiting:
        return {
            "Ready": ("False", "DependencyNotReady", report.waiting),
            "Reconciling": ("True", "DependencyNotReady", report.waiting),
        }
    drifts = report.drifts or []
    if drifts:
        return {"Ready": ("False", "DriftDetected", _drift_message(drifts))}
    return _health_conditions(report)


def _stalled(reason: str, what: str, objects: list[str]) -> Conditions:
    """Objects the last sync left alone until a person acts, each with why."""
    kept = f"{len(objects)} object" + (" was" if len(objects) == 1 else "s were")
    message = _short(f"{kept} {what}: " + "; ".join(objects))
    return {"Ready": ("False", reason, message), "Stalled": ("True", reason, message)}


def _health_conditions(report: SourceReport) -> Conditions:
    """Ready once every object of the revision is healthy, not only applied."""
    brief = digest(report.health or {}, SHOWN_IN_MESSAGE)
    if brief.status == Status.FAILED:
        return {"Ready": ("False", "HealthCheckFailed", _health_message(brief))}
    if brief.status != Status.CURRENT:
        message = _health_message(brief)
        return {
            "Ready": ("False", "Progressing", message),
            "Reconciling": ("True", "Progressing", message),
        }
    revision = report.applied_revision or report.attempted_revision
    return {
        "Ready": ("True", "Succeeded", f"revision {revision or 'local'} is in sync and healthy")
    }


def _health_message(brief: Digest) -> str:
    named = "; ".join(f"{key}: {h}" for key, h in brief.first[:SHOWN_IN_MESSAGE])
    more = brief.failing - SHOWN_IN_MESSAGE
    count = f"{brief.failing} of {brief.total} objects"
    return _short(f"{count} not healthy yet: {named}" + (f"; and {more} more" if more > 0 else ""))


def _stamped(
    kind: str,
    state: str,
    reason: str,
    message: str,
    generation: int,
    previous: Document,
    now: str,
) -> Document:
    before = _condition(previous, kind)
    unchanged = before is not None and before.get("status") == state
    return {
        "type": kind,
        "status": state,
        "observedGeneration": generation,
        "lastTransitionTime": before["lastTransitionTime"] if before and unchanged else now,
        "reason": reason,
        "message": message,
    }


def _condition(status: Document, kind: str) -> Document | None:
    found: Document | None = next(
        (c for c in status.get("conditions") or [] if c.get("type") == kind), None
    )
    return found


def _drift_message(drifts: list[Drift]) -> str:
    counts = Counter(str(d.state) for d in drifts)
    summary = ", ".join(f"{counts[str(s)]} {s}" for s in State if counts[str(s)])
    first = sorted(drifts, key=lambda d: d.key)[:5]
    named = "; ".join(_described(d) for d in first)
    more = f"; and {len(drifts) - len(first)} more" if len(drifts) > len(first) else ""
    count = f"{len(drifts)} object differs" if len(drifts) == 1 else f"{len(drifts)} objects differ"
    return _short(f"{count} from git ({summary}): {named}{more}")


def _described(drift: Drift) -> str:
    fields = ", ".join(f"{c.path} (by {c.manager})" for c in drift.changes[:5])
    detail = drift.reason or fields
    return f"{drift.key} {drift.state}" + (f": {detail}" if detail else "")


def _history(current: list[Document], previous: list[Document], named: bool) -> list[Document]:
    kept = history.merged(current, previous)
    return kept if named else history.in_status(kept)


def _drift_summary(drifts: list[Drift], accepted: list[Drift]) -> Document:
    counts = Counter(str(d.state) for d in drifts)
    shown = sorted(drifts, key=lambda d: d.key)[:MAX_DRIFTED_SHOWN]
    return {
        "total": len(drifts),
        **{str(state): counts[str(state)] for state in State},
        "objects": [
            {
                "object": str(d.key),
                "state": str(d.state),
                "fields": [_field(c) for c in d.changes],
                **({"reason": d.reason} if d.reason else {}),
            }
            for d in shown
        ],
        "accepted": len(accepted),
        "acceptedObjects": [
            {"object": str(d.key), "fields": [_field(c) for c in d.accepted]}
            for d in sorted(accepted, key=lambda d: d.key)[:MAX_DRIFTED_SHOWN]
        ],
    }


def _field(change: FieldChange) -> Document:
    """A field that differs, its manager, and the rule that decided it, if one did."""
    decided = {"decision": str(change.decision), "rule": change.rule} if change.rule else {}
    return {"path": change.path, "manager": change.manager, **decided}


def _health_summary(healths: dict[ObjectKey, Health] | None) -> Document:
    """Unknown until a revision was read and its objects assessed: no objects assessed is
    not the same as all of them Current."""
    brief = digest(healths or {}, MAX_DRIFTED_SHOWN)
    status = brief.status if healths is not None else Status.UNKNOWN
    return {
        "status": str(status),
        "total": brief.total,
        "current": brief.total - brief.failing,
        "objects": [
            {"object": str(key), "status": str(h.status), "reason": h.reason, "message": h.message}
            for key, h in brief.first
        ],
    }


def _inventory(kinds: Counter[GroupKind]) -> Document:
    return {
        "total": sum(kinds.values()),
        "kinds": [
            {"groupKind": str(kind), "count": count} for kind, count in sorted(kinds.items())
        ],
    }


def events(previous: Document | None, current: Document) -> list[Event]:
    """The Events a status change is worth: a revision applied, and each new problem."""
    previous = previous or {}
    found = []
    applied = current.get("lastAppliedRevision")
    if applied and applied != previous.get("lastAppliedRevision"):
        count = current["inventory"]["total"]
        objects = f"{count} object" + ("" if count == 1 else "s")
        found.append(Event("Normal", "Synced", f"applied revision {applied} ({objects})"))
    ready, before = _condition(current, "Ready") or {}, _condition(previous, "Ready") or {}
    news = (ready.get("reason"), ready.get("message")) != (
        before.get("reason"),
        before.get("message"),
    )
    reason = ready.get("reason")
    if ready.get("status") == "False" and reason not in QUIET_REASONS and news:
        kind = reason if reason in OWN_EVENT_REASONS else "Failed"
        found.append(Event("Warning", kind, ready["message"]))
    return found


QUIET_REASONS = frozenset({"Suspended", "Progressing", "DependencyNotReady"})
"""Ready False for these is work under way or asked for: no Warning Event."""
OWN_EVENT_REASONS = frozenset(
    {"DriftDetected", "PruneBlocked", "ApplyRefused", "HealthCheckFailed"}
)


def _short(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def _timestamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
