"""Faults between gitopsd and the API server, injected for real: a proxy in front of the
real kube-apiserver cuts connections, delays, and answers 429, 500 or HTML in its place,
and the API server itself is stopped and started again over the same etcd. What survives
is read from exit codes, /readyz, metrics, the cluster and the audit log."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gitopsd.cluster.api import CONNECT_TIMEOUT_SECONDS, Api
from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_value
from tests.harness.commands import scope
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import ELECTION, DaemonProcess, Daemons
from tests.harness.faultproxy import (
    HTML_PAGE,
    Answer,
    Fault,
    FaultProxy,
    Request,
    throttled,
    write_of_config_map,
)
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.manifests import config_map_files_with_data
from tests.harness.waiting import wait_for


def everything(request: Request) -> bool:
    return True


def edit_out_of_band(gitopsd: Gitopsd, namespace: str, value: str) -> None:
    patch = f'{{"data": {{"k": "{value}"}}}}'
    gitopsd.kubectl("-n", namespace, "patch", "configmap", "a", "-p", patch)


def no_thread_died(daemon: DaemonProcess) -> None:
    logs = daemon.logs()
    assert "Traceback" not in logs and "Exception in thread" not in logs, logs[-3000:]


SERVER_ERROR = Answer(500, b'{"kind":"Status","code":500,"message":"etcdserver: leader changed"}')


@pytest.mark.case("FA-10")
@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (Fault(everything, HTML_PAGE), "not JSON (text/html"),
        (Fault(everything, cut=True), "GET "),
        (
            Fault(
                everything, Answer(200, b'{"kind": "APIGroupDiscoveryList", "ite', truncated=True)
            ),
            "GET ",
        ),
        (Fault(everything, SERVER_ERROR), "etcdserver: leader changed"),
    ],
    ids=["html-200", "cut", "truncated", "500-every-time"],
)
def test_fa10_a_transport_fault_ends_the_cli_with_exit_4_and_one_line(
    gitopsd: Gitopsd,
    proxy: FaultProxy,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
    fault: Fault,
    says: str,
) -> None:
    git_repo.commit(config_map_files_with_data("a"))
    kubeconfig = proxy.kubeconfig(tmp_path / "kubeconfig")
    proxy.inject(fault)

    run = gitopsd(
        "diff", git_server.file_url(git_repo), *scope(namespace), "--kubeconfig", str(kubeconfig)
    )

    assert run.code == 4, run.text
    assert run.out == "" and run.err.count("\n") == 1, run.err
    assert run.err.startswith("gitopsd: error: ") and says in run.err, run.err


@pytest.mark.case("FA-09")
def test_fa09_a_throttled_cli_waits_out_retry_after_and_succeeds(
    gitopsd: Gitopsd,
    proxy: FaultProxy,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    git_repo.commit(config_map_files_with_data("a"))
    kubeconfig = proxy.kubeconfig(tmp_path / "kubeconfig")
    path = f"/api/v1/namespaces/{namespace}/configmaps/{PARENT}"
    throttle = proxy.inject(
        Fault(lambda r: r.method == "GET" and r.path == path, throttled(2), times=3)
    )

    run = gitopsd(
        "diff", git_server.file_url(git_repo), *scope(namespace), "--kubeconfig", str(kubeconfig)
    )

    assert run.code == 1, run.text  # drift: ConfigMap a is missing
    assert throttle.fired == 3
    # each try of the one read came after the 2 s asked (without: 0.2 s, 0.4 s)
    waits = [later - earlier for earlier, later in itertools.pairwise(throttle.fired_at)]
    assert len(waits) == 2 and min(waits) >= 2.0, waits


@pytest.mark.case("FA-03")
def test_fa03_watches_cut_or_answered_with_html_recover_and_heal_what_changed_meanwhile(
    daemons: Daemons,
    proxy: FaultProxy,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_map_files_with_data("a"))
    daemon = daemons.start(git_server.file_url(git_repo), server=proxy.url)
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "v", "the first sync")
    wait_for(lambda: daemon.get("/readyz")[0] == 200, "the daemon to be ready")

    proxy.cut_connections()  # every watch ends mid-stream
    edit_out_of_band(gitopsd, namespace, "cut")
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "v", "the edit healed")

    html = proxy.inject(Fault(lambda request: request.is_watch, HTML_PAGE))
    proxy.cut_connections()
    wait_for(lambda: html.fired >= 2, "watches to be answered with HTML twice")
    wait_for(lambda: daemon.get("/readyz")[0] == 503, "the caches to say they are broken")
    # and they keep saying so, never synced by a watch that answers with a page
    assert all(daemon.get("/readyz")[0] == 503 for _ in range(20)), html.fired
    edit_out_of_band(gitopsd, namespace, "html")
    proxy.clear()
    wait_for(lambda: daemon.get("/readyz")[0] == 200, "/readyz to recover", 60)
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "v", "the edit healed")
    no_thread_died(daemon)


@pytest.mark.case("FA-01")
def test_fa01_a_daemon_outlives_an_api_server_restart_and_heals_an_edit_made_after(
    daemons: Daemons,
    control_plane: ControlPlane,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_map_files_with_data("a"))
    daemon = daemons.start(git_server.file_url(git_repo))
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "v", "the first sync")
    wait_for(lambda: daemon.get("/readyz")[0] == 200, "the daemon to be ready")
    errors = daemon.value("gitopsd_errors_total", stage="cluster")

    with control_plane.apiserver_stopped():
        wait_for(lambda: daemon.get("/readyz")[0] == 503, "/readyz to turn false", 60)
        daemon.wait_value(
            "gitopsd_errors_total", lambda v: v > errors, "the outage counted", 90, stage="cluster"
        )
        assert daemon.get("/healthz")[0] == 200  # alive, only not ready

    wait_for(lambda: daemon.get("/readyz")[0] == 200, "/readyz to recover", 60)
    edit_out_of_band(gitopsd, namespace, "after-restart")
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "v", "the edit healed")
    no_thread_died(daemon)


@pytest.mark.case("FA-23")
def test_fa23_a_leader_that_loses_its_lease_while_throttled_writes_nothing_after(
    daemons: Daemons,
    proxy: FaultProxy,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_map_files_with_data("a"))
    url = git_server.file_url(git_repo)
    election = {**ELECTION, "namespace": namespace}
    leader = daemons.start(url, "first", top={"leaderElection": election}, server=proxy.url)
    leader.wait_value("gitopsd_leader", lambda v: v == 1, "the first replica to lead")
    leader.wait_value("gitopsd_commit_to_applied_seconds_count", bool, "the first commit")
    standby = daemons.start(url, "second", top={"leaderElection": election})
    wait_for(lambda: standby.get("/readyz")[0] == 200, "the standby to be ready")

    # Each "retry later" outlasts the 3 s renew deadline; the third attempt would pass.
    throttle = proxy.inject(Fault(write_of_config_map("a"), throttled(5), times=2))
    git_repo.commit(config_map_files_with_data("a", value="w"))
    wait_for(lambda: throttle.fired >= 1, "the leader's write to be throttled")
    lost_at = time.time()
    polls = leader.value("gitopsd_reconcile_total")  # the throttled one is still running
    proxy.inject(Fault(lambda request: "/leases" in request.path, delay_seconds=120))

    standby.wait_value("gitopsd_leader", lambda v: v == 1, "the standby to take over")
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "w", "the new leader's sync")
    leader.wait_value(
        "gitopsd_reconcile_total", lambda v: v >= polls + 2, "the old leader to poll again", 60
    )
    assert audit.changes(control_plane, leader.user, since=lost_at) == []
    assert throttle.fired == 1  # the retry was refused before it was sent
    assert leader.value("gitopsd_errors_total", reason="fenced") >= 1


REQUEST_TIMEOUT_SECONDS = CONNECT_TIMEOUT_SECONDS + Api.timeout_seconds
"""The longest a write that passed its fence may take to reach the API server."""


def is_write(request: Request) -> bool:
    return request.method == "PATCH" and "dryRun" not in request.query


@pytest.mark.case("FA-04")
def test_fa04_a_reconcile_that_crawls_stops_writing_at_its_timeout_and_tries_again(
    daemons: Daemons,
    proxy: FaultProxy,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """Every write takes 4 s through the proxy and the source writes one object at a time,
    so its twenty objects cannot be applied within its 3 s timeout (writing on, the
    reconcile would take 80 s). The API server's audit log shows the first reconcile's
    writes stop at its deadline: none received later than one request timeout past it.
    It fails with reason timeout and backs off; once the API server is fast again, the
    next attempt applies everything."""
    names = [f"c{n}" for n in range(20)]
    git_repo.commit(config_map_files_with_data(*names))
    slow = proxy.inject(Fault(is_write, delay_seconds=4))
    started = time.time()
    url = git_server.file_url(git_repo)
    daemon = daemons.start(url, server=proxy.url, timeout="3s", concurrency=1)

    daemon.wait_value("gitopsd_reconcile_total", bool, "the first reconcile to end", 120)
    ended = time.time()
    sent = [w for w in audit.writes(control_plane, daemon.user, started) if w.received <= ended]
    deadline = sent[0].received + 3  # it began before its first request reached the server
    assert [w for w in sent if w.received > deadline + REQUEST_TIMEOUT_SECONDS] == []
    daemon.wait_value(
        "gitopsd_errors_total", lambda v: v >= 1, "a timeout", 60, stage="cluster", reason="timeout"
    )
    assert "did not finish within its timeout of 3 s" in daemon.logs()
    applied = [name for name in names if config_map_value(admin_api, namespace, name)]
    assert slow.fired > 0 and len(applied) < len(names)

    proxy.clear()
    wait_for(
        lambda: all(config_map_value(admin_api, namespace, n) for n in names), "all applied", 60
    )
    no_thread_died(daemon)


def test_a_failed_reconcile_is_retried_after_its_backoff_not_at_the_next_interval(
    daemons: Daemons,
    proxy: FaultProxy,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_map_files_with_data("a"))
    proxy.inject(Fault(everything, SERVER_ERROR))  # the API server fails from the start
    daemon = daemons.start(git_server.file_url(git_repo), server=proxy.url, interval="10m")
    daemon.wait_value(
        "gitopsd_errors_total", lambda v: v > 0, "the first reconcile to fail", 60, stage="cluster"
    )

    proxy.clear()

    # Backoff starts at 1 s and doubles: the retry comes within seconds, not in ten minutes.
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "v", "the retry to sync", 10)
    assert "retrying in" in daemon.logs()
    no_thread_died(daemon)


@pytest.mark.case("FA-25")
def test_a_takeover_outdated_by_another_write_is_read_again_and_made(
    gitopsd: Gitopsd,
    proxy: FaultProxy,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    """FA-25: A controller's write between the sync's read and its takeover of kubectl's fields
    fails the takeover's resourceVersion test (422 from the API server): the object is read
    again and its takeover made anew, and the sync heals the edit (it ended with exit 2)."""
    git_repo.commit(config_map_files_with_data("a"))
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    edit_out_of_band(gitopsd, namespace, "edited")

    def controller_writes() -> None:
        annotate = ("annotate", "configmap", "a", "seen=yes", "--field-manager=a-controller")
        gitopsd.kubectl("-n", namespace, *annotate)

    takeover = proxy.inject(
        Fault(json_patch_of(namespace, "a"), meanwhile=controller_writes, times=1)
    )
    kubeconfig = proxy.kubeconfig(tmp_path / "kubeconfig")

    run = gitopsd("sync", url, *scope(namespace), "--kubeconfig", str(kubeconfig))

    assert run.code == 0, run.text
    assert takeover.fired == 1
    live: Any = client.CoreV1Api(admin_api).read_namespaced_config_map("a", namespace)
    assert live.data == {"k": "v"}  # kubectl's edit healed
    assert live.metadata.annotations == {"seen": "yes"}  # the controller's write kept
    assert gitopsd("diff", url, *scope(namespace)).code == 0


def json_patch_of(namespace: str, name: str) -> Any:
    """Matches a JSON patch (no field manager, unlike an apply) of ConfigMap `name`."""

    def matches(request: Request) -> bool:
        path = f"/api/v1/namespaces/{namespace}/configmaps/{name}"
        return request.method == "PATCH" and request.path == path and request.query == ""

    return matches


@pytest.mark.case("FA-08")
def test_fa08_a_parent_written_by_another_meanwhile_takes_one_write_and_keeps_theirs(
    gitopsd: Gitopsd,
    proxy: FaultProxy,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    """FA-08, decided otherwise than a retry on conflict: the ApplySet parent is written by
    server-side apply under its uid, not its resourceVersion, so another's write between
    the read and the write is no conflict: one attempt, their field kept, one prune."""
    git_repo.commit(config_map_files_with_data("a", "b"))
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace), "--prune").code == 0
    git_repo.commit({"b.yaml": None, **config_map_files_with_data("c")})

    def another_writes() -> None:
        note = ("annotate", "configmap", PARENT, "note=kept", "--field-manager=an-admin")
        gitopsd.kubectl("-n", namespace, *note)

    parent_write = proxy.inject(
        Fault(apply_of(namespace, PARENT), meanwhile=another_writes, times=1)
    )
    kubeconfig = proxy.kubeconfig(tmp_path / "kubeconfig")
    since = time.time()

    run = gitopsd("sync", url, *scope(namespace), "--prune", "--kubeconfig", str(kubeconfig))

    assert run.code == 0, run.text
    assert parent_write.fired == 1
    to_parent = [
        w
        for w in audit.changes(control_plane, "admin", since)
        if (w.namespace, w.name, w.verb) == (namespace, PARENT, "patch")
        and "fieldManager=gitopsd" in w.uri
    ]
    assert to_parent and {w.code for w in to_parent} == {200}  # none refused, none tried again
    deletes = audit.deletes(control_plane, namespace, since)
    assert [(w.name, w.code) for w in deletes] == [("b", 200)]
    live: Any = client.CoreV1Api(admin_api).read_namespaced_config_map(PARENT, namespace)
    assert live.metadata.annotations["note"] == "kept"
    assert gitopsd("diff", url, *scope(namespace)).code == 0


PARENT = "gitopsd-test"


def apply_of(namespace: str, name: str) -> Any:
    """Matches a server-side apply (not a dry-run) of ConfigMap `name`."""

    def matches(request: Request) -> bool:
        path = f"/api/v1/namespaces/{namespace}/configmaps/{name}"
        applying = "fieldManager=gitopsd" in request.query and "dryRun" not in request.query
        return request.method == "PATCH" and request.path == path and applying

    return matches


@pytest.mark.case("FA-01")
def test_fa01_a_daemon_started_while_the_api_server_is_down_waits_alive_and_converges(
    daemons: Daemons,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(config_map_files_with_data("a"))
    daemon = daemons.start_with([daemons.source(git_server.file_url(git_repo))], "daemon")

    with control_plane.apiserver_stopped():
        daemon.start()  # waits for /healthz: alive without an API server
        assert daemon.get("/readyz")[0] == 503
        daemon.wait_value(
            "gitopsd_errors_total", lambda v: v >= 2, "tries that back off", 90, stage="cluster"
        )
        assert daemon.process is not None and daemon.process.poll() is None  # no crash loop

    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "v", "the sync", 90)
    wait_for(lambda: daemon.get("/readyz")[0] == 200, "/readyz once the API server is up", 60)
    no_thread_died(daemon)
