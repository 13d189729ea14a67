"""The README's copy-paste examples run as written, against the test control plane."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.cli import Gitopsd

ROOT = Path(__file__).resolve().parents[2]


def readme_block(name: str) -> list[str]:
    """The command lines of the README block marked `<!-- readme-test: NAME -->`."""
    text = (ROOT / "README.md").read_text()
    match = re.search(rf"<!-- readme-test: {name} -->\n```sh\n(.*?)```", text, re.DOTALL)
    assert match, f"README.md has no block marked readme-test: {name}"
    return [line for line in match.group(1).splitlines() if line.strip()]


def expected_exit(line: str) -> int:
    found = re.search(r"#\s*exit (\d+)", line)
    return int(found.group(1)) if found else 0


def test_the_cli_examples_run_as_documented(gitopsd: Gitopsd) -> None:
    environment = {
        **os.environ,
        "KUBECONFIG": str(gitopsd.plane.kubeconfig),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        "XDG_CACHE_HOME": str(gitopsd.cache),
    }
    outputs = []
    for line in readme_block("cli"):
        done = subprocess.run(
            ["bash", "-c", line],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == expected_exit(line), f"{line}\n{done.stdout}{done.stderr}"
        outputs.append(done.stdout)
    assert outputs[0].strip() == "3 objects valid"
    assert "metadata.labels.touched" in outputs[6] and "kubectl-label" in outputs[6]


@pytest.mark.parametrize("command", ["make demo", "make test"])
def test_the_two_commands_are_named(command: str) -> None:
    readme = (ROOT / "README.md").read_text()
    assert f"{command} " in readme
    target = command.split()[1]
    assert re.search(rf"^{target}:", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("exec make test")
