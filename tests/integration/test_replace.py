"""Objects whose fields that cannot change once set git changes, against the real API server:
replaced (deleted exactly as read, then created anew) when asked and provably owned;
otherwise refused alone, while the rest of the revision is applied."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import job_uid
from tests.harness.commands import scope, sync
from tests.harness.controlplane import ControlPlane
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.manifests import suspended_job
from tests.harness.waiting import wait_for

OPTION = "gitopsd.io/sync-options: replace-on-immutable"


def config_map(value: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  k: {value}\n"


def job_deletes(plane: ControlPlane, namespace: str, since: float = 0.0) -> list[audit.Write]:
    return [
        w
        for w in audit.writes_by_anyone(plane, since)
        if (w.resource, w.verb, w.namespace) == ("jobs", "delete", namespace)
    ]


def test_a_changed_job_template_is_replaced_exactly_as_read(
    gitopsd: Gitopsd,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit({"job.yaml": suspended_job("migrate", "'true'", OPTION)})
    url = git_server.file_url(git_repo)
    assert sync(gitopsd, url, namespace).code == 0
    before = job_uid(admin_api, namespace, "migrate")
    batch: Any = client.BatchV1Api(admin_api)
    version = batch.read_namespaced_job("migrate", namespace).metadata.resource_version

    git_repo.commit({"job.yaml": suspended_job("migrate", "'sh', '-c', 'exit 0'", OPTION)})
    replaced = sync(gitopsd, url, namespace)

    assert replaced.code == 0, replaced.text
    assert f"replaced   batch/Job/{namespace}/migrate" in replaced.out
    after = job_uid(admin_api, namespace, "migrate")
    assert after is not None and after != before
    command = batch.read_namespaced_job("migrate", namespace).spec.template.spec.containers[0]
    assert command.command == ["sh", "-c", "exit 0"]
    [deleted] = job_deletes(control_plane, namespace)
    assert deleted.name == "migrate" and deleted.code == 200
    assert deleted.request is not None
    assert deleted.request["preconditions"] == {"uid": before, "resourceVersion": version}
    created = [
        w
        for w in audit.writes_by_anyone(control_plane, deleted.received)
        if (w.resource, w.name, w.verb) == ("jobs", "migrate", "patch") and not w.dry_run
    ]
    assert created and created[0].code == 201  # the apply after the delete created it


def test_without_the_option_the_rest_is_applied_and_the_refusal_named(
    gitopsd: Gitopsd,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(
        {
            "job.yaml": suspended_job("migrate", "'true'"),
            "other.yaml": suspended_job("cleanup", "'true'"),
            "settings.yaml": config_map("one"),
        }
    )
    url = git_server.file_url(git_repo)
    assert sync(gitopsd, url, namespace, "--prune").code == 0
    before = job_uid(admin_api, namespace, "migrate")

    git_repo.commit(
        {
            "job.yaml": suspended_job("migrate", "'false'"),
            "settings.yaml": config_map("two"),
            "other.yaml": None,
        }
    )
    refused = sync(gitopsd, url, namespace, "--prune")

    assert refused.code == 2
    assert f"batch/Job/{namespace}/migrate" in refused.err
    assert "spec.template" in refused.err and "replace-on-immutable" in refused.err
    assert f"refused    batch/Job/{namespace}/migrate" in refused.out
    core: Any = client.CoreV1Api(admin_api)
    assert core.read_namespaced_config_map("settings", namespace).data == {"k": "two"}
    assert job_uid(admin_api, namespace, "migrate") == before
    # the Job that left git is kept: the one refused might be it, renamed
    assert job_uid(admin_api, namespace, "cleanup") is not None
    assert "held_back" in refused.out
    assert job_deletes(control_plane, namespace) == []

    diff = gitopsd("diff", url, *scope(namespace))
    assert diff.code == 1 and "spec.template" in diff.out


def test_an_object_this_source_has_no_record_of_is_never_deleted(
    gitopsd: Gitopsd,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit({"job.yaml": suspended_job("migrate", "'true'")})
    url = git_server.file_url(git_repo)
    assert sync(gitopsd, url, namespace).code == 0
    batch: Any = client.BatchV1Api(admin_api)
    labels = batch.read_namespaced_job("migrate", namespace).metadata.labels
    # someone else deletes it and creates their own, copying gitopsd's label
    batch.delete_namespaced_job("migrate", namespace, propagation_policy="Background")
    copy = client.V1Job(
        metadata=client.V1ObjectMeta(name="migrate", labels=labels),
        spec=client.V1JobSpec(
            suspend=True,
            template=client.V1PodTemplateSpec(
                spec=client.V1PodSpec(
                    restart_policy="Never",
                    containers=[client.V1Container(name="main", image="busybox")],
                )
            ),
        ),
    )
    theirs = None

    def created() -> bool:
        nonlocal theirs
        try:
            theirs = batch.create_namespaced_job(namespace, copy).metadata.uid
        except client.ApiException as error:
            if error.status != 409:  # the first one is still being deleted
                raise
            return False
        return True

    wait_for(created, "their Job to be created", 30)
    since = max(w.received for w in job_deletes(control_plane, namespace))

    git_repo.commit({"job.yaml": suspended_job("migrate", "'false'", OPTION)})
    refused = sync(gitopsd, url, namespace, "--replace-on-immutable")

    assert refused.code == 2
    assert "not_owned" in refused.err
    assert job_uid(admin_api, namespace, "migrate") == theirs
    assert [w for w in job_deletes(control_plane, namespace) if w.received > since] == []


def stateful_set(storage: str, replicas: int) -> str:
    return f"""\
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db}}
spec:
  replicas: {replicas}
  serviceName: db
  selector: {{matchLabels: {{app: db}}}}
  template:
    metadata: {{labels: {{app: db}}}}
    spec:
      containers: [{{name: db, image: registry.example/db:1}}]
  volumeClaimTemplates:
    - metadata: {{name: data}}
      spec:
        accessModes: [ReadWriteOnce]
        resources: {{requests: {{storage: {storage}}}}}
"""


def test_an_immutable_refusal_names_the_field_git_changes_not_the_servers(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    """The server says only that a StatefulSet's `spec` may change in some fields; the
    refusal names the one the commit changed, and the remedy in the CLI's words."""
    git_repo.commit({"db.yaml": stateful_set("1Gi", replicas=1)})
    url = git_server.file_url(git_repo)
    assert sync(gitopsd, url, namespace).code == 0
    git_repo.commit({"db.yaml": stateful_set("2Gi", replicas=2)})

    diff = gitopsd("diff", url, *scope(namespace))
    refused = sync(gitopsd, url, namespace)

    named = "git changes spec.volumeClaimTemplates[0].spec.resources.requests.storage, which"
    assert diff.code == 1 and named in diff.out, diff.text
    assert refused.code == 2, refused.text
    assert f"refused    apps/StatefulSet/{namespace}/db  (not applied: {named}" in refused.out
    assert "give --replace-on-immutable or annotate it" in refused.out
    assert "spec.replicas" not in refused.out  # it may change: it is no reason
