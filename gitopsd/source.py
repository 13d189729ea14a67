"""Fetching desired state: the only module that runs git.

A git source is kept as a persistent shallow bare repository under the cache directory,
one per URL, shared by every source and process that names that URL and guarded by a
file lock. `fetch` resolves the ref to a commit; `snapshot` writes exactly that commit's
files into a private directory that nobody else writes to and that is removed after use,
so two sources on one URL (or a daemon and a CLI) never read each other's files.

The git host is treated as hostile (RELIABILITY.md rules 8-10): the URL and ref pass an
allow-list before git runs, git gets an environment built from nothing, credentials reach
it only through GIT_ASKPASS, and every error message is scrubbed of URLs' userinfo and of
the secret.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote, quote_plus, urlsplit

import git

from gitopsd.config import Credentials, SourceSpec, how_to_raise
from gitopsd.errors import ConfigError, SourceError, SourceReason

INSECURE_FLAG = "--allow-insecure-source"
URL_USERINFO_ADVICE = "put the token in $GITOPSD_GIT_PASSWORD or --password-file, not in the URL"

T = TypeVar("T")
STALE_SNAPSHOT_SECONDS = 24 * 3600.0
"""Snapshots are removed after use; older ones are leftovers of a killed process."""

_TARGETS = "refs/gitopsd/targets/"  # one ref per source ref keeps each one's commit alive
_HISTORY = "+refs/heads/*:refs/gitopsd/heads/*"
_FULL_DEPTH = "--depth=2147483647"  # git's documented spelling of "all of history"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_TRANSPORT = re.compile(r"^[A-Za-z0-9+.-]+::")  # remote helpers: ext::, fd::, ...
_SCP = re.compile(r"^(?P<user>[^@/:\s]+)@(?P<host>[^@/:\s]+):(?P<path>.*)$", re.DOTALL)
_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")
_BAD_REF = re.compile(r"\.\.|@\{|//|[\x00-\x20\x7f~^:?*\[\\]|^[-/]|[/.]$|\.lock$")
# Userinfo with a password may hold '/' or '@' unencoded, so it runs to the last '@'.
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^\s@/]*:[^\s@]*@")
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#]*@")
# scp-like `user@host:` only where a word starts: at the start, after space, quote or bracket.
_SCP_USER = re.compile(r"(?<![^\s'\"(<\[=])[^\s/@:'\"]+@(?=[^\s/:@]+:)")

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

_ASKPASS = """#!/bin/sh
# gitopsd: answers git's prompts from variables set only in that git child's environment.
case "$1" in
Username*) printf '%s\\n' "$GITOPSD_ASKPASS_USERNAME" ;;
*) printf '%s\\n' "$GITOPSD_ASKPASS_PASSWORD" ;;
esac
"""

# First match wins: auth and host-key failures also print "could not read from remote".
_CAUSES: tuple[tuple[SourceReason, re.Pattern[str]], ...] = tuple(
    (reason, re.compile(pattern, re.IGNORECASE))
    for reason, pattern in (
        (SourceReason.TIMEOUT, r"^timeout: the command|timed out"),
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
            SourceReason.UNREACHABLE,
            r"could not resolve|connection refused|failed to connect|couldn't connect"
            r"|unreachable|no route to host|connection reset|repository '.*' not found"
            r"|does not appear to be a git repository|could not read from remote"
            r"|remote end hung up|early eof|ssl|certificate|unable to access|returned error",
        ),
    )
)


@dataclass(frozen=True)
class Revision:
    """One state of a source: a commit of a git repository, or a local directory."""

    sha: str
    """Commit sha; "" for a local directory."""
    commit_time: float | None
    """Unix seconds of the commit (committer date); None for a directory."""
    blob_ids: Mapping[str, str]
    """Posix path relative to the tree's root -> git blob sha; empty for a directory."""
    url: str
    """Where it came from, masked: never carries a credential."""
    directory: Path | None = None
    """A local source's directory, read in place; None for git (see `snapshot`)."""


def read_directory(path: Path) -> Revision:
    """A local directory as a source: no git, no cache, read in place."""
    root = path.resolve()
    if not root.is_dir():
        raise SourceError(f"source directory {path} does not exist", SourceReason.REF_MISSING)
    return Revision(sha="", commit_time=None, blob_ids={}, url=str(root), directory=root)


