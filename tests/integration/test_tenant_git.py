"""TA-05 for git: a GitSync's repository URL reaches neither loopback, link-local nor the
cluster's networks, git's failures do not tell what listens on a port, and a git server
that trickles holds a command only until the administrator's git deadline; a name server
that never answers holds a git command or a chart fetch no longer than its deadline."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gitopsd.config import Credentials, SourceSpec
from gitopsd.errors import ConfigError, SourceError
from gitopsd.source import fetch
from tests.harness import silent_dns
from tests.harness.controlplane import SERVICE_CLUSTER_IP_RANGE, ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import create, credentials_secret, heals, ready_message
from tests.harness.kube import create_namespace
from tests.harness.loopback import closed_port
from tests.harness.manifests import config_map_with_value
from tests.harness.operators import MEMORY_LIMIT_MIB, tenant_operator
from tests.harness.trickle import Trickle, serving
from tests.harness.waiting import wait_for

FENCED = "resolves to loopback, link-local or the cluster's networks (network.clusterNetworks)"


@pytest.fixture
def slow_git_server(tmp_path: Path) -> Iterator[GitServer]:
    """A git server of this test's own, to trickle."""
    server = GitServer(root=tmp_path / "slow-git")
    server.root.mkdir()
    server.start()
    yield server
    server.stop()


def api_server_port(control_plane: ControlPlane) -> int:
    return int(control_plane.url.rpartition(":")[2])


def test_ta05_a_gitsync_repository_on_loopback_or_link_local_is_never_reached(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    control_plane: ControlPlane,
) -> None:
    """TA-05 (URL fencing, git): a GitSync whose repository is on loopback (by address or
    by name, the API server's port included) or link-local (the cloud's metadata address)
    fails naming the fence, and git never connects: a listening service counts no
    connection. Before, git connected and its TLS error told what listened there."""
    settings = {"enabled": True, "namespaces": [namespace]}  # insecure sources not allowed
    daemon = daemons.start_with([], "operator", gitSyncs=settings)
    daemon.memory_limit_mib = MEMORY_LIMIT_MIB
    daemon.start()
    with serving(Trickle()) as listening:
        urls = {
            "by-address": f"https://127.0.0.1:{listening.port}/repo.git",
            "by-name": f"https://localhost:{listening.port}/repo.git",
            "ipv6": f"https://[::ffff:127.0.0.1]:{listening.port}/repo.git",
            "api-server": f"https://127.0.0.1:{api_server_port(control_plane)}/repo.git",
            "metadata": "https://169.254.169.254/repo.git",
        }
        for name, url in urls.items():
            create(admin_api, namespace, name, {"repository": {"url": url}})
        for name in urls:
            wait_for(
                lambda: FENCED in ready_message(admin_api, namespace, name),  # noqa: B023
                f"GitSync {name} refused by the fence",
            )
        assert listening.accepted == 0
    assert daemon.process is not None and daemon.process.poll() is None


def test_ta05_the_clusters_service_network_is_fenced_without_being_listed(
    admin_api: Any, namespace: str, gitsync_crd: str, daemons: Daemons
) -> None:
    """TA-05 (URL fencing, the cluster's networks): with no network.clusterNetworks in the
    configuration, the daemon learns the cluster's ServiceCIDRs at start, and a GitSync
    whose repository is the `kubernetes` Service's address fails naming the fence. Before,
    git was sent there (here, where nothing routes it, it failed at the git deadline)."""
    settings = {"enabled": True, "namespaces": [namespace]}
    daemon = daemons.start_with([], "operator", gitSyncs=settings).start()
    service: Any = client.CoreV1Api(admin_api).read_namespaced_service("kubernetes", "default")
    create(
        admin_api,
        namespace,
        "service",
        {"repository": {"url": f"https://{service.spec.cluster_ip}/r.git"}},
    )

    wait_for(
        lambda: FENCED in ready_message(admin_api, namespace, "service"), "the Service refused"
    )
    learned = [line for line in daemon.log_lines() if line["message"].startswith("fenced for")]
    assert learned and SERVICE_CLUSTER_IP_RANGE in learned[0]["message"]


JOINED_POD_NETWORK = "10.251.7.0/24"
"""A node's pod range, in no range the harness's control plane uses."""


