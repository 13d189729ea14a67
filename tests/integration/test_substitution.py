"""Flux's post-build variables through the real CLI and a real daemon, against the real API
server: from flags, ConfigMaps and Secrets, as a GitSync's postBuild, strict, disabled, and a
Secret's value confined to Secrets."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from tests.harness.canary import Canary
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_value
from tests.harness.commands import INVALID, scope
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import create, wait_ready
from tests.harness.operators import operator
from tests.harness.waiting import wait_for
from tests.harness.webhooks import secret_data

APP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: app-${ENV}
  labels: {region: "${REGION}"}
data:
  region: ${REGION}
  zone: ${ZONE:=${REGION}a}
  script: echo $HOME $${LITERAL}
"""
KEPT = """apiVersion: v1
kind: ConfigMap
metadata:
  name: kept
  annotations: {kustomize.toolkit.fluxcd.io/substitute: disabled}
data: {template: "${REGION}"}
"""
CREDS = """apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: "${PASSWORD}"}
"""


def variables(admin_api: Any, namespace: str, canary: Canary) -> None:
    core: Any = client.CoreV1Api(admin_api)
    data = {"REGION": "eu-west-1", "ENV": "ignored"}  # --substitute wins over substituteFrom
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "vars"}, "data": data})
    secret = {"PASSWORD": secret_data(canary.value.encode())}
    core.create_namespaced_secret(namespace, {"metadata": {"name": "creds-vars"}, "data": secret})


def test_a_sync_expands_variables_of_flags_configmaps_and_secrets_and_masks_the_secrets(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    canary: Canary,
) -> None:
    variables(admin_api, namespace, canary)
    git_repo.commit({"app.yaml": APP, "kept.yaml": KEPT, "creds.yaml": CREDS})
    url = git_server.file_url(git_repo)
    given = ["--substitute-from", "configmap/vars", "--substitute-from", "secret/creds-vars"]
    given += ["--substitute", "ENV=prod"]

    synced = gitopsd("sync", url, *scope(namespace), *given, "-o", "json")

    assert synced.code == 0, synced.text
    core: Any = client.CoreV1Api(admin_api)
    app = core.read_namespaced_config_map("app-prod", namespace)
    assert app.data == {
        "region": "eu-west-1",
        "zone": "eu-west-1a",
        "script": "echo $HOME ${LITERAL}",
    }
    assert app.metadata.labels["region"] == "eu-west-1"
    assert config_map_value(admin_api, namespace, "kept", "template") == "${REGION}"
    password = core.read_namespaced_secret("creds", namespace).data["password"]
    assert password == canary.base64
    patch = json.dumps({"stringData": {"password": "changed-by-hand"}})
    gitopsd.kubectl("patch", "secret/creds", "-n", namespace, "-p", patch)
    diff = gitopsd("diff", url, *scope(namespace), *given, "-o", "json")
    assert diff.code == 1, diff.text  # the Secret drifted: shown masked
    for run in (synced, diff):
        canary.assert_absent(run.text, "the command's output")
    canary.assert_not_in_cluster(admin_api, namespace)


def test_a_secrets_variable_outside_a_secret_and_strictly_a_missing_one_apply_nothing(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    canary: Canary,
) -> None:
    variables(admin_api, namespace, canary)
    leak = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: leak}\ndata: {p: '${PASSWORD}'}\n"
    git_repo.commit({"leak.yaml": leak, "app.yaml": APP})
    url = git_server.file_url(git_repo)
    secret = [
        "--substitute-from",
        "secret/creds-vars",
        "--substitute",
        "REGION=eu",
        "--substitute",
        "ENV=a",
    ]

    refused = gitopsd("sync", url, *scope(namespace), *secret)
    strict = gitopsd(
        "sync", url, *scope(namespace), "--substitute", "PASSWORD=x", "--strict-substitute"
    )

    assert refused.code == INVALID, refused.text
    assert "leak.yaml:1: ConfigMap/" in refused.err
    assert "variable PASSWORD comes from a Secret" in refused.err
    canary.assert_absent(refused.text, "the refusal")
    assert strict.code == INVALID, strict.text
    assert "app.yaml:1: ConfigMap/" in strict.err and "has no value" in strict.err
    core: Any = client.CoreV1Api(admin_api)
    names = {c.metadata.name for c in core.list_namespaced_config_map(namespace).items}
    assert not names & {"leak", "app-a"}


def test_a_gitsyncs_postbuild_reads_its_configmap_again_at_each_reconcile(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    gitsync_crd: str,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    canary: Canary,
) -> None:
    """A changed value is applied without a new commit; the Secret's stays masked."""
    variables(admin_api, namespace, canary)
    git_repo.commit({"app.yaml": APP, "creds.yaml": CREDS})
    post_build = {
        "substitute": {"ENV": "staging"},
        "substituteFrom": [
            {"kind": "ConfigMap", "name": "vars"},
            {"kind": "Secret", "name": "creds-vars"},
            {"kind": "ConfigMap", "name": "absent", "optional": True},
        ],
    }
    spec = {"repository": {"url": git_server.file_url(git_repo)}, "interval": "1h"}
    operator(daemons, namespace)
    create(admin_api, namespace, "web", {**spec, "postBuild": post_build})
    wait_ready(admin_api, namespace, "web", "True", "Succeeded")
    assert config_map_value(admin_api, namespace, "app-staging", "region") == "eu-west-1"

    core: Any = client.CoreV1Api(admin_api)
    core.patch_namespaced_config_map("vars", namespace, {"data": {"REGION": "us-east-2"}})
    assert gitopsd("reconcile", "web", "--gitsync", "-n", namespace).code == 0

    wait_for(
        lambda: config_map_value(admin_api, namespace, "app-staging", "region") == "us-east-2",
        "the new value applied, the revision the same",
    )
    canary.assert_not_in_cluster(admin_api, namespace)


def test_validate_with_the_cluster_reads_the_variables_of_the_namespace_it_is_given(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    canary: Canary,
) -> None:
    """As sync expands them: --substitute-from reads --namespace's, not `default`'s."""
    variables(admin_api, namespace, canary)
    git_repo.commit({"app.yaml": APP, "creds.yaml": CREDS})
    url = git_server.file_url(git_repo)
    given = ["--allow-insecure-source", "--strict-substitute", "-n", namespace]
    given += ["--substitute-from", "configmap/vars", "--substitute-from", "secret/creds-vars"]
    kubeconfig = ["--kubeconfig", str(gitopsd.plane.kubeconfig)]

    checked = gitopsd("validate", url, *given, "--cluster", *kubeconfig)
    offline = gitopsd("validate", url, *given)

    assert (checked.code, checked.out) == (0, "2 objects valid\n"), checked.text
    assert offline.code == INVALID
    where = f"postBuild.substituteFrom: ConfigMap {namespace}/vars"
    assert f"{where}: reading it needs the cluster (--cluster)" in offline.err
    canary.assert_absent(checked.text + offline.text, "validate's output")
