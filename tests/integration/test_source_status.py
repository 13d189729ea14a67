"""A daemon's configured sources, reached through the API server as Flux's CLI reaches its
controllers: their status ConfigMaps (`gitopsd.source.NAME` in controlNamespace) hold the
status `gitopsd get --in-cluster` shows, the suspension that outlives a restart, and the
request to reconcile now. Against the real API server, through the real CLI."""

from __future__ import annotations

import signal
import time
from functools import partial
from typing import Any

from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_value
from tests.harness.commands import INVALID
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import ELECTION, DaemonProcess, Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.manifests import config_map_files_with_data
from tests.harness.waiting import wait_for


def _line(gitopsd: Gitopsd, *where: str) -> dict[str, Any]:
    """The one source's line; {} before its daemon wrote its status."""
    items = gitopsd("get", *where, "-o", "json").document("SourceList")["items"]
    assert len(items) <= 1, items
    return dict(items[0]) if items else {}


def _says_suspended(gitopsd: Gitopsd, replica: DaemonProcess) -> bool:
    return _line(gitopsd, "--daemon", replica.control_url).get("suspended") is True


def test_a_suspended_source_stays_suspended_across_a_restart_and_is_resumed_in_cluster(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    first = git_repo.commit(config_map_files_with_data("a"))
    daemon = daemons.start(git_server.file_url(git_repo), interval="1h")
    in_cluster = ["--in-cluster", namespace]
    wait_for(lambda: _line(gitopsd, *in_cluster).get("revision") == first, "the status written")
    line = _line(gitopsd, *in_cluster)
    assert line["source"] == {"kind": "Source", "namespace": "", "name": "app"}
    assert (line["ready"], line["reason"], line["suspended"]) == (True, "Succeeded", False)

    suspended = gitopsd("suspend", "app", "--daemon", daemon.control_url)
    assert (suspended.code, suspended.out) == (0, "source app suspended\n"), suspended.text
    refused = gitopsd("reconcile", "app", "--daemon", daemon.control_url)
    assert refused.code != 0 and "gitopsd resume app first" in refused.err, refused.text
    listed = gitopsd("get", *in_cluster)
    assert listed.out.splitlines()[1].split()[:4] == ["app", "in-cluster", "True", "Suspended"]
    assert _line(gitopsd, "--daemon", daemon.control_url)["suspended"] is True

    # A new process (a restart, or a new leader) reads the suspension before it runs the
    # source: one that polls every second would apply this commit before it is ready.
    daemon.stop()
    git_repo.commit(config_map_files_with_data("a", value="w"))
    again = daemons.start(git_server.file_url(git_repo), name="again", interval="1s")
    wait_for(lambda: again.get("/readyz")[0] == 200, "the new daemon ready")
    assert _line(gitopsd, "--daemon", again.control_url)["suspended"] is True
    assert config_map_value(admin_api, namespace, "a") == "v"

    resumed = gitopsd("resume", "app", *in_cluster, "-o", "json")
    assert resumed.code == 0, resumed.text
    result = resumed.document("SuspendResult")
    assert (result["source"]["name"], result["suspended"]) == ("app", False)
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "w", "the resumed sync")

    # the history its status ConfigMap keeps outlived the first process
    def history() -> list[dict[str, Any]]:
        found = gitopsd("history", "app", *in_cluster, "-o", "json")
        return list(found.document("SyncHistory")["history"])

    wait_for(lambda: len(history()) == 2, "the resumed sync in the history")
    assert [entry["revision"] for entry in history()] == [git_repo.head(), first]
    # each sync names its objects, those of the first process's too: its status kept them
    asked = gitopsd("history", "app", "--daemon", again.control_url, "-o", "json")
    newest, oldest = asked.document("SyncHistory")["history"]
    assert [newest["revision"], oldest["revision"]] == [git_repo.head(), first]
    assert newest["objects"]["configured"][0]["name"] == "a"
    assert oldest["objects"]["created"][0]["name"] == "a"
    assert asked.document("SyncHistory")["history"] == history()


def test_reconcile_in_cluster_applies_a_commit_now_and_names_the_sources_there(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    first = git_repo.commit(config_map_files_with_data("a"))
    daemons.start(git_server.file_url(git_repo), interval="1h")
    in_cluster = ["--in-cluster", namespace]
    wait_for(lambda: _line(gitopsd, *in_cluster).get("revision") == first, "the status written")

    second = git_repo.commit(config_map_files_with_data("a", value="w"))
    reconciled = gitopsd("reconcile", "app", *in_cluster, "-o", "json")
    assert reconciled.code == 0, reconciled.text
    result = reconciled.document("ReconcileResult")
    assert (result["succeeded"], result["reason"]) == (True, "Succeeded")
    assert config_map_value(admin_api, namespace, "a") == "w"  # applied before it returned
    assert _line(gitopsd, *in_cluster)["revision"] == second

    # its objects, from the record its status ConfigMap names, with no daemon asked
    tree = gitopsd("tree", "app", *in_cluster, "--daemon", "http://127.0.0.1:9")
    assert tree.code == 0, tree.text
    assert tree.out.splitlines()[0] == f"app at revision {second[:12]}"
    assert tree.out.splitlines()[2].split() == ["ConfigMap", namespace, "a", "Current", "-"]
    listed = gitopsd("tree", "app", *in_cluster, "-o", "json").document("ObjectTree")
    [entry] = listed["objects"]
    assert (entry["object"]["name"], entry["health"]["status"]) == ("a", "Current")

    unknown = gitopsd("reconcile", "nope", *in_cluster)
    said = (
        f"no source nope has a status in namespace {namespace} (the daemon's "
        "controlNamespace); those there: app"
    )
    assert (unknown.code, unknown.err) == (INVALID, f"gitopsd: error: {said}\n"), unknown.text
    typo = gitopsd("suspend", "nope", *in_cluster)
    assert typo.code == INVALID and said in typo.err, typo.text


def test_a_suspension_holds_when_a_standby_takes_over(
    daemons: Daemons,
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_map_files_with_data("a"))
    url, election = git_server.file_url(git_repo), {**ELECTION, "namespace": namespace}
    leader = daemons.start(url, "first", top={"leaderElection": election})
    leader.wait_value("gitopsd_commit_to_applied_seconds_count", bool, "the first commit")
    standby = daemons.start(url, "second", top={"leaderElection": election})
    wait_for(lambda: standby.get("/readyz")[0] == 200, "the standby ready")

    suspended = gitopsd("suspend", "app", "--in-cluster", namespace)
    assert suspended.code == 0, suspended.text
    for replica in (leader, standby):
        wait_for(partial(_says_suspended, gitopsd, replica), f"{replica.name} to hear of it")
    git_repo.commit(config_map_files_with_data("a", value="w"))
    leader.signal(signal.SIGKILL)
    standby.wait_value("gitopsd_leader", lambda v: v == 1, "the standby to take over")

    resumed_at = time.time()
    assert gitopsd("resume", "app", "--in-cluster", namespace).code == 0
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "w", "the resumed sync")
    # The new leader polls every source it runs at once: had it run this one, it would
    # have applied the commit before it was resumed.
    written = [w for w in audit.changes(control_plane, standby.user) if w.name == "a"]
    assert written and all(w.received >= resumed_at for w in written), written
