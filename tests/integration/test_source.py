"""gitopsd.source against a real git server: file:// and smart HTTP with basic auth.

Nothing is mocked. Where a test needs to see what git's children were given, a `git`
placed first on PATH records its own /proc cmdline and environ, then execs the real git.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import shutil
import socket
import stat
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

import pytest

from gitopsd.config import Credentials, Limits, Network, SourceSpec
from gitopsd.errors import ConfigError, SourceError
from gitopsd.reconcile.desired import read_revision
from gitopsd.source import GitTree, Revision, check_url, fetch, mask_url, read_directory, snapshot
from gitopsd.source import tree as source_tree
from gitopsd.source.credentials import environment
from gitopsd.source.runner import open_runner
from tests.harness.canary import Canary
from tests.harness.checkouts import cached_repository, file_spec, tree
from tests.harness.gitserver import GitRepo, GitServer, git
from tests.harness.loopback import closed_port
from tests.harness.manifests import config_map_without_data
from tests.harness.waiting import wait_for

CANARY = "CANARY-0123456789abcdef^+/="
CHILD_ENVIRONMENT = {
    "PATH",
    "HOME",
    "GIT_TERMINAL_PROMPT",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CONFIG_GLOBAL",
    "GIT_ALLOW_PROTOCOL",
    "LANG",
    "LC_ALL",
    "LANGUAGE",
    "GIT_ASKPASS",
    "GITOPSD_ASKPASS_USERNAME",
    "GITOPSD_ASKPASS_PASSWORD",
    "GIT_SSH_COMMAND",
}


# --- helpers --------------------------------------------------------------------------


def http_spec(
    server: GitServer, repo: GitRepo, tmp_path: Path, password: str | None = None
) -> SourceSpec:
    """Smart HTTP with the password in a file (with the trailing newline editors add)."""
    password_file = tmp_path / "git-password"
    password_file.write_text((server.password if password is None else password) + "\n")
    credentials = Credentials(username=server.username, password_file=password_file)
    return SourceSpec(
        url=server.http_url(repo), allow_insecure=True, credentials=credentials, timeout_seconds=30
    )


def checked_out(spec: SourceSpec, cache: Path) -> tuple[Revision, dict[str, str]]:
    """The revision the ref names now, and the files of its snapshot."""
    revision = fetch(spec, cache)
    with snapshot(spec, cache, revision) as root:
        return revision, tree(root)


def blob_id(repo: GitRepo, sha: str, path: str) -> str:
    return git("rev-parse", f"{sha}:{path}", cwd=repo.bare)


def blob_ids(spec: SourceSpec, cache: Path, revision: Revision) -> dict[str, str | None]:
    """Each file of the revision, as its tree lists it, with its blob id."""
    with source_tree(spec, cache, revision) as files:
        assert isinstance(files, GitTree)
        found: dict[str, str | None] = {}
        pending = ["."]
        while pending:
            directory = pending.pop()
            for name in files.names(directory):
                path = name if directory == "." else f"{directory}/{name}"
                mode = files.mode(path) or 0
                if stat.S_ISDIR(mode):
                    pending.append(path)
                else:
                    found[path] = files.content_id(path)
        return found


def assert_no_secret(text: str, secret: str, username: str = "gitopsd") -> None:
    Canary(secret, username).assert_absent(text, "the message")
    assert "CANARY" not in text


def files_under(root: Path) -> Iterator[Path]:
    return (p for p in root.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def spy_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `git` first on PATH that saves /proc/self/{cmdline,environ}, then runs the real one."""
    real = shutil.which("git")
    assert real
    records, bin_dir = tmp_path / "spy", tmp_path / "bin"
    records.mkdir()
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    saved = shlex.quote(str(records)) + "/$$"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"cat /proc/$$/cmdline > {saved}.cmdline\n"
        f"cat /proc/$$/environ > {saved}.environ\n"
        f'exec {shlex.quote(real)} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return records


def spied(records: Path) -> list[tuple[list[str], dict[str, str]]]:
    """Each recorded git child as (argv, environment)."""
    children = []
    for cmdline in sorted(records.glob("*.cmdline")):
        argv = [a.decode() for a in cmdline.read_bytes().split(b"\0") if a]
        raw = cmdline.with_suffix(".environ").read_bytes().split(b"\0")
        env = dict(entry.decode().partition("=")[::2] for entry in raw if entry)
        children.append((argv, env))
    return children


def forget_spied(records: Path) -> None:
    for record in records.iterdir():
        record.unlink()


@pytest.fixture
def blackhole_port() -> Iterator[int]:
    """A port whose kernel completes the TCP handshake but that never answers."""
    with socket.create_server(("127.0.0.1", 0), backlog=16) as listener:
        yield listener.getsockname()[1]


