"""The API server's audit log read back: which user's writes reached the server, and when
(and every request of the audited user, reads included).

Claims such as "only the leader writes" are checked here, against what the server
recorded, never against what a process says about itself. A window the log may no longer
hold whole (the API server rotated it meanwhile) fails the read, loudly: "no DELETE" must
never pass because the DELETE went to a rotated file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from gitopsd.gitsync import status_map
from tests.harness.controlplane import WRITE_VERBS, ControlPlane


@dataclass(frozen=True)
class Write:
    """A request the server logged: a write, or any request of the audited user."""

    user: str
    verb: str
    resource: str
    namespace: str
    name: str
    dry_run: bool
    code: int
    uri: str
    received: float
    """Unix seconds when the server received the request."""
    acting_as: str = ""
    """The user `user` impersonated for the request, if any (as a GitSync's ServiceAccount)."""
    answer: Mapping[str, Any] | None = None
    """The object the write made, where the policy logs it (a Job's status writes)."""
    request: Mapping[str, Any] | None = None
    """The request's body, where the policy logs it (a DELETE's options)."""


QUESTIONS = frozenset({"selfsubjectaccessreviews", "subjectaccessreviews", "tokenreviews"})
"""Created, yet stored nowhere: a review only asks the API server what someone may do."""


def writes(plane: ControlPlane, user: str, since: float = 0.0) -> list[Write]:
    """Every write request by `user` received at or after `since`, dry-runs included (a
    review, which only asks, is not one)."""
    logged = requests(plane, user, since)
    return [w for w in logged if w.verb in WRITE_VERBS and w.resource not in QUESTIONS]


def requests(plane: ControlPlane, user: str, since: float = 0.0) -> list[Write]:
    """Every logged request by `user` received at or after `since`: all of AUDITED_USER's."""
    return [w for w in _logged(plane, since) if w.user == user]


def _logged(plane: ControlPlane, since: float) -> list[Write]:
    found = []
    for event in events(plane.audit_log, since, plane.ready_at):
        if event.get("stage") != "ResponseComplete":
            continue
        write = _write(event)
        if write.received >= since:
            found.append(write)
    return found


class RotatedLog(AssertionError):
    """The audit log may not hold every event of the window read."""


def events(log: Path, since: float, began: float) -> list[dict[str, Any]]:
    """The complete events of `log` (the server may be writing the last line), once it is
    sure to hold every event from `since` on: raises RotatedLog if a file the server
    rotated out of it was written since then, or if its first event is later than `since`
    though it began (at `began`) before."""
    rotated = sorted(p.name for p in _rotated(log) if p.stat().st_mtime >= since)
    if rotated:
        raise RotatedLog(f"{log} was rotated after {_when(since)}, into {', '.join(rotated)}")
    if not log.exists():
        return []
    text = log.read_text()
    logged = [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]
    first = _received(logged[0]) if logged else None
    if first is not None and began <= since < first:
        raise RotatedLog(f"{log} begins at {_when(first)}, after {_when(since)}: rotated")
    return logged


def _rotated(log: Path) -> list[Path]:
    """The files the API server's log rotation (lumberjack) made of `log`: audit.log becomes
    audit-2006-01-02T15-04-05.000.log beside it (gzipped with --audit-log-compress)."""
    return list(log.parent.glob(f"{log.stem}-*{log.suffix}*"))


def _when(stamp: float) -> str:
    return datetime.fromtimestamp(stamp).isoformat(timespec="milliseconds")


def writes_by_anyone(plane: ControlPlane, since: float = 0.0) -> list[Write]:
    """Every write request any user made at or after `since`, dry-runs excluded."""
    logged = _logged(plane, since)
    return [
        w for w in logged if w.verb in WRITE_VERBS and not w.dry_run and w.resource not in QUESTIONS
    ]


def deletes(plane: ControlPlane, namespace: str, since: float = 0.0) -> list[Write]:
    """Every DELETE anyone sent for an object of `namespace` at or after `since`, dry-runs
    included: "nothing was pruned" read from what the server received."""
    logged = _logged(plane, since)
    return [w for w in logged if w.verb == "delete" and w.namespace == namespace]


def impersonated(plane: ControlPlane, acting_as: str, since: float = 0.0) -> list[Write]:
    """Every logged request made as `acting_as` by whoever impersonated it."""
    return [w for w in _logged(plane, since) if w.acting_as == acting_as]


def changes(plane: ControlPlane, user: str, since: float = 0.0) -> list[Write]:
    """The writes by `user` that could change the cluster: no dry-runs, no Lease traffic
    (candidates write the Lease by design), no status ConfigMap of the daemon's sources
    (its own bookkeeping, as a GitSync's status: `status_writes` counts those)."""
    found = writes(plane, user, since)
    return [w for w in found if not w.dry_run and w.resource != "leases" and not _status(w)]


def status_writes(plane: ControlPlane, user: str, since: float = 0.0) -> list[Write]:
    """The writes by `user` of the configured sources' status ConfigMaps."""
    return [w for w in writes(plane, user, since) if _status(w)]


def _status(write: Write) -> bool:
    return write.resource == "configmaps" and write.name.startswith(status_map.PREFIX)


def _write(event: dict[str, object]) -> Write:
    ref = event.get("objectRef") or {}
    assert isinstance(ref, dict)
    status = event.get("responseStatus") or {}
    assert isinstance(status, dict)
    user = event.get("user") or {}
    assert isinstance(user, dict)
    acting_as = event.get("impersonatedUser") or {}
    assert isinstance(acting_as, dict)
    return Write(
        user=str(user.get("username", "")),
        verb=str(event.get("verb", "")),
        resource=str(ref.get("resource", "")),
        namespace=str(ref.get("namespace", "")),
        name=str(ref.get("name", "")),
        dry_run="dryRun=All" in str(event.get("requestURI", "")),
        code=int(status.get("code", 0)),
        uri=str(event.get("requestURI", "")),
        received=_received(event),
        acting_as=str(acting_as.get("username", "")),
        answer=answer if isinstance(answer := event.get("responseObject"), dict) else None,
        request=asked if isinstance(asked := event.get("requestObject"), dict) else None,
    )


def _received(event: Mapping[str, Any]) -> float:
    """Unix seconds when the server received the event's request."""
    stamp = str(event["requestReceivedTimestamp"]).replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).timestamp()
