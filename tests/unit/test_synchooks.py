"""Which objects are sync hooks, read from gitopsd's, Argo CD's and Helm's annotations."""

from __future__ import annotations

import pytest

from gitopsd.config import Limits
from gitopsd.errors import ManifestError
from gitopsd.manifests import parse_documents
from gitopsd.manifests.identity import manifests_of
from gitopsd.objects import Manifest, ObjectKey
from gitopsd.synchooks import DeletePolicy, Phase, SyncHook, hook_of

PRE, SYNC, POST, FAIL = Phase.PRE_SYNC, Phase.SYNC, Phase.POST_SYNC, Phase.SYNC_FAIL
BEFORE = DeletePolicy.BEFORE_HOOK_CREATION
SUCCEEDED, FAILED = DeletePolicy.HOOK_SUCCEEDED, DeletePolicy.HOOK_FAILED


def hook(
    phases: set[Phase],
    policies: set[DeletePolicy] | None = None,
    weight: int = 0,
    wave: int | None = None,
) -> SyncHook:
    return SyncHook(frozenset(phases), frozenset(policies or {BEFORE}), weight, wave)


HOOKS: dict[str, tuple[dict[str, str], SyncHook | None]] = {
    "no annotation: a member": ({"other": "x"}, None),
    "gitopsd pre-sync": ({"gitopsd.io/hook": "pre-sync"}, hook({PRE})),
    "gitopsd phases and policies": (
        {
            "gitopsd.io/hook": "sync, sync-fail",
            "gitopsd.io/hook-delete-policy": "hook-succeeded,hook-failed",
            "gitopsd.io/sync-wave": "-2",
        },
        hook({SYNC, FAIL}, {SUCCEEDED, FAILED}, -2, wave=-2),
    ),
    "Argo CD PreSync": (
        {
            "argocd.argoproj.io/hook": "PreSync",
            "argocd.argoproj.io/hook-delete-policy": "HookSucceeded",
            "argocd.argoproj.io/sync-wave": "5",
        },
        hook({PRE}, {SUCCEEDED}, 5, wave=5),
    ),
    "Argo CD PostSync and SyncFail": (
        {"argocd.argoproj.io/hook": "PostSync,SyncFail"},
        hook({POST, FAIL}),
    ),
    "Argo CD Skip: never applied": ({"argocd.argoproj.io/hook": "Skip"}, hook(set())),
    "Argo CD PostDelete: never applied": ({"argocd.argoproj.io/hook": "PostDelete"}, hook(set())),
    "Helm install and upgrade: pre-sync": (
        {
            "helm.sh/hook": "pre-install,pre-upgrade",
            "helm.sh/hook-weight": "-5",
            "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded",
        },
        hook({PRE}, {BEFORE, SUCCEEDED}, -5),
    ),
    "Helm post-install: post-sync": ({"helm.sh/hook": "post-install"}, hook({POST})),
    "Helm delete and rollback hooks: never applied": (
        {"helm.sh/hook": "pre-delete,post-rollback"},
        hook(set()),
    ),
    "Helm install and delete: pre-sync only": (
        {"helm.sh/hook": "pre-install,post-delete"},
        hook({PRE}),
    ),
    "gitopsd's own wins over another tool's": (
        {"gitopsd.io/hook": "post-sync", "helm.sh/hook": "pre-install"},
        hook({POST}),
    ),
}


@pytest.mark.parametrize(("annotations", "expected"), HOOKS.values(), ids=HOOKS.keys())
def test_hooks_are_read_from_every_tools_annotations(
    annotations: dict[str, str], expected: SyncHook | None
) -> None:
    body = {"metadata": {"name": "x", "annotations": annotations}}

    assert hook_of(body, "jobs.yaml:1") == expected


