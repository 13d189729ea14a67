"""etcd's faults under a running API server (the catalogue's FA-05 and FA-06), each on a
control plane of the test's own, so that the shared one never loses its store: with etcd
stopped mid-apply or out of space, a sync with prune on fails, prunes nothing, says which
object or request failed and why, and the next sync converges once etcd is back.

The API server's own --request-timeout is short here (3 s): a request that waits for a
stopped etcd ends then, as on a real API server after its 60 s."""

from __future__ import annotations

import itertools
import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gitopsd.cluster.api import Api
from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.commands import CLUSTER_FAILED, scope
from tests.harness.controlplane import AUDITED_USER, Binaries, ControlPlane, running_control_plane
from tests.harness.faultproxy import Fault, FaultProxy, write_of_config_map
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import api_client
from tests.harness.owned_config_maps import OWNED, owned_files

NAMESPACE = "etcd-faults"
PARENT = "gitopsd-test"  # the ApplySet parent's ConfigMap, of `scope`'s --name test
QUOTA_BYTES = 20 * 1024 * 1024
FILLER_BYTES = 1000 * 1024


@pytest.fixture
def own_plane(binaries: Binaries, tmp_path: Path) -> Iterator[ControlPlane]:
    """A control plane with no controllers, an etcd quota of 20 MiB and a 3 s request
    timeout; its namespace NAMESPACE made."""
    flags = {
        "etcd": {"--quota-backend-bytes": str(QUOTA_BYTES)},
        "kube-apiserver": {"--request-timeout": "3s"},
    }
    workdir = tmp_path / "plane"
    with running_control_plane(binaries, workdir, with_controllers=False, flags=flags) as plane:
        core: Any = client.CoreV1Api(api_client(plane))
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        yield plane


def sync(gitopsd: Gitopsd, plane: ControlPlane, url: str, kubeconfig: Path | None = None) -> Any:
    """`gitopsd sync --prune` into NAMESPACE, as the audited user of `plane` (pruning two of
    three objects is over the budget); through `kubeconfig` if given."""
    cluster = ["--kubeconfig", str(kubeconfig or plane.audited_kubeconfig)]
    return gitopsd("sync", url, *scope(NAMESPACE), "--prune", "--allow-mass-prune", *cluster)


def synced_with_owned_objects(
    gitopsd: Gitopsd, plane: ControlPlane, repo: GitRepo, url: str
) -> None:
    """Syncs OWNED and `app` (value one), then commits `app` changed and OWNED removed: a
    sync of it would write `app` and prune every OWNED object."""
    repo.commit({**owned_files(""), "app.yaml": app("one")})
    assert sync(gitopsd, plane, url).code == 0
    repo.commit({"app.yaml": app("two"), **{f"{name}.yaml": None for name in OWNED}})