# --- mask_url, check_url, read_directory (no server) ----------------------------------


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("https://user:tok@host/p", "https://***@host/p"),
        ("https://tok@host/p", "https://***@host/p"),
        ("https://u:p%5Eq@host:8443/p.git", "https://***@host:8443/p.git"),
        ("https://u:pa/ss@host/p", "https://***@host/p"),
        ("https://u:p@ss@host/p", "https://***@host/p"),
        ("HTTP://u:p@host/p", "HTTP://***@host/p"),
        ("ssh://git@host:22/org/repo.git", "ssh://***@host:22/org/repo.git"),
        ("git@github.com:org/repo.git", "***@github.com:org/repo.git"),
        ("https://host/org/repo.git", "https://host/org/repo.git"),
        ("file:///srv/git/repo.git", "file:///srv/git/repo.git"),
        (
            "fatal: unable to access 'https://u:tok@h/p/': 401",
            "fatal: unable to access 'https://***@h/p/': 401",
        ),
        ("push to git@host:org/r.git failed", "push to ***@host:org/r.git failed"),
    ],
)
def test_mask_url_hides_every_userinfo(url: str, masked: str) -> None:
    assert mask_url(url) == masked


KNOWN_HOSTS = Credentials(known_hosts_file=Path("/nonexistent/known_hosts"))


@pytest.mark.parametrize(
    "spec",
    [
        SourceSpec(url="https://git.example.com/org/repo.git"),
        SourceSpec(url="https://git.example.com/org/repo.git", ref="feature/x-1.2"),
        SourceSpec(url="https://git.example.com/org/repo.git", ref="v1.2.3"),
        SourceSpec(
            url="https://git.example.com/r.git", ref="0123456789abcdef0123456789abcdef01234567"
        ),
        SourceSpec(url="https://git.example.com/r.git", ref="refs/heads/main"),
        SourceSpec(url="ssh://git@git.example.com/org/repo.git", credentials=KNOWN_HOSTS),
        SourceSpec(url="git@git.example.com:org/repo.git", credentials=KNOWN_HOSTS),
        SourceSpec(url="file:///srv/git/repo.git", allow_insecure=True),
        SourceSpec(url="http://127.0.0.1:8080/repo.git", allow_insecure=True),
    ],
)
def test_check_url_accepts_the_allowed_transports(spec: SourceSpec) -> None:
    check_url(spec)


def _refused(url: str, ref: str = "HEAD", insecure: bool = True, hosts: bool = True) -> SourceSpec:
    credentials = KNOWN_HOSTS if hosts else Credentials()
    return SourceSpec(url=url, ref=ref, allow_insecure=insecure, credentials=credentials)


SENTINEL = "/tmp/gitopsd-test-source-sentinel"
REFUSED = {
    "ext-helper": _refused(f"ext::sh -c touch% {SENTINEL}"),
    "fd-helper": _refused("fd::17"),
    "file-without-flag": _refused("file:///etc", insecure=False),
    "http-without-flag": _refused("http://127.0.0.1/r.git", insecure=False),
    "git-protocol": _refused("git://git.example.com/r.git"),
    "other-scheme": _refused("ftp://git.example.com/r.git"),
    "plain-path": _refused("/srv/git/repo.git"),
    "ssh-proxycommand-host": _refused(f"ssh://-oProxyCommand=touch%20{SENTINEL}/r.git"),
    "ssh-proxycommand-user": _refused(f"ssh://-oProxyCommand=touch%20{SENTINEL}@h/r.git"),
    "scp-option-host": _refused(f"git@-oProxyCommand=touch {SENTINEL}:r.git"),
    "option-url": _refused(f"-oProxyCommand=touch {SENTINEL}"),
    "upload-pack-url": _refused(f"--upload-pack=touch {SENTINEL}"),
    "password-in-url": _refused("https://user:CANARY-0123456789abcdef@git.example.com/r.git"),
    "encoded-password": _refused("https://u:CANARY-0123456789abcdef%5E@git.example.com/r.git"),
    "ssh-without-known-hosts": _refused("ssh://git@git.example.com/r.git", hosts=False),
    "scp-without-known-hosts": _refused("git@git.example.com:r.git", hosts=False),
    "newline-in-url": _refused("https://git.example.com/r.git\nx"),
    "nul-in-url": _refused("https://git.example.com/r.git\0x"),
    "empty-url": _refused(""),
    "unparseable-url": _refused("https://[::1/r.git"),
    "no-host": _refused("https:///r.git"),
    "option-ref": _refused("https://git.example.com/r.git", ref=f"--upload-pack=touch {SENTINEL}"),
    "dash-ref": _refused("https://git.example.com/r.git", ref="-b"),
    "dotdot-ref": _refused("https://git.example.com/r.git", ref="main..evil"),
    "space-ref": _refused("https://git.example.com/r.git", ref=f"$(touch {SENTINEL})"),
    "control-ref": _refused("https://git.example.com/r.git", ref="main\x1b[2J"),
    "reflog-ref": _refused("https://git.example.com/r.git", ref="main@{1}"),
}


