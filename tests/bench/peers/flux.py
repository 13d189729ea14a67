"""Flux's source-controller and kustomize-controller, run as processes outside the cluster
against a benchmark's control plane, as gitopsd's daemon is: leader election off, the
artifact storage served on loopback, each controller as a user of its own (PEER_USERS), so
that the audit log counts their requests apart from gitopsd's. Built once, from the wrapper
module tests/bench/flux/ (its provide.sh), with their CRDs from the same modules."""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.bench.measure import BenchError, cpu_seconds, tail, wait_until
from tests.harness.controlplane import (
    PEER_USERS,
    ControlPlane,
    free_port,
    provided,
    spawn,
    stop_process,
)
from tests.harness.kube import api_client

PROVIDE_SCRIPT = Path(__file__).resolve().parents[1] / "flux" / "provide.sh"
SOURCES = ("source.toolkit.fluxcd.io", "v1", "gitrepositories")
KUSTOMIZATIONS = ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"
"""What `flux reconcile` and a Receiver set on an object: reconcile it now."""
CONCURRENT = 8
"""Reconciles each controller runs at once: gitopsd's concurrentReconciles by default."""
START_DEADLINE_SECONDS = 120.0
GIT_SECRET = "git"
"""Each tenant's basic-auth Secret for the git server (Flux reads git over HTTP only)."""


@dataclass(frozen=True)
class FluxBinaries:
    source_controller: Path
    kustomize_controller: Path
    crds: tuple[Path, ...]
    """The folders of their CustomResourceDefinitions (each module's config/crd/bases)."""

    @property
    def versions(self) -> str:
        """ "source-controller v1.9.0, kustomize-controller v1.9.6", from the cache's folders."""
        folders = (self.source_controller.parent.name, self.kustomize_controller.parent.name)
        return ", ".join(folder.replace("-controller-", "-controller ") for folder in folders)


def provide_flux(build: bool) -> FluxBinaries | None:
    """Flux's binaries: built first if `build` (minutes, once); else only if already cached
    (None if not)."""
    paths = provided(PROVIDE_SCRIPT, *(() if build else ("--cached",)))
    if not paths:
        return None
    return FluxBinaries(
        source_controller=paths["FLUX_SOURCE_CONTROLLER"],
        kustomize_controller=paths["FLUX_KUSTOMIZE_CONTROLLER"],
        crds=(paths["FLUX_SOURCE_CONTROLLER_CRDS"], paths["FLUX_KUSTOMIZE_CONTROLLER_CRDS"]),
    )


