"""The daemon's log stays machine-readable: against a cluster whose TLS is not verified, and
when the daemon cannot start."""

from __future__ import annotations

import json
import re
import socket
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
TEXT_LINE = re.compile(r"^\d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR)\s")
"""A line of `--log-format text`: its time, then its level."""


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
    daemon = DaemonProcess.configured(
        tmp_path, "daemon", user, kubeconfig, [source], controlNamespace=namespace
    )
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


@pytest.mark.parametrize("log_format", ["json", "text"])
@pytest.mark.parametrize("setting", ["listen", "probeListen", "controlListen"])
def test_a_listen_address_in_use_is_one_error_line_naming_the_setting(
    daemons: Daemons, namespace: str, setting: str, log_format: str
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as holder:
        address = f"127.0.0.1:{holder.getsockname()[1]}"
        daemon = daemons.start_with([], "daemon")
        daemon.config[setting] = address
        daemon.flags = ("--log-format", log_format)
        daemon.start(wait=False)
        process = daemon.process
        assert process is not None
        wait_for(lambda: process.poll() is not None, "the daemon to give up")

    text = daemon.logs()
    assert process.returncode == 2, text
    assert "Traceback" not in text
    errors = error_lines(text, log_format)
    assert len(errors) == 1, text
    assert f"{setting}: cannot listen on {address}: Address already in use; " in errors[0]
    remedy = f"give {setting} another port in the configuration file, or stop what holds it"
    assert remedy in errors[0]


def error_lines(text: str, log_format: str) -> list[str]:
    """The messages of the error lines, each line checked to be one of `log_format`."""
    lines = text.splitlines()
    if log_format == "json":
        records = [json.loads(line) for line in lines]  # each line, or it fails here
        return [record["message"] for record in records if record["level"] == "error"]
    assert all(TEXT_LINE.match(line) for line in lines), text
    return [line for line in lines if line.split()[1] == "ERROR"]
