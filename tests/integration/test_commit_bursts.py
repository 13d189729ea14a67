"""Commits faster than syncs (the catalogue's LD-06, at a test's scale): a burst of commits
pushed while a sync is in flight is coalesced, the latest wins, a source never has two syncs
at once, and the daemon ends at HEAD. The burst is pushed from inside the first sync's write
(the fault proxy holds it meanwhile), so no test paces commits with sleeps."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.harness import audit
from tests.harness.cluster_reads import config_map_value
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.faultproxy import Fault, FaultProxy, write_of_config_map
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.manifests import config_map_files_with_data
from tests.harness.waiting import wait_for

BURST = 20
MOST_SYNCS = 3
"""The held sync, one of whatever was fetched while it was held, one of HEAD."""


def finished(lines: list[dict[str, Any]], revision: str) -> bool:
    return any(
        line["message"].startswith("sync finished") and line.get("revision") == revision
        for line in lines
    )


@pytest.mark.case("LD-06")
def test_ld06_a_burst_of_commits_is_coalesced_one_sync_at_a_time_and_ends_at_head(
    daemons: Daemons,
    proxy: FaultProxy,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_map_files_with_data("app", value="v0"))
    daemon = daemons.start(git_server.file_url(git_repo), server=proxy.url)
    wait_for(lambda: config_map_value(admin_api, namespace, "app") == "v0", "the first sync")
    commits: list[str] = []
    first_noted = threading.Event()

    def push_the_burst() -> None:
        first_noted.wait(30)  # the daemon may write before the test noted the first commit
        for n in range(2, BURST + 1):
            commits.append(git_repo.commit(config_map_files_with_data("app", value=f"v{n}")))

    held = proxy.inject(Fault(write_of_config_map("app"), meanwhile=push_the_burst, times=1))
    since = time.time()
    commits.append(git_repo.commit(config_map_files_with_data("app", value="v1")))
    first_noted.set()
    wait_for(lambda: len(commits) == BURST, "the burst, pushed while the first sync writes")
    head = git_repo.head()
    assert held.fired == 1 and commits[-1] == head
    wait_for(lambda: config_map_value(admin_api, namespace, "app") == f"v{BURST}", "HEAD applied")
    daemon.wait_value(
        "gitopsd_source_revision_info", lambda v: v == 1, "HEAD", source="app", revision=head
    )
    wait_for(lambda: finished(daemon.log_lines(), head), "the sync of HEAD to finish")

    lines = daemon.log_lines()
    ends = [line["message"].split(":")[0] for line in lines]
    ends = [end for end in ends if end in ("sync started", "sync finished")]
    assert ends == ["sync started", "sync finished"] * (len(ends) // 2), ends  # one at a time
    started = [
        line["revision"]
        for line in lines
        if line["message"] == "sync started" and line.get("revision") in commits
    ]
    order = [commits.index(revision) for revision in started]
    assert order == sorted(set(order)), order  # latest wins: never an older one after it
    assert order[0] == 0 and order[-1] == BURST - 1, order
    assert len(order) <= MOST_SYNCS, order  # coalesced, no queue of commits
    writes = [
        w
        for w in audit.writes(control_plane, daemon.user, since)
        if w.resource == "configmaps" and w.name == "app" and not w.dry_run
    ]
    assert len(writes) == len(order), (writes, order)  # one write a sync
    assert config_map_value(admin_api, namespace, "app") == f"v{BURST}"
