"""The daemon as a real subprocess, its metrics scraped over HTTP as Prometheus does."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.harness.controlplane import ControlPlane, free_port, spawn
from tests.harness.kube import admin_service_account, kubeconfig_for
from tests.harness.memory_cage import MemoryCage
from tests.harness.waiting import wait_for

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
ELECTION = {"enabled": True, "leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "1s"}
"""Leader election in seconds, not the default tens of seconds, for a test's daemons."""
IMAGE_ENVIRONMENT = {"MALLOC_ARENA_MAX": "2"}
"""The allocator as the image sets it (the Dockerfile's ENV): the daemons the tests and
`make bench` start hold their memory as the Deployment's would."""


@dataclass
class DaemonProcess:
    """`gitopsd run` with a config written from `config`; `user` is its API identity."""

    config: dict[str, Any]
    workdir: Path
    user: str
    name: str = "daemon"
    process: subprocess.Popen[bytes] | None = None
    flags: tuple[str, ...] = ()
    """More flags for `gitopsd run` (--log-level, --log-format)."""
    memory_limit_mib: int | None = None
    """Runs the daemon inside a memory cgroup of this size, as the Deployment's limit."""
    cage: MemoryCage | None = None

    @classmethod
    def configured(
        cls,
        workdir: Path,
        name: str,
        user: str,
        kubeconfig: Path,
        sources: list[dict[str, Any]],
        **top: Any,
    ) -> DaemonProcess:
        home = workdir / name
        home.mkdir(parents=True, exist_ok=True)
        config = {
            "listen": f"127.0.0.1:{free_port()}",
            "probeListen": f"127.0.0.1:{free_port()}",
            "controlListen": f"127.0.0.1:{free_port()}",
            "cacheDir": str(home / "cache"),  # each replica has its own, as in a pod
            "kubeconfig": str(kubeconfig),
            "shutdownGraceSeconds": 20,
            "sources": sources,
            **top,
        }
        return cls(config, home, user, name)

    @property
    def url(self) -> str:
        """Where its webhooks are served."""
        return f"http://{self.config['listen']}"

    @property
    def probe_url(self) -> str:
        """Where /metrics, /healthz and /readyz are served."""
        return f"http://{self.config['probeListen']}"

    @property
    def control_url(self) -> str:
        """Where `gitopsd get` and `gitopsd reconcile` reach it (`--daemon`)."""
        return f"http://{self.config['controlListen']}"

    @property
    def log_file(self) -> Path:
        return self.workdir / "daemon.log"

    def start(self, wait: bool = True) -> DaemonProcess:
        config_file = self.workdir / "gitopsd.yaml"
        config_file.write_text(json.dumps(self.config))  # JSON is YAML
        argv = [sys.executable, "-m", "gitopsd", "run", "--config", str(config_file), *self.flags]
        if self.memory_limit_mib is not None:
            self.cage = MemoryCage.create(self.memory_limit_mib)
            argv = self.cage.wrap(argv)
        self.process = spawn(argv, self.log_file, IMAGE_ENVIRONMENT)
        if wait:
            wait_for(self._serving, f"{self.name} to serve /healthz")
        return self

    def _serving(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"{self.name} exited {self.process.returncode}:\n{self.logs()}")
        return self.get("/healthz")[0] == 200

    def get(self, path: str) -> tuple[int, str]:
        """The status and body of a GET on the probe listener; status 0 with the reason as
        body when nothing answered."""
        try:
            with urllib.request.urlopen(self.probe_url + path, timeout=5) as answer:  # noqa: S310
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
            return 0, repr(error)

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> int:
        request = urllib.request.Request(  # noqa: S310 - our own loopback URL
            self.url + path, data=body, headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310
                return int(answer.status)
        except urllib.error.HTTPError as error:
            return int(error.code)

    def metrics(self) -> str:
        """The /metrics exposition text (fails, saying why, unless it answers 200)."""
        status, text = self.get("/metrics")
        assert status == 200, f"/metrics answered {status}: {text}\n{self.logs()[-3000:]}"
        return text

    def samples(self) -> Samples:
        found: Samples = {}
        for family in text_string_to_metric_families(self.metrics()):
            for sample in family.samples:
                found[(sample.name, frozenset(sample.labels.items()))] = sample.value
        return found

    def value(self, metric: str, **labels: str) -> float:
        """The sum of the samples of `metric` whose labels include `labels` (0 when none)."""
        wanted = set(labels.items())
        return sum(v for (n, ls), v in self.samples().items() if n == metric and wanted <= ls)

    def wait_value(
        self,
        metric: str,
        condition: Callable[[float], bool],
        what: str,
        deadline_seconds: float = 30.0,
        **labels: str,
    ) -> float:
        """Waits until the value of `metric` (see `value`) meets `condition`; returns it."""

        def met() -> tuple[float] | None:
            value = self.value(metric, **labels)
            return (value,) if condition(value) else None

        return wait_for(met, what, deadline_seconds)[0]

    def requests(self) -> dict[str, float]:
        """API requests this process made so far, by verb (its own tally)."""
        tally: dict[str, float] = {}
        for (name, labels), value in self.samples().items():
            if name == "gitopsd_api_requests_total":
                verb = dict(labels)["verb"]
                tally[verb] = tally.get(verb, 0) + value
        return tally

    def threads(self) -> int:
        """How many threads the process runs now."""
        assert self.process is not None
        return len(list(Path(f"/proc/{self.process.pid}/task").iterdir()))

    def peak_rss_mib(self) -> float:
        """The most memory the process has held so far (VmHWM), as the kernel counts it."""
        assert self.process is not None
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
        return int(line.split()[1]) / 1024

    def logs(self) -> str:
        return self.log_file.read_text(errors="replace")

    def log_lines(self) -> list[dict[str, Any]]:
        """The JSON log lines (the daemon writes JSON when stderr is not a terminal)."""
        return [json.loads(line) for line in self.logs().splitlines() if line.startswith("{")]

    def signal(self, number: int) -> None:
        assert self.process is not None
        self.process.send_signal(number)

    def stop(self) -> int:
        """SIGTERM, then the exit code (SIGKILL if it does not stop in time)."""
        try:
            return self._stop()
        finally:
            if self.cage is not None:
                self.cage.close()

    def _stop(self) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGCONT)
        self.process.terminate()
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGUSR1)  # its threads' stacks, into its log
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(2)
            self.process.kill()
            return self.process.wait()


