"""What `gitopsd sync` says while it runs, read where a CI job reads it (stderr that is no
terminal): a line per phase, the wait with its slowest object, nothing with --quiet; and a
Ctrl-C during a wait that says how long it really waited. The control plane's Deployment
controller, scheduler and kwok's nodes decide health; a Deployment no node takes stays
InProgress."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.harness.cli import Gitopsd
from tests.harness.commands import UNHEALTHY, scope
from tests.harness.controllers import NOWHERE
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.manifests import config_map_files, deployment
from tests.harness.waiting import wait_for

LATER = {
    "app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n"
    "  annotations: {gitopsd.io/sync-wave: '1'}\n"
}


def test_a_sync_into_a_log_says_each_phase_and_how_its_wave_waits(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit({**deployment("db", pods_on=NOWHERE), **LATER})
    url = git_server.file_url(git_repo)

    run = gitopsd("sync", url, *scope(namespace), "--timeout", "3s")

    assert run.code == UNHEALTHY, run.text
    lines = run.err.splitlines()
    assert lines[0].startswith(f"fetched {git_repo.head()[:12]} in "), run.err
    assert lines[1:5] == [
        "rendered 2 manifests",
        "dry-run 2 of 2 objects: 2 drifted",
        "applying 2 objects",
        "wave 0 applied (1 objects)",
    ]
    assert lines[5].startswith(
        f"waiting: 0 of 1 Current after 0 s, slowest apps/Deployment/{namespace}/db: InProgress"
    )
    failed = "gitopsd: error: sync wave 0 is not healthy after [34] s of at most 3 s"
    assert re.search(failed, run.err), run.err
    assert f"ConfigMap/{namespace}/app" not in run.out  # wave 1 was held back


def test_quiet_prints_the_result_alone(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(config_map_files("a"))

    run = gitopsd("sync", git_server.file_url(git_repo), *scope(namespace), "--quiet")

    assert run.code == 0, run.text
    assert run.err == ""
    assert f"created    ConfigMap/{namespace}/a" in run.out


def test_a_ctrl_c_during_a_wait_says_how_long_it_waited(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str, tmp_path: Path
) -> None:
    git_repo.commit(deployment("db", pods_on=NOWHERE))
    argv = [sys.executable, "-m", "gitopsd", "sync", git_server.file_url(git_repo)]
    argv += [*scope(namespace), "--wait", "--kubeconfig", str(gitopsd.plane.kubeconfig)]
    argv += ["--cache-dir", str(tmp_path / "cache")]
    err = tmp_path / "err"
    with err.open("w") as written:
        started = time.monotonic()
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=written, stdin=subprocess.DEVNULL, text=True
        )
        try:
            wait_for(lambda: "waiting: 0 of 1 Current" in err.read_text(), "the wait to start")
            process.send_signal(signal.SIGINT)
            out, _ = process.communicate(timeout=60)
        finally:
            process.kill()
        waited = time.monotonic() - started

    said = err.read_text()
    assert process.returncode == 130, said
    stopped = re.search(r"gitopsd: stopped by SIGINT after (\d+) s: ", said)
    assert stopped is not None, said
    assert int(stopped.group(1)) <= waited + 1  # its own time, not the 300 s it may wait
    assert f"created    apps/Deployment/{namespace}/db" in out  # what it did, reported