def mask_url(url: str) -> str:
    """Replaces the userinfo of every URL in `url` (also free text) with `***`."""
    masked = _URL_PASSWORD.sub(r"\1***@", url)
    masked = _URL_USERINFO.sub(r"\1***@", masked)
    return _SCP_USER.sub("***@", masked)


def check_url(spec: SourceSpec) -> None:
    """Raises ConfigError unless the URL and ref are ones gitopsd lets git touch."""
    _check_text(spec.url, "source URL")
    _check_ref(spec.ref)
    scheme = _url_scheme(spec.url)
    if scheme in ("file", "http") and not spec.allow_insecure:
        raise ConfigError(
            f"source URL {mask_url(spec.url)}: {scheme}:// is refused unless {INSECURE_FLAG} "
            "is given (for local use and tests)"
        )
    if _URL_PASSWORD.search(spec.url) or _has_password(spec.url):
        raise ConfigError(f"source URL {mask_url(spec.url)}: {URL_USERINFO_ADVICE}")
    if scheme == "ssh" and spec.credentials.known_hosts_file is None:
        raise ConfigError(
            f"source URL {mask_url(spec.url)}: ssh needs a known_hosts file with the host's "
            "pinned key (no trust on first use)"
        )


def fetch(spec: SourceSpec, cache_dir: Path) -> Revision:
    """Fetches the commit the ref of `spec` names into the cache and describes it.

    A cache git cannot use is deleted and cloned again once. Raises ConfigError for a
    refused source, SourceError for everything else.
    """
    check_url(spec)
    runner = _open_runner(spec, cache_dir)
    with _locked(runner):
        return _recovering(runner, _resolve)


@contextmanager
def snapshot(spec: SourceSpec, cache_dir: Path, revision: Revision) -> Iterator[Path]:
    """A private directory holding exactly the files of `revision`, removed on exit.

    Every file is written from the object store, so a missing or truncated object fails
    here (the cache is then cloned again once), never later as a file that is not there.
    """
    if revision.directory is not None:
        yield revision.directory
        return
    runner = _open_runner(spec, cache_dir)
    root = _guard_os(runner, lambda r: Path(tempfile.mkdtemp(dir=_snapshots(cache_dir))))
    try:
        with _locked(runner):
            _recovering(runner, lambda r: _materialize(r, revision.sha, root))
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
        root.with_name(root.name + ".index").unlink(missing_ok=True)


# --- URL and ref policy ---------------------------------------------------------------


def _check_text(value: str, what: str) -> None:
    """Git would read a leading '-' as an option; control characters split or hide text."""
    if not value or value.startswith("-") or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ConfigError(f"{what} {mask_url(value)!r} is refused: empty, option-like or control")


def _check_ref(ref: str) -> None:
    _check_text(ref, "ref")
    if ref != "HEAD" and _BAD_REF.search(ref):
        raise ConfigError(f"ref {ref!r} is refused: not a branch, tag or commit sha")


def _url_scheme(url: str) -> str:
    """The transport git would use: https, ssh (also scp-like), http or file; else refused."""
    if _TRANSPORT.match(url):
        raise ConfigError(f"source URL {mask_url(url)}: remote-helper transports are refused")
    if scheme := _SCHEME.match(url):
        name = scheme.group(1).lower()
        if name not in ("https", "ssh", "http", "file"):
            raise ConfigError(f"source URL {mask_url(url)}: scheme {name}:// is refused")
        _check_authority(url, name)
        return name
    if scp := _SCP.match(url):
        _check_parts(url, scp.group("user"), scp.group("host"), scp.group("path"))
        return "ssh"
    raise ConfigError(f"source URL {mask_url(url)}: use https://, ssh:// or user@host:path")


def _check_authority(url: str, scheme: str) -> None:
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed IPv6 bracket: refuse rather than guess
        raise ConfigError(f"source URL {mask_url(url)}: cannot be parsed") from None
    if scheme != "file" and not parts.hostname:
        raise ConfigError(f"source URL {mask_url(url)}: no host")
    _check_parts(url, parts.username or "", parts.hostname or "", parts.path.lstrip("/"))


def _check_parts(url: str, user: str, host: str, path: str) -> None:
    """ssh would take `-oProxyCommand=...` as a user or host for an option (CVE-2017-1000117)."""
    if any(part.startswith("-") for part in (user, host, path)):
        raise ConfigError(f"source URL {mask_url(url)}: a user, host or path starts with '-'")