@dataclass
class Daemons:
    """Starts daemons for a test, each under its own cluster-admin ServiceAccount in the
    test's namespace (so the audit log tells replicas apart), and stops them all after."""

    plane: ControlPlane
    admin_api: Any
    namespace: str
    workdir: Path
    started: list[DaemonProcess] = field(default_factory=list)

    def source(self, url: str, **fields: Any) -> dict[str, Any]:
        """A source named `app` polling `url` every second into the test's namespace."""
        return {
            "name": "app",
            "repository": url,
            "allowInsecure": True,
            "interval": "1s",
            "namespace": self.namespace,
            "inventoryNamespace": self.namespace,
            **fields,
        }

    def start(
        self,
        url: str,
        name: str = "daemon",
        top: dict[str, Any] | None = None,
        server: str = "",
        **fields: Any,
    ) -> DaemonProcess:
        """One daemon keeping `self.source(url, **fields)`; `top` adds top-level settings,
        `server` another address of the API server (a fault proxy)."""
        sources = [self.source(url, **fields)]
        return self.start_with(sources, name, server, **(top or {})).start()

    def start_with(
        self, sources: list[dict[str, Any]], name: str, server: str = "", **top: Any
    ) -> DaemonProcess:
        """A daemon for `sources`, configured and registered for teardown but not started."""
        user, token = admin_service_account(self.admin_api, self.namespace, name)
        return self.configure_as(user, token, sources, name, server, **top)

    def configure_as(
        self,
        user: str,
        token: str,
        sources: list[dict[str, Any]],
        name: str,
        server: str = "",
        **top: Any,
    ) -> DaemonProcess:
        """As `start_with`, with the API identity `user` that `token` proves."""
        top.setdefault("controlNamespace", self.namespace)  # its sources' status, apart
        path = self.workdir / f"{name}.kubeconfig"
        kubeconfig = kubeconfig_for(self.plane, path, name, token, server)
        daemon = DaemonProcess.configured(self.workdir, name, user, kubeconfig, sources, **top)
        self.started.append(daemon)
        return daemon

    def stop_all(self) -> None:
        for daemon in self.started:
            daemon.stop()
