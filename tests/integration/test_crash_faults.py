"""A sync cut off part-way, with prune on: the API server killed (FA-02) or hung (FA-03)
mid-apply, the daemon killed mid-apply (FA-20). Nothing is pruned in that run; the ApplySet
parent records only objects that exist; the next sync converges, with every object it
created recorded and nothing deleted that git holds. Read from the audit log and the
cluster."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.harness import audit
from tests.harness.census import recorded_names, uid_prefixes
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_names
from tests.harness.commands import CLUSTER_FAILED, scope
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.faultproxy import Fault, FaultProxy
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import admin_service_account
from tests.harness.manifests import config_map_files
from tests.harness.sync_writes import creates, write_of_a_new_config_map
from tests.harness.waiting import wait_for

NEW = [f"new{i}" for i in range(200)]
PARENT = "gitopsd-test"


@dataclass(frozen=True)
class Applying:
    """A CLI sync of 200 new objects and one left out, prune on, each write slowed by the
    fault proxy: applying when a test gets it, so whatever the test does lands mid-apply."""

    url: str
    user: str
    process: subprocess.Popen[bytes]
    err: Path


@pytest.fixture
def applying(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
    proxy: FaultProxy,
) -> Iterator[Applying]:
    git_repo.commit(config_map_files("victim"))
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace), "--prune").code == 0
    git_repo.commit({"victim.yaml": None, **config_map_files(*NEW)})
    user, token = admin_service_account(admin_api, namespace, "cli")
    proxy.inject(Fault(when=write_of_a_new_config_map, delay_seconds=0.2))
    kubeconfig = proxy.kubeconfig(tmp_path / "cli.kubeconfig", "cli", token)
    argv = [sys.executable, "-m", "gitopsd", "sync", url, *scope(namespace), "--prune"]
    argv += ["--allow-mass-prune", "--kubeconfig", str(kubeconfig)]
    argv += ["--cache-dir", str(tmp_path / "cache")]
    with (tmp_path / "out").open("w+") as out, (tmp_path / "err").open("w+") as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        try:
            wait_for(lambda: len(creates(control_plane, user)) >= 20, "the sync to be applying")
            yield Applying(url, user, process, Path(err.name))
        finally:
            process.kill()
            process.wait()


@pytest.mark.case("FA-02")
def test_fa02_an_api_server_killed_mid_apply_prunes_nothing_and_the_next_sync_converges(
    applying: Applying,
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    namespace: str,
    proxy: FaultProxy,
) -> None:
    with control_plane.apiserver_stopped():
        code = applying.process.wait(180)

    url, user, errors = applying.url, applying.user, applying.err.read_text()
    assert code == CLUSTER_FAILED, errors
    assert [w for w in audit.changes(control_plane, user) if w.verb == "delete"] == []
    live = uid_prefixes(admin_api, namespace)
    assert "victim" in live
    assert 20 <= len([name for name in live if name.startswith("new")]) < len(NEW)
    recorded = recorded_names(admin_api, namespace, PARENT)
    assert all(live.get(name) == uid for name, uid in recorded.items()), recorded  # no ghosts

    proxy.clear()
    again = gitopsd("sync", url, *scope(namespace), "--prune", "--allow-mass-prune")
    assert again.code == 0, again.text
    assert config_map_names(admin_api, namespace) >= set(NEW) and "victim" not in config_map_names(
        admin_api, namespace
    )
    assert recorded_names(admin_api, namespace, PARENT) == {
        name: uid for name, uid in uid_prefixes(admin_api, namespace).items() if name in NEW
    }


@pytest.mark.case("FA-20")
def test_fa20_a_daemon_killed_mid_apply_converges_on_restart_and_orphans_nothing(
    daemons: Daemons,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    proxy: FaultProxy,
) -> None:
    kept = [f"keep{i}" for i in range(10)]
    git_repo.commit(config_map_files("victim", *kept))
    url = git_server.file_url(git_repo)
    daemon = daemons.start(url, server=proxy.url, prune=True)
    wait_for(lambda: {"victim", *kept} <= config_map_names(admin_api, namespace), "the first sync")
    since = time.time()
    proxy.inject(Fault(when=write_of_a_new_config_map, delay_seconds=0.2))
    git_repo.commit({"victim.yaml": None, **config_map_files(*NEW)})
    wait_for(lambda: len(creates(control_plane, daemon.user, since)) >= 20, "it to be applying")

    assert daemon.process is not None
    daemon.process.kill()  # SIGKILL: no finishing anything
    daemon.process.wait(30)
    killed_at = time.time()
    assert [w for w in audit.changes(control_plane, daemon.user, since) if w.verb == "delete"] == []
    live = config_map_names(admin_api, namespace)
    assert "victim" in live and len(live & set(NEW)) < len(NEW)

    proxy.clear()
    daemon.start()
    wanted = {*kept, *NEW}
    wait_for(
        lambda: set(recorded_names(admin_api, namespace, "gitopsd-app")) == wanted,
        "the restarted daemon to converge",
        120,
    )
    assert config_map_names(admin_api, namespace) >= wanted and "victim" not in config_map_names(
        admin_api, namespace
    )
    deleted = [
        w.name for w in audit.changes(control_plane, daemon.user, since) if w.verb == "delete"
    ]
    assert deleted == ["victim"]  # once, after the restart
    assert all(w.received >= killed_at for w in audit.deletes(control_plane, namespace, since))
    live_uids = uid_prefixes(admin_api, namespace)
    recorded = recorded_names(admin_api, namespace, "gitopsd-app")
    assert all(live_uids[name] == uid for name, uid in recorded.items())  # no orphans, no ghosts


@pytest.mark.case("FA-03")
def test_fa03_an_api_server_that_hangs_mid_apply_times_the_sync_out_and_prunes_nothing(
    applying: Applying,
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    namespace: str,
    proxy: FaultProxy,
) -> None:
    """SIGSTOP, not a kill: connections stay open and nothing answers. The requests in
    flight end at their 30 s timeout, the sync fails and deletes nothing; after SIGCONT the
    next sync converges."""
    with control_plane.apiserver_paused():
        code = applying.process.wait(120)  # its requests' own timeout ends them, not SIGCONT

    url, user, errors = applying.url, applying.user, applying.err.read_text()
    assert code == CLUSTER_FAILED, errors
    assert "timed out" in errors or "timeout" in errors, errors
    assert [w for w in audit.changes(control_plane, user) if w.verb == "delete"] == []
    assert "victim" in config_map_names(admin_api, namespace)
    proxy.clear()
    again = gitopsd("sync", url, *scope(namespace), "--prune", "--allow-mass-prune")
    assert again.code == 0, again.text
    assert "victim" not in config_map_names(admin_api, namespace)
