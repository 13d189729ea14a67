"""Running git for one source: the only module that imports git.

Every git child runs with settings given on the command line (so neither the repository
nor the host chooses them), an environment built from nothing, a bound on every file it
writes and on its time; one that reaches the network connects only where `gitreach` allows,
within its deadline. Its failures become SourceErrors with a closed reason, scrubbed of
URLs' userinfo and of the secret; a server that gave no git answer is not described.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

import git

from gitopsd.config import SourceSpec, how_to_raise
from gitopsd.errors import SourceError, SourceReason
from gitopsd.source import gitreach
from gitopsd.source.credentials import environment, read_password, secret_forms
from gitopsd.source.gitreach import Reach
from gitopsd.source.network import LookupTimedOut
from gitopsd.source.policy import mask_url

# Settings given on every command line, so neither the repository nor the host chooses them.
_GIT_OPTIONS = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "credential.helper=",
    "-c", "http.followRedirects=false",  # a redirect could carry credentials to another host
    "-c", "transfer.fsckObjects=true",  # reject crafted trees (paths like .. or .git)
    "-c", "submodule.recurse=false",
    "-c", "fetch.recurseSubmodules=false",
    "-c", "core.logAllRefUpdates=false",  # reflogs would keep every old commit from gc
    "-c", "gc.autoDetach=false",  # no gc left running behind our back after a command
    "-c", "advice.detachedHead=false",
    "-c", "fetch.unpackLimit=1",  # every fetch is kept as one pack, which --fsize bounds
)  # fmt: skip

MAX_LISTED_REFS_BYTES = 64 * 1024
"""Most of `ls-remote`'s answer read for the few refs a source names."""

# First match wins: auth and host-key failures also print "could not read from remote".
_CAUSES: tuple[tuple[SourceReason, re.Pattern[str]], ...] = tuple(
    (reason, re.compile(pattern, re.IGNORECASE))
    for reason, pattern in (
        (SourceReason.TIMEOUT, r"^timeout: the command"),  # gitpython's, past the limit
        (SourceReason.NOSPACE, r"no space left on device|disk quota exceeded"),
        (SourceReason.TOO_LARGE, r"file too large"),  # EFBIG: a write past the limit below
        (
            SourceReason.HOSTKEY,
            r"host key verification failed|remote host identification has changed",
        ),
        (
            SourceReason.AUTH,
            r"authentication failed|could not read (username|password)|permission denied \("
            r"|returned error: 40[13]|terminal prompts disabled",
        ),
        (SourceReason.REF_MISSING, r"couldn't find remote ref|not our ref|unadvertised object"),
        (
            SourceReason.UNREACHABLE,  # a git server's (or an HTTP server's) own answer
            r"repository '.*' not found|does not appear to be a git repository|returned error",
        ),
    )
)
_NO_ANSWER = re.compile(
    r"could not resolve|connection refused|failed to connect|couldn't connect|timed out"
    r"|unreachable|no route to host|connection reset|could not read from remote"
    r"|remote end hung up|early eof|ssl|tls|certificate|unable to access|empty reply"
    r"|recv failure|kex_exchange|banner|connection closed",
    re.IGNORECASE,
)
"""git's words for a server that gave no git answer: they would tell a closed port, a TLS
service and a plain one apart, so none is shown."""


