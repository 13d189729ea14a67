"""What a command without a cluster loads: not the daemon, the Kubernetes client or deepdiff,
whose imports cost more processor time than helm takes to render a chart of 1,000 objects
(docs/helm.md, What a render costs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LEFT_OUT = ("gitopsd.daemon", "apscheduler", "prometheus_client", "kubernetes", "deepdiff")
CONFIG_MAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: b}\ndata: {k: v}\n"
VALIDATED = """
import sys
from gitopsd.cli import main
main(["validate", sys.argv[1]])
print(*sys.modules)
"""


def test_validate_loads_neither_the_daemon_nor_the_cluster_client_nor_deepdiff(
    tmp_path: Path,
) -> None:
    (tmp_path / "config-map.yaml").write_text(CONFIG_MAP)
    ran = subprocess.run(
        [sys.executable, "-c", VALIDATED, str(tmp_path)],
        cwd=ROOT,  # the gitopsd of this checkout
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = set(ran.stdout.split())

    assert "1 objects valid" in ran.stdout
    assert [name for name in LEFT_OUT if name in loaded] == []
