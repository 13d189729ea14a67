"""The control commands Flux and Argo CD users reach for, through the real CLI: `get` and
`reconcile` against a running daemon's loopback API, and for GitSyncs the
reconcile-requested-at annotation, `suspend` and `resume` against the real API server.
The sources poll hourly, so whatever is applied within a test was asked for."""

from __future__ import annotations

import re
from typing import Any

from tests.harness import contract
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_value
from tests.harness.commands import CLUSTER_FAILED, INVALID
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import condition, create, get, wait_ready
from tests.harness.manifests import config_map_files_with_data
from tests.harness.operators import operator
from tests.harness.waiting import wait_for


def test_get_lists_a_daemons_sources_and_reconcile_applies_a_commit_now(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_map_files_with_data("a"))
    daemon = daemons.start(git_server.file_url(git_repo), interval="1h")
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "v", "the first sync")
    at = ["--daemon", daemon.control_url]
    wait_for(lambda: " True " in gitopsd("get", *at).out, "the source Ready (its health read)")

    listed = gitopsd("get", *at)
    assert listed.code == 0, listed.text
    header, row = listed.out.splitlines()
    assert header.split() == [
        "NAME",
        "READY",
        "REASON",
        "REVISION",
        "SYNCED",
        "DRIFT",
        "HEALTH",
        "SUSPENDED",
        "MESSAGE",
    ]
    name, ready, reason, revision, synced, *rest = row.split()
    assert (name, ready, reason, revision) == ("app", "True", "Succeeded", git_repo.head()[:12])
    assert re.fullmatch(r"\d+[sm]", synced) and rest == ["0", "Current", "false"]

    second = git_repo.commit(config_map_files_with_data("a", value="w"))
    reconciled = gitopsd("reconcile", "app", *at)

    assert reconciled.code == 0, reconciled.text
    assert reconciled.out.startswith("app: reconciled: Succeeded: ")
    assert config_map_value(admin_api, namespace, "a") == "w"  # applied before it returned
    [line] = gitopsd("get", *at, "-o", "json").document("SourceList")["items"]
    assert (line["source"]["name"], line["revision"], line["ready"]) == ("app", second, True)

    tree = gitopsd("tree", "app", *at)
    assert tree.code == 0, tree.text
    assert tree.out.splitlines()[0] == f"app at revision {second[:12]}"
    assert tree.out.splitlines()[2].split() == ["ConfigMap", namespace, "a", "Current", "-"]
    [entry] = gitopsd("tree", "app", *at, "-o", "json").document("ObjectTree")["objects"]
    assert (entry["object"]["name"], entry["health"]["status"], entry["drift"]) == (
        "a",
        "Current",
        "",
    )
    typo = gitopsd("tree", "ap", *at)
    assert typo.code == INVALID and "no source ap at" in typo.err, typo.text

    unknown = gitopsd("reconcile", "nope", *at)
    assert unknown.code == INVALID, unknown.text
    said = f"no source nope at {daemon.control_url}; those there: app"
    assert f"gitopsd: error: {said}\n" == unknown.err
    not_control = gitopsd("get", "--daemon", daemon.url)  # the webhook port: no control API
    assert not_control.code == CLUSTER_FAILED and "control API" in not_control.err
    daemon.stop()
    gone = gitopsd("get", *at)
    assert gone.code == CLUSTER_FAILED
    assert f"cannot reach the gitopsd daemon at {daemon.control_url}" in gone.err


def test_a_reconcile_that_fails_says_why_with_the_exit_code_sync_would_give(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_map_files_with_data("a"))
    daemon = daemons.start(git_server.file_url(git_repo), interval="1h")
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "v", "the first sync")
    git_repo.commit({"a.yaml": "kind: [unclosed\n"})

    run = gitopsd("reconcile", "app", "--daemon", daemon.control_url)

    assert run.code == INVALID, run.text
    assert run.out.startswith("app: failed: Syntax: a.yaml:2:1: did not find expected")

    # a manifest the API server refuses is bad input too, though the cluster said so
    port = (
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - port: 70000\n"
    )
    git_repo.commit({"a.yaml": config_map_files_with_data("a")["a.yaml"], "web.yaml": port})

    refused = gitopsd("reconcile", "app", "--daemon", daemon.control_url)

    assert refused.code == INVALID, refused.text
    assert refused.out.startswith("app: failed: Invalid: "), refused.out
    assert f"Service/{namespace}/web (web.yaml:1)" in refused.out
    assert "spec.ports[0].port" in refused.out