@pytest.mark.parametrize("spec", REFUSED.values(), ids=REFUSED.keys())
def test_refused_sources_raise_config_error_and_run_nothing(spec: SourceSpec, cache: Path) -> None:
    Path(SENTINEL).unlink(missing_ok=True)
    with pytest.raises(ConfigError) as refused:
        fetch(spec, cache)
    assert not cache.exists(), "the cache was touched before the source was checked"
    assert not Path(SENTINEL).exists()
    assert "CANARY" not in str(refused.value)


def test_insecure_transports_name_the_flag() -> None:
    for url in ("file:///srv/r.git", "http://127.0.0.1/r.git"):
        with pytest.raises(ConfigError, match="--allow-insecure-source"):
            check_url(SourceSpec(url=url))


def test_password_in_url_is_refused_with_advice_and_a_masked_url() -> None:
    with pytest.raises(ConfigError) as refused:
        check_url(SourceSpec(url=f"https://bob:{quote(CANARY, safe='')}@git.example.com/r.git"))
    message = str(refused.value)
    assert "put the token in $GITOPSD_GIT_PASSWORD or --password-file, not in the URL" in message
    assert "https://***@git.example.com/r.git" in message
    assert_no_secret(message, CANARY, "bob")


def test_read_directory(tmp_path: Path) -> None:
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "a.yaml").write_text("kind: ConfigMap\n")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "apps")
    revision = read_directory(link)
    apps = (tmp_path / "apps").resolve()
    assert revision == Revision(sha="", commit_time=None, url=str(apps), directory=apps)
    with snapshot(SourceSpec(url=str(link)), tmp_path / "cache", revision) as root:
        assert root == apps  # read in place: a local directory is nobody else's checkout
    assert revision.url == str((tmp_path / "apps").resolve())
    with pytest.raises(SourceError) as missing:
        read_directory(tmp_path / "nope")
    assert missing.value.reason == "ref_missing"


# --- fetching -------------------------------------------------------------------------


def test_fetch_over_file_url(git_server: GitServer, git_repo: GitRepo, cache: Path) -> None:
    sha = git_repo.commit({"apps/a.yaml": "a: 1\n", "b.json": "{}"})
    before = time.time()
    revision, files = checked_out(file_spec(git_server, git_repo), cache)
    assert revision.sha == sha
    assert files == {"apps/a.yaml": "a: 1\n", "b.json": "{}"}
    assert blob_ids(file_spec(git_server, git_repo), cache, revision) == {
        "apps/a.yaml": blob_id(git_repo, sha, "apps/a.yaml"),
        "b.json": blob_id(git_repo, sha, "b.json"),
    }
    assert revision.commit_time is not None
    assert abs(revision.commit_time - before) < 120
    assert revision.url == git_server.file_url(git_repo)
    assert cached_repository(cache).parent == cache


def test_fetch_over_http_with_password_file(
    git_server: GitServer, git_repo: GitRepo, tmp_path: Path, cache: Path
) -> None:
    sha = git_repo.commit({"a.yaml": "a: 1\n"})
    revision, files = checked_out(http_spec(git_server, git_repo, tmp_path), cache)
    assert (revision.sha, files) == (sha, {"a.yaml": "a: 1\n"})
    assert revision.url == git_server.http_url(git_repo)


