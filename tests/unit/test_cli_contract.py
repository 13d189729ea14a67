"""The JSON contract of the command line (docs/schemas/cli/v1): every kind a command prints
has a schema, the documents gitopsd builds are valid against it, the schema refuses what the
contract rules out, and no test reads a command's JSON without checking it."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitopsd import diff
from gitopsd.changes import Action, ChangeSet, Outcome
from gitopsd.cli import documents
from gitopsd.cli.parser import build_parser
from gitopsd.drift_policy import Decision
from gitopsd.errors import ClusterError, ClusterReason, SourceError, SourceReason
from gitopsd.health import Health, Status
from gitopsd.objects import ObjectKey
from gitopsd.plan import Refusal
from gitopsd.reconcile import SyncReport
from tests.harness import contract

TESTS = Path(__file__).resolve().parents[1]
WEB = ObjectKey("apps", "Deployment", "shop", "web")
ROLE = ObjectKey("rbac.authorization.k8s.io", "ClusterRole", "", "reader")
SHA = "0123456789abcdef0123456789abcdef01234567"


def versions(key: ObjectKey) -> str:
    return {WEB: "v1", ROLE: "v1"}.get(key, "")


def printed_kinds() -> set[str]:
    """The kind of document each command of the parser prints with -o json."""
    actions = build_parser()._actions
    [commands] = [action for action in actions if isinstance(action, argparse._SubParsersAction)]
    found = {parser.get_default("document") for parser in commands.choices.values()}
    return found - {None}


def a_sync_result(error: Exception | None = None) -> dict[str, Any]:
    report = SyncReport(
        SHA,
        ChangeSet(
            [Outcome(WEB, Action.CONFIGURED, "", "v1"), Outcome(ROLE, Action.PRUNED, "", "v1")],
            takeovers=["apps/Deployment/shop/web: kubectl lost .spec.replicas"],
        ),
        refused=[(ObjectKey("", "ConfigMap", "shop", "kept"), Refusal.THRESHOLD)],
        left_git=1,
    )
    healths = {WEB: Health(Status.IN_PROGRESS, "Rollout", "available replicas 0/1")}
    failure = error if isinstance(error, ClusterError) else None
    return documents.sync_result(report, True, healths, versions, failure)


def a_diff_result() -> dict[str, Any]:
    change = diff.FieldChange("spec.replicas", 5, 2, "kubectl-scale", decision=Decision.HEAL)
    drift = diff.Drift(WEB, diff.State.MODIFIED, (change,), desired={"apiVersion": "apps/v1"})
    origins = {WEB: "deploy/web.yaml:1"}
    return documents.diff_result(SHA, [drift], origins, {}, versions, None)


def test_every_kind_a_command_prints_has_a_valid_schema_and_every_schema_a_command() -> None:
    assert printed_kinds() == set(contract.kinds())
    assert contract.registry()  # each schema checked against the 2020-12 meta-schema


@pytest.mark.parametrize("kind", contract.kinds())
def test_a_command_that_failed_before_it_had_a_result_prints_a_valid_document(kind: str) -> None:
    error = SourceError("cannot fetch https://git.example.com/a.git", SourceReason.UNREACHABLE)
    source = documents.source_reference("GitSync", "team-a", "web")

    found = contract.checked(documents.failed(kind, error, source), kind)

    assert found["error"] == {
        "stage": "source",
        "reason": "unreachable",
        "message": "cannot fetch https://git.example.com/a.git",
        "exitCode": 3,
    }


def test_a_sync_names_each_object_by_a_structured_reference_and_counts_each_action() -> None:
    error = ClusterError("timed out", ClusterReason.TIMEOUT)
    found = contract.checked(a_sync_result(error), "SyncResult")

    assert found["outcomes"][1]["object"] == {
        "group": "rbac.authorization.k8s.io",
        "version": "v1",
        "kind": "ClusterRole",
        "namespace": "",
        "name": "reader",
    }
    assert found["counts"] == {
        "created": 0,
        "configured": 1,
        "unchanged": 0,
        "pruned": 1,
        "skipped": 1,
        "hook": 0,
        "replaced": 0,
        "refused": 0,
    }
    assert (found["leftGit"], found["dryRun"], found["error"]["exitCode"]) == (1, False, 4)


def test_a_diff_names_its_fields_with_both_values_and_the_manager() -> None:
    found = contract.checked(a_diff_result(), "DiffResult")

    [drift] = found["drift"]
    assert drift["object"]["version"] == "v1" and drift["origin"] == "deploy/web.yaml:1"
    assert drift["changes"] == [
        {
            "path": "spec.replicas",
            "live": 5,
            "desired": 2,
            "manager": "kubectl-scale",
            "decision": "heal",
            "rule": None,
        }
    ]


def test_a_build_holds_whole_objects_each_with_its_labels() -> None:
    labels = {"applyset.kubernetes.io/part-of": "applyset-x-v1"}
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": labels}}
    found = contract.checked(documents.build_result(SHA, [body], None), "BuildResult")
    assert found["objects"] == [body]

    for unlabelled in ({**body, "metadata": {"name": "a"}}, {**body, "kind": ""}):
        with pytest.raises(AssertionError):
            contract.checked(documents.build_result(SHA, [unlabelled], None), "BuildResult")


def test_a_daemons_request_time_is_rfc_3339_and_a_gitsyncs_annotation_as_written() -> None:
    line = {
        "name": "app",
        "ready": "True",
        "reason": "Succeeded",
        "message": "",
        "revision": SHA,
        "drift": 0,
        "health": "Current",
        "suspended": False,
        "failed": False,
        "lastHandledReconcileAt": "1764892800000000042",
        "lastSyncTime": "2025-12-05T00:00:00Z",
    }
    source = documents.source_reference("Source", "", "app")

    [item] = contract.checked(
        documents.source_list([documents.source_item(source, line)]), "SourceList"
    )["items"]

    assert item["ready"] is True
    assert item["lastHandledReconcileAt"] == "2025-12-05T00:00:00.000000042Z"
    assert item["cluster"] == ""  # a daemon that does not say where its source syncs


@pytest.mark.parametrize(
    ("where", "value"),
    [
        pytest.param(("dryRun",), "false", id="a-boolean-as-a-string"),
        pytest.param(
            ("outcomes", 0, "object"), "apps/Deployment/shop/web", id="a-name-as-a-string"
        ),
        pytest.param(("leftGit",), "1", id="a-count-as-a-string"),
        pytest.param(("revision",), "v1.2", id="a-revision-that-is-no-commit"),
        pytest.param(("counts", "deleted"), 1, id="an-action-that-is-none"),
        pytest.param(("prune_refused",), [], id="a-snake-case-key"),
        pytest.param(("apiVersion",), "v1", id="another-version"),
    ],
)
def test_the_schema_refuses_what_the_contract_rules_out(where: tuple[Any, ...], value: Any) -> None:
    found = a_sync_result()
    *path, last = where
    place: Any = found
    for step in path:
        place = place[step]
    place[last] = value

    with pytest.raises(AssertionError):
        contract.checked(found, "SyncResult")


def test_yaml_prints_the_same_document_as_json() -> None:
    found = a_sync_result()

    as_json = json.loads(documents.serialized(found, "json"))
    as_yaml = yaml.safe_load(documents.serialized(found, "yaml"))

    assert as_json == as_yaml == found


def reads_output_unchecked(tree: ast.AST) -> list[int]:
    """Lines where a test parses a command's output (`json.loads(x.out)`) itself."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func) in ("json.loads", "yaml.safe_load")
        and any(ast.unparse(argument).endswith(".out") for argument in node.args)
    ]


def test_no_test_reads_a_commands_json_without_checking_it_against_its_schema() -> None:
    unchecked = {
        str(path.relative_to(TESTS)): lines
        for path in sorted(TESTS.rglob("*.py"))
        if (lines := reads_output_unchecked(ast.parse(path.read_text())))
    }

    assert unchecked == {}, "read it with Run.document() or contract.parsed()"


def test_a_test_that_parses_output_itself_is_found() -> None:
    tree = ast.parse("found = json.loads(gitopsd('get', '-o', 'json').out)\n")

    assert reads_output_unchecked(tree) == [1]


@pytest.mark.parametrize(
    "revision",
    [SHA, "ab" * 32, f"1.2.3+build.5@sha256:{'cd' * 32}", ""],
    ids=["sha-1", "sha-256", "a-charts-version-and-digest", "a-directory"],
)
def test_every_revision_a_source_reads_is_one_the_schema_takes(revision: str) -> None:
    found = a_sync_result()
    found["revision"] = revision

    assert contract.checked(found, "SyncResult")["revision"] == revision
