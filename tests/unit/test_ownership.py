"""Ownership at the moment of the write: the precondition each write carries, what the API
server's refusal of it means, and which live objects a sync may not write."""

from __future__ import annotations

import json

import pytest

from gitopsd.config import SourceSpec, SyncSettings
from gitopsd.diff import Drift, FieldChange, State
from gitopsd.inventory import ApplySet, gitopsd_parent
from gitopsd.objects import APPLYSET_PART_OF_LABEL, APPLYSET_TOOLING_ANNOTATION, Body, ObjectKey
from gitopsd.ownership import (
    ABSENT_VERSION,
    CREATED_MEANWHILE,
    Foreign,
    Owner,
    as_unowned,
    guarded,
    refusal,
    unowned,
    why,
)
from gitopsd.reconcile.naming import target_identity
from gitopsd.target_identity import TargetIdentity, Tool

APPLYSET = ApplySet("gitopsd-app", "apps")
CLI = SyncSettings("app")
REPOSITORY = SourceSpec("https://git.example.com/org/app")
DAEMON = SyncSettings(
    "app", tool=Tool.DAEMON, identity=target_identity(REPOSITORY, "apps", Tool.DAEMON)
)
GITSYNC = SyncSettings("apps/app", tool=Tool.GITSYNC)
KEY = ObjectKey("", "ConfigMap", "apps", "web")
MANIFEST: Body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}}


def live(uid: str, owner: str | None = None) -> Body:
    labels = {APPLYSET_PART_OF_LABEL: owner} if owner else {}
    return {"metadata": {"name": "web", "uid": uid, "labels": labels}}


def test_an_absent_object_is_created_only_if_it_is_still_absent() -> None:
    body = guarded(MANIFEST, None)
    assert body["metadata"] == {"name": "web", "resourceVersion": ABSENT_VERSION}
    assert "resourceVersion" not in MANIFEST["metadata"]  # the target's body is left alone


def test_an_existing_object_is_written_only_while_it_is_the_one_read() -> None:
    assert guarded(MANIFEST, live("u-1"))["metadata"] == {"name": "web", "uid": "u-1"}


def test_an_object_read_without_a_uid_is_written_without_one() -> None:
    assert guarded(MANIFEST, {"metadata": {"name": "web"}}) == MANIFEST


DELETED_SINCE = "not written: it was deleted since this sync read it (rule: not_owned)"
MADE_ANEW = (
    "not written: it was deleted and created anew since this sync read it, by someone else; "
    "gitopsd writes only the object whose ownership it checked (rule: not_owned, checked at "
    "the write)"
)
REFUSALS = [
    # (status, message, live, meaning)
    (409, "Operation cannot be fulfilled: the object has been modified", None, CREATED_MEANWHILE),
    (409, "Operation cannot be fulfilled: uid mismatch: …", live("u-1"), DELETED_SINCE),
    (422, 'ConfigMap "web" is invalid: metadata.uid: field is immutable', live("u-1"), MADE_ANEW),
    (409, 'Apply failed with 1 conflict: conflict with "kubectl"', live("u-1"), None),
    (422, "spec.replicas: Invalid value", live("u-1"), None),
    (409, "the object has been modified", live("u-1"), None),  # not our precondition
    (403, "forbidden", None, None),
]


@pytest.mark.parametrize(("status", "message", "seen", "meaning"), REFUSALS)
def test_a_refused_precondition_says_what_it_means(
    status: int, message: str, seen: Body | None, meaning: str | None
) -> None:
    assert refusal(status, message, seen) == meaning


OWNERSHIP = [
    # (live now, as read for the plan, adopt, refused with)
    (None, None, False, None),  # absent: created under the create-only precondition
    (live("u-1", APPLYSET.id), live("u-1", APPLYSET.id), False, None),  # ours
    (live("u-2", APPLYSET.id), None, False, None),  # ours, whoever made it
    (live("u-1"), None, False, CREATED_MEANWHILE),  # appeared since the read
    (live("u-1"), None, True, CREATED_MEANWHILE),  # --adopt takes only what it was shown
    (live("u-1"), live("u-1"), False, "no gitopsd source manages it"),
    (live("u-1", "applyset-other-v1"), live("u-1"), False, "belongs to ApplySet applyset-other"),
    (live("u-1"), live("u-1"), True, None),  # adopted, as read
    (live("u-2"), live("u-1"), True, "no gitopsd source manages it"),  # made anew meanwhile
]


@pytest.mark.parametrize(("now", "read", "adopt", "refused"), OWNERSHIP)
def test_only_what_this_source_owns_or_adopts_as_read_is_written(
    now: Body | None, read: Body | None, adopt: bool, refused: str | None
) -> None:
    foreign = unowned(APPLYSET, [KEY], {KEY: now}, {KEY: read}, adopt)
    found = {f.key: why(f, {}, CLI) for f in foreign}
    if refused is None:
        assert found == {}
    else:
        assert refused in found[KEY]


