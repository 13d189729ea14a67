"""SE-14: signed commits. A source given keys to verify against (--verify-public-keys,
--verify-allowed-signers) uses a revision only once git's own verify-commit (or, in mode
Tag, verify-tag) accepted its signature; anything else is refused naming the commit or tag
and why, with the key's id (not a secret), and nothing of it is read or applied.

Real signatures: commits and tags signed by Debian's gnupg (ed25519 keys, one made in the
past so that it has expired by now, one revoked) and by ssh-keygen, on a real git server;
`gitopsd validate` and `gitopsd sync` as a user types them.
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gitopsd.errors import ExitCode
from tests.harness.cli import Gitopsd, Run, offline
from tests.harness.cluster_reads import config_map_data_value, config_map_value
from tests.harness.commands import scope
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import condition, create, wait_ready
from tests.harness.manifests import config_map_with_value
from tests.harness.operators import operator
from tests.harness.signing import Keychain, OpenPGPSigner, Signer, SSHSigner

ONE = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: signed\ndata:\n  k: {}\n"
TWO = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: second\ndata:\n  k: v\n"


@pytest.fixture
def keys() -> Iterator[Keychain]:
    with Keychain() as keychain:
        yield keychain


Published = Signer | Callable[[], bytes]
"""A signer whose key a team publishes, or what publishes an armored OpenPGP key once the
commit is made (a revoked key signs nothing)."""


def trusting(tmp_path: Path, *signers: Published) -> list[str]:
    """The flags that verify with `signers`' keys, as files a team publishes them in."""
    flags = []
    openpgp = [
        s.public_key() if isinstance(s, OpenPGPSigner) else s()
        for s in signers
        if not isinstance(s, SSHSigner)
    ]
    if openpgp:
        (tmp_path / "team.asc").write_bytes(b"".join(openpgp))
        flags += ["--verify-public-keys", str(tmp_path / "team.asc")]
    ssh = [s.allowed_signers() for s in signers if isinstance(s, SSHSigner)]
    if ssh:
        (tmp_path / "allowed_signers").write_text("".join(ssh))
        flags += ["--verify-allowed-signers", str(tmp_path / "allowed_signers")]
    return flags


def validate(server: GitServer, repo: GitRepo, tmp_path: Path, *flags: str) -> Run:
    url = server.file_url(repo)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    return offline("validate", url, "--allow-insecure-source", *cache, *flags)


def refused(run: Run, cause: str) -> None:
    assert run.code == ExitCode.SOURCE_FAILED, run.text
    assert "failed (verification_failed)" in run.err, run.err
    assert f"{cause}: nothing of it is used" in run.err, run.err
    assert run.out == "", run.text


@pytest.mark.case("SE-14")
@pytest.mark.parametrize("kind", ["openpgp", "ssh"])
def test_a_commit_signed_with_a_key_given_is_read(
    git_server: GitServer, git_repo: GitRepo, keys: Keychain, tmp_path: Path, kind: str
) -> None:
    signer = keys.openpgp("alice@example.com") if kind == "openpgp" else keys.ssh("a@example.com")
    git_repo.commit({"one.yaml": ONE.format("v1")}, signer=signer)

    run = validate(git_server, git_repo, tmp_path, *trusting(tmp_path, signer))

    assert (run.code, run.out) == (ExitCode.OK, "1 objects valid\n"), run.text


Refusal = tuple[Signer | None, list[Published], str]
"""Who signs the commit, whose keys the source verifies with, and why it is refused."""


def unsigned(keys: Keychain) -> Refusal:
    return None, [keys.openpgp("alice@example.com")], "is not signed"


def unknown_key(keys: Keychain) -> Refusal:
    stranger = keys.openpgp("mallory@example.com")
    return (
        stranger,
        [keys.openpgp("alice@example.com")],
        f"is signed with OpenPGP key {stranger.key_id}, which is not among the source's keys",
    )


def revoked_key(keys: Keychain) -> Refusal:
    alice = keys.openpgp("alice@example.com")
    return alice, [alice.revoked], f"is signed with OpenPGP key {alice.key_id}, which is revoked"


def expired_key(keys: Keychain) -> Refusal:
    old = keys.openpgp("old@example.com", expired=True)
    return old, [old], f"is signed with OpenPGP key {old.key_id}, which has expired"


def ssh_key_not_allowed(keys: Keychain) -> Refusal:
    stranger = keys.ssh("mallory@example.com")
    fingerprint = ssh_fingerprint(stranger)
    return (
        stranger,
        [keys.ssh("alice@example.com")],
        f"is signed with SSH key {fingerprint}, which is not among the source's allowed signers",
    )


