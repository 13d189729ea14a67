"""The writes of a large sync's new ConfigMaps (named new...), for the tests that stop a
sync while it applies them: the request the fault proxy slows, and the ones the audit log
shows applied."""

from __future__ import annotations

from tests.harness import audit
from tests.harness.controlplane import ControlPlane
from tests.harness.faultproxy import Request


def write_of_a_new_config_map(request: Request) -> bool:
    return (
        request.method == "PATCH"
        and "/configmaps/new" in request.path
        and "dryRun" not in request.query
    )


def creates(plane: ControlPlane, user: str, since: float = 0.0) -> list[audit.Write]:
    """The ConfigMaps `user` applied for real (not dry-run) since `since`."""
    return [
        w
        for w in audit.changes(plane, user, since)
        if w.verb == "patch" and w.resource == "configmaps" and w.name.startswith("new")
    ]
