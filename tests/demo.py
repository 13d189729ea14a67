"""`make demo`: a real sync of examples/ from a git repository into a local control plane.

Starts kube-apiserver + etcd, commits examples/ to a local git repository, runs
`gitopsd sync`, shows that `gitopsd diff` then finds nothing, makes an out-of-band edit
that `gitopsd diff` names (field, values and the manager that did it), and syncs it back.
`--keep` leaves the control plane running until Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.harness.cli import EXAMPLES, example_files
from tests.harness.controlplane import (
    Binaries,
    ControlPlane,
    provide_binaries,
    running_control_plane,
)
from tests.harness.gitserver import GitServer

NAMESPACE = "gitopsd-demo"


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
        self.server = GitServer(root=workdir / "git")
        self.server.root.mkdir()
        self.env = {
            **os.environ,
            "KUBECONFIG": str(plane.kubeconfig),
            "PATH": f"{binaries.kubectl.parent}{os.pathsep}{os.environ['PATH']}",
        }

    def run(self) -> None:
        step(f"A local kube-apiserver + etcd serve at {self.plane.url}.")
        url = self.commit_examples()
        flags = ["--allow-insecure-source", "--namespace", NAMESPACE, "--name", "demo"]
        step("gitopsd sync applies every object with server-side apply, CRDs first:")
        self.gitopsd("sync", url, *flags, expect=0)
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
        step("Done: that was a real API server, a real git repository and the gitopsd CLI.")

    def commit_examples(self) -> str:
        repo = self.server.create_repo("examples")
        files: dict[str, str | None] = {
            f"{folder.name}/{name}": text
            for folder in sorted(EXAMPLES.iterdir())
            if folder.is_dir()
            for name, text in example_files(folder.name).items()
        }
        files["namespace.yaml"] = (
            f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NAMESPACE}\n"
        )
        sha = repo.commit(files, "examples")
        url = self.server.file_url(repo)
        step(f"examples/ is committed to {url} at {sha[:12]}.")
        return url

    def gitopsd(self, *arguments: str, expect: int) -> None:
        self.command(sys.executable, "-m", "gitopsd", *arguments, expect=expect)

    def command(self, *argv: str, expect: int = 0) -> None:
        shown = ["gitopsd", *argv[3:]] if argv[1:3] == ("-m", "gitopsd") else ["kubectl", *argv[1:]]
        print(f"$ {' '.join(shown)}", flush=True)
        code = subprocess.run(argv, env=self.env, check=False).returncode
        if code != expect:
            raise SystemExit(f"demo: expected exit code {expect}, got {code}")


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


if __name__ == "__main__":
    main()
