"""Of the fields the API server refuses to change once set, those git changes: the server
names the field it guards, the refusal names what the commit changed under it."""

from __future__ import annotations

import pytest

from gitopsd.config import SyncSettings
from gitopsd.immutable import changed_fields
from gitopsd.objects import Body
from gitopsd.plan import replacing
from gitopsd.target_identity import Tool

STATEFUL_SET_ALLOWS = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)


def stateful_set(storage: str, replicas: int = 1, image: str = "db:1") -> Body:
    claim = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}},
    }
    template = {"spec": {"containers": [{"name": "db", "image": image}]}}
    spec = {"replicas": replicas, "template": template, "volumeClaimTemplates": [claim]}
    return {"spec": spec}


def live_stateful_set(storage: str) -> Body:
    """As stored: the server's defaults beside what was applied."""
    body = stateful_set(storage)
    claim = body["spec"]["volumeClaimTemplates"][0]
    claim["spec"]["volumeMode"] = "Filesystem"
    claim["status"] = {"phase": "Pending"}
    body["spec"]["podManagementPolicy"] = "OrderedReady"
    return body


CASES = [
    # the StatefulSet: the server names `spec`; the commit changed the claim's storage (and
    # replicas and the image, which may change)
    (
        stateful_set("2Gi", replicas=3, image="db:2"),
        live_stateful_set("1Gi"),
        ["spec"],
        STATEFUL_SET_ALLOWS,
        ("spec.volumeClaimTemplates[0].spec.resources.requests.storage",),
    ),
    # a Job's template: the server names spec.template; the container, by its name
    (
        {"spec": {"template": {"spec": {"containers": [{"name": "run", "command": ["b"]}]}}}},
        {"spec": {"template": {"spec": {"containers": [{"name": "run", "command": ["a"]}]}}}},
        ["spec.template"],
        (),
        ("spec.template.spec.containers[name=run].command[0]",),
    ),
    # a port written as a number and stored as one is no change; nothing named: the server's
    ({"spec": {"port": 80}}, {"spec": {"port": "80"}}, ["spec"], (), ("spec",)),
    # a selector git changes
    (
        {"spec": {"selector": {"matchLabels": {"app": "b"}}}},
        {"spec": {"selector": {"matchLabels": {"app": "a"}}}},
        ["spec.selector"],
        (),
        ("spec.selector.matchLabels.app",),
    ),
]


@pytest.mark.parametrize(("declared", "live", "guarded", "allowed", "named"), CASES)
def test_the_refusal_names_what_git_changes_under_the_guarded_field(
    declared: Body,
    live: Body,
    guarded: list[str],
    allowed: tuple[str, ...],
    named: tuple[str, ...],
) -> None:
    assert changed_fields(declared, live, guarded, allowed) == named


@pytest.mark.parametrize(
    ("tool", "remedy"),
    [
        (Tool.CLI, "give --replace-on-immutable or annotate"),
        (Tool.DAEMON, "give replaceOnImmutable: true or annotate"),
        (Tool.GITSYNC, "give spec.replaceOnImmutable or annotate"),
    ],
)
def test_the_remedy_is_said_in_the_words_of_the_place(tool: Tool, remedy: str) -> None:
    said = replacing(SyncSettings("app", tool=tool))
    assert remedy in said and "gitopsd.io/sync-options: replace-on-immutable" in said
