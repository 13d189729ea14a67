"""A local directory's default source name comes from its repository, not its path."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gitopsd.config import SourceSpec
from gitopsd.reconcile.desired import default_name
from gitopsd.source import checkout_identity


def checkout(at: Path, remote: str | None) -> Path:
    subprocess.run(["git", "init", "-q", str(at)], check=True)
    if remote:
        subprocess.run(["git", "-C", str(at), "remote", "add", "origin", remote], check=True)
    (at / "deploy").mkdir()
    return at


def test_two_checkouts_of_one_remote_have_one_identity(tmp_path: Path) -> None:
    one = checkout(tmp_path / "ws-1", "https://git.example.com/org/app.git")
    two = checkout(tmp_path / "ws-2", "https://ci:token@git.example.com/org/app/")

    assert checkout_identity(one / "deploy") == "https://git.example.com/org/app#deploy"
    assert checkout_identity(two / "deploy") == checkout_identity(one / "deploy")
    assert default_name(SourceSpec(str(one / "deploy"))) == default_name(
        SourceSpec(str(two / "deploy"))
    )
    assert default_name(SourceSpec(str(one / "deploy"))).startswith("deploy-")


def test_another_path_or_remote_is_another_source(tmp_path: Path) -> None:
    one = checkout(tmp_path / "ws-1", "https://git.example.com/org/app.git")
    other = checkout(tmp_path / "ws-2", "https://git.example.com/org/other.git")

    names = {
        default_name(SourceSpec(str(one / "deploy"))),
        default_name(SourceSpec(str(one))),
        default_name(SourceSpec(str(other / "deploy"))),
        default_name(SourceSpec(str(one / "deploy"), paths=("base",))),
    }
    assert len(names) == 4


def test_a_directory_outside_git_or_without_a_remote_is_known_by_its_path(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    local_only = checkout(tmp_path / "local", remote=None)

    assert checkout_identity(plain) is None
    assert checkout_identity(local_only / "deploy") is None


def test_a_worktree_reads_its_repository_config(tmp_path: Path) -> None:
    main = checkout(tmp_path / "main", "git@git.example.com:org/app.git")
    (main / "deploy" / "a.yaml").write_text("{}\n")
    git = ["git", "-C", str(main), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    subprocess.run([*git, "worktree", "add", "-q", str(tmp_path / "tree")], check=True)

    assert checkout_identity(tmp_path / "tree" / "deploy") == "git@git.example.com:org/app#deploy"