def _has_password(url: str) -> bool:
    return bool(_SCHEME.match(url)) and urlsplit(url).password is not None


# --- Running git ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Runner:
    """Runs git for one source: its cache repository, a scrubbed environment, bounded time."""

    spec: SourceSpec
    repo: Path
    env: Mapping[str, str]
    secrets: tuple[str, ...]

    def run(self, *args: str) -> str:
        return self.run_bytes(*args).decode(errors="replace").strip()

    def run_bytes(self, *args: str) -> bytes:
        # prlimit bounds every file git writes: a server that streams without end is cut off.
        limit = f"--fsize={self.spec.limits.max_fetch_bytes}"
        command = ["env", *_unset_inherited(self.env), "prlimit", limit, "git", *_GIT_OPTIONS]
        command += [f"--git-dir={self.repo}", *args]
        status, out, err = git.Git(self.repo.parent).execute(
            command,
            env=self.env,
            kill_after_timeout=self.spec.timeout_seconds,
            with_extended_output=True,
            with_exceptions=False,
            stdout_as_string=False,
        )
        if status != 0:
            reason, cause = _classify(err)
            raise self.error(cause, reason)
        return out if isinstance(out, bytes) else out.encode()

    def fetch(self, refspec: str, depth: str = "--depth=1") -> None:
        options = ("--quiet", "--no-tags", "--no-recurse-submodules", "--no-write-fetch-head")
        try:
            self.run("fetch", *options, depth, "--", self.spec.url, refspec)
        except SourceError as error:
            if error.reason == SourceReason.CORRUPT and self._pack_reached_limit():
                raise self.error("", SourceReason.TOO_LARGE) from None
            raise

    def _pack_reached_limit(self) -> bool:
        """index-pack killed at the file-size limit leaves only "invalid index-pack output"
        behind, and its partial pack, which shows why (and is removed: it is garbage)."""
        partial = list((self.repo / "objects" / "pack").glob("tmp_pack_*"))
        reached = any(p.stat().st_size >= self.spec.limits.max_fetch_bytes for p in partial)
        for path in partial:
            path.unlink(missing_ok=True)
        return reached

    def with_index(self, index: Path) -> _Runner:
        """The same runner with its own index file, so no two commands share one."""
        return replace(self, env={**self.env, "GIT_INDEX_FILE": str(index)})

    def resolve(self, name: str) -> str:
        """The full sha of the commit `name` points at."""
        return self.run("rev-parse", "--verify", "--end-of-options", f"{name}^{{commit}}")

    def missing(self) -> SourceError:
        return self.error(
            f"no branch, tag or commit {self.spec.ref!r} on the remote", SourceReason.REF_MISSING
        )

    def error(self, cause: str, reason: SourceReason) -> SourceError:
        if reason == SourceReason.TIMEOUT:
            cause = f"no answer within {self.spec.timeout_seconds:g} s"
        if reason == SourceReason.TOO_LARGE:
            limit = self.spec.limits.max_fetch_bytes
            cause = f"git received more than {limit} bytes ({how_to_raise('max_fetch_bytes')})"
        message = f"git source {self.spec.url} at ref {self.spec.ref!r} failed ({reason}): {cause}"
        return SourceError(self.scrub(message), reason)

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return mask_url(text)


def _unset_inherited(env: Mapping[str, str]) -> list[str]:
    """`env -u` arguments dropping every inherited variable: gitpython starts each child
    from a copy of os.environ, and `env -u` leaves exactly `env` (names, never values, on
    the command line)."""
    return [arg for name in sorted(os.environ) if name not in env for arg in ("-u", name)]


