"""TA-05 (URL fencing): the addresses a chart fetch or git never connects to, decided
before any socket opens, literal addresses and their IPv4-mapped forms alike; and what
git's failures may tell."""

from __future__ import annotations

import pytest

from gitopsd.config import Network
from gitopsd.errors import SourceReason
from gitopsd.source.network import Connector, Deadline, Fenced
from gitopsd.source.policy import endpoint
from gitopsd.source.runner import _classify

CLUSTER = Network(cluster_networks=("10.96.0.0/12", "fd00:10::/64"))


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.8.8.8",
        "::1",
        "::ffff:127.0.0.1",
        "169.254.169.254",
        "fe80::1",
        "0.0.0.0",  # noqa: S104 - an address refused, never bound
        "10.96.0.1",
        "::ffff:10.96.0.1",
        "fd00:10::1",
    ],
)
def test_ta05_loopback_link_local_and_the_cluster_networks_are_fenced(host: str) -> None:
    with pytest.raises(Fenced):
        Connector(CLUSTER, True, Deadline(5)).connect(host, 443, 1)


def test_ta05_insecure_sources_lift_the_fence() -> None:
    with pytest.raises(OSError) as refused:  # a closed port: connected to, not fenced
        Connector(CLUSTER, False, Deadline(5)).connect("127.0.0.1", 1, 1)
    assert not isinstance(refused.value, Fenced)


@pytest.mark.parametrize(
    ("url", "where"),
    [
        ("https://Git.Example.com/org/repo.git", ("https", "git.example.com", 443)),
        ("http://git.example.com:8080/repo.git", ("http", "git.example.com", 8080)),
        ("ssh://git@[::1]:2222/repo.git", ("ssh", "::1", 2222)),
        ("git@GitHub.com:org/repo.git", ("ssh", "github.com", 22)),
    ],
)
def test_ta05_git_connects_to_the_host_and_port_its_url_names(
    url: str, where: tuple[str, str, int]
) -> None:
    """TA-05 (git): the host whose addresses are checked is the one git would connect to."""
    assert endpoint(url) == where


@pytest.mark.parametrize(
    "stderr",
    [
        "fatal: unable to access 'https://h:1/r/': Failed to connect to h port 1: Connection "
        "refused",
        "fatal: unable to access 'https://h:1/r/': server certificate verification failed.",
        "fatal: unable to access 'https://h:1/r/': gnutls_handshake() failed: An unexpected TLS",
        "fatal: unable to access 'https://h:1/r/': Empty reply from server",
        "kex_exchange_identification: Connection closed by remote host\n"
        "fatal: Could not read from remote repository.",
        "ssh: connect to host h port 22: Connection timed out",
    ],
)
def test_ta05_git_words_that_would_tell_what_listens_are_not_shown(stderr: str) -> None:
    assert _classify(stderr) == (SourceReason.UNREACHABLE, None)


def test_ta05_a_git_servers_own_answer_is_still_told() -> None:
    said = "fatal: repository 'https://h/r/' not found"
    assert _classify(said) == (SourceReason.UNREACHABLE, said)