@dataclass(frozen=True)
class Runner:
    """Runs git for one source: its cache repository, a scrubbed environment, bounded time."""

    spec: SourceSpec
    repo: Path
    env: Mapping[str, str]
    secrets: tuple[str, ...]

    def run(self, *args: str, reach: Reach | None = None) -> str:
        return self.run_bytes(*args, reach=reach).decode(errors="replace").strip()

    def run_bytes(
        self, *args: str, stdin: BinaryIO | None = None, reach: Reach | None = None
    ) -> bytes:
        """git's output for `args`; `reach`: where and how long it may reach (by default,
        nowhere: a command on the cache, bounded by the source's timeout)."""
        reach = reach or gitreach.local(self.spec, self.env)
        status, out, err = self._execute(args, reach, stdin)
        if status != 0:
            raise self._failed_with(err, reach)
        return out

    def answer(self, *args: str, reach: Reach) -> tuple[bool, str]:
        """Whether git succeeded at `args`, with all it wrote: for a command whose failure
        is an answer (verify-commit), not a fault of the cache. Only running out of time
        raises."""
        status, out, err = self._execute(args, reach, None)
        said = out.decode(errors="replace") + "\n" + err
        if status != 0 and _classify(said)[0] == SourceReason.TIMEOUT:
            raise self.failed(reach.limit.said, SourceReason.TIMEOUT)
        return status == 0, said

    def _execute(
        self, args: tuple[str, ...], reach: Reach, stdin: BinaryIO | None
    ) -> tuple[int, bytes, str]:
        """git's exit status, output and error output (gitpython decodes the latter)."""
        status, out, err = git.Git(self.repo.parent).execute(
            self._command(args, reach),
            istream=stdin,
            env=reach.env,
            kill_after_timeout=reach.limit.left(),
            with_extended_output=True,
            with_exceptions=False,
            stdout_as_string=False,
        )
        text = err if isinstance(err, str) else err.decode(errors="replace")
        return status, out if isinstance(out, bytes) else out.encode(), text

    @contextmanager
    def records(
        self, *args: str, separator: bytes = b"\0", reach: Reach | None = None
    ) -> Iterator[Iterator[bytes]]:
        """The records git writes for `args` (NUL-terminated, or ended by `separator`),
        read as they come: what a listing costs is bounded by its reader, who may stop at
        any record by raising (git is killed then), never by what git would write. Raises
        SourceError as `run_bytes` does."""
        reach = reach or gitreach.local(self.spec, self.env)
        running = git.Git(self.repo.parent).execute(
            self._command(args, reach), as_process=True, env=reach.env
        )
        process: subprocess.Popen[bytes] = running.proc  # type: ignore[assignment]
        out, errors = _pipes(process)
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            process.kill()

        timer = threading.Timer(reach.limit.left(), expire)
        timer.start()
        try:
            yield _split_records(out, separator)
            status, err = process.wait(), errors.read().decode(errors="replace")
        finally:
            timer.cancel()
            if process.poll() is None:  # its reader stopped early
                process.kill()
            process.wait()
            out.close()
            errors.close()
        if expired.is_set():
            raise self.failed(reach.limit.said, SourceReason.TIMEOUT)
        if status != 0:
            raise self._failed_with(err, reach)

    def _command(self, args: tuple[str, ...], reach: Reach) -> list[str]:
        # prlimit bounds every file git writes: a server that streams without end is cut off.
        limit = f"--fsize={self.spec.limits.max_fetch_bytes}"
        command = ["env", *_unset_inherited(reach.env), "prlimit", limit, "git", *_GIT_OPTIONS]
        return [*command, *reach.options, f"--git-dir={self.repo}", *args]

    def _remote(self) -> Reach:
        """Where and how long a command may reach the source's host (checked now: a name
        may resolve otherwise at each command)."""
        try:
            return gitreach.remote(self.spec, self.env)
        except LookupTimedOut:
            said = gitreach.limit(self.spec, network=True).said
            raise self.failed(f"{said}, looking up its host", SourceReason.TIMEOUT) from None
        except OSError:  # the name does not resolve
            raise self.failed(gitreach.no_answer(self.spec.url), SourceReason.UNREACHABLE) from None

    def _failed_with(self, stderr: str, reach: Reach) -> SourceError:
        reason, cause = _classify(stderr)
        if reason == SourceReason.TIMEOUT:
            cause = reach.limit.said
        if reason == SourceReason.HOSTKEY:
            cause = gitreach.host_key_refused(self.spec.url, stderr) or cause
        return self.error(cause or gitreach.no_answer(self.spec.url), reason)

    def fetch(self, refspec: str, depth: str = "--depth=1") -> None:
        options = ("--quiet", "--no-tags", "--no-recurse-submodules", "--no-write-fetch-head")
        try:
            arguments = (*options, depth, "--", self.spec.url, refspec)
            self.run("fetch", *arguments, reach=self._remote())
        except SourceError as error:
            if error.reason == SourceReason.CORRUPT and self._pack_reached_limit():
                raise self.error("", SourceReason.TOO_LARGE) from None
            raise

    def remote_refs(self, names: tuple[str, ...]) -> dict[str, str]:
        """What the remote's refs `names` point at now (`ls-remote`: the refs only, no
        objects), a tag's peeled commit under its name + "^{}". A server that answers with
        more than a listing of them could be is cut off, as too large."""
        found: dict[str, str] = {}
        read = 0
        with self.records(
            "ls-remote",
            "--end-of-options",
            self.spec.url,
            *names,
            separator=b"\n",
            reach=self._remote(),
        ) as lines:
            for line in lines:
                read += len(line) + 1
                if read > MAX_LISTED_REFS_BYTES:
                    cause = (
                        f"its listing of {len(names)} refs ran past {MAX_LISTED_REFS_BYTES} bytes"
                    )
                    raise self.failed(cause, SourceReason.TOO_LARGE)
                sha, _, name = line.decode(errors="replace").partition("\t")
                found[name.strip()] = sha.strip()
        return found

    def _pack_reached_limit(self) -> bool:
        """index-pack killed at the file-size limit leaves only "invalid index-pack output"
        behind, and its partial pack, which shows why (and is removed: it is garbage)."""
        partial = list((self.repo / "objects" / "pack").glob("tmp_pack_*"))
        reached = any(p.stat().st_size >= self.spec.limits.max_fetch_bytes for p in partial)
        for path in partial:
            path.unlink(missing_ok=True)
        return reached

    def resolve(self, name: str) -> str:
        """The full sha of the commit `name` points at."""
        return self.run("rev-parse", "--verify", "--end-of-options", f"{name}^{{commit}}")

    def missing(self) -> SourceError:
        return self.error(
            f"no branch, tag or commit {self.spec.ref!r} on the remote", SourceReason.REF_MISSING
        )

    def error(self, cause: str, reason: SourceReason) -> SourceError:
        """A failure of git's; a write past the size bound says which bound."""
        if reason == SourceReason.TOO_LARGE:
            limit = self.spec.limits.max_fetch_bytes
            cause = f"git received more than {limit} bytes ({how_to_raise('max_fetch_bytes')})"
        return self.failed(cause, reason)

    def failed(self, cause: str, reason: SourceReason) -> SourceError:
        message = f"git source {self.spec.url} at ref {self.spec.ref!r} failed ({reason}): {cause}"
        return SourceError(self.scrub(message), reason)

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return mask_url(text)