def ssh_without_allowed_signers(keys: Keychain) -> Refusal:
    return (
        keys.ssh("alice@example.com"),
        [keys.openpgp("alice@example.com")],
        "is signed with an SSH key, and the source has no allowed signers",
    )


def ssh_fingerprint(signer: SSHSigner) -> str:
    listed = subprocess.run(
        ["ssh-keygen", "-l", "-f", f"{signer.key}.pub"], capture_output=True, text=True, check=True
    )
    return listed.stdout.split()[1]


@pytest.mark.case("SE-14")
@pytest.mark.parametrize(
    "case",
    [
        unsigned,
        unknown_key,
        revoked_key,
        expired_key,
        ssh_key_not_allowed,
        ssh_without_allowed_signers,
    ],
)
def test_a_commit_not_signed_with_a_key_given_is_refused_naming_why(
    git_server: GitServer,
    git_repo: GitRepo,
    keys: Keychain,
    tmp_path: Path,
    case: Callable[[Keychain], Refusal],
) -> None:
    signer, trusted, cause = case(keys)
    sha = git_repo.commit({"one.yaml": ONE.format("v1")}, signer=signer)

    run = validate(git_server, git_repo, tmp_path, *trusting(tmp_path, *trusted))

    refused(run, f"commit {sha[:12]} {cause}")
    again = validate(git_server, git_repo, tmp_path, *trusting(tmp_path, *trusted))
    assert again.code == ExitCode.SOURCE_FAILED, "a refusal is not remembered as a pass"


@pytest.mark.case("SE-14")
def test_in_tag_mode_the_signed_tag_is_verified_and_in_head_mode_its_commit(
    git_server: GitServer, git_repo: GitRepo, keys: Keychain, tmp_path: Path
) -> None:
    """A signed tag on an unsigned commit: mode Tag uses it (the tag's signature covers the
    commit it names), mode HEAD and TagAndHEAD refuse it (the commit is not signed)."""
    alice = keys.openpgp("alice@example.com")
    sha = git_repo.commit({"one.yaml": ONE.format("v1")})
    git_repo.annotated_tag("v1", sha, signer=alice)
    flags = ["--ref", "v1", *trusting(tmp_path, alice)]

    tag = validate(git_server, git_repo, tmp_path, *flags, "--verify-mode", "Tag")
    head = validate(git_server, git_repo, tmp_path, *flags, "--verify-mode", "HEAD")
    both = validate(git_server, git_repo, tmp_path, *flags, "--verify-mode", "TagAndHEAD")

    assert (tag.code, tag.out) == (ExitCode.OK, "1 objects valid\n"), tag.text
    refused(head, f"commit {sha[:12]} is not signed")
    refused(both, f"commit {sha[:12]} is not signed")


@pytest.mark.case("SE-14")
def test_in_tag_mode_a_tag_that_is_not_a_signed_annotated_tag_is_refused(
    git_server: GitServer, git_repo: GitRepo, keys: Keychain, tmp_path: Path
) -> None:
    alice = keys.openpgp("alice@example.com")
    sha = git_repo.commit({"one.yaml": ONE.format("v1")}, signer=alice)
    git_repo.tag("light", sha)
    git_repo.annotated_tag("plain", sha)
    flags = [*trusting(tmp_path, alice), "--verify-mode", "Tag"]

    lightweight = validate(git_server, git_repo, tmp_path, "--ref", "light", *flags)
    unsigned_tag = validate(git_server, git_repo, tmp_path, "--ref", "plain", *flags)
    branch = validate(git_server, git_repo, tmp_path, "--ref", "main", *flags)

    verifies = "names no annotated tag, and mode Tag verifies the signature of one"
    refused(lightweight, f"ref 'light' {verifies}")
    refused(unsigned_tag, "tag 'plain' is not signed")
    refused(branch, f"ref 'main' {verifies}")


