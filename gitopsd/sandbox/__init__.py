"""Runs a renderer (kubectl kustomize, helm template) as the repository's hostile input demands.

The program runs by absolute path with list arguments and no shell, under `offline` (a
seccomp filter under which no socket opens, so not even loopback is reached, and the
render's memory and processor time bounded by rlimits, `SandboxBounds`), once one of the
daemon's few render slots is free (`slots`: the renders in flight bounded as a whole and
shared fairly between namespaces), from a fresh private directory, with an environment
built from nothing: its own empty HOME and XDG directories, a PATH that finds no program,
proxies that lead nowhere, and whatever private settings the caller adds. Its output is
read as it comes and the program is killed once it passes the bytes left of the revision's
budget or its deadline; its errors are cut to their cause and scrubbed of every value that
may be a secret before anyone sees them.
"""

from __future__ import annotations

import base64
import functools
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from gitopsd.config import how_to_raise
from gitopsd.errors import ManifestError, ManifestReason, SourceError, SourceReason
from gitopsd.health.expressions import evaluate_with
from gitopsd.quantities import format_size
from gitopsd.sandbox import offline
from gitopsd.sandbox.expressions import ExpressionBox
from gitopsd.sandbox.slots import RenderSlots
from gitopsd.sandbox.turns import Turns
from gitopsd.sandbox_bounds import SANDBOX_SETTINGS, SandboxBounds

log = logging.getLogger("gitopsd.sandbox")
OFFLINE = Path(__file__).with_name("offline.py")
"""Starts a program with the network closed (see its docstring)."""
RENDER_NICENESS = 10
"""How far renders yield the processor: a tenant's renders at their CPU bound run at this
niceness, so the daemon's own threads (heals, probes, other tenants' polls) go first when
the cores are busy. Measured with `make bench`'s tenants section: a victim's heal p90 was
2.6x its idle figure while render bombs ran at the daemon's priority."""
RENDER_TIMEOUT_SECONDS = 60
"""How long a render may take, not counting the time it waited for a processor: a niced
render on busy cores waits (for the daemon's own threads, by design), which is no fault of
the chart's; a render that stalls, or spins past its CPU bound, is stopped all the same."""
RENDER_WALL_CAP_SECONDS = 600
"""How long a render may take at all, however long it waited: it holds a render slot."""
WATCH_SECONDS = 1.0
"""How often a render's time is looked at."""
_CHUNK_BYTES = 64 * 1024
_STDERR_BYTES = 64 * 1024
_CAUSE_CHARS = 400
_NOWHERE = "http://127.0.0.1:9"  # the discard port: anything sent through a proxy goes nowhere
_ASSIGNMENT = re.compile(r"([\w./-]*)=([^\s\]]+)")  # `KEY=value`, and a bare `=value`
_QUOTED_LINES = re.compile(r"`[^`]*\n[^`]*`")
_RERUN_HINTS = re.compile(r"^Use --debug flag to render out invalid YAML$", re.MULTILINE)
"""helm's advice to run it again with a flag: gitopsd runs it, the user cannot add one."""
_BYTE_LIST = re.compile(r"\[\d{1,3}(?: \d{1,3})+\]")  # Go prints a bad line as its bytes
_MASK = "***"
_SHORTEST_MASKED = 3  # shorter values are masked only as `KEY=***`, or every "1" would go


_bounds = [SandboxBounds()]
"""The bounds renders run under: the defaults, or the daemon's configuration's."""
_slots = [RenderSlots(SandboxBounds.renders_in_flight, SandboxBounds.render_queue_seconds)]
"""The slots every render takes one of while it runs, under those bounds."""
_turns: list[Turns] = []
"""The turns of the health rules' box, once there is one."""


def bound_everything(bounds: SandboxBounds, rule_seconds_per_minute: float) -> None:
    """Runs renders, and the process's health rules in a box, under `bounds` from now on (the
    daemon's, whose rules are its tenants'; the command line evaluates its user's own in
    place), each namespace's rules within `rule_seconds_per_minute` of the box's time."""
    _bounds[:] = [bounds]
    _slots[:] = [RenderSlots(bounds.renders_in_flight, bounds.render_queue_seconds)]
    _turns[:] = [Turns(rule_seconds_per_minute)]
    evaluate_with(ExpressionBox(bounds, _turns[0]).evaluate)


