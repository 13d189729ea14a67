"""Renders a kustomization directory with `kubectl kustomize` (kubectl carries kustomize)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from gitopsd.errors import ManifestError

RENDER_TIMEOUT_SECONDS = 60


def renderer() -> Callable[[Path], str] | None:
    """A render function when kubectl is on PATH, else None (a kustomization is then an error)."""
    kubectl = shutil.which("kubectl")
    return None if kubectl is None else (lambda directory: render(kubectl, directory))


def render(kubectl: str, directory: Path) -> str:
    """The rendered YAML of one kustomization. Remote bases are refused: no network for it."""
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(directory),
        "GIT_ALLOW_PROTOCOL": "none",  # remote git bases would fetch code the revision does not pin
        "HTTPS_PROXY": "http://127.0.0.1:9",  # and remote URLs go nowhere
        "HTTP_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "",
    }
    try:
        done = subprocess.run(
            [kubectl, "kustomize", "--", str(directory)],
            capture_output=True,
            text=True,
            env=environment,
            timeout=RENDER_TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        raise ManifestError(
            f"{directory}: kustomize did not finish in {RENDER_TIMEOUT_SECONDS} s"
        ) from None
    if done.returncode != 0:
        reason = done.stderr.strip().splitlines()[-1:] or ["no message"]
        raise ManifestError(f"{directory}: kustomize failed: {reason[0]}")
    return done.stdout
