"""TA-05: time a tenant cannot take from the others. A chart repository that sends a byte
now and then holds a fetch only until the administrator's deadline; the GitSync controller
never waits for a hung worker to retire; /readyz says when the pool of polls is stuck."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from gitopsd.errors import ExitCode
from tests.harness.cli import Gitopsd, Run
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import (
    GROUP,
    PLURAL,
    VERSION,
    create,
    get,
    heals,
    patch_spec,
    ready_message,
    wait_ready,
)
from tests.harness.kube import create_namespace
from tests.harness.loopback import closed_port
from tests.harness.manifests import config_map_with_value
from tests.harness.operators import MEMORY_LIMIT_MIB, tenant_operator
from tests.harness.trickle import Trickle, serving
from tests.harness.waiting import wait_for

HUNG = {"helm": {"chart": "hello", "releaseName": "hello"}}


@pytest.fixture
def trickle() -> Iterator[Trickle]:
    with serving(Trickle()) as served:
        served.trickling.set()
        yield served


def hang(admin_api: Any, namespaces: list[str], trickle: Trickle, each: int) -> list[str]:
    """`each` GitSyncs in every one of `namespaces` whose chart repository trickles."""
    names = [f"hung-{n}" for n in range(each)]
    for namespace in namespaces:
        for name in names:
            create(admin_api, namespace, name, {"repository": {"url": trickle.url}, **HUNG})
    return names


def test_ta05_a_trickling_chart_repository_holds_a_fetch_only_until_the_admins_deadline(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
    trickle: Trickle,
) -> None:
    """TA-05: two tenants' GitSyncs whose chart repository sends a byte every half second
    would take every thread of the pool (1 turn, 4 threads, 2 per tenant, one more each
    time a poll stalls); the administrator's fetch deadline ends each fetch, with a status
    naming it, and another tenant is polled and healed. Without the deadline the fetches
    never end, and the other tenant's poll waits for a thread forever."""
    attackers = [create_namespace(admin_api), create_namespace(admin_api)]
    top = {"concurrentReconciles": 1, "network": {"fetchDeadline": "3s"}}
    daemon = tenant_operator(daemons, [*attackers, namespace], top)
    names = hang(admin_api, attackers, trickle, each=2)
    hung = [(attacker, name) for attacker in attackers for name in names]

    def past_deadline() -> bool:
        deadline = "fetch deadline of 3 s (network.fetchDeadline)"
        return all(deadline in ready_message(admin_api, *gitsync) for gitsync in hung)

    wait_for(
        lambda: trickle.holding() == 4 or past_deadline(),
        "every thread of the pool held by a fetch, or every fetch ended by the deadline",
        deadline_seconds=90,
    )
    heals(admin_api, namespace, git_server, git_repo)
    wait_for(past_deadline, "each hung GitSync's status naming the deadline")
    assert daemon.process is not None and daemon.process.poll() is None
    assert daemon.cage is not None and daemon.cage.oom_kills() == 0


def depending_on(repository: str) -> dict[str, str]:
    """A chart in git whose one dependency is in the chart repository at `repository`."""
    return {
        "shop/Chart.yaml": (
            "apiVersion: v2\nname: shop\nversion: 1.0.0\ndependencies:\n"
            f"- name: hello\n  version: 1.x\n  repository: {repository}\n"
        )
    }


def sync_chart(gitopsd: Gitopsd, git_repo: GitRepo, namespace: str, *flags: str) -> Run:
    target = ["--namespace", namespace, "--inventory-namespace", namespace, "--name", "shop"]
    return gitopsd("sync", str(git_repo.work), "--path", "shop", *target, *flags)


def test_ta05_dependency_urls_on_loopback_or_link_local_are_never_fetched(
    gitopsd: Gitopsd, git_repo: GitRepo, namespace: str
) -> None:
    """TA-05 (URL fencing): a Chart.yaml dependency on loopback or link-local (the cloud's
    metadata address) is refused before a socket opens, unless insecure sources are
    allowed; the refusal names the fence, not what answers there."""
    with serving(Trickle()) as listening:
        for host in (f"127.0.0.1:{listening.port}", "169.254.169.254", "[::1]:443"):
            git_repo.commit(depending_on(f"https://{host}/charts"))
            refused = sync_chart(gitopsd, git_repo, namespace)
            assert refused.code == ExitCode.INVALID, refused.text
            assert "resolves to loopback, link-local or the cluster's networks" in refused.err
        assert listening.accepted == 0

        git_repo.commit(depending_on(f"https://127.0.0.1:{listening.port}/charts"))
        allowed = sync_chart(gitopsd, git_repo, namespace, "--allow-insecure-source")
        assert allowed.code == ExitCode.SOURCE_FAILED, allowed.text
        assert listening.accepted == 1  # the administrator's allowance lifts the fence


