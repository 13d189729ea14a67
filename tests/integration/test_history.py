"""`gitopsd history NAME`, through the real CLI: a daemon's source's last syncs from its
control API, a GitSync's from its status in the real API server. The sources poll hourly,
so each sync within a test was asked for."""

from __future__ import annotations

from typing import Any

from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_value
from tests.harness.commands import INVALID
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import create, get, wait_ready
from tests.harness.manifests import config_map_files_with_data
from tests.harness.operators import operator
from tests.harness.waiting import wait_for


def names(entry: dict[str, Any], action: str) -> list[str]:
    return [reference["name"] for reference in entry["objects"][action]]


def test_a_sources_history_lists_its_syncs_newest_first_with_the_objects_they_changed(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    first = git_repo.commit(config_map_files_with_data("a", "b"))
    daemon = daemons.start(git_server.file_url(git_repo), interval="1h", prune=True)
    at = ["--daemon", daemon.control_url]

    def history() -> list[dict[str, Any]]:
        found = gitopsd("history", "app", *at, "-o", "json")
        assert found.code == 0, found.text
        return list(found.document("SyncHistory")["history"])

    wait_for(lambda: len(history()) == 1, "the first sync in the history")
    changed = {"b.yaml": None, **config_map_files_with_data("a", "c", value="w")}
    second = git_repo.commit(changed)
    assert gitopsd("reconcile", "app", *at).code == 0
    assert config_map_value(admin_api, namespace, "c") == "w"
    assert gitopsd("reconcile", "app", *at).code == 0  # nothing to do: nothing to tell

    newest, oldest = history()

    assert (newest["revision"], newest["outcome"]) == (second, "Succeeded")
    assert newest["counts"] == {"created": 1, "configured": 1, "pruned": 1}
    assert names(newest, "created") == ["c"] and names(newest, "configured") == ["a"]
    assert newest["objects"]["pruned"] == [
        {"group": "", "version": "v1", "kind": "ConfigMap", "namespace": namespace, "name": "b"}
    ]
    assert (oldest["revision"], oldest["counts"]) == (first, {"created": 2})
    assert names(oldest, "created") == ["a", "b"]
    assert oldest["startedAt"] <= newest["startedAt"]

    table = gitopsd("history", "app", *at)
    assert table.code == 0, table.text
    header, *rows = table.out.splitlines()
    assert header.split() == [
        "REVISION",
        "STARTED",
        "DURATION",
        "OUTCOME",
        "CREATED",
        "CONFIGURED",
        "PRUNED",
        "MESSAGE",
    ]
    assert [row.split()[3:] for row in rows] == [
        ["Succeeded", "1", "1", "1"],
        ["Succeeded", "2", "0", "0"],
    ]
    assert [row.split()[0] for row in rows] == [second[:12], first[:12]]

    unknown = gitopsd("history", "nope", *at)
    assert unknown.code == INVALID, unknown.text
    said = f"no source nope at {daemon.control_url}; those there: app"
    assert unknown.err == f"gitopsd: error: {said}\n"


def test_a_gitsyncs_history_is_in_its_status_failures_included(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    gitsync_crd: str,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    first = git_repo.commit(config_map_files_with_data("a"))
    operator(daemons, namespace)
    create(
        admin_api,
        namespace,
        "web",
        {"repository": {"url": git_server.file_url(git_repo)}, "interval": "1h"},
    )
    wait_ready(admin_api, namespace, "web", "True", "Succeeded")

    def status_history() -> list[dict[str, Any]]:
        return list(
            ((get(admin_api, namespace, "web") or {}).get("status") or {}).get("history") or []
        )

    wait_for(lambda: len(status_history()) == 1, "the first sync in status.history")
    broken = git_repo.commit({"a.yaml": "kind: [unclosed\n"})
    gitopsd("reconcile", "web", "--gitsync", "-n", namespace)  # fails: its history says why
    wait_for(lambda: len(status_history()) == 2, "the failed sync in status.history")

    found = gitopsd("history", "web", "--gitsync", "-n", namespace, "-o", "json")

    assert found.code == 0, found.text
    document = found.document("SyncHistory")
    assert document["source"] == {"kind": "GitSync", "namespace": namespace, "name": "web"}
    failed, synced = document["history"]
    assert (failed["revision"], failed["outcome"], failed["reason"]) == (broken, "Failed", "Syntax")
    assert "a.yaml:2:1" in failed["message"] and failed["counts"] == {}
    assert (synced["revision"], synced["outcome"], synced["counts"]) == (
        first,
        "Succeeded",
        {"created": 1},
    )
    assert "objects" not in synced  # a status counts them; the daemon's answer names them
    table = gitopsd("history", "web", "--gitsync", "-n", namespace).out.splitlines()
    assert table[1].split()[3:8] == ["Failed", "0", "0", "0", "Syntax:"]
    assert table[2].split()[3:] == ["Succeeded", "1", "0", "0"]
    typo = gitopsd("history", "wbe", "--gitsync", "-n", namespace)
    assert typo.code == INVALID and f"no GitSync wbe in namespace {namespace}" in typo.err