def _classify(stderr: str) -> tuple[SourceReason, str]:
    """A closed reason for metrics and the line of git's stderr that shows it; anything
    unrecognised is blamed on the cache."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for reason, pattern in _CAUSES:
        if found := next((line for line in lines if pattern.search(line)), None):
            return reason, found[:300]
    complaints = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return SourceReason.CORRUPT, (complaints or lines or ["git failed without a message"])[-1][:300]


def _open_runner(spec: SourceSpec, cache_dir: Path) -> _Runner:
    cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    password = _read_password(spec.credentials)
    env = _environment(spec, cache_dir, password)
    key = hashlib.sha256(spec.url.encode()).hexdigest()[:16]
    secrets = _secret_forms(spec.credentials.username, password) if password else ()
    return _Runner(spec=spec, repo=cache_dir / f"{key}.git", env=env, secrets=secrets)


def _read_password(credentials: Credentials) -> str | None:
    """The https password or token: the file wins over the environment variable."""
    if credentials.password_file is None:
        return os.environ.get(credentials.password_env) or None
    try:
        return credentials.password_file.read_text().strip() or None
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not text"
        raise ConfigError(
            f"cannot read password file {credentials.password_file}: {reason}"
        ) from None


def _secret_forms(username: str, password: str) -> tuple[str, ...]:
    """Every spelling of the secret an error could carry, longest first."""
    basic = base64.b64encode(f"{username}:{password}".encode()).decode()
    forms = {password, quote(password, safe=""), quote_plus(password), basic}
    forms |= {form.lower() for form in forms if "%" in form}
    forms.add(base64.b64encode(password.encode()).decode())
    return tuple(sorted(forms, key=len, reverse=True))


def _environment(spec: SourceSpec, cache_dir: Path, password: str | None) -> dict[str, str]:
    """Everything git's children see, built from nothing so the daemon's variables stay home."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(cache_dir),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ALLOW_PROTOCOL": "https:ssh:http:file" if spec.allow_insecure else "https:ssh",
        "LANG": "C",
        "LC_ALL": "C",  # gitpython sets these two anyway
        "LANGUAGE": "C",
    }
    if password:
        env["GIT_ASKPASS"] = str(_write_askpass(cache_dir))
        env["GITOPSD_ASKPASS_USERNAME"] = spec.credentials.username
        env["GITOPSD_ASKPASS_PASSWORD"] = password
    if _url_scheme(spec.url) == "ssh":
        env["GIT_SSH_COMMAND"] = _ssh_command(spec.credentials)
    return env


def _write_askpass(cache_dir: Path) -> Path:
    """The askpass script holds no secret; it is replaced whole so git never runs half of it."""
    path = cache_dir / "askpass.sh"
    if path.is_file() and path.read_text() == _ASKPASS and path.stat().st_mode & 0o777 == 0o700:
        return path
    partial = cache_dir / f"askpass.sh.{os.getpid()}"
    partial.write_text(_ASKPASS)
    partial.chmod(0o700)
    partial.replace(path)
    return path


def _ssh_command(credentials: Credentials) -> str:
    """ssh without the user's config, agent identities or any host key not pinned by us."""
    known_hosts = shlex.quote(str(credentials.known_hosts_file))
    words = ["ssh", "-F", "/dev/null"]
    if credentials.ssh_key_file is not None:
        words += ["-i", shlex.quote(str(credentials.ssh_key_file))]
    words += ["-o", "IdentitiesOnly=yes", "-o", f"UserKnownHostsFile={known_hosts}"]
    words += ["-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes"]
    return " ".join([*words, "-o", "BatchMode=yes"])


# --- The fetch itself -----------------------------------------------------------------


@contextmanager
def _locked(runner: _Runner) -> Iterator[None]:
    """One git at a time per cached repository, across threads and processes alike (flock
    locks belong to the open file, so two opens in one process exclude each other too)."""
    try:
        lock = runner.repo.with_suffix(".lock").open("a")
    except OSError as error:
        raise _os_error(runner, error) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _recovering(runner: _Runner, step: Callable[[_Runner], T]) -> T:
    """Runs `step`; a cache git cannot use is deleted and `step` runs once more on a fresh
    clone. Whatever broke it (a killed fetch, truncated objects, a broken repository) is
    gone with it; a fresh clone that fails again is reported, not retried."""
    try:
        return _guard_os(runner, step)
    except SourceError as error:
        if error.reason != SourceReason.CORRUPT:
            raise
    shutil.rmtree(runner.repo, ignore_errors=True)
    return _guard_os(runner, step)


def _guard_os(runner: _Runner, step: Callable[[_Runner], T]) -> T:
    """File system failures around git (a full disk, a vanished cache) are source errors."""
    try:
        return step(runner)
    except OSError as error:
        raise _os_error(runner, error) from None


