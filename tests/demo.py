"""`make demo`: a local control plane, started and left running until Ctrl-C.

Prints how to reach it with kubectl or any client.
"""

from __future__ import annotations

import signal
import tempfile
from pathlib import Path

from tests.harness.controlplane import provide_binaries, running_control_plane


def main() -> None:
    binaries = provide_binaries()
    with (
        tempfile.TemporaryDirectory(prefix="gitopsd-demo-") as workdir,
        running_control_plane(binaries, Path(workdir)) as plane,
    ):
        print(f"kube-apiserver + etcd are serving at {plane.url}")
        print(f"  export KUBECONFIG={plane.kubeconfig}")
        print(f"  {binaries.kubectl} get namespaces")
        print("Ctrl-C stops them.", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            print("\nstopping")


if __name__ == "__main__":
    main()
