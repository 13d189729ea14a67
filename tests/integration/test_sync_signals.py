"""`gitopsd sync` stopped by SIGTERM or SIGINT: the requests in flight finish, no new one is
sent, nothing is pruned, and it reports what it did. Checked against the server's audit log."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gitopsd.config import SyncSettings
from tests.harness import audit
from tests.harness.census import recorded_names
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_names
from tests.harness.commands import scope
from tests.harness.controlplane import ControlPlane
from tests.harness.faultproxy import Fault, FaultProxy
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import admin_service_account
from tests.harness.manifests import config_map_files
from tests.harness.sync_writes import creates, write_of_a_new_config_map
from tests.harness.waiting import wait_for

OBJECTS = 500
IN_FLIGHT = SyncSettings(name="any").concurrency
"""At most this many requests were already sent when the signal was handled."""


@pytest.mark.case("FA-21")
@pytest.mark.parametrize(
    ("stop", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"]
)
def test_fa21_a_signal_stops_a_sync_without_new_requests_or_prune(
    stop: signal.Signals,
    code: int,
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
    proxy: FaultProxy,
) -> None:
    git_repo.commit(config_map_files("victim"))
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace), "--prune").code == 0
    new = [f"new{i}" for i in range(OBJECTS)]
    git_repo.commit({"victim.yaml": None, **config_map_files(*new)})
    user, token = admin_service_account(admin_api, namespace, "cli")
    # each write takes a while, as on a busy API server: the signal comes mid-apply on any
    # machine (a fast one once applied all 500 before the test saw 20)
    proxy.inject(Fault(when=write_of_a_new_config_map, delay_seconds=0.2))
    kubeconfig = proxy.kubeconfig(tmp_path / "cli.kubeconfig", "cli", token)
    argv = [sys.executable, "-m", "gitopsd", "sync", url, *scope(namespace), "--prune"]
    argv += ["--allow-mass-prune", "--kubeconfig", str(kubeconfig)]
    argv += ["--cache-dir", str(tmp_path / "cache")]
    with (tmp_path / "out").open("w+") as out, (tmp_path / "err").open("w+") as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        try:
            wait_for(lambda: len(creates(control_plane, user)) >= 20, "the sync to be applying")
            stopped_at = time.time()
            process.send_signal(stop)
            assert process.wait(60) == code, Path(err.name).read_text()
        finally:
            process.kill()
        summary, errors = Path(out.name).read_text(), Path(err.name).read_text()

    applied = [w for w in creates(control_plane, user) if w.code < 300]
    assert len(applied) < OBJECTS  # it stopped
    after = audit.changes(control_plane, user, stopped_at)
    records = [w for w in after if w.name == "gitopsd-test"]
    assert len(records) == 1 and len(after) - len(records) <= IN_FLIGHT
    recorded = recorded_names(admin_api, namespace, "gitopsd-test")
    assert set(recorded) == {"victim", *(w.name for w in applied)}  # what it did, kept
    assert [w for w in audit.changes(control_plane, user) if w.verb == "delete"] == []
    assert "victim" in config_map_names(admin_api, namespace)  # not pruned
    assert summary.count(f"created    ConfigMap/{namespace}/new") == len(applied)
    assert f"{len(applied)} created" in summary
    assert f"stopped by {stop.name}" in errors, errors
    assert "error" not in errors, errors