def test_each_object_of_the_revision_is_checked_and_one_that_appeared_names_its_owner() -> None:
    ours, appeared = live("u-1", APPLYSET.id), live("u-2", "applyset-other-v1")
    other_key = ObjectKey("", "ConfigMap", "apps", "other")

    foreign = unowned(APPLYSET, [KEY, other_key], {KEY: ours, other_key: appeared}, {}, False)

    assert list(foreign) == [Foreign(other_key, "applyset-other-v1", appeared=True)]


OTHER = ApplySet.of_source("app-1a2b3c4d", "ci")


def test_an_object_of_another_target_is_named_by_that_target_never_adopt() -> None:
    said = why(Foreign(KEY, OTHER.id), {OTHER.id: Owner(OTHER)}, CLI)
    assert said == (
        "exists and is owned by another target: gitopsd source app-1a2b3c4d (its parent: "
        "ConfigMap ci/gitopsd-app-1a2b3c4d); if this sync is that target, give it --name "
        "app-1a2b3c4d, else remove the object from that source first (rule: not_owned)"
    )


def test_a_gitsync_meeting_another_targets_object_is_told_to_adopt_if_it_is_its_own() -> None:
    said = why(Foreign(KEY, OTHER.id), {OTHER.id: Owner(OTHER)}, GITSYNC)
    assert "; if it is this GitSync's target, set spec.adopt, else remove the object" in said


def test_an_object_of_a_set_whose_parent_cannot_be_read_names_the_set() -> None:
    said = why(Foreign(KEY, "applyset-other-v1"), {}, CLI)
    assert said == (
        "exists and belongs to ApplySet applyset-other-v1, whose parent is no gitopsd source "
        "this identity can read (rule: not_owned)"
    )


def test_the_other_target_is_described_as_its_parent_records_it() -> None:
    identity = target_identity(REPOSITORY, "prod", Tool.CLI)
    owner = Owner(OTHER, json.loads(identity.annotation()))

    said = why(Foreign(KEY, OTHER.id), {OTHER.id: owner}, CLI)

    assert "gitopsd sync of https://git.example.com/org/app (paths .) into namespace prod" in said


def test_a_daemon_source_meeting_a_cli_sync_of_its_own_target_is_told_to_adopt() -> None:
    cli_here = target_identity(REPOSITORY, "apps", Tool.CLI)
    elsewhere = target_identity(REPOSITORY, "prod", Tool.CLI)

    said = why(Foreign(KEY, OTHER.id), {OTHER.id: Owner(OTHER, _recorded(cli_here))}, DAEMON)
    other = why(Foreign(KEY, OTHER.id), {OTHER.id: Owner(OTHER, _recorded(elsewhere))}, DAEMON)

    assert "is recorded by a `gitopsd sync` of the same repository, paths and namespace" in said
    assert "set adopt: true" in said
    assert "owned by another target" in other and "give it name app-1a2b3c4d" in other


def _recorded(identity: TargetIdentity) -> dict[str, object]:
    found: dict[str, object] = json.loads(identity.annotation())
    return found


@pytest.mark.parametrize(
    ("settings", "remedy"),
    [
        (CLI, "--adopt takes it over"),
        (DAEMON, "adopt: true takes it over"),
        (GITSYNC, "spec.adopt"),
    ],
)
def test_an_object_no_source_manages_may_be_adopted_in_the_words_of_the_place(
    settings: SyncSettings, remedy: str
) -> None:
    assert remedy in why(Foreign(KEY, None), {}, settings)


def parent(name: str, namespace: str, tooling: str = "gitopsd/v1") -> Body:
    annotations = {APPLYSET_TOOLING_ANNOTATION: tooling}
    return {"metadata": {"name": name, "namespace": namespace, "annotations": annotations}}


@pytest.mark.parametrize(
    ("body", "found"),
    [
        (parent("gitopsd-app-1a2b3c4d", "ci"), OTHER),
        (parent("gitopsd-app-1a2b3c4d", "ci", tooling="kubectl/v1.34"), None),  # not ours
        (parent("gitopsd-app", "ci"), None),  # labelled with another set's id: forged
        (parent("gitopsd-app-1a2b3c4d", "tenant"), None),
    ],
)
def test_a_parent_is_known_by_the_hash_of_its_name_not_by_its_label(
    body: Body, found: ApplySet | None
) -> None:
    assert gitopsd_parent(body, OTHER.id) == found


def test_diff_reports_an_unowned_object_as_sync_would_refuse_it() -> None:
    modified = Drift(KEY, State.MODIFIED, (FieldChange("data.k", "a", "b", "kubectl-edit"),))
    same = ObjectKey("", "ConfigMap", "apps", "same")
    drifts = as_unowned([modified], [Foreign(KEY, None), Foreign(same, OTHER.id)], {}, CLI)
    assert [(d.key, d.state) for d in drifts] == [(same, State.UNOWNED), (KEY, State.UNOWNED)]
    assert drifts[1].changes == modified.changes  # what differs is still shown
    assert "no gitopsd source manages it" in drifts[1].reason
    assert f"belongs to ApplySet {OTHER.id}" in drifts[0].reason
