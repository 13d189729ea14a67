"""SE-13 against a real sshd on loopback (tests/harness/sshd.py): a git source over ssh is
read only from a host whose key is the one pinned for it, and a key no one pinned is never
trusted on first use, nor remembered.

Each test runs `gitopsd validate` as a user types it, with `--ssh-key` and `--known-hosts`
(the daemon hands its Secret's `identity` and `known_hosts` to the same source settings),
and `--allow-insecure-source`, which lifts the fence that keeps sources off loopback.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitopsd.cli import main
from gitopsd.errors import ExitCode
from tests.harness.canary import Canary
from tests.harness.cli import Run
from tests.harness.gitserver import GitRepo
from tests.harness.sshd import SshServer, make_key, running_sshd

MANIFEST = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: over-ssh\n  namespace: demo\n"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Every record the test logs, at every level, to be searched for the private key."""
    caplog.set_level(logging.DEBUG)
    return caplog


def validate(sshd: SshServer, repo: GitRepo, known_hosts: Path, cache: Path) -> Run:
    """`gitopsd validate` of the repository over ssh, with the server's authorized key."""
    argv = ["validate", sshd.url(repo.bare), "--ssh-key", str(sshd.client_key.private)]
    argv += ["--known-hosts", str(known_hosts), "--allow-insecure-source"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--cache-dir", str(cache)])
    return Run(code, out.getvalue(), err.getvalue())


def assert_no_private_key(sshd: SshServer, text: str) -> None:
    """Neither the key file (as written, base64 as a Secret holds it, JSON-escaped) nor
    any line of its body."""
    key = sshd.client_key.private.read_text()
    Canary(key).assert_absent(text, "gitopsd's output")
    body = [line for line in key.splitlines() if line and not line.startswith("-----")]
    assert body and not [line for line in body if line in text], text


def fetched_objects(cache: Path) -> list[Path]:
    """Every object (loose or packed) the cache's repositories hold."""
    return [path for path in cache.glob("*.git/objects/**/*") if path.is_file()]


@pytest.mark.case("SE-13")
def test_a_host_with_its_pinned_key_is_read_over_ssh(
    sshd: SshServer,
    git_repo: GitRepo,
    tmp_path: Path,
    logs: pytest.LogCaptureFixture,
) -> None:
    """SE-13: the key pinned under the host's name as the URL gives it (not the address
    ssh is told to connect to) lets the fetch in; the revision is read and validated."""
    git_repo.commit({"config.yaml": MANIFEST})
    pinned = f"git.example.com {sshd.host_key.public}\n{sshd.known_hosts_line()}"
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(pinned)
    cache = tmp_path / "cache"
    run = validate(sshd, git_repo, known_hosts, cache)
    assert (run.code, run.out) == (ExitCode.OK, "1 objects valid\n"), run.text
    assert fetched_objects(cache) != []
    assert known_hosts.read_text() == pinned
    assert_no_private_key(sshd, run.text + logs.text)


@pytest.mark.case("SE-13")
@pytest.mark.parametrize(
    ("pinned_for_the_host", "refusal"),
    [
        pytest.param(False, "is not known", id="none pinned for the host"),
        pytest.param(True, "is not the one pinned", id="another key pinned for the host"),
    ],
)
def test_a_host_key_not_pinned_is_refused_and_never_remembered(
    sshd: SshServer,
    git_repo: GitRepo,
    tmp_path: Path,
    logs: pytest.LogCaptureFixture,
    pinned_for_the_host: bool,
    refusal: str,
) -> None:
    """SE-13: a key not pinned for the host refuses the fetch, naming the host; nothing is
    fetched, the known_hosts file is left as it was (the key is not trusted on first use),
    and the next fetch is refused the same way."""
    git_repo.commit({"config.yaml": MANIFEST})
    pinned = f"git.example.com {sshd.host_key.public}\n"  # the server's key, for another host
    if pinned_for_the_host:
        pinned += sshd.known_hosts_line(make_key(tmp_path / "another" / "id_ed25519"))
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(pinned)
    cache, said = tmp_path / "cache", ""
    for attempt in ("first", "second"):
        run = validate(sshd, git_repo, known_hosts, cache)
        said += run.text
        assert run.code == ExitCode.SOURCE_FAILED, f"{attempt} fetch: {run.text}"
        assert f"the host key of {sshd.known_as} {refusal}" in run.err, run.err
        assert "(--known-hosts; a configured source's credentials: knownHostsFile" in run.err
        assert "(hostkey)" in run.err and run.out == "", run.text
        assert fetched_objects(cache) == [], f"{attempt} fetch"
        assert known_hosts.read_text() == pinned, f"{attempt} fetch"
    assert_no_private_key(sshd, said + logs.text)