IN_WAVES: dict[str, tuple[dict[str, str], int | None]] = {
    "Argo CD's Sync hook of wave 1 (its sync-waves example)": (
        {"argocd.argoproj.io/hook": "Sync", "argocd.argoproj.io/sync-wave": "1"},
        1,
    ),
    "gitopsd's sync hook of a negative wave": (
        {"gitopsd.io/hook": "sync", "gitopsd.io/sync-wave": "-1"},
        -1,
    ),
    "wave 0 named: runs in wave 0": ({"gitopsd.io/hook": "sync", "gitopsd.io/sync-wave": "0"}, 0),
    "gitopsd's wave wins over Argo CD's, as for objects": (
        {
            "argocd.argoproj.io/hook": "Sync",
            "gitopsd.io/sync-wave": "4",
            "argocd.argoproj.io/sync-wave": "2",
        },
        4,
    ),
    "Argo CD's wave on gitopsd's hook": (
        {"gitopsd.io/hook": "sync", "argocd.argoproj.io/sync-wave": "3"},
        3,
    ),
    "a sync hook that names no wave: after every wave": ({"gitopsd.io/hook": "sync"}, None),
    "Helm's weight is no wave": ({"gitopsd.io/hook": "sync", "helm.sh/hook-weight": "2"}, None),
    "a sync and sync-fail hook: its wave in the sync phase": (
        {"argocd.argoproj.io/hook": "Sync,SyncFail", "argocd.argoproj.io/sync-wave": "2"},
        2,
    ),
    "a pre-sync hook's wave orders its phase": (
        {"argocd.argoproj.io/hook": "PreSync", "argocd.argoproj.io/sync-wave": "1"},
        None,
    ),
    "so does a post-sync hook's": (
        {"gitopsd.io/hook": "post-sync", "gitopsd.io/sync-wave": "1"},
        None,
    ),
    "and a Helm hook's weight": ({"helm.sh/hook": "pre-install", "helm.sh/hook-weight": "1"}, None),
}


@pytest.mark.parametrize(("annotations", "wave"), IN_WAVES.values(), ids=IN_WAVES.keys())
def test_a_sync_hook_that_names_a_wave_runs_in_that_wave(
    annotations: dict[str, str], wave: int | None
) -> None:
    found = hook_of({"metadata": {"name": "x", "annotations": annotations}}, "jobs.yaml:1")

    assert found is not None
    assert found.sync_wave == wave
    assert found.runs_apart(SYNC) == (SYNC in found.phases and wave is None)


def test_a_hook_in_a_wave_still_runs_apart_in_its_other_phases() -> None:
    both = hook({SYNC, FAIL}, wave=2)

    assert not both.runs_apart(SYNC)  # in wave 2 instead
    assert both.runs_apart(FAIL)
    assert not both.runs_apart(PRE)


INVALID = {
    "an unknown phase": (
        {"gitopsd.io/hook": "presync"},
        "jobs.yaml:1: annotation gitopsd.io/hook: 'presync' is not a list of pre-sync, sync",
    ),
    "an empty phase list": ({"gitopsd.io/hook": " , "}, "annotation gitopsd.io/hook: ' , '"),
    "another tool's spelling": (
        {"argocd.argoproj.io/hook": "pre-sync"},
        "annotation argocd.argoproj.io/hook: 'pre-sync' is not a list of PreSync",
    ),
    "an unknown policy": (
        {"helm.sh/hook": "pre-install", "helm.sh/hook-delete-policy": "always"},
        "annotation helm.sh/hook-delete-policy: 'always' is not a list of before-hook-creation",
    ),
    "a weight that is no number": (
        {"helm.sh/hook": "pre-install", "helm.sh/hook-weight": "first"},
        "annotation helm.sh/hook-weight: 'first' is not a whole number",
    ),
}


@pytest.mark.parametrize(("annotations", "message"), INVALID.values(), ids=INVALID.keys())
def test_an_invalid_hook_annotation_names_the_object_and_the_annotation(
    annotations: dict[str, str], message: str
) -> None:
    body = {"metadata": {"name": "x", "annotations": annotations}}

    with pytest.raises(ManifestError) as refused:
        hook_of(body, "jobs.yaml:1")

    assert str(refused.value).startswith("jobs.yaml:1: ")
    assert message in str(refused.value)


def manifests_in(text: str) -> list[Manifest]:
    return list(manifests_of("hooks.yaml", parse_documents(text, "hooks.yaml", Limits())))


def test_a_hook_may_be_named_by_the_server_from_its_generate_name() -> None:
    text = (
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: smoke-\n"
        "  annotations: {gitopsd.io/hook: post-sync}\n"
    )

    [manifest] = manifests_in(text)

    assert manifest.key == ObjectKey("batch", "Job", "", "smoke-")


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (
            "{generateName: smoke-}",
            "metadata.generateName without metadata.name is for sync hooks only",
        ),
        (
            "{generateName: Smoke_, annotations: {gitopsd.io/hook: sync}}",
            "Job metadata.name 'Smoke_x' must be",
        ),
    ],
)
def test_a_generate_name_is_for_hooks_and_follows_the_naming_rules(
    metadata: str, message: str
) -> None:
    with pytest.raises(ManifestError) as refused:
        manifests_in(f"apiVersion: batch/v1\nkind: Job\nmetadata: {metadata}\n")

    assert str(refused.value).startswith("hooks.yaml:1: ")
    assert message in str(refused.value)
