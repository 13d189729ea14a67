"""What a local directory is a checkout of: its repository's remote URL and its path in it.

Two checkouts of one repository (two CI workspaces) are one source by default, so the
default source name is made of this, not of the absolute path. The repository's files are
read as text, never by running git in it: a checkout's config can name programs git runs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from gitopsd.target_identity import canonical_url

MAX_CONFIG_BYTES = 1024 * 1024
_SECTION = re.compile(r'^\s*\[\s*remote\s+"([^"]*)"\s*\]', re.IGNORECASE)
_OTHER_SECTION = re.compile(r"^\s*\[")
_URL = re.compile(r"^\s*url\s*=\s*(.*?)\s*$", re.IGNORECASE)


class Checkout(NamedTuple):
    url: str
    """The repository's remote (origin, else the first), without userinfo or `.git`."""
    inside: str
    """The directory's path inside the repository ("." for its root)."""


def checkout_of(directory: Path) -> Checkout | None:
    """What a directory inside a git checkout whose repository has a remote is; None for
    any other directory."""
    root = _work_tree_root(directory)
    if root is None:
        return None
    url = _remote_url(_git_dir(root / ".git"))
    if url is None:
        return None
    return Checkout(canonical_url(url), directory.relative_to(root).as_posix())


def checkout_identity(directory: Path) -> str | None:
    """`<remote URL>#<path inside the repository>` (`checkout_of`), or None."""
    checkout = checkout_of(directory)
    return f"{checkout.url}#{checkout.inside}" if checkout else None


def _work_tree_root(directory: Path) -> Path | None:
    for candidate in (directory, *directory.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _git_dir(dot_git: Path) -> Path:
    """`.git` itself, or where a worktree's or submodule's `.git` file points, and from a
    worktree's own directory on to the repository's (`commondir`), where its config is."""
    git_dir = dot_git
    if dot_git.is_file():
        pointer = _read(dot_git).strip().removeprefix("gitdir:").strip()
        git_dir = (dot_git.parent / pointer).resolve()
    common = git_dir / "commondir"
    return (git_dir / _read(common).strip()).resolve() if common.is_file() else git_dir


def _remote_url(git_dir: Path) -> str | None:
    urls: dict[str, str] = {}
    remote = None
    for line in _read(git_dir / "config").splitlines():
        section = _SECTION.match(line)
        if section or _OTHER_SECTION.match(line):
            remote = section.group(1) if section else None
            continue
        url = _URL.match(line)
        if remote is not None and url and remote not in urls:
            urls[remote] = url.group(1).strip('"')
    return urls.get("origin") or next(iter(urls.values()), None)


def _read(path: Path) -> str:
    try:
        with path.open("rb") as file:
            return file.read(MAX_CONFIG_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""