def stop_waiting_for_rules() -> None:
    """Health rules waiting for their turn in the box are not evaluated, now or later: the
    daemon is stopping, and a namespace's share may take longer to come back than its
    grace period."""
    for turns in _turns:
        turns.close()


Settings = Callable[[Path], Mapping[str, str]]
"""The program's own variables, given its private home (made empty, with .config, .cache
and .local/share in it)."""


@dataclass(frozen=True)
class Finished:
    status: int
    output: bytes | None  # None: over the byte budget, and killed for it
    stderr: str
    expired: bool  # killed for taking too long


def run(
    program: Sequence[str],
    max_bytes: int,
    settings: Settings,
    what: str,
    reads: Sequence[Path],
    tenant: str,
    cwd: Path | None = None,
) -> Finished:
    """Runs `program` (an absolute path and its arguments) offline, from `cwd` or a fresh
    private directory, able to read only `reads` (and what lies beneath) and to write only
    its private directory, once one of the render slots is free for `tenant` (the namespace
    of the source it renders for). Raises SourceError, naming `what`, when it cannot start
    or gets no slot in time."""
    _say_once_if_unfenced()
    bounds = _bounds[0]
    limits = [
        f"--address-space={bounds.render_memory_bytes}",
        f"--cpu-seconds={bounds.render_cpu_seconds}",
        f"--niceness={RENDER_NICENESS}",
    ]
    try:
        with tempfile.TemporaryDirectory(prefix="gitopsd-render-") as private:
            fence = [f"--read={path}" for path in reads] + [f"--write={private}"]
            command = [sys.executable, "-I", "-S", str(OFFLINE), *limits, *fence, "--", *program]
            home = _private_home(Path(private))
            environment = {**_BASE_ENVIRONMENT, **_home_environment(home), **settings(home)}
            with _slots[0].held(tenant, what):
                return _run(command, Path(private), cwd or Path(private), environment, max_bytes)
    except OSError as error:  # the program gone since it was found, or no room for its files
        raise SourceError(f"{what} could not run: {error.strerror}", SourceReason.CORRUPT) from None


@functools.cache
def _say_once_if_unfenced() -> None:
    """Logs once that renders are not fenced, where Landlock is unavailable: they still run
    (offline, bounded), but a chart's `$ref: file://` reads what the daemon can. A kernel
    without it and a seccomp profile that refuses its calls look alike from inside."""
    if offline.landlock_abi() == 0:
        log.warning(
            "Landlock is unavailable (a kernel before 5.13 or without it enabled, or a "
            "seccomp profile that refuses its calls): renders cannot be fenced to their own "
            "files; a chart can read any file the daemon can (docs/security.md, Bounds)"
        )


_BASE_ENVIRONMENT = {
    "GIT_ALLOW_PROTOCOL": "none",
    "HTTPS_PROXY": _NOWHERE,
    "HTTP_PROXY": _NOWHERE,
    "NO_PROXY": "",
}
"""No inherited variable; proxies that lead nowhere (the network is closed anyway, by
`offline`: these are a second wall)."""


def _private_home(private: Path) -> Path:
    home = private / "home"
    for directory in (home / ".config", home / ".cache", home / ".local/share", private / "tmp"):
        directory.mkdir(parents=True)
    return home


def _home_environment(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "TMPDIR": str(home.parent / "tmp"),
        "PATH": str(home.parent / "no-programs"),  # neither git nor helm nor a plugin is found
    }


def _run(
    command: list[str], private: Path, cwd: Path, environment: dict[str, str], max_bytes: int
) -> Finished:
    """Reads the program's output as it comes, killing it once over budget. stderr goes to
    a file, so a chatty program can never block on a full pipe."""
    expired = threading.Event()
    with (
        (private / "stderr").open("w+b") as stderr,
        subprocess.Popen(  # by absolute paths, list arguments, no shell
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=environment,
            cwd=cwd,
        ) as process,
    ):
        done = threading.Event()
        watcher = threading.Thread(
            target=_watch, args=(process, done, expired), name="render-deadline", daemon=True
        )
        watcher.start()
        try:
            output = _read_at_most(process.stdout, max_bytes)
            if output is None:
                process.kill()
            status = process.wait()
        finally:
            done.set()
        stderr.seek(0)
        text = stderr.read(_STDERR_BYTES).decode(errors="replace")
    return Finished(status, output, text, expired.is_set())