def test_ta05_a_node_that_joins_has_its_pod_network_fenced_without_a_restart(
    admin_api: Any, namespace: str, gitsync_crd: str, daemons: Daemons
) -> None:
    """TA-05 (URL fencing, the cluster's networks): a node that joins after the daemon
    started has its pod CIDR fenced as soon as the daemon's watch of Nodes tells of it.
    Before, the networks were read once, at start, and a GitSync could reach the new
    node's pods until the daemon restarted."""
    settings = {"enabled": True, "namespaces": [namespace]}
    daemon = daemons.start_with([], "operator", gitSyncs=settings).start()
    core: Any = client.CoreV1Api(admin_api)
    node = f"joined-{namespace}"
    core.create_node({"metadata": {"name": node}, "spec": {"podCIDRs": [JOINED_POD_NETWORK]}})
    try:
        wait_for(
            lambda: any(JOINED_POD_NETWORK in line["message"] for line in daemon.log_lines()),
            "the joined node's pod network learned",
            30,
        )
        url = f"https://{JOINED_POD_NETWORK.replace('0/24', '9')}/r.git"
        create(admin_api, namespace, "pods", {"repository": {"url": url}})
        wait_for(lambda: FENCED in ready_message(admin_api, namespace, "pods"), "the pod refused")
    finally:
        core.delete_node(node)


def failure(admin_api: Any, namespace: str, name: str, port: int) -> str:
    """The GitSync's failure as its status says it, its port and retry delay left out."""

    def failed() -> str | None:
        said = ready_message(admin_api, namespace, name)
        return said if " failed (" in said else None

    said = wait_for(failed, f"GitSync {name} failing")
    return re.sub(r"retrying in [0-9.]+ s", "retrying", said.replace(str(port), "PORT"))


def test_ta05_git_failures_say_the_same_of_a_closed_port_a_tls_service_and_a_plain_one(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    control_plane: ControlPlane,
) -> None:
    """TA-05 (URL fencing, git): where the fence is lifted (allowInsecure), a repository
    URL that gets no git answer fails with one message whether its port is closed, serves
    TLS (the API server) or plain HTTP. Before, git's "Connection refused", "SSL
    certificate problem" and "wrong version number" were the tenant's port scanner."""
    tenant_operator(daemons, [namespace])
    with serving(Trickle()) as plain:
        ports = {
            "closed": closed_port(),
            "tls": api_server_port(control_plane),
            "plain": plain.port,
        }
        for name, port in ports.items():
            create(
                admin_api, namespace, name, {"repository": {"url": f"https://127.0.0.1:{port}/r"}}
            )
        said = {name: failure(admin_api, namespace, name, port) for name, port in ports.items()}
        assert plain.accepted >= 1
    assert said["closed"] == said["tls"] == said["plain"], said
    assert "no git answer from https://127.0.0.1:PORT" in said["closed"]


def test_ta05_git_over_ssh_is_fenced_and_its_failures_say_the_same_too(
    tmp_path: Path, control_plane: ControlPlane
) -> None:
    """TA-05 (URL fencing, git over ssh): an ssh URL on loopback is refused before ssh
    runs; where the fence is lifted, ssh connects to the address checked, and a closed
    port, a TLS service and a plain one fail alike (before: "Connection refused",
    "Connection closed by remote host", "banner exchange")."""
    (tmp_path / "known_hosts").write_text("")
    credentials = Credentials(
        ssh_key_file=tmp_path / "id_ed25519", known_hosts_file=tmp_path / "known_hosts"
    )
    with serving(Trickle()) as listening:
        url = f"ssh://git@127.0.0.1:{listening.port}/repo.git"
        with pytest.raises(ConfigError, match=re.escape(FENCED)):
            fetch(SourceSpec(url=url, credentials=credentials), tmp_path / "cache")
        assert listening.accepted == 0

        said = {}
        ports = {
            "closed": closed_port(),
            "tls": api_server_port(control_plane),
            "plain": listening.port,
        }
        for kind, port in ports.items():
            url = f"ssh://git@127.0.0.1:{port}/repo.git"
            spec = SourceSpec(url=url, credentials=credentials, allow_insecure=True)
            with pytest.raises(SourceError) as failed:
                fetch(spec, tmp_path / "cache")
            said[kind] = str(failed.value).replace(str(port), "PORT")
        assert listening.accepted == 1
    assert said["closed"] == said["tls"] == said["plain"], said
    assert "no git answer from ssh://127.0.0.1:PORT" in said["closed"]