def test_ta05_a_closed_port_a_tls_service_and_a_plain_one_fail_alike(
    gitopsd: Gitopsd, git_repo: GitRepo, namespace: str, control_plane: ControlPlane
) -> None:
    """TA-05 (URL fencing): where the fence is lifted, a dependency's https URL that gets
    no HTTP answer fails with one message, whether its port is closed, serves TLS (the API
    server, whose certificate is not trusted) or plain HTTP: the status is no scanner."""
    with serving(Trickle()) as plain:
        ports = {
            "closed": closed_port(),
            "tls": int(control_plane.url.rpartition(":")[2]),
            "plain": plain.port,
        }
        said = {}
        for kind, port in ports.items():
            git_repo.commit(depending_on(f"https://127.0.0.1:{port}/charts"))
            failed = sync_chart(gitopsd, git_repo, namespace, "--allow-insecure-source")
            assert failed.code == ExitCode.SOURCE_FAILED, failed.text
            said[kind] = failed.err.replace(str(port), "PORT")
        assert plain.accepted == 1
    assert said["closed"] == said["tls"] == said["plain"], said
    assert "no HTTP answer from https://127.0.0.1:PORT" in said["closed"]


def test_ta05_readyz_says_when_the_pool_of_polls_is_held_and_no_poll_moves(
    daemons: Daemons, git_server: GitServer, git_repo: GitRepo
) -> None:
    """TA-05 (readiness): four sources whose chart repository starts to trickle take every
    thread of the pool (1 turn, 4 threads; the configuration's sources are not held to a
    share), and a fifth waits: /readyz answers 503 once no poll has started or ended for
    poolProgressDeadline, and 200 again once the polls move. Before, it said ready."""
    git_repo.commit({"c.yaml": config_map_with_value("c")})
    with serving(Trickle()) as trickle:
        hung = [{**daemons.source(trickle.url), "name": f"hung-{n}", **HUNG} for n in range(4)]
        sources = [*hung, daemons.source(git_server.file_url(git_repo))]
        top: dict[str, Any] = {"concurrentReconciles": 1, "poolProgressDeadline": "15s"}
        daemon = daemons.start_with(sources, "daemon", **top)
        daemon.memory_limit_mib = MEMORY_LIMIT_MIB
        daemon.start()
        wait_for(lambda: daemon.get("/readyz")[0] == 200, "every source tried: ready")

        trickle.trickling.set()
        wait_for(
            lambda: daemon.get("/readyz")[0] == 503,
            "/readyz saying the pool is held",
            deadline_seconds=120,
        )
        assert trickle.holding() == 4
        trickle.stopped.set()  # each held fetch ends: the polls move again
        wait_for(lambda: daemon.get("/readyz")[0] == 200, "ready again", deadline_seconds=60)


def test_ta05_retiring_hung_gitsyncs_never_holds_up_another_tenants(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
    trickle: Trickle,
) -> None:
    """TA-05 (the GitSync controller): a tenant changes two of its GitSyncs and deletes two
    while their fetches hang (the deadline is the default 5 minutes). Each retired worker
    is waited for on a thread of its own, so another tenant's new GitSync is served at
    once; before, the controller's one thread waited 30 s for each (2 minutes for four)."""
    attacker = create_namespace(admin_api)
    # four of the pool's threads for the attacker (its share is 2 by default): four fetches
    # hang at once, so four workers are retired while their polls are in flight
    tenant_operator(daemons, [attacker, namespace], {"tenantQuota": {"threads": 4}})
    names = hang(admin_api, [attacker], trickle, each=4)
    wait_for(lambda: trickle.holding() == 4, "the tenant's four fetches hanging")

    for name in names[:2]:
        patch_spec(admin_api, attacker, name, {"interval": "2s"})
    objects: Any = client.CustomObjectsApi(admin_api)
    for name in names[2:]:
        objects.delete_namespaced_custom_object(GROUP, VERSION, attacker, PLURAL, name)
    git_repo.commit({"c.yaml": config_map_with_value("c")})
    create(admin_api, namespace, "app", {"repository": {"url": git_server.file_url(git_repo)}})
    wait_ready(admin_api, namespace, "app", "True", "Succeeded", deadline=45)
    assert trickle.holding() >= 2  # the changed GitSyncs' fetches still hang

    for name in names[2:]:  # withdrawn once their fetch ends, or its grace passes
        wait_for(lambda: get(admin_api, attacker, name) is None, name, deadline_seconds=90)  # noqa: B023