def _watch(
    process: subprocess.Popen[bytes], done: threading.Event, expired: threading.Event
) -> None:
    """Kills the render once it has taken RENDER_TIMEOUT_SECONDS of its own time (the time
    it waited for a processor not counted), or RENDER_WALL_CAP_SECONDS in all."""
    started = time.monotonic()
    while not done.wait(WATCH_SECONDS):
        elapsed = time.monotonic() - started
        own = elapsed - waited_for_a_processor(process.pid)
        if own > RENDER_TIMEOUT_SECONDS or elapsed > RENDER_WALL_CAP_SECONDS:
            expired.set()
            process.kill()
            return


def waited_for_a_processor(pid: int) -> float:
    """Seconds the busiest thread of process `pid` spent runnable but waiting for a
    processor (the kernel's schedstat run delay: behind busier tasks, or held by a CPU
    limit's quota); 0.0 where the kernel does not say."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0.0
    waited = 0
    for task in tasks:
        try:
            waited = max(waited, int((task / "schedstat").read_text().split()[1]))
        except (OSError, IndexError, ValueError):
            continue
    return waited / 1e9


def output_of(
    finished: Finished, what: str, max_bytes: int, secrets: Iterable[str], root: Path
) -> str:
    """The program's output as text; raises ManifestError, naming `what`, when it failed,
    took too long or wrote more than `max_bytes` (its cause scrubbed of `secrets` and
    with paths relative to `root`)."""
    if finished.expired:
        raise ManifestError(
            f"{what} did not finish in {RENDER_TIMEOUT_SECONDS} s (time it waited for a "
            f"processor not counted; {RENDER_WALL_CAP_SECONDS} s in all at most)"
        )
    if finished.output is None:
        raise ManifestError(
            f"{what}'s output is over the {max_bytes} bytes left of the per-revision "
            f"limit ({how_to_raise('max_revision_bytes')})",
            ManifestReason.SIZE_LIMIT,
        )
    if finished.status != 0:
        raise ManifestError(_failure(finished, what, secrets, root), _reason(finished))
    try:
        return finished.output.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(
            f"{what} wrote invalid UTF-8 at byte {exc.start}", ManifestReason.INVALID
        ) from None


_OUT_OF_MEMORY = "fatal error: out of memory"  # Go's runtime, an allocation past RLIMIT_AS
_KILLED_BY_KERNEL = (-signal.SIGKILL, -signal.SIGXCPU)  # past RLIMIT_CPU (not our own kill)


def _failure(finished: Finished, what: str, secrets: Iterable[str], root: Path) -> str:
    """Why the program failed: a bound it reached, named with its setting, or its cause."""
    bounds = _bounds[0]
    if _OUT_OF_MEMORY in finished.stderr:
        size = format_size(bounds.render_memory_bytes)
        setting = SANDBOX_SETTINGS["render_memory_bytes"]
        bound = f"the render memory bound, {size} of address space ({setting})"
        return f"{what} ran out of memory: over {bound}"
    if finished.status in _KILLED_BY_KERNEL:
        setting = SANDBOX_SETTINGS["render_cpu_seconds"]
        bound = f"{bounds.render_cpu_seconds} s of processor time ({setting})"
        return f"{what} was stopped at the render CPU bound, {bound}"
    return f"{what} failed: {explained(finished.stderr, secrets, root)}"


def _reason(finished: Finished) -> ManifestReason:
    return (
        ManifestReason.SIZE_LIMIT if _OUT_OF_MEMORY in finished.stderr else ManifestReason.INVALID
    )


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


def cause(stderr: str) -> str:
    """The program's own words, from its `error:` line on (else its last line), without the
    configs it quotes over several lines: those may hold an inline patch of a Secret."""
    quoted = _QUOTED_LINES.sub("`...`", stderr)
    lines = [line.strip() for line in _RERUN_HINTS.sub("", quoted).splitlines()]
    lines = [line for line in lines if line]
    starts = [at for at, line in enumerate(lines) if line.lower().startswith("error:")]
    return " ".join(lines[starts[0] if starts else -1 :]) or "no message"


def explained(stderr: str, secrets: Iterable[str], root: Path) -> str:
    """The cause of a failure, scrubbed and cut to a length a status can carry."""
    text = scrub(cause(stderr), secrets, root)
    return text if len(text) <= _CAUSE_CHARS else text[:_CAUSE_CHARS] + "..."


def scrub(text: str, secrets: Iterable[str], root: Path) -> str:
    """`text` without any `KEY=value` value or known secret, and with paths made relative."""
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
