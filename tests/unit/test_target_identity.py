"""Two targets never share a record: what makes a target, the names made of it, and which
record an earlier gitopsd wrote is this target's."""

from __future__ import annotations

import hashlib
import json

import pytest

from gitopsd.cli import settings
from gitopsd.cli.parser import build_parser
from gitopsd.config import ChartSettings, EarlierRecord, SourceSpec, SyncSettings
from gitopsd.objects import ObjectKey
from gitopsd.reconcile.naming import default_name, earlier_default_name, target_identity
from gitopsd.target_identity import Tool, claims, described, identity_of, same_place

URL = "https://git.example.com/org/app.git"


def sync_settings(*flags: str, context: str | None = None) -> SyncSettings:
    arguments = build_parser().parse_args(["sync", URL, *flags])
    return settings.sync_settings(arguments, settings.source_spec(arguments), context)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (["-n", "prod"], ["-n", "staging"]),
        (["--helm-values", "values-prod.yaml"], ["--helm-values", "values-staging.yaml"]),
        (["--helm-set", "fullnameOverride=web-a"], ["--helm-set", "fullnameOverride=web-b"]),
        (["--helm-release", "a"], ["--helm-release", "b"]),
        (["--path", "a"], ["--path", "b"]),
        (["--include", "*.yaml"], ["--include", "*.json"]),
        (["--exclude", "test/*"], []),
    ],
)
def test_each_thing_that_makes_a_target_makes_another_name(
    one: list[str], other: list[str]
) -> None:
    first, second = sync_settings(*one), sync_settings(*other)

    assert first.name != second.name


def test_two_contexts_of_one_cluster_differing_in_their_namespace_are_two_targets() -> None:
    prod, staging = sync_settings(context="prod"), sync_settings(context="staging")

    assert prod.name != staging.name
    assert (prod.inventory_namespace, staging.inventory_namespace) == ("prod", "staging")


def test_a_new_ref_or_chart_version_is_the_same_target_moving_on() -> None:
    assert sync_settings("--ref", "v1").name == sync_settings("--ref", "v2").name
    chart = sync_settings("--helm-chart", "web")
    assert chart.name.startswith("web-")
    assert sync_settings("--helm-chart", "web", "--helm-version", "1.x").name == chart.name


def test_the_name_is_the_users_when_given_and_kept_in_the_namespace_it_applies_into() -> None:
    named = sync_settings("--name", "app", "-n", "shop")

    assert (named.name, named.inventory_namespace) == ("app", "shop")
    assert named.earlier == (EarlierRecord("app", "default", named=True),)
    chosen = sync_settings("--name", "app", "-n", "shop", "--inventory-namespace", "records")
    assert (chosen.inventory_namespace, chosen.earlier) == ("records", ())


def test_an_unnamed_target_looks_for_the_record_gitopsd_kept_under_its_old_name() -> None:
    spec = SourceSpec(URL, paths=("deploy",))
    where = f"{URL}\n{sorted(spec.paths)}"
    old = f"app-{hashlib.sha256(where.encode()).hexdigest()[:8]}"  # the naming before

    found = sync_settings("--path", "deploy", "-n", "prod")

    assert earlier_default_name(spec) == old
    assert found.earlier == (EarlierRecord(old, "default", named=False),)
    assert found.name != old


def test_the_parent_keeps_the_identity_without_the_values_themselves() -> None:
    secret = "s3cr3t-value"
    spec = SourceSpec(
        "https://user:token@git.example.com/org/app.git",
        helm=ChartSettings(values=json.dumps({"db": {"password": secret}})),
    )
    identity = target_identity(spec, "prod", Tool.CLI)
    written = json.loads(identity.annotation())

    assert secret not in identity.annotation() and "token" not in identity.annotation()
    assert written["helm"]["values"] == ["db.password"]
    assert written["source"] == "https://git.example.com/org/app"
    parent = {"metadata": {"annotations": {"gitopsd.io/target": identity.annotation()}}}
    assert identity_of(parent) == written
    assert same_place(written, target_identity(spec, "prod", Tool.DAEMON))
    assert not same_place(written, target_identity(spec, "staging", Tool.DAEMON))
    assert described(written) == (
        "gitopsd sync of https://git.example.com/org/app (paths .) into namespace prod"
    )
    other = target_identity(SourceSpec(spec.url), "prod", Tool.CLI)
    assert other.digest() != identity.digest()  # the values are in the name's hash


@pytest.mark.parametrize("annotation", ["", "not json", "[1]", '{"paths": []}'])
def test_a_parent_without_a_readable_identity_has_none(annotation: str) -> None:
    assert identity_of({"metadata": {"annotations": {"gitopsd.io/target": annotation}}}) is None


def cm(namespace: str, name: str) -> ObjectKey:
    return ObjectKey("", "ConfigMap", namespace, name)


CLUSTER_ROLE = ObjectKey("rbac.authorization.k8s.io", "ClusterRole", "", "reader")
CLAIMS = [
    # the record of the same source synced into prod is not staging's
    ({cm("prod", "settings")}, {cm("staging", "settings")}, "staging", False),
    ({cm("prod", "settings")}, {cm("prod", "settings")}, "prod", True),
    # what left git is still the target's, while the namespace is its own
    ({cm("prod", "settings"), cm("prod", "old")}, {cm("prod", "settings")}, "prod", True),
    # an object shared by two targets (cluster-scoped) does not make another's record ours
    ({CLUSTER_ROLE, cm("prod", "s")}, {CLUSTER_ROLE, cm("staging", "s")}, "staging", False),
    ({CLUSTER_ROLE}, {CLUSTER_ROLE}, "default", True),
    # a record that shares nothing with the revision is not taken on a guess
    ({cm("prod", "a")}, {cm("prod", "b")}, "prod", False),
    # objects that name their namespace: the namespaces the revision writes count
    ({cm("shop", "a"), cm("shop", "b")}, {cm("shop", "a")}, "default", True),
    (set(), {cm("prod", "a")}, "prod", False),
]


@pytest.mark.parametrize(("recorded", "desired", "namespace", "ours"), CLAIMS)
def test_an_earlier_record_is_this_targets_only_when_it_provably_is(
    recorded: set[ObjectKey], desired: set[ObjectKey], namespace: str, ours: bool
) -> None:
    assert claims(recorded, desired, namespace) is ours


def test_the_cli_and_the_daemon_syncing_one_target_make_one_name() -> None:
    spec = SourceSpec(URL)
    cli, daemon = (target_identity(spec, "x", tool) for tool in (Tool.CLI, Tool.DAEMON))

    assert default_name(spec, cli) == default_name(spec, daemon)
    assert json.loads(cli.annotation())["tool"] == "cli"