def test_a_gitsync_is_reconciled_on_request_and_suspended_and_resumed_from_the_cli(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    gitsync_crd: str,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_map_files_with_data("a"))
    operator(daemons, namespace)
    create(
        admin_api,
        namespace,
        "web",
        {"repository": {"url": git_server.file_url(git_repo)}, "interval": "1h"},
    )
    wait_ready(admin_api, namespace, "web", "True", "Succeeded")

    # Flux's convention, as `kubectl annotate --overwrite` writes it
    git_repo.commit(config_map_files_with_data("a", value="w"))
    gitopsd.kubectl(
        "annotate",
        "--overwrite",
        "-n",
        namespace,
        "gitsync/web",
        "gitopsd.io/reconcile-requested-at=first",
    )
    wait_for(
        lambda: (
            (get(admin_api, namespace, "web") or {}).get("status", {}).get("lastHandledReconcileAt")
            == "first"
        ),
        "the request echoed in status",
    )
    assert config_map_value(admin_api, namespace, "a") == "w"

    third = git_repo.commit(config_map_files_with_data("a", value="x"))
    reconciled = gitopsd("reconcile", "web", "--gitsync", "-n", namespace)
    assert reconciled.code == 0, reconciled.text
    assert reconciled.out.startswith(f"{namespace}/web: reconciled: Succeeded: revision {third}")
    assert config_map_value(admin_api, namespace, "a") == "x"
    as_json = gitopsd("reconcile", "web", "--gitsync", "-n", namespace, "-o", "json")
    result = as_json.document("ReconcileResult")
    assert (as_json.code, result["succeeded"], result["exitCode"]) == (0, True, 0)
    assert result["source"] == {"kind": "GitSync", "namespace": namespace, "name": "web"}
    typo = gitopsd("reconcile", "wbe", "--gitsync", "-n", namespace, "-o", "json")
    assert typo.code == INVALID, typo.text
    said = f"no GitSync wbe in namespace {namespace}; those there: web"
    assert typo.document("ReconcileResult")["error"]["message"] == said

    suspended = gitopsd("suspend", "web", "--gitsync", "-n", namespace)
    assert suspended.code == 0 and suspended.out == f"GitSync {namespace}/web suspended\n"
    again = gitopsd("suspend", "web", "--gitsync", "-n", namespace, "-o", "yaml")
    assert contract.parsed(again.out, "SuspendResult", form="yaml")["suspended"] is True
    wait_ready(admin_api, namespace, "web", "True", "Suspended")
    table = gitopsd.kubectl("get", "gitsyncs", "-n", namespace).splitlines()
    assert table[0].split() == [
        "NAME",
        "READY",
        "MODE",
        "REVISION",
        "DRIFT",
        "HEALTH",
        "SUSPENDED",
        "AGE",
    ]
    assert table[1].split()[6] == "true"
    listed = gitopsd("get", "--gitsyncs", "-n", namespace, "-o", "json")
    [line] = listed.document("SourceList")["items"]
    assert (line["source"], line["suspended"], line["reason"]) == (
        {"kind": "GitSync", "namespace": namespace, "name": "web"},
        True,
        "Suspended",
    )
    refused = gitopsd("reconcile", "web", "--gitsync", "-n", namespace)
    assert refused.code == INVALID and "gitopsd resume web first" in refused.err

    resumed = gitopsd("resume", "web", "--gitsync", "-n", namespace)
    assert resumed.code == 0, resumed.text
    ready = wait_ready(admin_api, namespace, "web", "True", "Succeeded")
    assert condition(ready, "Ready")["status"] == "True"
    assert ready["spec"]["suspend"] is False


def test_the_daemon_logs_text_at_the_level_asked(
    daemons: Daemons, git_server: GitServer, namespace: str
) -> None:
    missing = (git_server.root / "missing.git").as_uri()
    daemon = daemons.start_with([daemons.source(missing)], "texts")
    daemon.flags = ("--log-format", "text", "--log-level", "warning")
    daemon.start()

    wait_for(lambda: "does not appear to be a git repository" in daemon.logs(), "the error line")
    lines = daemon.logs().splitlines()
    errors = [line for line in lines if " ERROR   git source " in line]
    assert errors and "source=app" in errors[0]
    assert not [line for line in lines if line.startswith("{")]  # no JSON
    assert not [line for line in lines if " INFO    " in line]  # below the level asked
