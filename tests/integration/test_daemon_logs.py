"""The daemon's log stays machine-readable against a cluster whose TLS is not verified."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitopsd.cluster import Cluster
from gitopsd.resources import CONFIG_MAPS
from tests.harness.cli import Gitopsd
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import admin_service_account
from tests.harness.manifests import config_map_files, folder
from tests.harness.waiting import wait_for

WARNING = "TLS verification is off for the cluster at"


def insecure_kubeconfig(path: Path, server: str, user: str, token: str) -> Path:
    """A kubeconfig that skips TLS verification, as many local clusters' do."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "local", "cluster": {"server": server, "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
        "current-context": "local",
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


def test_every_log_line_is_json_and_unverified_tls_is_said_once(
    daemons: Daemons,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    git_repo.commit(config_map_files("a", "b", "c"))
    user, token = admin_service_account(admin_api, namespace, "daemon")
    kubeconfig = insecure_kubeconfig(tmp_path / "insecure", control_plane.url, "daemon", token)
    source = daemons.source(git_server.file_url(git_repo))
    daemon = DaemonProcess.configured(tmp_path, "daemon", user, kubeconfig, [source])
    daemons.started.append(daemon)
    daemon.start()
    admin = Cluster.connect(str(control_plane.kubeconfig))
    wait_for(lambda: admin.get(CONFIG_MAPS, namespace, "gitopsd-app"), "the daemon's first sync")
    wait_for(lambda: daemon.value("gitopsd_reconcile_total") >= 3, "more reconciles")
    assert daemon.stop() == 0

    text = daemon.logs()
    lines = [json.loads(line) for line in text.splitlines()]  # each line, or it fails here
    warned = [line for line in lines if WARNING in line["message"]]
    assert len(warned) == 1, text
    assert warned[0]["level"] == "warning"
    assert control_plane.url in warned[0]["message"]
    assert token not in text


def test_unverified_tls_is_warned_of_unless_the_command_asks_for_it(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    namespace: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, token = admin_service_account(admin_api, namespace, "cli")
    kubeconfig = insecure_kubeconfig(tmp_path / "insecure", control_plane.url, "cli", token)
    one = folder(tmp_path / "one", "a")
    at = ("diff", str(one), "-n", namespace, "--kubeconfig", str(kubeconfig))

    def warned() -> list[str]:
        said = [record.getMessage() for record in caplog.records if WARNING in record.getMessage()]
        caplog.clear()
        return said

    found = gitopsd(*at)
    found_warned = warned()
    asked = gitopsd(*at, "--insecure-skip-tls-verify")

    assert (found.code, asked.code) == (1, 1), found.text + asked.text  # a is missing
    assert len(found_warned) == 1 and control_plane.url in found_warned[0]
    assert warned() == []