def app(value: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  k: {value}\n"


def config_maps(plane: ControlPlane) -> dict[str, str]:
    """name -> data.k of NAMESPACE's ConfigMaps but the ApplySet parent."""
    items: Any = client.CoreV1Api(api_client(plane)).list_namespaced_config_map(NAMESPACE).items
    return {
        m.metadata.name: (m.data or {}).get("k", "") for m in items if m.metadata.name != PARENT
    }


def tries_by_object(plane: ControlPlane, since: float) -> dict[str, list[float]]:
    """name -> when the audited user's writes (not dry-run) of it were received."""
    tries: dict[str, list[float]] = {}
    for write in audit.writes(plane, AUDITED_USER, since):
        if write.namespace == NAMESPACE and not write.dry_run:
            tries.setdefault(write.name, []).append(write.received)
    return tries


@pytest.mark.case("FA-05")
def test_fa05_etcd_stopped_mid_apply_fails_the_sync_prunes_nothing_and_the_next_converges(
    own_plane: ControlPlane,
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    tmp_path: Path,
) -> None:
    url = git_server.file_url(git_repo)
    synced_with_owned_objects(gitopsd, own_plane, git_repo, url)
    proxy = FaultProxy(own_plane).start()
    # etcd stops as the first write of an object goes out: the reads and dry-runs are done
    stop = proxy.inject(Fault(write_of_config_map("app"), meanwhile=own_plane.pause_etcd, times=1))
    kubeconfig = proxy.kubeconfig(tmp_path / "kubeconfig", AUDITED_USER, own_plane.audited_token)
    since = time.time()
    try:
        run = sync(gitopsd, own_plane, url, kubeconfig)
    finally:
        own_plane.resume_etcd()
        proxy.stop()

    assert stop.fired == 1
    assert run.code == CLUSTER_FAILED, run.text
    assert f"/{NAMESPACE}/" in run.err, run.err  # the object or request that failed
    assert audit.deletes(own_plane, NAMESPACE, since) == []
    live = config_maps(own_plane)
    assert live.keys() == {"app", *OWNED}, live
    # the API server timed the write out, yet etcd, continued, may still have made it
    assert live["app"] in ("one", "two"), live

    assert sync(gitopsd, own_plane, url).code == 0
    assert config_maps(own_plane) == {"app": "two"}


@pytest.mark.case("FA-06")
def test_fa06_etcd_out_of_space_refuses_the_apply_with_backoff_prunes_nothing_and_recovers(
    own_plane: ControlPlane, gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo
) -> None:
    url = git_server.file_url(git_repo)
    synced_with_owned_objects(gitopsd, own_plane, git_repo, url)
    fill_etcd(own_plane)
    since = time.time()

    run = sync(gitopsd, own_plane, url)

    assert run.code == CLUSTER_FAILED, run.text
    assert f"/{NAMESPACE}/" in run.err, run.err  # the object or request that failed
    assert "database space exceeded" in run.err, run.err
    assert audit.deletes(own_plane, NAMESPACE, since) == []  # etcd would have let them through
    tries = tries_by_object(own_plane, since)
    assert max(map(len, tries.values()), default=0) == Api.max_attempts, tries  # retried
    for name, times in tries.items():
        assert len(times) <= Api.max_attempts, (name, times)  # and no more
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        assert all(gap >= 0.1 * 2**n for n, gap in enumerate(gaps)), (name, gaps)  # backing off

    free_etcd(own_plane)
    assert sync(gitopsd, own_plane, url).code == 0
    assert config_maps(own_plane) == {"app": "two"}


def fill_etcd(plane: ControlPlane) -> None:
    """Writes ConfigMaps of FILLER_BYTES in namespace `filler` until etcd says it is out of
    space (its NOSPACE alarm raised)."""
    core: Any = client.CoreV1Api(api_client(plane))
    core.create_namespace({"metadata": {"name": "filler"}})
    for n in range(2 * QUOTA_BYTES // FILLER_BYTES):
        filler = {"metadata": {"name": f"filler-{n}"}, "data": {"k": "x" * FILLER_BYTES}}
        try:
            core.create_namespaced_config_map("filler", filler)
        except client.ApiException as error:
            assert "database space exceeded" in str(error.body), error.body
            return
    raise AssertionError("etcd never ran out of space")


def free_etcd(plane: ControlPlane) -> None:
    """Deletes the fillers, then compacts and defragments etcd and lifts its alarm, as an
    operator would (etcdctl compact, defrag, alarm disarm), through etcd's JSON gateway."""
    core: Any = client.CoreV1Api(api_client(plane))
    core.delete_collection_namespaced_config_map("filler")  # etcd lets deletes through
    status = etcd_call(plane, "maintenance/status", {})
    etcd_call(plane, "kv/compaction", {"revision": status["header"]["revision"], "physical": True})
    etcd_call(plane, "maintenance/defragment", {})
    for alarm in etcd_call(plane, "maintenance/alarm", {"action": "GET"}).get("alarms", []):
        etcd_call(plane, "maintenance/alarm", {**alarm, "action": "DEACTIVATE"})


def etcd_call(plane: ControlPlane, method: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(  # noqa: S310 - etcd's own http URL, on loopback
        f"{plane.etcd_url}/v3/{method}",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - loopback
        return json.load(answer)
