"""The one object a sync sends without a dry-run: all the sync writes, and its dry-run
would only check it (`measure.lone_write`), as a table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from gitopsd.changes import Live, Target
from gitopsd.config import SyncSettings
from gitopsd.drift_policy import Decision, Rule
from gitopsd.objects import Body, ObjectKey, Origin
from gitopsd.reconcile.measure import IN_SYNC, DriftMemo, lone_write
from gitopsd.resources import CONFIG_MAPS

NAMES = ("a", "b", "c")


def key(name: str) -> ObjectKey:
    return ObjectKey("", "ConfigMap", "gitops", name)


def target(name: str, value: str = "v", annotations: dict[str, str] | None = None) -> Target:
    metadata = {"name": name, "namespace": "gitops", "annotations": annotations or {}}
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"k": value}}
    return Target(key(name), body, Origin(f"{name}.yaml", 1), CONFIG_MAPS)


def live(version: str) -> Body:
    return {"metadata": {"resourceVersion": version, "uid": "0a1b2c3d-0000"}}


class Fleet:
    """Three ConfigMaps, each applied and remembered in sync at version 1."""

    def __init__(self) -> None:
        self.targets = {key(n): target(n) for n in NAMES}
        self.live: dict[ObjectKey, Body | None] = {key(n): live("1") for n in NAMES}
        self.memo = DriftMemo()
        for name in NAMES:
            self.memo.remember(self.targets[key(name)], live("1"), IN_SYNC)
        self.owned: dict[ObjectKey, Body] = {}
        self.settings = SyncSettings("app", default_namespace="gitops")

    def lone(self) -> str | None:
        state = Live(None, self.owned, self.live, {k: "0a1b2c3d" for k in self.owned})
        present = [k for k, body in self.live.items() if body is not None]
        stale = [
            t for k, t in self.targets.items() if (b := self.live[k]) and not self.memo.fresh(t, b)
        ]
        found = lone_write(self.settings, self.targets, state, self.memo, present, stale)
        return found.key.name if found else None


def new_body(fleet: Fleet, name: str = "a") -> None:
    fleet.targets[key(name)] = target(name, "changed")


def created(fleet: Fleet, name: str = "d") -> None:
    fleet.targets[key(name)] = target(name)
    fleet.live[key(name)] = None


def both(*edits: Callable[[Fleet], None]) -> Callable[[Fleet], None]:
    def edit(fleet: Fleet) -> None:
        for one in edits:
            one(fleet)

    return edit


def moved(fleet: Fleet) -> None:
    """Someone edited the object since it was measured: its dry-run measures that drift."""
    edit = {"manager": "kubectl-edit", "operation": "Update", "fieldsV1": {"f:data": {"f:k": {}}}}
    fleet.live[key("a")] = {
        "metadata": {**live("2")["metadata"], "managedFields": [edit]},
        "data": {"k": "edited"},
    }


def left_git(fleet: Fleet) -> None:
    fleet.owned[key("gone")] = live("1")


def ruled(fleet: Fleet) -> None:
    fleet.settings = replace(fleet.settings, drift_rules=(Rule(Decision.ACCEPT, "r"),))


def replaced(fleet: Fleet) -> None:
    annotations = {"gitopsd.io/sync-options": "replace-on-immutable"}
    fleet.targets[key("a")] = target("a", "changed", annotations)


def dry(fleet: Fleet) -> None:
    fleet.settings = replace(fleet.settings, dry_run=True)


CASES = [
    ("a new git body on the live version measured", new_body, "a"),
    ("one object to create: its dry-run measures its drift", created, None),
    ("nothing to write", lambda fleet: None, None),
    ("two new bodies", both(new_body, lambda f: new_body(f, "b")), None),
    ("a new body and an object to create", both(new_body, created), None),
    ("a new body on a live version that moved", both(new_body, moved), None),
    ("an object to create and one that left git", both(created, left_git), None),
    ("a new body a drift rule may hold", both(new_body, ruled), None),
    ("a new body whose immutable fields would be replaced", replaced, None),
    ("a dry run", both(new_body, dry), None),
]


@pytest.mark.parametrize(("edit", "lone"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_lone_write(edit: Callable[[Fleet], None], lone: str | None) -> None:
    fleet = Fleet()
    edit(fleet)
    assert fleet.lone() == lone
