"""The GitSync CRD as the real API server enforces it: an invalid GitSync is refused before it
is stored (422, naming the rule), unknown fields are pruned, a minimal one is stored with
every default filled in, the status gitopsd writes is kept whole, and the printer columns
read it."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from kubernetes import client

from gitopsd.diff import Drift, FieldChange, State
from gitopsd.gitsync import GROUP, PLURAL, VERSION, status
from gitopsd.gitsync.status import SourceReport
from gitopsd.health import Health, Status
from gitopsd.objects import GroupKind, ObjectKey

URL = "https://git.example.com/team/apps.git"
SSH_URL = "git@git.example.com:team/apps.git"
TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"


def gitsync(name: str = "app", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GitSync",
        "metadata": {"name": name},
        "spec": {"repository": {"url": URL}, **spec},
    }


def create(api: Any, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    custom: Any = client.CustomObjectsApi(api)
    stored: dict[str, Any] = custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body
    )
    return stored


def without(key: str) -> dict[str, Any]:
    body = gitsync()
    del body["spec"][key]
    return body


INVALID = {
    "missing repository": (without("repository"), ["spec.repository", "Required value"]),
    "missing url": (gitsync(repository={"ref": "main"}), ["spec.repository.url", "Required"]),
    "url scheme": (
        gitsync(repository={"url": "ftp://x"}),
        ["spec.repository.url in body should match"],
    ),
    "mode enum": (gitsync(mode="sometimes"), ["spec.mode", "Unsupported value", "enforce"]),
    "interval pattern": (gitsync(interval="5x"), ["spec.interval in body should match"]),
    "interval below 1s": (gitsync(interval="0s"), ["spec.interval", "from 1s to 168h"]),
    "interval above 7 days": (gitsync(interval="200h"), ["spec.interval", "from 1s to 168h"]),
    "timeout above 7 days": (gitsync(timeout="169h"), ["spec.timeout", "from 1s to 168h"]),
    "budget 0": (
        gitsync(prune=True, guards={"pruneBudgetPercent": 0}),
        ["spec.guards.pruneBudgetPercent", "greater than 0"],
    ),
    "budget 101": (
        gitsync(prune=True, guards={"pruneBudgetPercent": 101}),
        ["spec.guards.pruneBudgetPercent", "less than or equal to 100"],
    ),
    "absolute path": (gitsync(paths=["apps", "/abs"]), ["spec.paths[1]", "without '..'"]),
    "path with ..": (gitsync(paths=["a/../b"]), ["spec.paths[0]", "without '..'"]),
    "path of ..": (gitsync(paths=[".."]), ["spec.paths[0]", "without '..'"]),
    "empty paths": (gitsync(paths=[]), ["spec.paths", "at least 1 items"]),
    "empty path": (gitsync(paths=[""]), ["spec.paths[0]", "at least 1 chars"]),
    "prune in observe mode": (
        gitsync(mode="observe", prune=True),
        ["prune needs mode enforce"],
    ),
    "prune in warn mode": (gitsync(mode="warn", prune=True), ["prune needs mode enforce"]),
    "mass prune without prune": (
        gitsync(guards={"allowMassPrune": True}),
        ["guards.allowMassPrune needs prune"],
    ),
    "ssh url without secretRef": (
        gitsync(repository={"url": "ssh://git@git.example.com/team/apps.git"}),
        ["spec.repository", "an ssh repository needs a secretRef"],
    ),
    "scp-like url without secretRef": (
        gitsync(repository={"url": SSH_URL}),
        ["spec.repository", "an ssh repository needs a secretRef"],
    ),
    "file url with secretRef": (
        gitsync(repository={"url": "file:///srv/git/apps", "secretRef": {"name": "creds"}}),
        ["spec.repository", "a file:// repository takes no secretRef"],
    ),
    "secretRef without name": (
        gitsync(repository={"url": URL, "secretRef": {}}),
        ["spec.repository.secretRef.name", "Required"],
    ),
    "targetNamespace": (
        gitsync(targetNamespace="Bad_NS"),
        ["spec.targetNamespace in body should match"],
    ),
    "serviceAccountName": (
        gitsync(serviceAccountName="Deployer!"),
        ["spec.serviceAccountName in body should match"],
    ),
    "name with a dot (a source name has none)": (
        gitsync("my.app"),
        ["metadata.name: at most 50 lower-case letters"],
    ),
    "name over 50 characters": (
        gitsync("a" * 51),
        ["metadata.name: at most 50 lower-case letters"],
    ),
    "selfHeal not a boolean": (gitsync(selfHeal="yes"), ["spec.selfHeal", "boolean"]),
    "missing spec": (
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GitSync", "metadata": {"name": "app"}},
        ["spec", "Required value"],
    ),
}


@pytest.mark.parametrize("case", INVALID, ids=list(INVALID))
def test_an_invalid_gitsync_is_refused_naming_the_rule(
    admin_api: Any, namespace: str, gitsync_crd: str, case: str
) -> None:
    body, mentions = INVALID[case]

    with pytest.raises(client.ApiException) as refused:
        create(admin_api, namespace, body)

    assert refused.value.status == 422, refused.value.body
    message = json.loads(str(refused.value.body))["message"]
    for mention in mentions:
        assert mention in message, message
    assert listed(admin_api, namespace) == []


def listed(api: Any, namespace: str) -> list[str]:
    custom: Any = client.CustomObjectsApi(api)
    found = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    return [item["metadata"]["name"] for item in found["items"]]


VALID = {
    "scp-like url with secretRef": gitsync(
        repository={"url": SSH_URL, "secretRef": {"name": "git-ssh"}}
    ),
    "file url": gitsync(repository={"url": "file:///srv/git/apps"}),
    "prune with every guard": gitsync(
        prune=True,
        guards={
            "allowEmpty": True,
            "pruneBudgetPercent": 100,
            "allowMassPrune": True,
            "pruneProtected": True,
        },
    ),
    "observe without prune": gitsync(mode="observe", selfHeal=False, suspend=True),
    "durations at the bounds": gitsync(interval="1s", timeout="168h"),
    "composite duration": gitsync(interval="1h30m", timeout="2.5s"),
    "name of 50 characters": gitsync("a" * 50),
    "path with dots in names": gitsync(paths=["a..b/c", "./apps", "..x"]),
}


@pytest.mark.parametrize("case", VALID, ids=list(VALID))
def test_a_valid_gitsync_is_stored(
    admin_api: Any, namespace: str, gitsync_crd: str, case: str
) -> None:
    body = VALID[case]

    stored = create(admin_api, namespace, body)

    for key, value in body["spec"].items():
        kept = stored["spec"][key]
        # a mapping is stored with its defaults added; everything given is kept as given
        assert ({**kept, **value} if isinstance(value, dict) else value) == kept, key


def test_a_minimal_gitsync_is_stored_with_every_default(
    admin_api: Any, namespace: str, gitsync_crd: str
) -> None:
    stored = create(admin_api, namespace, gitsync())

    assert stored["spec"] == {
        "repository": {"url": URL, "ref": "HEAD"},
        "paths": ["."],
        "include": ["*.yaml", "*.yml", "*.json"],
        "exclude": [],
        "interval": "60s",
        "timeout": "600s",
        "mode": "enforce",
        "prune": False,
        "selfHeal": True,
        "suspend": False,
        "replaceOnImmutable": False,
        "adopt": False,
        "createNamespace": False,
        "guards": {
            "allowEmpty": False,
            "pruneBudgetPercent": 25,
            "allowMassPrune": False,
            "pruneProtected": False,
        },
    }


def test_unknown_fields_are_pruned_not_refused(
    admin_api: Any, namespace: str, gitsync_crd: str
) -> None:
    body = gitsync(
        repository={"url": URL, "branch": "main"},
        credentials={"passwordEnv": "GITOPSD_GIT_PASSWORD"},
        guards={"budget": 10},
    )
    body["surprise"] = True

    stored = create(admin_api, namespace, body)

    assert "surprise" not in stored
    assert "credentials" not in stored["spec"]
    assert "branch" not in stored["spec"]["repository"]
    assert "budget" not in stored["spec"]["guards"]


def status_subresource(api: Any, namespace: str, name: str, written: dict[str, Any]) -> Any:
    custom: Any = client.CustomObjectsApi(api)
    live = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    live["status"] = written
    return custom.replace_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, live
    )


def drifted_report(count: int) -> SourceReport:
    drifts = [
        Drift(
            ObjectKey("apps", "Deployment", "team", f"web-{i:02}"),
            State.MODIFIED,
            (FieldChange("spec.replicas", live=3, desired=2, manager="kubectl-edit"),),
        )
        for i in range(count)
    ] + [Drift(ObjectKey("", "ConfigMap", "team", "gone"), State.MISSING)]
    rolling = Health(Status.IN_PROGRESS, "Rollout", "available replicas 0/3")
    return SourceReport(
        finished=1,
        attempted_revision="0123456789abcdef",
        applied_revision="0123456789abcdef",
        synced_at=1_700_000_000.0,
        drifts=drifts,
        inventory=Counter({GroupKind("apps", "Deployment"): count, GroupKind("", "ConfigMap"): 1}),
        health={drift.key: rolling for drift in drifts},
    )


def test_the_status_gitopsd_writes_is_kept_whole(
    admin_api: Any, namespace: str, gitsync_crd: str
) -> None:
    """Every field status_of writes is in the CRD's status schema (none is pruned), and a
    long drift list stays within the schema's bound."""
    create(admin_api, namespace, gitsync())
    written = status.status_of(1, drifted_report(30), None, now=1_700_000_000.0)
    assert written["drift"]["total"] == 31
    assert written["health"]["total"] == 31 and len(written["health"]["objects"]) == 20

    stored = status_subresource(admin_api, namespace, "app", written)

    assert stored["status"] == written


