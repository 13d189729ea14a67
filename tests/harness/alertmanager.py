"""A real Alertmanager (Debian's package) on a free loopback port, alone (no cluster peers),
routing every alert to a receiver that sends nothing: the tests read its alerts back from
its v2 API."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.harness.controlplane import free_port, provided, spawn
from tests.harness.waiting import wait_for

PROVIDE_SCRIPT = Path(__file__).resolve().parent.parent / "alertmanager" / "provide.sh"
RESOLVE_SECONDS = 4
"""Alertmanager's resolve_timeout here (5 m by default): short, so a test sees an alert
that is not sent again resolve."""


def provide_alertmanager() -> Path:
    return provided(PROVIDE_SCRIPT)["ALERTMANAGER"]


class Alertmanager:
    def __init__(self, binary: Path, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Alertmanager:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "alertmanager.yml"
        route = {"receiver": "nowhere", "group_wait": "1s", "group_interval": "1s"}
        # an alert nothing hears of for 4 s is resolved: a client must send it again
        top = {"global": {"resolve_timeout": f"{RESOLVE_SECONDS}s"}, "route": route}
        config.write_text(json.dumps({**top, "receivers": [{"name": "nowhere"}]}))
        argv = [
            str(self.binary),
            f"--config.file={config}",
            f"--storage.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",  # alone: no gossip port to collide with another's
        ]
        self.process = spawn(argv, self.workdir / "alertmanager.log")
        wait_for(self._ready, "Alertmanager to be ready")
        return self

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            log = (self.workdir / "alertmanager.log").read_text(errors="replace")
            raise AssertionError(f"alertmanager exited {self.process.returncode}:\n{log}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:  # noqa: S310
                return bool(answer.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts it holds as active (resolved ones are not listed)."""
        url = f"{self.url}/api/v2/alerts?active=true&silenced=false&inhibited=false"
        with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - loopback
            found: list[dict[str, Any]] = json.load(answer)
            return found

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)