@pytest.mark.case("SE-14")
def test_after_a_key_rotation_only_commits_of_the_new_key_are_read(
    git_server: GitServer, git_repo: GitRepo, keys: Keychain, tmp_path: Path
) -> None:
    old, new = keys.openpgp("old@example.com"), keys.openpgp("new@example.com")
    sha = git_repo.commit({"one.yaml": ONE.format("v1")}, signer=old)
    assert validate(git_server, git_repo, tmp_path, *trusting(tmp_path, old)).code == 0

    rotated = trusting(tmp_path, new)
    before = validate(git_server, git_repo, tmp_path, *rotated)
    git_repo.commit({"one.yaml": ONE.format("v2")}, signer=new)
    after = validate(git_server, git_repo, tmp_path, *rotated)

    refused(before, f"commit {sha[:12]} is signed with OpenPGP key {old.key_id}, which is not "
            "among the source's keys")  # fmt: skip
    assert (after.code, after.out) == (ExitCode.OK, "1 objects valid\n"), after.text


@pytest.mark.case("SE-14")
def test_an_unsigned_commit_is_never_applied_and_nothing_is_pruned(
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    keys: Keychain,
    tmp_path: Path,
    namespace: str,
    admin_api: Any,
) -> None:
    """`gitopsd sync --prune` of a signed commit applies it; of an unsigned commit that
    changes one object and removes the other, it applies and prunes nothing."""
    alice = keys.openpgp("alice@example.com")
    url = git_server.file_url(git_repo)
    flags = [*scope(namespace), "--prune", *trusting(tmp_path, alice)]
    git_repo.commit({"one.yaml": ONE.format("signed"), "two.yaml": TWO}, signer=alice)
    assert gitopsd("sync", url, *flags).code == ExitCode.OK

    sha = git_repo.commit({"one.yaml": ONE.format("forged"), "two.yaml": None})
    run = gitopsd("sync", url, *flags)

    refused(run, f"commit {sha[:12]} is not signed")
    assert config_map_value(admin_api, namespace, "signed") == "signed"
    assert config_map_value(admin_api, namespace, "second") == "v"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--verify-mode", "Tag"],
            "--verify-mode: give the keys a revision must be signed with",
        ),
        (
            ["--verify-allowed-signers", "/dev/null", "--helm-chart", "app"],
            "only a git revision carries a signature to verify",
        ),
    ],
    ids=["a mode without keys", "keys for a chart"],
)
def test_verification_that_would_verify_nothing_is_refused(
    git_server: GitServer, git_repo: GitRepo, tmp_path: Path, flags: list[str], message: str
) -> None:
    git_repo.commit({"one.yaml": ONE.format("v1")})

    run = validate(git_server, git_repo, tmp_path, *flags)

    assert run.code == ExitCode.INVALID and message in run.err, run.text


@pytest.mark.case("SE-14")
def test_a_gitsync_applies_only_signed_commits_and_keeps_the_last_verified_one_live(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
    keys: Keychain,
) -> None:
    """A GitSync's verify.secretRef holds its team's public key: a signed commit is applied,
    an unsigned one is not (Ready=False, VerificationFailed, counted), the last verified
    revision stays live, and the daemon keeps polling: the next signed commit is applied."""
    alice = keys.openpgp("alice@example.com")
    first = git_repo.commit({"c.yaml": config_map_with_value("c")}, signer=alice)
    core: Any = client.CoreV1Api(admin_api)
    published = base64.b64encode(alice.public_key()).decode()
    core.create_namespaced_secret(
        namespace, {"metadata": {"name": "team-keys"}, "data": {"alice.asc": published}}
    )
    daemon = operator(daemons, namespace)
    verify = {"mode": "HEAD", "secretRef": {"name": "team-keys"}}
    create(admin_api, namespace, "app", {"repository": {"url": git_server.file_url(git_repo)},
                                         "verify": verify})  # fmt: skip
    wait_ready(admin_api, namespace, "app", "True", "Succeeded", deadline=90)

    forged = git_repo.commit({"c.yaml": config_map_with_value("c", "forged")})
    refused = wait_ready(admin_api, namespace, "app", "False", "VerificationFailed", deadline=90)

    message = condition(refused, "Ready")["message"]
    assert f"commit {forged[:12]} is not signed: nothing of it is used" in message, message
    assert refused["status"]["lastAppliedRevision"] == first
    assert config_map_data_value(admin_api, namespace, "c") == "one"
    daemon.wait_value(
        "gitopsd_errors_total",
        lambda refusals: refusals >= 1,
        "the refusal counted",
        source=f"{namespace}/app",
        stage="source",
        reason="verification_failed",
    )
    signed = git_repo.commit({"c.yaml": config_map_with_value("c", "two")}, signer=alice)
    synced = wait_ready(admin_api, namespace, "app", "True", "Succeeded", deadline=90)
    assert synced["status"]["lastAppliedRevision"] == signed
    assert config_map_data_value(admin_api, namespace, "c") == "two"
