"""TA-07 (second half): a hook is owned at every write. Its wait and its cleanup act on the
run it started (its uid and this source's hook label), never on whatever holds its name by
then; and a hook created under a name the server generates is never created twice for one
answer that was lost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import jobs_by_name
from tests.harness.commands import scope
from tests.harness.faultproxy import Answer, Fault, FaultProxy
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import Gate
from tests.harness.manifests import config_map_with_data, hook_job, replica_set
from tests.harness.status_writer import meanwhile
from tests.harness.waiting import wait_for

GATEWAY_TIMEOUT = b'{"kind":"Status","apiVersion":"v1","status":"Failure","code":504}'


def test_ta07_a_hooks_cleanup_never_deletes_an_object_made_anew_under_its_name(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    gate: Gate,
) -> None:
    """TA-07: while a pre-sync hook (a ReplicaSet held back) waits to be healthy, its tenant
    deletes it and the platform makes its own ReplicaSet under that name. The wait does not
    judge the platform's object in the hook's place, and the cleanup (hook-succeeded and
    hook-failed) deletes nothing: before, the platform's object, healthy at once, passed for
    the hook and was deleted as its cleanup."""
    hook = yaml.safe_load(gate.hold(replica_set("web")))
    hook["metadata"]["annotations"] = {
        "gitopsd.io/hook": "pre-sync",
        "gitopsd.io/hook-delete-policy": "hook-succeeded,hook-failed",
    }
    git_repo.commit({"web.yaml": yaml.safe_dump(hook)})
    apps: Any = client.AppsV1Api(admin_api)
    platform: dict[str, Any] = {}

    def tenant_deletes_it_and_the_platform_takes_its_name() -> None:
        wait_for(lambda: apps.list_namespaced_replica_set(namespace).items, "the hook", 120)
        apps.delete_namespaced_replica_set("web", namespace)
        wait_for(lambda: not apps.list_namespaced_replica_set(namespace).items, "it gone")
        theirs = yaml.safe_load(replica_set("web"))
        theirs["spec"]["replicas"] = 0  # healthy at once
        platform["uid"] = apps.create_namespaced_replica_set(namespace, theirs).metadata.uid

    with meanwhile(tenant_deletes_it_and_the_platform_takes_its_name):
        failed = gitopsd("sync", git_server.file_url(git_repo), *scope(namespace))

    assert failed.code != 0, failed.text
    assert "another object took its name" in failed.err, failed.text
    found = apps.read_namespaced_replica_set("web", namespace)
    assert found.metadata.uid == platform["uid"]


def test_ta07_a_generate_name_hook_whose_create_answer_is_lost_runs_once(
    gitopsd: Gitopsd,
    admin_api: Any,
    proxy: FaultProxy,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    """TA-07 (no retried create): a gateway answers 504 after the API server created a
    post-sync hook Job named by generateName. The POST is not sent again (a 5xx may mean
    it was applied): the run is found by its run label and waited for, so one Job runs.
    Before, the POST was retried and the hook ran twice."""
    smoke = hook_job("smoke", {"gitopsd.io/hook": "post-sync"}).replace(
        "  name: smoke\n", "  generateName: smoke-\n"
    )
    git_repo.commit({"smoke.yaml": smoke, "app.yaml": config_map_with_data("app")})
    kubeconfig = proxy.kubeconfig(tmp_path / "kubeconfig")
    lost = proxy.inject(
        Fault(
            lambda request: request.method == "POST" and request.path.endswith("/jobs"),
            Answer(504, GATEWAY_TIMEOUT),
            forwarded=True,
            times=1,
        )
    )

    synced = gitopsd(
        "sync", git_server.file_url(git_repo), *scope(namespace), "--kubeconfig", str(kubeconfig)
    )

    assert lost.fired == 1
    assert synced.code == 0, synced.text
    runs = jobs_by_name(admin_api, namespace)
    assert len(runs) == 1 and all(name.startswith("smoke-") for name in runs), runs
