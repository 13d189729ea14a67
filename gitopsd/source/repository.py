"""The cached bare repository of a URL: its lock, its recovery, and fetching a ref into it.

Each URL has one persistent shallow bare repository under the cache directory, shared by
every source and process that names that URL. One git runs at a time per repository; a
repository git cannot use is deleted and cloned again once.
"""

from __future__ import annotations

import fcntl
import hashlib
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from gitopsd.errors import SourceError, SourceReason
from gitopsd.source.git_cache import lock_path
from gitopsd.source.runner import Runner

T = TypeVar("T")

TARGETS = "refs/gitopsd/targets/"  # one ref per source ref keeps each one's commit alive
_HISTORY = "+refs/heads/*:refs/gitopsd/heads/*"
_FULL_DEPTH = "--depth=2147483647"  # git's documented spelling of "all of history"
_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")


@contextmanager
def locked(runner: Runner) -> Iterator[None]:
    """One git at a time per cached repository, across threads and processes alike (flock
    locks belong to the open file, so two opens in one process exclude each other too)."""
    try:
        lock = lock_path(runner.repo).open("a")
    except OSError as error:
        raise os_error(runner, error) from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def recovering(runner: Runner, step: Callable[[Runner], T]) -> T:
    """Runs `step`; a cache git cannot use is deleted and `step` runs once more on a fresh
    clone. Whatever broke it (a killed fetch, truncated objects, a broken repository) is
    gone with it; a fresh clone that fails again is reported, not retried. A step that
    ran out of space leaves no partial write behind to keep the disk full."""
    try:
        return guard_os(runner, step)
    except SourceError as error:
        if error.reason == SourceReason.NOSPACE:
            discard_partial_writes(runner.repo)
        if error.reason != SourceReason.CORRUPT:
            raise
    shutil.rmtree(runner.repo, ignore_errors=True)
    return guard_os(runner, step)


def discard_partial_writes(repo: Path) -> None:
    """git's files of a write it did not finish: a pack or object half received
    (`objects/**/tmp_*`, which git leaves when the disk fills) and its locks."""
    temporary = (repo / "objects").rglob("tmp_*")
    for path in [*temporary, *repo.glob("*.lock"), *repo.glob("refs/**/*.lock")]:
        path.unlink(missing_ok=True)


def guard_os(runner: Runner, step: Callable[[Runner], T]) -> T:
    """File system failures around git (a full disk, a vanished cache) are source errors."""
    try:
        return step(runner)
    except OSError as error:
        raise os_error(runner, error) from None


def os_error(runner: Runner, error: OSError) -> SourceError:
    nospace = error.errno in (28, 122)  # ENOSPC, EDQUOT
    cause = f"{error.strerror or error} ({error.filename})"
    return runner.error(cause, SourceReason.NOSPACE if nospace else SourceReason.CORRUPT)


def ensure_repository(runner: Runner) -> None:
    if (runner.repo / "HEAD").is_file():
        return
    # Leftovers of a run killed before `git init` finished.
    shutil.rmtree(runner.repo, ignore_errors=True)
    runner.repo.mkdir(mode=0o700)
    runner.run("init", "--bare", "--quiet", "--template=")  # no templates: no sample hooks


def fetch_ref(runner: Runner) -> str:
    """Fetches the ref's commit (depth 1) into its own target ref and returns its sha;
    a ref that still points where it did is only asked for, not fetched."""
    ref = runner.spec.ref
    target = target_ref(ref)
    unchanged = _unchanged(runner, target)
    if unchanged is not None:
        return unchanged
    for source in _ref_candidates(ref):
        try:
            runner.fetch(f"+{source}:{target}")
        except SourceError as error:
            if error.reason != SourceReason.REF_MISSING:
                raise
            continue
        return runner.resolve(target)
    if _SHA.match(ref):
        return fetch_commit(runner, ref.lower(), target)
    raise runner.missing()


def target_ref(ref: str) -> str:
    """The cache's ref that holds what the source's `ref` pointed at when last fetched."""
    return TARGETS + hashlib.sha256(ref.encode()).hexdigest()[:16]


def _unchanged(runner: Runner, target: str) -> str | None:
    """The commit fetched last, if the remote's ref (the first of its candidates the
    remote has) still points at it: `ls-remote` costs the remote a listing of a few refs,
    not a fetch's negotiation."""
    candidates = tuple(_ref_candidates(runner.spec.ref))
    if not candidates or _interrupted(runner):
        return None  # a commit's sha is fetched by it; a killed git's cache is cloned again
    try:
        fetched = runner.resolve(target)
    except SourceError:
        return None  # never fetched into this cache
    remote = runner.remote_refs(candidates)
    found = next((name for name in candidates if name in remote), None)
    if found is None:
        return None  # the fetch says why it is missing
    now = remote.get(f"{found}^{{}}", remote[found])  # a tag: the commit it points at
    return fetched if now == fetched else None


def _interrupted(runner: Runner) -> bool:
    """Whether a git was killed in the cache: its lock files are left (none of ours runs
    now: we hold the cache's lock), and the fetch that meets them clones again."""
    locks = (*runner.repo.glob("*.lock"), *(runner.repo / "refs").rglob("*.lock"))
    return bool(locks)


def _ref_candidates(ref: str) -> Iterator[str]:
    if ref == "HEAD" or ref.startswith("refs/"):
        yield ref
    elif not (_SHA.match(ref) and len(ref) == 40):
        yield f"refs/heads/{ref}"
        yield f"refs/tags/{ref}"


def fetch_commit(runner: Runner, sha: str, target: str) -> str:
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


def ensure_commit(runner: Runner, sha: str) -> None:
    """Commit `sha` with its whole tree in the repository, fetched again if the cache was
    cloned again since (by this process or another)."""
    ensure_repository(runner)
    try:
        runner.resolve(sha)
    except SourceError:
        fetch_commit(runner, sha, TARGETS + "snapshot")


def read_blobs(runner: Runner, sha: str, blobs: list[str]) -> dict[str, bytes]:
    """The contents of `blobs` of commit `sha`, read from the object store in one git."""
    ensure_commit(runner, sha)
    with tempfile.TemporaryFile() as requests:
        requests.write("".join(f"{blob}\n" for blob in blobs).encode())
        requests.seek(0)
        output = runner.run_bytes("cat-file", "--batch", "--buffer", stdin=requests)
    return _batch_contents(runner, output, blobs)


def _batch_contents(runner: Runner, output: bytes, blobs: list[str]) -> dict[str, bytes]:
    """Parses `cat-file --batch` output, `<sha> blob <size>\\n<content>\\n` per object; an
    object missing or cut short means a broken cache."""
    contents: dict[str, bytes] = {}
    at = 0
    for blob in blobs:
        end = output.find(b"\n", at)
        header = output[at:end].split() if end >= 0 else []
        if len(header) != 3 or header[:2] != [blob.encode(), b"blob"]:
            raise runner.error(f"object {blob} is missing", SourceReason.CORRUPT)
        start, size = end + 1, int(header[2])
        contents[blob] = output[start : start + size]
        if len(contents[blob]) != size:
            raise runner.error(f"object {blob} is cut short", SourceReason.CORRUPT)
        at = start + size + 1
    return contents