class Flux:
    """Both controllers against `plane`, their CRDs installed first; `stop()` ends them."""

    def __init__(self, plane: ControlPlane, binaries: FluxBinaries, kubectl: Path, workdir: Path):
        self.plane, self.binaries, self.kubectl, self.workdir = plane, binaries, kubectl, workdir
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.objects: Any = client.CustomObjectsApi(api_client(plane))

    def start(self) -> Flux:
        self.install_crds()
        (self.workdir / "artifacts").mkdir(parents=True, exist_ok=True)
        storage = f"127.0.0.1:{free_port()}"
        source_flags = {
            "--storage-path": str(self.workdir / "artifacts"),
            "--storage-addr": storage,
            "--storage-adv-addr": storage,
        }
        self._start("source-controller", self.binaries.source_controller, source_flags)
        self._start("kustomize-controller", self.binaries.kustomize_controller, {})
        return self

    def install_crds(self) -> None:
        """Server-side applied (a second Flux on the same plane finds them), until Established."""
        for folder in self.binaries.crds:
            self._kubectl("apply", "--server-side", "-f", str(folder))
            self._kubectl("wait", "--for=condition=Established", "-f", str(folder))

    def stop(self) -> None:
        for process in self.processes.values():
            stop_process(process)

    @property
    def pids(self) -> dict[str, int]:
        return {name: process.pid for name, process in self.processes.items()}

    def log(self, name: str) -> str:
        return tail(self.workdir / f"{name}.log")

    def create_tenant(self, namespace: str, url: str, interval: str, targeted: bool) -> None:
        """A GitRepository of `url` and a Kustomization of it, both named `app`, in
        `namespace` (which holds GIT_SECRET); `targeted`: the manifests name no namespace,
        and land in `namespace`."""
        create = self.objects.create_namespaced_custom_object
        create(*SOURCES[:2], namespace, SOURCES[2], git_repository(url, interval))
        target = namespace if targeted else None
        create(*KUSTOMIZATIONS[:2], namespace, KUSTOMIZATIONS[2], kustomization(interval, target))

    def kustomizations(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.objects.list_cluster_custom_object(
            *KUSTOMIZATIONS[:2], KUSTOMIZATIONS[2]
        )["items"]
        return found

    def kustomization(self, namespace: str) -> dict[str, Any]:
        found: dict[str, Any] = self.objects.get_namespaced_custom_object(
            *KUSTOMIZATIONS[:2], namespace, KUSTOMIZATIONS[2], "app"
        )
        return found

    def request(self, api: tuple[str, str, str], namespace: str) -> str:
        """Asks for a reconcile of `app` of `api` in `namespace` now, as `flux reconcile`
        and a Receiver do; the stamp its status answers in lastHandledReconcileAt."""
        stamp = datetime.now(UTC).isoformat()
        patch = {"metadata": {"annotations": {REQUESTED_AT: stamp}}}
        self.objects.patch_namespaced_custom_object(*api[:2], namespace, api[2], "app", patch)
        return stamp

    def _start(self, name: str, binary: Path, flags: Mapping[str, str]) -> None:
        user = f"flux-{name}"
        assert user in PEER_USERS
        health = free_port()
        argv = [
            str(binary),
            "--enable-leader-election=false",
            f"--concurrent={CONCURRENT}",
            f"--metrics-addr=127.0.0.1:{free_port()}",
            f"--health-addr=127.0.0.1:{health}",
            *(f"{flag}={value}" for flag, value in flags.items()),
        ]
        environment = {"KUBECONFIG": str(self.plane.peer_kubeconfig(user))}
        process = spawn(argv, self.workdir / f"{name}.log", environment)
        self.processes[name] = process

        def ready() -> bool:
            if process.poll() is not None:
                raise BenchError(
                    f"{name} exited {process.returncode}; its log ends:\n{self.log(name)}"
                )
            return _answers(f"http://127.0.0.1:{health}/readyz")

        wait_until(ready, f"{name} to be ready", START_DEADLINE_SECONDS)

    def _kubectl(self, *arguments: str) -> None:
        argv = [str(self.kubectl), "--kubeconfig", str(self.plane.kubeconfig), *arguments]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise BenchError(f"kubectl {' '.join(arguments)} failed: {done.stderr.strip()}")


def git_repository(url: str, interval: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{SOURCES[0]}/{SOURCES[1]}",
        "kind": "GitRepository",
        "metadata": {"name": "app"},
        "spec": {
            "url": url,
            "interval": interval,
            "ref": {"branch": "main"},
            "secretRef": {"name": GIT_SECRET},
        },
    }


def kustomization(interval: str, target_namespace: str | None) -> dict[str, Any]:
    """Applies the whole GitRepository (a kustomization.yaml of every manifest is generated,
    as there is none) and prunes what left it; into `target_namespace`, if any."""
    spec = {
        "interval": interval,
        "path": "./",
        "prune": True,
        "sourceRef": {"kind": "GitRepository", "name": "app"},
    }
    if target_namespace:
        spec["targetNamespace"] = target_namespace
    return {
        "apiVersion": f"{KUSTOMIZATIONS[0]}/{KUSTOMIZATIONS[1]}",
        "kind": "Kustomization",
        "metadata": {"name": "app"},
        "spec": spec,
    }


def git_secret(username: str, password: str) -> dict[str, Any]:
    return {
        "metadata": {"name": GIT_SECRET},
        "stringData": {"username": username, "password": password},
    }


def revision(sha: str) -> str:
    """How Flux names the commit `sha` of branch main in its status."""
    return f"main@sha1:{sha}"


def applied(kustomization: Mapping[str, Any], at: str) -> bool:
    """The revision `at` applied, and no pass failed since: Ready, or Unknown while a later
    pass runs. Flux marks each pass in progress, and with its workers busy (a fleet at its
    intervals) as many Kustomizations as it has workers always are: "all Ready at once"
    never held, though every tenant had applied the revision minutes before."""
    status = kustomization.get("status") or {}
    conditions = status.get("conditions") or []
    failed = any(c["type"] == "Ready" and c["status"] == "False" for c in conditions)
    return not failed and status.get("lastAppliedRevision") == at


def handled(kustomization: Mapping[str, Any], stamp: str) -> bool:
    """Whether the reconcile requested at `stamp` is done."""
    return (kustomization.get("status") or {}).get("lastHandledReconcileAt") == stamp


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 - our own loopback URL
            return bool(answer.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


class CpuWatch:
    """The CPU seconds each named process spent between two laps."""

    def __init__(self, pids: Mapping[str, int]) -> None:
        self.pids = dict(pids)
        self.last = self._now()

    def lap(self) -> dict[str, float]:
        """Each process's CPU seconds since the last lap (or the watch's start)."""
        now = self._now()
        spent = {name: now[name] - self.last[name] for name in self.pids}
        self.last = now
        return spent

    def _now(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) for name, pid in self.pids.items()}


def watched(plane: ControlPlane, flux: Flux) -> CpuWatch:
    """A CpuWatch of Flux's controllers and of the control plane that serves them."""
    assert plane.apiserver is not None and plane.etcd is not None
    return CpuWatch({**flux.pids, "kube-apiserver": plane.apiserver.pid, "etcd": plane.etcd.pid})
