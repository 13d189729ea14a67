"""Two `gitopsd run` replicas sharing a Lease: one writes, the other stands by and takes
over; a leader that lost its lease writes nothing. Writes are read from the API server's
audit log, by each replica's own ServiceAccount."""

from __future__ import annotations

import signal
import time
from typing import Any

from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_value
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import ELECTION, DaemonProcess, Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.manifests import config_map_files_with_data
from tests.harness.waiting import wait_for


def replicas(
    daemons: Daemons, git_server: GitServer, git_repo: GitRepo, **timing: str
) -> tuple[DaemonProcess, DaemonProcess]:
    """A leader that applied a first commit (ConfigMap a, k: v) and a ready standby;
    `timing` overrides the lease durations."""
    git_repo.commit(config_map_files_with_data("a"))
    url = git_server.file_url(git_repo)
    election = {**ELECTION, **timing, "namespace": daemons.namespace}
    leader = daemons.start(url, "first", top={"leaderElection": election})
    leader.wait_value("gitopsd_leader", lambda v: v == 1, "the first replica to lead")
    leader.wait_value("gitopsd_commit_to_applied_seconds_count", bool, "the first commit")
    standby = daemons.start(url, "second", top={"leaderElection": election})
    wait_for(lambda: standby.get("/readyz")[0] == 200, "the standby to be ready (caches warm)")
    assert standby.value("gitopsd_leader") == 0
    return leader, standby


def test_only_the_leader_writes_and_a_standby_takes_over_when_it_dies(
    daemons: Daemons,
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    leader, standby = replicas(daemons, git_server, git_repo)

    git_repo.commit(config_map_files_with_data("a", value="w"))
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "w", "the second commit")
    standby.wait_value(
        "gitopsd_reconcile_total", lambda v: v >= 3, "the standby to poll too", result="standby"
    )
    assert standby.value("gitopsd_reconcile_total", result="success") == 0  # it only read
    refused = gitopsd("reconcile", "app", "--daemon", standby.control_url)
    assert refused.code == 4 and "does not write for this source" in refused.err

    assert {w.name for w in audit.changes(control_plane, leader.user)} >= {"a", "gitopsd-app"}
    assert audit.changes(control_plane, standby.user) == []

    leader.signal(signal.SIGKILL)
    standby.wait_value("gitopsd_leader", lambda v: v == 1, "the standby to take over")
    git_repo.commit(config_map_files_with_data("a", value="x"))

    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "x", "the new leader's sync")
    assert "a" in {w.name for w in audit.changes(control_plane, standby.user)}


def test_a_leader_stopped_past_its_lease_is_fenced_and_writes_nothing(
    daemons: Daemons,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    leader, standby = replicas(daemons, git_server, git_repo)

    stopped_at = time.time()
    leader.signal(signal.SIGSTOP)  # a hung process: it cannot renew, nor know it lost
    standby.wait_value("gitopsd_leader", lambda v: v == 1, "the standby to take over")
    # work the old leader would still want to do
    git_repo.commit(config_map_files_with_data("a", value="w"))
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "w", "the new leader's sync")
    leader.signal(signal.SIGCONT)

    leader.wait_value("gitopsd_leader", lambda v: v == 0, "the old leader to notice")
    polls = leader.value("gitopsd_reconcile_total")
    leader.wait_value("gitopsd_reconcile_total", lambda v: v >= polls + 2, "it to poll again")
    assert audit.changes(control_plane, leader.user, since=stopped_at) == []
    assert config_map_value(admin_api, namespace, "a") == "w"


def test_a_stopped_leader_hands_the_lease_over_at_once(
    daemons: Daemons, git_server: GitServer, git_repo: GitRepo
) -> None:
    long_lease = {"leaseDuration": "120s", "renewDeadline": "60s"}
    leader, standby = replicas(daemons, git_server, git_repo, **long_lease)

    assert leader.stop() == 0

    # Released, not expired: the standby takes over long before the 120 s lease runs out.
    standby.wait_value("gitopsd_leader", lambda v: v == 1, "the standby to lead", 30)
    assert any(line["message"] == "leadership acquired" for line in standby.log_lines())
