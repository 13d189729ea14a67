"""The control commands Flux and Argo CD users reach for, through the real CLI: `get` and
`reconcile` against a running daemon's loopback API, and for GitSyncs the
reconcile-requested-at annotation, `suspend` and `resume` against the real API server.
The sources poll hourly, so whatever is applied within a test was asked for."""

from __future__ import annotations

import re
from typing import Any

from kubernetes import client

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
        "CLUSTER",
        "READY",
        "REASON",
        "REVISION",
        "SYNCED",
        "DRIFT",
        "HEALTH",
        "SUSPENDED",
        "MESSAGE",
    ]
    name, cluster, ready, reason, revision, synced, *rest = row.split()
    assert (name, cluster, ready) == ("app", "in-cluster", "True")
    assert (reason, revision) == ("Succeeded", git_repo.head()[:12])
    assert re.fullmatch(r"\d+[sm]", synced) and rest == ["0", "Current", "false"]

    second = git_repo.commit(config_map_files_with_data("a", value="w"))
    reconciled = gitopsd("reconcile", "app", *at)

    assert reconciled.code == 0, reconciled.text
    assert reconciled.out.startswith("app: reconciled: Succeeded: ")
    assert config_map_value(admin_api, namespace, "a") == "w"  # applied before it returned
    [line] = gitopsd("get", *at, "-o", "json").document("SourceList")["items"]
    assert (line["source"]["name"], line["revision"], line["ready"]) == ("app", second, True)
    assert line["cluster"] == "in-cluster"

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
    hint = f"gitopsd resume web --gitsync -n {namespace} first"
    assert refused.code == INVALID and hint in refused.err

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


def test_tree_of_a_gitsync_reads_its_record_and_status_from_the_cluster_with_no_daemon(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    gitsync_crd: str,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_map_files_with_data("a", "b"))
    daemon = operator(daemons, namespace)
    url = git_server.file_url(git_repo)
    # selfHeal off: out-of-band changes are measured as drift, never undone
    create(admin_api, namespace, "web", {"repository": {"url": url}, "selfHeal": False})
    create(admin_api, namespace, "idle", {"repository": {"url": url}, "suspend": True})
    ready = wait_ready(admin_api, namespace, "web", "True", "Succeeded")
    revision = ready["status"]["lastAppliedRevision"]
    tree = ["tree", "web", "--gitsync", "-n", namespace]

    synced = gitopsd(*tree)
    assert synced.code == 0, synced.text
    lines = synced.out.splitlines()
    assert lines[0] == f"{namespace}/web at revision {revision[:12]}"
    assert [line.split() for line in lines[2:4]] == [
        ["ConfigMap", namespace, name, "Current", "-"] for name in ("a", "b")
    ]

    core: Any = client.CoreV1Api(admin_api)
    core.patch_namespaced_config_map("a", namespace, {"data": {"k": "edited"}})
    core.delete_namespaced_config_map("b", namespace)
    wait_for(
        lambda: (
            _drifts(get(admin_api, namespace, "web"))
            == {f"ConfigMap/{namespace}/a": "modified", f"ConfigMap/{namespace}/b": "missing"}
        ),
        "the daemon's status to name both drifts",
    )
    daemon.stop()  # what follows reads the cluster alone

    drifted = gitopsd(*tree)
    assert drifted.code == 0, drifted.text
    rows = [line.split() for line in drifted.out.splitlines()[2:4]]
    assert rows == [
        ["ConfigMap", namespace, "a", "Current", "modified:", "data.k"],
        ["ConfigMap", namespace, "b", "NotFound", "missing"],
    ]
    assert "drift as the daemon measured it last" in drifted.out
    document = gitopsd(*tree, "-o", "json").document("ObjectTree")
    assert (document["source"], document["revision"]) == (
        {"kind": "GitSync", "namespace": namespace, "name": "web"},
        revision,
    )
    found = {
        entry["object"]["name"]: (entry["health"]["status"], entry["drift"], entry["fields"])
        for entry in document["objects"]
    }
    assert found == {"a": ("Current", "modified", ["data.k"]), "b": ("NotFound", "missing", [])}

    idle = gitopsd("tree", "idle", "--gitsync", "-n", namespace)
    assert idle.code == 0 and "idle has not synced" in idle.out, idle.text
    assert (
        gitopsd("tree", "idle", "--gitsync", "-n", namespace, "-o", "json").document("ObjectTree")[
            "objects"
        ]
        == []
    )
    typo = gitopsd("tree", "wbe", "--gitsync", "-n", namespace)
    assert typo.code == INVALID, typo.text
    assert f"no GitSync wbe in namespace {namespace}; those there: idle, web" in typo.err

    tooling = "applyset.kubernetes.io/tooling=kubectl/v1.30"
    gitopsd.kubectl("annotate", "--overwrite", "-n", namespace, "cm/gitopsd-web", tooling)
    foreign = gitopsd(*tree)
    assert foreign.code == CLUSTER_FAILED, foreign.text
    assert "is not the ApplySet parent of source web: its tooling is" in foreign.err


def _drifts(gitsync: dict[str, Any] | None) -> dict[str, str]:
    drift = ((gitsync or {}).get("status") or {}).get("drift") or {}
    return {each["object"]: each["state"] for each in drift.get("objects") or []}