def test_ta05_a_trickling_git_server_holds_a_command_only_until_the_admins_git_deadline(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
    slow_git_server: GitServer,
) -> None:
    """TA-05 (time, git): two tenants' GitSyncs on a git server that sends a byte every
    2 s would take every thread of the pool (1 turn, 4 threads, 2 per tenant); the
    administrator's git deadline (network.gitDeadline, 3 s here) ends each command, with
    a status naming it, and another tenant is polled and healed. Before, git's commands
    had a fixed minute, which no status named and no administrator could set."""
    slow = slow_git_server.create_repo("slow")
    slow.commit({"c.yaml": config_map_with_value("c")})
    url = slow_git_server.http_url(slow)
    attackers = [create_namespace(admin_api), create_namespace(admin_api)]
    top = {"concurrentReconciles": 1, "network": {"gitDeadline": "3s"}}
    daemon = tenant_operator(daemons, [*attackers, namespace], top)
    slow_git_server.trickling.set()
    hung = [(attacker, f"hung-{n}") for attacker in attackers for n in range(2)]
    for attacker in attackers:
        secret = credentials_secret(admin_api, attacker, slow_git_server, url)
        repository = {"url": url, "secretRef": {"name": secret}}
        for name in ("hung-0", "hung-1"):
            create(admin_api, attacker, name, {"repository": repository, "timeout": "168h"})

    def past_deadline() -> bool:
        deadline = "not done within the git deadline of 3 s (network.gitDeadline)"
        return all(deadline in ready_message(admin_api, *gitsync) for gitsync in hung)

    wait_for(past_deadline, "each hung GitSync's status naming the git deadline", 45)
    heals(admin_api, namespace, git_server, git_repo)
    wait_for(past_deadline, "each hung GitSync's status naming the git deadline")
    assert slow_git_server.trickled >= len(hung)
    assert daemon.process is not None and daemon.process.poll() is None
    assert daemon.cage is not None and daemon.cage.oom_kills() == 0


LOOKING_UP = """
from pathlib import Path
from tempfile import mkdtemp
from gitopsd.config import ChartSettings, Network, SourceSpec
from gitopsd.source import fetch, fetch_chart
network = Network(fetch_deadline_seconds=2, git_deadline_seconds=2)
git = SourceSpec(url="https://git.slow.example/repo.git", network=network)
hello = ChartSettings(chart="hello")
chart = SourceSpec(url="https://charts.slow.example/", network=network, helm=hello)
for fetching, spec in ((fetch, git), (fetch_chart, chart)):
    try:
        fetching(spec, Path(mkdtemp()))
    except Exception as error:
        print(error)
"""
"""A git source and a chart source, each on a host whose name server never answers."""


@pytest.mark.skipif(
    not silent_dns.namespaces_allowed(), reason="no unprivileged user namespaces here"
)
def test_ta05_a_name_server_that_never_answers_holds_a_fetch_only_until_its_deadline() -> None:
    """TA-05 (time, name lookups): a tenant's host under a zone whose name servers never
    answer (here, a real resolver asking a server that hears and never answers) holds a
    git command and a chart request only until their deadlines, 2 s here, each naming its
    deadline: both have failed long before the resolver would give up. Before, the chart
    request waited out the resolver's timeouts (150 s), and git its fixed minute."""
    try:
        ran = silent_dns.run(
            [sys.executable, "-c", LOOKING_UP], timeout_seconds=silent_dns.RESOLVER_SECONDS / 2
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the fetches waited for the resolver's own timeouts, past their deadlines")
    assert ran.returncode == 0, ran.stderr
    git, chart = ran.stdout.splitlines()
    named = (
        "not done within the git deadline of 2 s (network.gitDeadline), looking up" in git,
        "not fetched within the fetch deadline of 2 s (network.fetchDeadline)" in chart,
    )
    assert named == (True, True), ran.stdout