def test_fetch_over_http_with_password_from_environment(
    git_server: GitServer, git_repo: GitRepo, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = git_repo.commit({"a.yaml": "a: 1\n"})
    monkeypatch.setenv("GITOPSD_GIT_PASSWORD", git_server.password)
    credentials = Credentials(username=git_server.username)
    spec = SourceSpec(
        url=git_server.http_url(git_repo), allow_insecure=True, credentials=credentials
    )
    assert fetch(spec, cache).sha == sha
    monkeypatch.delenv("GITOPSD_GIT_PASSWORD")
    with pytest.raises(SourceError) as refused:
        fetch(spec, cache)
    assert refused.value.reason == "auth"


def test_cache_is_reused_and_follows_new_commits(
    git_server: GitServer, git_repo: GitRepo, tmp_path: Path, cache: Path
) -> None:
    git_repo.commit({"a.yaml": "a: 1\n", "old.yaml": "old\n", ".gitignore": "*.tmp\n"})
    spec = http_spec(git_server, git_repo, tmp_path)
    first, _ = checked_out(spec, cache)
    marker = cached_repository(cache) / "gitopsd-test-marker"
    marker.write_text("still the same clone")
    inode = cached_repository(cache).stat().st_ino
    sha = git_repo.commit({"a.yaml": "a: 2\n", "old.yaml": None, "new/c.yaml": "c\n"})
    second, files = checked_out(spec, cache)
    assert second.sha == sha != first.sha
    assert files == {"a.yaml": "a: 2\n", "new/c.yaml": "c\n", ".gitignore": "*.tmp\n"}
    assert marker.exists() and cached_repository(cache).stat().st_ino == inode


def test_a_snapshot_holds_exactly_its_commit_and_is_removed_after_use(
    git_server: GitServer, git_repo: GitRepo, cache: Path
) -> None:
    git_repo.commit({"a.yaml": "a: 1\n", ".gitignore": "*.tmp\n"})
    spec = file_spec(git_server, git_repo)
    revision = fetch(spec, cache)
    with snapshot(spec, cache, revision) as root:
        (root / "stray.yaml").write_text("kind: Secret\n")  # a reader's mess stays its own
        (root / "a.yaml").write_text("a: 9\n")
        assert root.parent == cache / "snapshots"
        with snapshot(spec, cache, revision) as other:
            assert other != root
            assert tree(other) == {"a.yaml": "a: 1\n", ".gitignore": "*.tmp\n"}
    assert not root.exists()
    assert list((cache / "snapshots").iterdir()) == []


def test_snapshots_left_by_a_killed_process_are_removed(
    git_server: GitServer, git_repo: GitRepo, cache: Path
) -> None:
    git_repo.commit({"a.yaml": "a: 1\n"})
    spec = file_spec(git_server, git_repo)
    revision = fetch(spec, cache)
    leftover, recent = cache / "snapshots" / "killed", cache / "snapshots" / "in-use"
    for directory in (leftover, recent):
        (directory / "sub").mkdir(parents=True)
    old = time.time() - 2 * 24 * 3600
    os.utime(leftover, (old, old))
    with snapshot(spec, cache, revision):
        assert not leftover.exists()
        assert recent.exists()  # another process may still be reading it


def test_two_sources_on_one_url_each_read_exactly_their_own_ref(
    git_server: GitServer, git_repo: GitRepo, cache: Path
) -> None:
    """The daemon polls sources concurrently, and sources on one URL share the cache: each
    must load exactly its own ref's objects, every time (none missing, none of the other)."""
    main_objects = {f"main-{n}" for n in range(40)}
    other_objects = {f"other-{n}" for n in range(30)}
    git_repo.commit({f"app/{name}.yaml": config_map_without_data(name) for name in main_objects})
    removed = dict.fromkeys(f"app/{name}.yaml" for name in main_objects)
    added = {f"app/{name}.yaml": config_map_without_data(name) for name in other_objects}
    git_repo.commit({**removed, **added}, branch="other")
    expected = {"main": main_objects, "other": other_objects}
    failures: list[str] = []

    def load(ref: str) -> None:
        spec = file_spec(git_server, git_repo, ref)
        for _ in range(50):
            try:
                found = read_revision(fetch(spec, cache), spec, cache)
            except SourceError as error:
                failures.append(f"{ref}: {error}")
                continue
            names = {manifest.key.name for manifest in found}
            if names != expected[ref]:
                failures.append(f"{ref}: loaded {len(names)} objects, not its {len(expected[ref])}")

    readers = [threading.Thread(target=load, args=(ref,)) for ref in expected]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    assert failures == []


def test_fetch_by_branch_tag_and_commit(
    git_server: GitServer, git_repo: GitRepo, cache: Path
) -> None:
    deep = git_repo.commit({"app.yaml": "v0\n"})
    tagged = git_repo.commit({"app.yaml": "v1\n"})
    git_repo.tag("v1", tagged)
    tip = git_repo.commit({"app.yaml": "v2\n"})
    git("tag", "-a", "-m", "release", "v2-annotated", tip, cwd=git_repo.work)
    git("push", "-q", "origin", "refs/tags/v2-annotated", cwd=git_repo.work)
    feature = git_repo.commit({"feature.yaml": "f\n"}, branch="feature/x")
    expected = {
        "HEAD": (tip, "v2\n"),
        "main": (tip, "v2\n"),
        "refs/heads/main": (tip, "v2\n"),
        "feature/x": (feature, "v2\n"),
        "v1": (tagged, "v1\n"),
        "v2-annotated": (tip, "v2\n"),
        deep: (deep, "v0\n"),  # not a branch or tag tip
        tagged[:10]: (tagged, "v1\n"),  # abbreviated: found in the branches' history
    }
    for ref, (sha, app) in expected.items():
        spec = file_spec(git_server, git_repo, ref)
        revision, files = checked_out(spec, cache / "by-ref")
        assert (revision.sha, files["app.yaml"]) == (sha, app), ref
        assert ("feature.yaml" in files) == (sha == feature), ref


def test_fetch_by_commit_over_http(
    git_server: GitServer, git_repo: GitRepo, tmp_path: Path, cache: Path
) -> None:
    old = git_repo.commit({"app.yaml": "v0\n"})
    git_repo.commit({"app.yaml": "v1\n"})
    spec = dataclasses.replace(http_spec(git_server, git_repo, tmp_path), ref=old)
    assert checked_out(spec, cache)[1] == {"app.yaml": "v0\n"}


@pytest.mark.case("FA-17")
def test_force_push_rewind_and_amend_are_followed(
    git_server: GitServer, git_repo: GitRepo, cache: Path
) -> None:
    first = git_repo.commit({"a.yaml": "1\n"})
    git_repo.commit({"b.yaml": "2\n"})
    spec = file_spec(git_server, git_repo, "main")
    assert set(checked_out(spec, cache)[1]) == {"a.yaml", "b.yaml"}
    git_repo.force_push(first)  # FA-17 (b): rewind
    rewound, files = checked_out(spec, cache)
    assert (rewound.sha, files) == (first, {"a.yaml": "1\n"})
    replaced = git_repo.commit({"c.yaml": "3\n"})  # FA-17 (a): a new commit on the rewound tip
    revision, files = checked_out(spec, cache)
    assert (revision.sha, set(files)) == (replaced, {"a.yaml", "c.yaml"})


@pytest.mark.parametrize("ref", ["0" * 40, "deadbee", "no-such-branch"])
def test_unknown_ref_is_ref_missing(
    git_server: GitServer, git_repo: GitRepo, cache: Path, ref: str
) -> None:
    git_repo.commit({"a.yaml": "1\n"})
    with pytest.raises(SourceError) as missing:
        fetch(file_spec(git_server, git_repo, ref), cache)
    assert missing.value.reason == "ref_missing"
    assert ref in str(missing.value)


@pytest.mark.case("FA-18")
def test_deleted_branch_is_ref_missing(
    git_server: GitServer, git_repo: GitRepo, tmp_path: Path, cache: Path
) -> None:
    git_repo.commit({"a.yaml": "1\n"})
    git_repo.commit({"b.yaml": "2\n"}, branch="doomed")
    spec = dataclasses.replace(http_spec(git_server, git_repo, tmp_path), ref="doomed")
    assert "b.yaml" in blob_ids(spec, cache, fetch(spec, cache))
    git_repo.delete_branch("doomed")  # FA-18 (c)
    with pytest.raises(SourceError) as missing:
        fetch(spec, cache)
    assert missing.value.reason == "ref_missing"


@pytest.mark.case("FA-18")
def test_repository_without_commits_is_ref_missing(
    git_server: GitServer, git_repo: GitRepo, cache: Path
) -> None:
    with pytest.raises(SourceError) as missing:  # FA-18 (d)
        fetch(file_spec(git_server, git_repo), cache)
    assert missing.value.reason == "ref_missing"


def test_shell_syntax_in_a_ref_is_never_run(
    git_server: GitServer, git_repo: GitRepo, tmp_path: Path, cache: Path
) -> None:
    git_repo.commit({"a.yaml": "1\n"})
    sentinel = tmp_path / "pwned"
    spec = file_spec(git_server, git_repo, f"$(touch${{IFS}}{sentinel})")  # SE-15
    with pytest.raises(SourceError) as missing:
        fetch(spec, cache)
    assert missing.value.reason == "ref_missing"
    assert not sentinel.exists()


def test_submodules_are_not_fetched(git_server: GitServer, git_repo: GitRepo, cache: Path) -> None:
    other = git_server.create_repo(git_repo.name + "-sub")
    pointee = other.commit({"secret.yaml": "x\n"})
    modules = f'[submodule "sub"]\n\tpath = sub\n\turl = {git_server.file_url(other)}\n'
    git_repo.commit({".gitmodules": modules, "a.yaml": "1\n"})
    git("update-index", "--add", "--cacheinfo", f"160000,{pointee},sub", cwd=git_repo.work)
    git("commit", "-q", "-m", "add submodule", cwd=git_repo.work)
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=git_repo.work)
    revision, files = checked_out(file_spec(git_server, git_repo), cache)
    assert set(blob_ids(file_spec(git_server, git_repo), cache, revision)) == {
        ".gitmodules",
        "a.yaml",
    }
    assert set(files) == {".gitmodules", "a.yaml"}


