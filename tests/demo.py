"""`make demo`: a real sync of examples/ from a git repository into a local control plane.

Starts a control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
kwok's simulated nodes), commits examples/ to a local git repository, runs
`gitopsd sync --wait` (the migration Job completes, then the Deployments roll out), shows
that `gitopsd diff` then finds nothing, makes an out-of-band edit
that `gitopsd diff` names (field, values and the manager that did it), and syncs it back.
Then the daemon: `gitopsd run` keeps the same source, heals an out-of-band edit at once
and exports it on /metrics, applies a new commit, and stops cleanly on SIGTERM.
`--keep` leaves the control plane running until Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.harness.cli import EXAMPLES, example_files
from tests.harness.controllers import NODES
from tests.harness.controlplane import (
    Binaries,
    ControlPlane,
    provide_binaries,
    running_control_plane,
)
from tests.harness.daemon import DaemonProcess
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.waiting import wait_for

NAMESPACE = "gitopsd-demo"
NOT_DEMOED = {"chart", "clusters"}
"""Example folders the demo leaves out (see commit_examples)."""

SHOWN_METRICS = re.compile(
    r"^gitopsd_(drift_objects|drift_detection_seconds_count|apply_total\{action=\"configured\""
    r"|source_revision_info|commit_to_applied_seconds_count|leader)"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    keep = parser.parse_args().keep
    binaries = provide_binaries()
    with (
        tempfile.TemporaryDirectory(prefix="gitopsd-demo-") as workdir,
        running_control_plane(binaries, Path(workdir) / "cluster") as plane,
    ):
        Demo(binaries, plane, Path(workdir)).run()
        if keep:
            print(f"\nexport KUBECONFIG={plane.kubeconfig}   # Ctrl-C stops the cluster")
            signal.pause()


class Demo:
    def __init__(self, binaries: Binaries, plane: ControlPlane, workdir: Path) -> None:
        self.binaries = binaries
        self.plane = plane
        self.workdir = workdir
        self.server = GitServer(root=workdir / "git")
        self.server.root.mkdir()
        self.env = {
            **os.environ,
            "KUBECONFIG": str(plane.kubeconfig),
            "PATH": os.pathsep.join(
                [str(binaries.kubectl.parent), str(binaries.helm.parent), os.environ["PATH"]]
            ),
        }

    def run(self) -> None:
        nodes = ", ".join(NODES)
        step(f"A local control plane serves at {self.plane.url}, with kwok's nodes {nodes}.")
        repo = self.commit_examples()
        self.one_shot(self.server.file_url(repo))
        self.daemon(repo)
        step("Done: that was a real API server, a real git repository and gitopsd.")

    def one_shot(self, url: str) -> None:
        flags = ["--allow-insecure-source", "--namespace", NAMESPACE, "--name", "demo"]
        step(
            "gitopsd sync --wait applies every object with server-side apply, CRDs first, "
            "wave by wave, and waits until all are healthy:"
        )
        self.gitopsd("sync", url, *flags, "--wait", "--timeout", "3m", expect=0)
        self.command(str(self.binaries.kubectl), "get", "deployments,jobs", "-n", NAMESPACE)
        step("gitopsd diff compares the server's dry-run of git with the live objects: no drift.")
        self.gitopsd("diff", url, *flags, expect=0)
        step("Someone scales the Deployment by hand:")
        self.command(
            str(self.binaries.kubectl), "scale", "deployment/web", "--replicas=5", "-n", NAMESPACE
        )
        step("gitopsd diff names the field, both values and the field manager (exit code 1):")
        self.gitopsd("diff", url, *flags, expect=1)
        step("gitopsd sync takes the field back; diff is clean again:")
        self.gitopsd("sync", url, *flags, expect=0)
        self.gitopsd("diff", url, *flags, expect=0)

    def daemon(self, repo: GitRepo) -> None:
        daemon = DaemonProcess.configured(
            self.workdir,
            "daemon",
            "admin",
            self.plane.kubeconfig,
            [demo_source(self.server.file_url(repo))],
            leaderElection={"enabled": False},
        )
        config = daemon.workdir / "gitopsd.yaml"
        step(f"gitopsd run keeps the same source in sync; its configuration ({config}):")
        print(json.dumps(daemon.config, indent=2), flush=True)
        print(f"$ gitopsd run --config {config} &", flush=True)
        try:
            daemon.start()
            wait_for(lambda: daemon.get("/readyz")[0] == 200, "the daemon to be ready", 60)
        except AssertionError as error:
            raise SystemExit(f"demo: {error}; its log:\n{daemon.logs()[-3000:]}") from None
        step("Someone scales the Deployment by hand again; the daemon heals it at once:")
        self.command(
            str(self.binaries.kubectl), "scale", "deployment/web", "--replicas=5", "-n", NAMESPACE
        )
        self.wait_replicas(2, "healed")
        step("What it exported on /metrics (drift detected and healed, no drift left):")
        show_metrics(daemon)
        step("A commit changes the Deployment; the daemon applies it at its next poll:")
        sha = repo.commit({"app/deployment.yaml": scaled(3)}, "web: 3 replicas")
        print(f"committed {sha[:12]}: replicas 2 -> 3", flush=True)
        self.wait_replicas(3, "applied")
        wait_for(lambda: sha in daemon.metrics(), "the new revision on /metrics")
        # the sync counts its writes once it is done (after recording and pruning), which is
        # after the live object shows the change: show the figures once it is
        configured = {"source": "demo", "action": "configured", "result": "success"}
        wait_for(lambda: daemon.value("gitopsd_apply_total", **configured) >= 2, "the sync's count")
        show_metrics(daemon)
        step("SIGTERM: the daemon finishes what is in flight and exits 0:")
        code = daemon.stop()
        print(f"gitopsd run exited {code}", flush=True)
        if code != 0:
            raise SystemExit(f"demo: the daemon exited {code}; its log:\n{daemon.logs()[-3000:]}")

    def wait_replicas(self, replicas: int, done: str) -> None:
        started = time.monotonic()
        wait_for(lambda: self.replicas() == replicas, f"{replicas} replicas", 60)
        print(f"{done}: replicas {replicas} after {time.monotonic() - started:.1f} s", flush=True)

    def replicas(self) -> int:
        argv = [str(self.binaries.kubectl), "get", "deployment/web", "-n", NAMESPACE]
        done = subprocess.run(
            [*argv, "-o", "jsonpath={.spec.replicas}"],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return int(done.stdout)

    def commit_examples(self) -> GitRepo:
        """examples/ but the chart and the clusters. The chart's CRD, cluster-wide, can
        belong to one source only, and the Helm example of docs/helm.md, run against the
        same control plane by the tests, applies it (docs/helm.md shows it). The clusters
        example is three overlays of one base, each for a cluster of its own (with a daemon
        configuration beside them): tests/integration/test_clusters.py runs it."""
        repo = self.server.create_repo("examples")
        files: dict[str, str | None] = {
            f"{folder.name}/{name}": text
            for folder in sorted(EXAMPLES.iterdir())
            if folder.is_dir() and folder.name not in NOT_DEMOED
            for name, text in example_files(folder.name).items()
        }
        files["namespace.yaml"] = (
            f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n"
        )
        sha = repo.commit(files, "examples")
        step(f"examples/ is committed to {self.server.file_url(repo)} at {sha[:12]}.")
        return repo

    def gitopsd(self, *arguments: str, expect: int) -> None:
        self.command(sys.executable, "-m", "gitopsd", *arguments, expect=expect)

    def command(self, *argv: str, expect: int = 0) -> None:
        shown = ["gitopsd", *argv[3:]] if argv[1:3] == ("-m", "gitopsd") else ["kubectl", *argv[1:]]
        print(f"$ {' '.join(shown)}", flush=True)
        code = subprocess.run(argv, env=self.env, check=False).returncode
        if code != expect:
            raise SystemExit(f"demo: expected exit code {expect}, got {code}")


def demo_source(url: str) -> dict[str, Any]:
    """The source the one-shot commands used (same name and ApplySet), polled every 2 s."""
    return {
        "name": "demo",
        "repository": url,
        "allowInsecure": True,
        "interval": "2s",
        "namespace": NAMESPACE,
        "mode": "enforce",
        "selfHeal": True,
        "prune": True,
    }


def scaled(replicas: int) -> str:
    deployment = (EXAMPLES / "app" / "deployment.yaml").read_text()
    return deployment.replace("replicas: 2\n", f"replicas: {replicas}\n", 1)


def show_metrics(daemon: DaemonProcess) -> None:
    print(f"$ curl -s {daemon.probe_url}/metrics | grep ...", flush=True)
    for line in daemon.metrics().splitlines():
        if SHOWN_METRICS.match(line):
            print(line, flush=True)


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


if __name__ == "__main__":
    main()
