"""A real Prometheus server (Debian's package) scraping the daemon, queried with PromQL."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness.controlplane import free_port, provided, spawn
from tests.harness.waiting import wait_for

PROVIDE_SCRIPT = Path(__file__).resolve().parent.parent / "prometheus" / "provide.sh"


@dataclass(frozen=True)
class PrometheusBinaries:
    prometheus: Path
    promtool: Path


def provide_prometheus() -> PrometheusBinaries:
    paths = provided(PROVIDE_SCRIPT)
    return PrometheusBinaries(paths["PROMETHEUS"], paths["PROMTOOL"])


class Prometheus:
    """One server scraping `targets` (host:port) every second, job "gitopsd"."""

    def __init__(self, binaries: PrometheusBinaries, workdir: Path, targets: list[str]) -> None:
        self.binaries = binaries
        self.workdir = workdir
        self.targets = targets
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Prometheus:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(
            json.dumps(
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "scrape_configs": [
                        {"job_name": "gitopsd", "static_configs": [{"targets": self.targets}]}
                    ],
                }
            )
        )
        argv = [
            str(self.binaries.prometheus),
            f"--config.file={config}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]
        self.process = spawn(argv, self.workdir / "prometheus.log")
        wait_for(self._ready, "Prometheus to be ready")
        return self

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            log = (self.workdir / "prometheus.log").read_text(errors="replace")
            raise AssertionError(f"prometheus exited {self.process.returncode}:\n{log}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:  # noqa: S310
                return bool(answer.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector `promql` evaluates to now (its `metric` and `value` entries)."""
        query = urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{query}", timeout=5) as answer:  # noqa: S310
            result: list[dict[str, Any]] = json.load(answer)["data"]["result"]
            return result

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)