def _os_error(runner: _Runner, error: OSError) -> SourceError:
    nospace = error.errno in (28, 122)  # ENOSPC, EDQUOT
    cause = f"{error.strerror or error} ({error.filename})"
    return runner.error(cause, SourceReason.NOSPACE if nospace else SourceReason.CORRUPT)


def _snapshots(cache_dir: Path) -> Path:
    """The parent of all snapshots, after removing leftovers of killed processes."""
    parent = cache_dir / "snapshots"
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    cutoff = time.time() - STALE_SNAPSHOT_SECONDS
    for entry in parent.iterdir():
        try:
            stale = entry.lstat().st_mtime < cutoff
        except FileNotFoundError:
            continue  # another process cleaned it up first
        if stale and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        elif stale:
            entry.unlink(missing_ok=True)
    return parent


def _resolve(runner: _Runner) -> Revision:
    _ensure_repository(runner)
    return _describe(runner, _fetch_ref(runner))


def _ensure_repository(runner: _Runner) -> None:
    if (runner.repo / "HEAD").is_file():
        return
    # Leftovers of a run killed before `git init` finished.
    shutil.rmtree(runner.repo, ignore_errors=True)
    runner.repo.mkdir(mode=0o700)
    runner.run("init", "--bare", "--quiet", "--template=")  # no templates: no sample hooks


def _fetch_ref(runner: _Runner) -> str:
    """Fetches the ref's commit (depth 1) into its own target ref and returns its sha."""
    ref = runner.spec.ref
    target = _TARGETS + hashlib.sha256(ref.encode()).hexdigest()[:16]
    for source in _ref_candidates(ref):
        try:
            runner.fetch(f"+{source}:{target}")
        except SourceError as error:
            if error.reason != SourceReason.REF_MISSING:
                raise
            continue
        return runner.resolve(target)
    if _SHA.match(ref):
        return _fetch_commit(runner, ref.lower(), target)
    raise runner.missing()


def _ref_candidates(ref: str) -> Iterator[str]:
    if ref == "HEAD" or ref.startswith("refs/"):
        yield ref
    elif not (_SHA.match(ref) and len(ref) == 40):
        yield f"refs/heads/{ref}"
        yield f"refs/tags/{ref}"


def _fetch_commit(runner: _Runner, sha: str, target: str) -> str:
    """Most servers hand out a reachable commit by full sha; for the others (and for an
    abbreviated sha) all branches' history is fetched and the sha looked up there."""
    if len(sha) == 40:
        try:
            runner.fetch(f"+{sha}:{target}")
        except SourceError as error:
            if error.reason != SourceReason.REF_MISSING:
                raise
        else:
            return runner.resolve(target)
    runner.fetch(_HISTORY, depth=_FULL_DEPTH)
    try:
        return runner.resolve(sha)
    except SourceError:  # all of history is here now: the sha is not in it (or not a commit)
        raise runner.missing() from None


def _materialize(runner: _Runner, sha: str, root: Path) -> None:
    """Writes every file of commit `sha` into the empty directory `root` from the object
    store, through an index of its own beside it (readers of `root` never see it)."""
    _ensure_repository(runner)
    try:
        runner.resolve(sha)
    except SourceError:  # a cache cloned again since the fetch: the commit is fetched anew
        _fetch_commit(runner, sha, _TARGETS + "snapshot")
    indexed = runner.with_index(root.with_name(root.name + ".index"))
    indexed.run("read-tree", sha)
    indexed.run(f"--work-tree={root}", "checkout-index", "--all", "--force")


def _describe(runner: _Runner, sha: str) -> Revision:
    listing = runner.run_bytes("ls-tree", "-r", "-z", "--full-tree", sha)
    commit_time = float(runner.run("show", "--no-patch", "--format=%ct", sha))
    return Revision(
        sha=sha,
        commit_time=commit_time,
        blob_ids=_blob_ids(listing),
        url=mask_url(runner.spec.url),
    )


def _blob_ids(listing: bytes) -> dict[str, str]:
    """Parses `ls-tree -z` lines `<mode> <type> <sha>\\t<path>`; submodule links are skipped."""
    blobs: dict[str, str] = {}
    for entry in filter(None, listing.split(b"\0")):
        info, _, path = entry.partition(b"\t")
        _, kind, blob = info.split(b" ")
        if kind == b"blob":
            blobs[os.fsdecode(path)] = blob.decode()
    return blobs
