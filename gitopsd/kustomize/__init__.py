"""Renders a kustomization directory with `kubectl kustomize` (kubectl carries kustomize).

The repository is hostile (docs/ARCHITECTURE.md, Trust boundaries), and kubectl and
kustomize read more than the kustomization: kubectl reads `$HOME/.kube/kuberc`, whose
defaults can switch on exec plugins or point `--helm-command` at a program; kustomize runs
plugins from `$XDG_CONFIG_HOME/kustomize/plugin`, fetches remote bases and files, and loads
any directory it is pointed at. So each render first checks every path the kustomizations reach
(`references.check`) and has the tree write what they reach into a private copy (a
local directory is its own): the very bytes checked, straight from git's object store.
Then it runs kubectl by absolute path on that copy, from a fresh private directory outside
it, with no network at all (`offline`: a seccomp filter under which no socket opens, so
not even loopback is reached), its own empty HOME and XDG directories, kuberc off, a PATH
that finds no program, plugins and helm switched off by flag. Its output counts against the
revision's byte budget while it is read, and its errors are scrubbed of generator values
before anyone sees them.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from gitopsd.config import Limits, how_to_raise
from gitopsd.errors import ManifestError, ManifestReason, SourceError, SourceReason
from gitopsd.kustomize import references
from gitopsd.manifests import Render, Tree

RENDER_TIMEOUT_SECONDS = 60
OFFLINE = Path(__file__).with_name("offline.py")
"""Starts a program with the network closed (see its docstring)."""
HARDENING_FLAGS = (
    "--enable-alpha-plugins=false",  # no exec or container plugins, no KRM functions
    "--enable-helm=false",  # no helm binary, wherever --helm-command would point
    "--load-restrictor=LoadRestrictionsRootOnly",  # files only from a kustomization's own dir
)
_CHUNK_BYTES = 64 * 1024
_STDERR_BYTES = 64 * 1024
_CAUSE_CHARS = 400
_NOWHERE = "http://127.0.0.1:9"  # the discard port: anything sent through a proxy goes nowhere
_ASSIGNMENT = re.compile(r"([\w./-]*)=([^\s\]]+)")  # `KEY=value`, and a bare `=value`
_QUOTED_LINES = re.compile(r"`[^`]*\n[^`]*`")
_BYTE_LIST = re.compile(r"\[\d{1,3}(?: \d{1,3})+\]")  # Go prints a bad line as its bytes
_MASK = "***"
_SHORTEST_MASKED = 3  # shorter values are masked only as `KEY=***`, or every "1" would go


def renderer() -> Render | None:
    """A render function when kubectl is on PATH, else None (a kustomization is then an error)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    found = str(Path(kubectl).resolve())
    return lambda tree, rel, limits, max_bytes: render(found, tree, rel, limits, max_bytes)


def render(kubectl: str, tree: Tree, rel: str, limits: Limits, max_bytes: int) -> str:
    """The rendered YAML of the kustomization in directory `rel` of the revision's `tree`.

    Raises ManifestError when it reaches outside the revision or past `limits`, when
    kustomize fails, takes too long, or writes more than `max_bytes` (what is left of the
    revision's byte limit).
    """
    reach = references.check(tree, rel, limits)
    root = tree.materialized(sorted(reach.paths))
    offline = [sys.executable, "-I", "-S", str(OFFLINE)]
    command = [*offline, kubectl, "kustomize", *HARDENING_FLAGS, "--", str(root / rel)]
    try:
        with tempfile.TemporaryDirectory(prefix="gitopsd-kustomize-") as private:
            finished = _run(command, Path(private), max_bytes)
    except OSError as error:  # kubectl gone since it was found, or no room for its files
        raise SourceError(
            f"{rel}: kustomize could not run: {error.strerror}", SourceReason.CORRUPT
        ) from None
    if finished.expired:
        raise ManifestError(f"{rel}: kustomize did not finish in {RENDER_TIMEOUT_SECONDS} s")
    if finished.output is None:
        raise ManifestError(
            f"{rel}: kustomize's output is over the {max_bytes} bytes left of the "
            f"per-revision limit ({how_to_raise('max_revision_bytes')})",
            ManifestReason.SIZE_LIMIT,
        )
    if finished.status != 0:
        cause = _bounded(scrub(_cause(finished.stderr), reach.secrets, root))
        raise ManifestError(f"{rel}: kustomize failed: {cause}")
    return _decoded(finished.output, rel)