# --- credentials ----------------------------------------------------------------------


def test_wrong_password_is_auth_and_never_echoed(
    git_server: GitServer, git_repo: GitRepo, tmp_path: Path, cache: Path
) -> None:
    git_repo.commit({"a.yaml": "1\n"})
    spec = http_spec(git_server, git_repo, tmp_path, password=CANARY)
    with pytest.raises(SourceError) as refused:
        fetch(spec, cache)
    assert refused.value.reason == "auth"
    message = str(refused.value)
    assert git_server.http_url(git_repo) in message and "'HEAD'" in message
    assert_no_secret(message + repr(refused.value.args), CANARY)
    for path in files_under(cache):
        assert CANARY.encode() not in path.read_bytes(), path


def test_wrong_password_from_environment_is_never_echoed(
    git_server: GitServer, git_repo: GitRepo, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git_repo.commit({"a.yaml": "1\n"})
    monkeypatch.setenv("GITOPSD_GIT_PASSWORD", CANARY)
    spec = SourceSpec(url=git_server.http_url(git_repo), allow_insecure=True)
    with pytest.raises(SourceError) as refused:
        fetch(spec, cache)
    assert refused.value.reason == "auth"
    assert_no_secret(str(refused.value), CANARY, "git")


@pytest.mark.case("SE-06")
def test_git_children_get_no_secret_on_argv_and_a_scratch_environment(
    git_server: GitServer,
    git_repo: GitRepo,
    cache: Path,
    spy_git: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SE-06."""
    git_repo.commit({"a.yaml": "1\n"})
    monkeypatch.setenv("GITOPSD_GIT_PASSWORD", git_server.password)
    monkeypatch.setenv("GITOPSD_TEST_PARENT_ONLY", "must not reach git")
    credentials = Credentials(username=git_server.username)
    spec = SourceSpec(
        url=git_server.http_url(git_repo), allow_insecure=True, credentials=credentials
    )
    forget_spied(spy_git)  # the harness's own git calls above
    fetch(spec, cache)
    children = spied(spy_git)
    assert any("fetch" in argv for argv, _ in children)
    for argv, env in children:
        for spelling in Canary(git_server.password, git_server.username).forms().values():
            assert not any(spelling in arg for arg in argv), argv
        assert not any("@" in arg for arg in argv if arg.startswith("http")), argv
        assert set(env) <= CHILD_ENVIRONMENT, set(env) - CHILD_ENVIRONMENT
        assert (env["HOME"], env["GIT_CONFIG_GLOBAL"]) == (str(cache), os.devnull)
        assert env["GIT_ALLOW_PROTOCOL"] == "https:ssh:http:file"
        askpass = Path(env["GIT_ASKPASS"])
        assert askpass.parent == cache and askpass.stat().st_mode & 0o777 == 0o700
        assert git_server.password not in askpass.read_text()
    for path in files_under(cache):
        assert git_server.password.encode() not in path.read_bytes(), path


def test_ssh_reads_no_config_but_ours_and_connects_to_the_checked_address(
    tmp_path: Path, cache: Path, spy_git: Path
) -> None:
    """What a real server cannot show (SE-13 is proven against one, test_ssh_source.py):
    ssh reads neither the user's nor the system's config or known hosts, never prompts,
    offers only the key given, and connects to the address checked (TA-05)."""
    keys = tmp_path / "ssh keys"
    keys.mkdir()
    (keys / "known_hosts").write_text("")
    credentials = Credentials(
        ssh_key_file=keys / "id_ed25519", known_hosts_file=keys / "known_hosts"
    )
    port = closed_port()
    url = f"ssh://git@localhost:{port}/repo.git"  # loopback: the fence lifted, as for tests
    spec = SourceSpec(url=url, credentials=credentials, timeout_seconds=30, allow_insecure=True)
    with pytest.raises(SourceError) as failed:
        fetch(spec, cache)
    assert failed.value.reason == "unreachable"
    assert "ssh://***@localhost" in str(failed.value)
    assert f"no git answer from ssh://localhost:{port}" in str(failed.value)
    env = next(env for argv, env in spied(spy_git) if "fetch" in argv)
    ssh = env["GIT_SSH_COMMAND"]
    for option in ("BatchMode=yes", "IdentitiesOnly=yes", "GlobalKnownHostsFile=/dev/null"):
        assert option in ssh
    assert "-F /dev/null" in ssh
    assert "HostName=127.0.0.1" in ssh or "HostName=::1" in ssh
    secure = dataclasses.replace(spec, allow_insecure=False)
    assert environment(secure, cache, None)["GIT_ALLOW_PROTOCOL"] == "https:ssh"


# --- faults ---------------------------------------------------------------------------


def test_unreachable_host(cache: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/repo.git"
    with pytest.raises(SourceError) as failed:
        fetch(SourceSpec(url=url, allow_insecure=True, timeout_seconds=30), cache)
    assert failed.value.reason == "unreachable"
    assert url in str(failed.value)


def test_silent_host_times_out_and_git_is_killed(cache: Path, blackhole_port: int) -> None:
    url = f"http://127.0.0.1:{blackhole_port}/repo.git"
    started = time.monotonic()
    network = Network(git_deadline_seconds=1)
    with pytest.raises(SourceError) as failed:
        fetch(SourceSpec(url=url, allow_insecure=True, network=network), cache)
    assert failed.value.reason == "timeout"
    assert time.monotonic() - started < 20
    assert "not done within the git deadline of 1 s (network.gitDeadline)" in str(failed.value)

    def git_children_gone() -> bool:
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if url.encode() in cmdline.read_bytes():
                    return False
            except OSError:
                continue  # the process ended while we looked
        return True

    wait_for(git_children_gone, "git children of a timed-out fetch to be killed", 10)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda git_dir: (git_dir / "HEAD").write_bytes(b"\0garbage\n"), id="head"),
        pytest.param(lambda git_dir: (git_dir / "config").write_text("[core\n"), id="config"),
        pytest.param(lambda git_dir: shutil.rmtree(git_dir / "refs"), id="refs"),
        pytest.param(lambda git_dir: (git_dir / "shallow.lock").write_text(""), id="killed-lock"),
    ],
)
def test_broken_git_dir_is_discarded_and_recloned(
    git_server: GitServer, git_repo: GitRepo, cache: Path, damage: object
) -> None:
    sha = git_repo.commit({"a.yaml": "1\n"})
    spec = file_spec(git_server, git_repo)
    fetch(spec, cache)
    git_dir = cached_repository(cache)
    marker = git_dir / "gitopsd-test-marker"
    marker.write_text("old clone")
    assert callable(damage)
    damage(git_dir)
    revision, files = checked_out(spec, cache)
    assert (revision.sha, files) == (sha, {"a.yaml": "1\n"})
    assert not marker.exists(), "the broken cache was not re-cloned"


@pytest.mark.parametrize("new_commit", [False, True], ids=["same-commit", "new-commit"])
def test_missing_objects_never_yield_a_partial_tree(
    git_server: GitServer, git_repo: GitRepo, cache: Path, new_commit: bool
) -> None:
    git_repo.commit({"a.yaml": "1\n", "dir/b.yaml": "2\n"})
    spec = file_spec(git_server, git_repo)
    fetch(spec, cache)
    for entry in (cached_repository(cache) / "objects").iterdir():
        shutil.rmtree(entry)
    files = {"a.yaml": "1\n", "dir/b.yaml": "2\n"}
    if new_commit:
        git_repo.commit({"c.yaml": "3\n"})
        files["c.yaml"] = "3\n"
    revision, read = checked_out(spec, cache)
    assert (revision.sha, read) == (git_repo.head(), files)
    git("fsck", "--no-progress", cwd=cached_repository(cache))


@pytest.mark.case("FA-19")
def test_truncated_objects_never_yield_a_partial_tree(
    git_server: GitServer, git_repo: GitRepo, cache: Path
) -> None:
    """FA-19: a snapshot writes every file from the object store, so a truncated object
    fails there and the cache is cloned again, even between the fetch and the read."""
    sha = git_repo.commit({"a.yaml": "1\n" * 50, "b.yaml": "2\n" * 50})
    spec = file_spec(git_server, git_repo)
    revision = fetch(spec, cache)
    for path in files_under(cached_repository(cache) / "objects"):
        path.chmod(0o644)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with snapshot(spec, cache, revision) as root:
        assert (revision.sha, tree(root)) == (sha, {"a.yaml": "1\n" * 50, "b.yaml": "2\n" * 50})
    git("fsck", "--no-progress", cwd=cached_repository(cache))


def test_secret_is_scrubbed_even_where_git_echoes_it(
    git_server: GitServer, git_repo: GitRepo, tmp_path: Path, cache: Path
) -> None:
    """A ref equal to the password is echoed back in the ref_missing message: scrubbed."""
    git_repo.commit({"a.yaml": "1\n"})
    spec = http_spec(git_server, git_repo, tmp_path)
    spec = dataclasses.replace(spec, ref=git_server.password)
    with pytest.raises(SourceError) as missing:
        fetch(spec, cache)
    assert missing.value.reason == "ref_missing"
    assert "ref '***'" in str(missing.value)
    assert_no_secret(str(missing.value), git_server.password)


# --- a git server that never stops sending ---------------------------------------------

ENDLESS_SHA = "1" * 40
ENDLESS_CAP_BYTES = 64 * 1024 * 1024  # the test's server stops here; gitopsd must stop first


def pkt_line(text: str) -> bytes:
    data = text.encode()
    return f"{len(data) + 4:04x}".encode() + data


def pack_object(blob: bytes) -> bytes:
    """A blob as a pack entry: type and size in a varint header, then zlib data."""
    size = len(blob)
    header = bytearray([0x80 | (3 << 4) | (size & 0x0F)])  # 3 = blob
    size >>= 4
    while size:
        header.append((0x80 if size >> 7 else 0) | (size & 0x7F))
        size >>= 7
    return bytes(header) + zlib.compress(blob, 1)


class _EndlessPack(BaseHTTPRequestHandler):
    """Smart HTTP, protocol v0: advertises one commit, then answers the shallow fetch with a
    pack that claims 100,000 objects (6 GB) and streams incompressible ones."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        capabilities = "shallow symref=HEAD:refs/heads/main"
        body = pkt_line("# service=git-upload-pack\n") + b"0000"
        body += pkt_line(f"{ENDLESS_SHA} HEAD\0{capabilities}\n")
        body += pkt_line(f"{ENDLESS_SHA} refs/heads/main\n") + b"0000"
        self._start("application/x-git-upload-pack-advertisement")
        self.wfile.write(body)

    def do_POST(self) -> None:
        request = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._start("application/x-git-upload-pack-result")
        self.wfile.write(pkt_line(f"shallow {ENDLESS_SHA}\n") + b"0000")
        if b"done" not in request:
            return  # the first round of a shallow fetch only agrees on the shallow list
        entry = pack_object(os.urandom(64 * 1024))
        sent = 0
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(pkt_line("NAK\n") + b"PACK" + struct.pack(">II", 2, 100_000))
            while sent < ENDLESS_CAP_BYTES:
                self.wfile.write(entry)
                sent += len(entry)

    def _start(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.end_headers()


@pytest.fixture
def endless_git_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EndlessPack)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/repo.git"
    server.shutdown()
    server.server_close()


@pytest.mark.case("FA-16")
def test_fa16_a_fetch_that_never_ends_is_cut_off_by_size(
    endless_git_server: str, cache: Path
) -> None:
    limits = Limits(max_fetch_bytes=1024 * 1024)
    spec = SourceSpec(url=endless_git_server, allow_insecure=True, limits=limits)
    with pytest.raises(SourceError) as refused:
        fetch(spec, cache)
    assert refused.value.reason == "too_large"
    assert "more than 1048576 bytes (--max-fetch-bytes, limits.maxFetchBytes)" in str(refused.value)
    written = sum(path.stat().st_size for path in files_under(cache))
    assert written <= 2 * 1024 * 1024


# --- an unchanged ref is asked for, not fetched ---------------------------------------


def git_commands(records: Path) -> set[str]:
    """The subcommands the recorded git children ran (of those these tests ask about)."""
    known = {"fetch", "ls-remote"}
    return {arg for argv, _ in spied(records) for arg in argv if arg in known}


@pytest.mark.parametrize("ref", ["main", "HEAD", "v1"])
def test_an_unchanged_ref_is_listed_not_fetched_and_a_moved_one_fetched(
    git_server: GitServer, git_repo: GitRepo, cache: Path, spy_git: Path, ref: str
) -> None:
    first = git_repo.commit({"a.yaml": "1\n"})
    git_repo.tag("v1", first)
    spec = file_spec(git_server, git_repo, ref)
    assert fetch(spec, cache).sha == first
    forget_spied(spy_git)

    assert fetch(spec, cache).sha == first
    assert "ls-remote" in git_commands(spy_git) and "fetch" not in git_commands(spy_git)

    second = git_repo.commit({"a.yaml": "2\n"})
    git_repo.tag("v1", second)  # moved, as a release tag sometimes is
    forget_spied(spy_git)
    assert fetch(spec, cache).sha == second
    assert "fetch" in git_commands(spy_git)


class _EndlessRefs(BaseHTTPRequestHandler):
    """Smart HTTP, protocol v0: advertises refs/heads/main 100,000 times (git prints each)."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-git-upload-pack-advertisement")
        self.end_headers()
        head = pkt_line("# service=git-upload-pack\n") + b"0000"
        head += pkt_line(f"{ENDLESS_SHA} HEAD\0symref=HEAD:refs/heads/main\n")
        line = pkt_line(f"{ENDLESS_SHA} refs/heads/main\n")
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(head + line * 100_000 + b"0000")


@pytest.mark.case("FA-16")
def test_fa16_a_listing_of_refs_past_any_listing_of_them_is_cut_off(cache: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EndlessRefs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/repo.git"
    runner = open_runner(SourceSpec(url=url, ref="main", allow_insecure=True), cache)
    try:
        with pytest.raises(SourceError) as refused:
            runner.remote_refs(("refs/heads/main",))
    finally:
        server.shutdown()
        server.server_close()
    assert refused.value.reason == "too_large"
    assert "its listing of 1 refs ran past 65536 bytes" in str(refused.value)