def open_runner(spec: SourceSpec, cache_dir: Path) -> Runner:
    """The runner for `spec`'s repository in the cache: one bare repository per URL."""
    cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    password = read_password(spec.credentials)
    env = environment(spec, cache_dir, password)
    secrets = secret_forms(spec.credentials.username, password) if password else ()
    return Runner(spec, repository_path(spec, cache_dir), env, secrets)


def repository_path(spec: SourceSpec, cache_dir: Path) -> Path:
    """Where `spec`'s repository is cached: one bare repository per URL."""
    return cache_dir / f"{hashlib.sha256(spec.url.encode()).hexdigest()[:16]}.git"


def _pipes(process: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes]]:
    if process.stdout is None or process.stderr is None:
        raise TypeError("git was started without its output pipes")
    return process.stdout, process.stderr


def _split_records(stream: IO[bytes], separator: bytes) -> Iterator[bytes]:
    pending = b""
    while chunk := os.read(stream.fileno(), 64 * 1024):
        *records, pending = (pending + chunk).split(separator)
        yield from records
    if pending:
        yield pending


def _unset_inherited(env: Mapping[str, str]) -> list[str]:
    """`env -u` arguments dropping every inherited variable: gitpython starts each child
    from a copy of os.environ, and `env -u` leaves exactly `env` (names, never values, on
    the command line)."""
    return [arg for name in sorted(os.environ) if name not in env for arg in ("-u", name)]


def _classify(stderr: str) -> tuple[SourceReason, str | None]:
    """A closed reason for metrics and the line of git's stderr that shows it (None: no git
    server answered, and what did is not told); anything unrecognised is blamed on the
    cache."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for reason, pattern in _CAUSES:
        if found := next((line for line in lines if pattern.search(line)), None):
            return reason, found[:300]
    if any(_NO_ANSWER.search(line) for line in lines):
        return SourceReason.UNREACHABLE, None
    complaints = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return SourceReason.CORRUPT, (complaints or lines or ["git failed without a message"])[-1][:300]