@dataclass(frozen=True)
class _Finished:
    status: int
    output: bytes | None  # None: over the byte budget, and killed for it
    stderr: str
    expired: bool  # killed for taking too long


def _run(command: list[str], private: Path, max_bytes: int) -> _Finished:
    """Runs kubectl, reading its output as it comes and killing it once over budget.

    stderr goes to a file, so a chatty kustomize can never block on a full pipe.
    """
    expired = threading.Event()
    with (
        (private / "stderr").open("w+b") as stderr,
        subprocess.Popen(  # by absolute paths, list arguments, no shell
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=_environment(private),
            cwd=private,
        ) as process,
    ):

        def expire() -> None:
            expired.set()
            process.kill()

        timer = threading.Timer(RENDER_TIMEOUT_SECONDS, expire)
        timer.start()
        try:
            output = _read_at_most(process.stdout, max_bytes)
            if output is None:
                process.kill()
            status = process.wait()
        finally:
            timer.cancel()
        stderr.seek(0)
        text = stderr.read(_STDERR_BYTES).decode(errors="replace")
    return _Finished(status, output, text, expired.is_set())


def _read_at_most(stream: IO[bytes] | None, limit: int) -> bytes | None:
    """Everything `stream` holds, or None as soon as it passes `limit` bytes."""
    assert stream is not None  # noqa: S101 - Popen with stdout=PIPE
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(stream.fileno(), _CHUNK_BYTES):
        total += len(chunk)
        if total > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _environment(private: Path) -> dict[str, str]:
    """No inherited variable: only a private home, and proxies that lead nowhere (the
    network is closed to kustomize anyway, by `offline`: these are a second wall)."""
    home = private / "home"
    for directory in (home / ".config", home / ".cache", home / ".local/share", private / "tmp"):
        directory.mkdir(parents=True)
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "TMPDIR": str(private / "tmp"),
        "KUBECTL_KUBERC": "false",  # no kuberc, so no defaults that switch plugins back on
        "PATH": str(private / "no-programs"),  # neither git nor helm nor a plugin is found
        "GIT_ALLOW_PROTOCOL": "none",
        "HTTPS_PROXY": _NOWHERE,
        "HTTP_PROXY": _NOWHERE,
        "NO_PROXY": "",
    }


def _decoded(output: bytes, rel: str) -> str:
    try:
        return output.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(
            f"{rel}: kustomize wrote invalid UTF-8 at byte {exc.start}", ManifestReason.INVALID
        ) from None


def _cause(stderr: str) -> str:
    """kustomize's own words, from its `error:` line on (else its last line), without the
    configs it quotes over several lines: those may hold an inline patch of a Secret."""
    lines = [line.strip() for line in _QUOTED_LINES.sub("`...`", stderr).splitlines()]
    lines = [line for line in lines if line]
    starts = [at for at, line in enumerate(lines) if line.lower().startswith("error:")]
    return " ".join(lines[starts[0] if starts else -1 :]) or "no message"


def _bounded(cause: str) -> str:
    return cause if len(cause) <= _CAUSE_CHARS else cause[:_CAUSE_CHARS] + "..."


def scrub(text: str, secrets: Iterable[str], root: Path) -> str:
    """`text` without any `KEY=value` value or generator value, and with paths made relative."""
    text = text.replace(f"{root}/", "").replace(str(root), ".")
    text = _ASSIGNMENT.sub(rf"\1={_MASK}", text)
    text = _BYTE_LIST.sub(f"[{_MASK}]", text)
    forms = {form for secret in secrets for form in _forms(secret)}
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, _MASK)
    return text


def _forms(secret: str) -> list[str]:
    if len(secret) < _SHORTEST_MASKED:
        return []
    return [secret, base64.b64encode(secret.encode()).decode()]
