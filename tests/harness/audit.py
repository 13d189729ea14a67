"""The API server's audit log read back: which user's writes reached the server, and when
(and every request of the audited user, reads included).

Claims such as "only the leader writes" are checked here, against what the server
recorded, never against what a process says about itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

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
    if not plane.audit_log.exists():
        return []
    found = []
    text = plane.audit_log.read_text()
    complete = text[: text.rfind("\n") + 1]  # the server may be writing the last line
    for line in complete.splitlines():
        event = json.loads(line)
        if event.get("stage") != "ResponseComplete":
            continue
        write = _write(event)
        if write.received >= since:
            found.append(write)
    return found


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
    (candidates write the Lease by design)."""
    return [w for w in writes(plane, user, since) if not w.dry_run and w.resource != "leases"]


def _write(event: dict[str, object]) -> Write:
    ref = event.get("objectRef") or {}
    assert isinstance(ref, dict)
    status = event.get("responseStatus") or {}
    assert isinstance(status, dict)
    user = event.get("user") or {}
    assert isinstance(user, dict)
    acting_as = event.get("impersonatedUser") or {}
    assert isinstance(acting_as, dict)
    stamp = str(event["requestReceivedTimestamp"]).replace("Z", "+00:00")
    return Write(
        user=str(user.get("username", "")),
        verb=str(event.get("verb", "")),
        resource=str(ref.get("resource", "")),
        namespace=str(ref.get("namespace", "")),
        name=str(ref.get("name", "")),
        dry_run="dryRun=All" in str(event.get("requestURI", "")),
        code=int(status.get("code", 0)),
        uri=str(event.get("requestURI", "")),
        received=datetime.fromisoformat(stamp).timestamp(),
        acting_as=str(acting_as.get("username", "")),
        answer=answer if isinstance(answer := event.get("responseObject"), dict) else None,
        request=asked if isinstance(asked := event.get("requestObject"), dict) else None,
    )
