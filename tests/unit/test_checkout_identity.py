"""A local directory's default source name comes from its repository, not its path."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gitopsd.config import SourceSpec
from gitopsd.reconcile.naming import default_name, target_identity
from gitopsd.source import checkout_identity
from gitopsd.target_identity import Tool


def name_of(spec: SourceSpec, namespace: str = "default") -> str:
    return default_name(spec, target_identity(spec, namespace, Tool.CLI))


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
    assert name_of(SourceSpec(str(one / "deploy"))) == name_of(SourceSpec(str(two / "deploy")))
    assert name_of(SourceSpec(str(one / "deploy"))).startswith("deploy-")


def test_another_path_or_remote_is_another_source(tmp_path: Path) -> None:
    one = checkout(tmp_path / "ws-1", "https://git.example.com/org/app.git")
    other = checkout(tmp_path / "ws-2", "https://git.example.com/org/other.git")

    names = {
        name_of(SourceSpec(str(one / "deploy"))),
        name_of(SourceSpec(str(one))),
        name_of(SourceSpec(str(other / "deploy"))),
        name_of(SourceSpec(str(one / "deploy"), paths=("base",))),
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


def test_a_checkout_is_the_target_a_daemon_syncing_its_repository_is(tmp_path: Path) -> None:
    """Its paths count from the repository's root: the CLI in `deploy` with --path base is
    the daemon's source of the repository with paths [deploy/base]."""
    work = checkout(tmp_path / "ws", "https://ci:token@git.example.com/org/app.git")
    cli = target_identity(SourceSpec(str(work / "deploy"), paths=("base",)), "prod", Tool.CLI)
    daemon = target_identity(
        SourceSpec("https://git.example.com/org/app", paths=("deploy/base",)), "prod", Tool.DAEMON
    )

    assert (cli.source, cli.paths) == ("https://git.example.com/org/app", ("deploy/base",))
    assert cli.digest() == daemon.digest()
    assert "token" not in cli.annotation()