def test_the_status_subresource_ignores_the_spec(
    admin_api: Any, namespace: str, gitsync_crd: str
) -> None:
    create(admin_api, namespace, gitsync())
    custom: Any = client.CustomObjectsApi(admin_api)
    live = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "app")
    live["spec"]["mode"] = "observe"
    live["status"] = status.status_of(1, SourceReport(), None, now=1_700_000_000.0)

    stored = custom.replace_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, "app", live
    )

    assert stored["spec"]["mode"] == "enforce"
    assert stored["metadata"]["generation"] == 1
    assert stored["status"]["observedGeneration"] == 1


def table(api: Any, namespace: str) -> dict[str, Any]:
    """`kubectl get gitsyncs`'s view: the list as a meta.k8s.io Table."""
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    request = api.param_serialize(
        "GET", path, header_params={"Accept": TABLE}, auth_settings=["BearerToken"]
    )
    response = api.call_api(*request)
    response.read()
    assert response.status == 200, response.data
    found: dict[str, Any] = json.loads(response.data)
    return found


def test_printer_columns_show_ready_mode_revision_and_drift(
    admin_api: Any, namespace: str, gitsync_crd: str
) -> None:
    create(admin_api, namespace, gitsync(mode="warn"))
    status_subresource(
        admin_api, namespace, "app", status.status_of(1, drifted_report(2), None, now=1.7e9)
    )

    found = table(admin_api, namespace)

    columns = [(c["name"], c["priority"]) for c in found["columnDefinitions"]]
    assert columns == [
        ("Name", 0),
        ("Ready", 0),
        ("Mode", 0),
        ("Revision", 0),
        ("Drift", 0),
        ("Health", 0),
        ("Suspended", 0),
        ("Age", 0),
        ("Message", 1),
    ]
    [row] = found["rows"]
    name, ready, mode, revision, drift, health, suspended, _age, message = row["cells"]
    assert (name, ready, mode, revision, drift) == ("app", "False", "warn", "0123456789abcdef", 3)
    assert (health, suspended) == ("InProgress", False)
    assert message.startswith("3 objects differ from git")
