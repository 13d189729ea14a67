"""`gitopsd build` through the real CLI prints what `sync` then sends: every object it
prints is found in the cluster after the sync, as printed (the server only adds defaults),
and no other object carries the ApplySet's label. Offline it needs no cluster for the
built-in kinds and the CRDs of the revision, and names a kind it cannot resolve without
one; kustomizations and charts are rendered; Secrets' values are masked unless asked."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.harness import contract
from tests.harness.cli import Gitopsd, example_files
from tests.harness.commands import INVALID, scope
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import unique_name, wait_established
from tests.harness.waiting import wait_for

PART_OF = "applyset.kubernetes.io/part-of"
HOOK_OF = "gitopsd.io/hook-of"
NOWHERE = """\
apiVersion: v1
kind: Config
clusters: [{name: nowhere, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: nowhere, user: u}}]
current-context: c
"""
KUSTOMIZATION = """\
namePrefix: shop-
labels:
  - pairs: {app.kubernetes.io/part-of: shop}
resources: [deployment.yaml]
configMapGenerator:
  - name: settings
    literals: [GREETING=hello]
"""
SECRET = """\
apiVersion: v1
kind: Secret
metadata: {name: db}
stringData: {password: CANARY-build-string-data}
data: {token: Q0FOQVJZLWJ1aWxkLWRhdGE=}
"""


def crd(group: str, scope_: str = "Namespaced") -> str:
    return f"""\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: gadgets.{group}}}
spec:
  group: {group}
  names: {{kind: Gadget, plural: gadgets}}
  scope: {scope_}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"""


def gadget(group: str) -> str:
    return f"apiVersion: {group}/v1\nkind: Gadget\nmetadata: {{name: g}}\nspec: {{size: 2}}\n"


def built(gitopsd: Gitopsd, *arguments: str) -> list[dict[str, Any]]:
    run = gitopsd("build", *arguments, "-o", "json")
    assert run.code == 0, run.text
    objects: list[dict[str, Any]] = run.document("BuildResult")["objects"]
    return objects


def nowhere(tmp_path: Path) -> list[str]:
    """A kubeconfig whose cluster does not exist: any request would fail the command."""
    kubeconfig = tmp_path / "nowhere.kubeconfig"
    kubeconfig.write_text(NOWHERE)
    return ["--kubeconfig", str(kubeconfig)]


def live(gitopsd: Gitopsd, body: dict[str, Any]) -> dict[str, Any]:
    """The object `body` names, as the cluster holds it."""
    metadata = body["metadata"]
    where = ["-n", metadata["namespace"]] if "namespace" in metadata else []
    group = body["apiVersion"].rpartition("/")[0]
    kind = f"{body['kind'].lower()}.{group}" if group else body["kind"].lower()
    answer = gitopsd.kubectl("get", f"{kind}/{metadata['name']}", *where, "-o", "json")
    found: dict[str, Any] = json.loads(answer)
    return found


def contained(part: Any, whole: Any, path: str = "") -> list[str]:
    """Where `part` is not found in `whole`: every key it has, with the same value; a list
    item by item (the server adds defaults within items, never items)."""
    if isinstance(part, dict):
        if not isinstance(whole, dict):
            return [path]
        return [w for k, v in part.items() for w in contained(v, whole.get(k), f"{path}.{k}")]
    if isinstance(part, list):
        if not isinstance(whole, list) or len(part) != len(whole):
            return [path]
        return [
            w
            for i, (p, h) in enumerate(zip(part, whole, strict=True))
            for w in contained(p, h, f"{path}[{i}]")
        ]
    return [] if part == whole else [f"{path}: {part!r} != {whole!r}"]


def labelled(gitopsd: Gitopsd, namespace: str, applyset_id: str, kinds: set[str]) -> set[str]:
    """The objects of `kinds` in `namespace` that carry the ApplySet's member label, each as
    kind/name."""
    listed = gitopsd.kubectl(
        "get",
        ",".join(sorted(kinds)),
        "-n",
        namespace,
        "-l",
        f"{PART_OF}={applyset_id}",
        "-o",
        "name",
    )
    found = (entry.partition("/") for entry in listed.split())  # deployment.apps/web
    return {f"{kind.partition('.')[0]}/{name}" for kind, _, name in found}


def assert_sync_sends_what_build_printed(
    gitopsd: Gitopsd, url: str, namespace: str, objects: list[dict[str, Any]], *flags: str
) -> None:
    """A sync creates each object as build printed it (the server adds only defaults), and
    no other object is a member of the ApplySet, whose parent is the one the label names."""
    synced = gitopsd("sync", url, *scope(namespace), *flags)
    assert synced.code == 0, synced.text
    assert f"{len(objects)} created" in synced.out
    for body in objects:
        assert contained(body, live(gitopsd, body)) == [], body["metadata"]["name"]
    [applyset_id] = {body["metadata"]["labels"][PART_OF] for body in objects}
    parent = live(
        gitopsd,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "gitopsd-test", "namespace": namespace},
        },
    )
    assert parent["metadata"]["labels"]["applyset.kubernetes.io/id"] == applyset_id
    kinds = {body["kind"].lower() for body in objects}
    shown = {f"{body['kind'].lower()}/{body['metadata']['name']}" for body in objects}
    assert labelled(gitopsd, namespace, applyset_id, kinds) == shown


def test_build_prints_what_sync_then_applies(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(example_files("app"))
    url = git_server.file_url(git_repo)

    objects = built(gitopsd, url, *scope(namespace))

    assert [o["kind"] for o in objects] == ["ConfigMap", "Service", "Deployment"]
    assert {o["metadata"]["namespace"] for o in objects} == {namespace}
    assert_sync_sends_what_build_printed(gitopsd, url, namespace, objects)


def test_build_renders_a_kustomization_as_sync_applies_it(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    deployment = example_files("app")["deployment.yaml"].replace(
        "name: web-config", "name: settings"
    )
    git_repo.commit({"app/kustomization.yaml": KUSTOMIZATION, "app/deployment.yaml": deployment})
    url = git_server.file_url(git_repo)

    objects = built(gitopsd, url, "--path", "app", *scope(namespace))

    generated, web = objects
    assert generated["metadata"]["name"].startswith("shop-settings-")  # the content's hash
    assert web["metadata"]["name"] == "shop-web"
    assert web["metadata"]["labels"]["app.kubernetes.io/part-of"] == "shop"
    env_from = web["spec"]["template"]["spec"]["containers"][0]["envFrom"]
    assert env_from == [{"configMapRef": {"name": generated["metadata"]["name"]}}]
    assert_sync_sends_what_build_printed(gitopsd, url, namespace, objects, "--path", "app")


def test_build_offline_resolves_built_in_kinds_and_the_revisions_crds(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, tmp_path: Path
) -> None:
    group = f"{unique_name('build')}.example.com"  # installed nowhere
    git_repo.commit(
        {
            "app/configmap.yaml": example_files("app")["configmap.yaml"],
            "app/role.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
            "metadata: {name: reader}\nrules: []\n",
            "app/crd.yaml": crd(group),
            "app/gadget.yaml": gadget(group),
        }
    )
    url = git_server.file_url(git_repo)

    objects = built(gitopsd, url, "--allow-insecure-source", "-n", "offline", *nowhere(tmp_path))

    placed = {(o["kind"], o["metadata"].get("namespace")) for o in objects}
    assert [o["kind"] for o in objects][:1] == ["CustomResourceDefinition"]
    assert placed == {
        ("CustomResourceDefinition", None),
        ("ClusterRole", None),
        ("ConfigMap", "offline"),
        ("Gadget", "offline"),  # its scope from the revision's CRD
    }


def test_a_kind_known_only_to_the_cluster_needs_cluster(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, tmp_path: Path
) -> None:
    group = f"{unique_name('build')}.example.com"
    definition = yaml.safe_load(crd(group, "Cluster"))
    extensions: Any = client.ApiextensionsV1Api(admin_api)
    extensions.create_custom_resource_definition(definition)
    wait_established(admin_api, definition["metadata"]["name"])
    wait_for(lambda: group in json.dumps(gitopsd.plane.request("GET", "/apis")), f"{group} served")
    git_repo.commit({"gadget.yaml": gadget(group)})
    url = git_server.file_url(git_repo)

    offline = gitopsd("build", url, "--allow-insecure-source", *nowhere(tmp_path))
    online = built(gitopsd, url, "--allow-insecure-source", "--cluster", "-n", "x")

    assert (offline.code, offline.out) == (INVALID, "")
    assert f"gadget.yaml:1: Gadget g: {group}/v1 Gadget is no kind of Kubernetes" in offline.err
    assert "pass --cluster" in offline.err
    [found] = online
    assert "namespace" not in found["metadata"]  # the cluster says: cluster-scoped


def test_build_renders_a_chart_offline_and_for_the_cluster_with_cluster(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    git_repo.commit(example_files("chart"))
    url = git_server.file_url(git_repo)
    chart = ["--path", "shop", "--helm-release", "web", *scope(namespace)]

    offline = built(gitopsd, url, *chart, *nowhere(tmp_path))
    online = built(gitopsd, url, *chart, "--cluster")

    kinds = [o["kind"] for o in offline]
    assert (kinds[0], kinds[-1], len(kinds)) == ("CustomResourceDefinition", "Job", 7)
    [promotion] = [o for o in offline if o["kind"] == "Promotion"]
    assert promotion["metadata"]["namespace"] == namespace  # scoped by the chart's CRD
    migrate = offline[-1]
    assert migrate["metadata"]["labels"][HOOK_OF] == offline[0]["metadata"]["labels"][PART_OF]
    assert PART_OF not in migrate["metadata"]["labels"]
    version = client.VersionApi(admin_api).get_code().git_version
    assert config_map(offline, "web-shop")["data"]["greeting"] == "hello"
    assert config_map(offline, "web-shop")["data"]["kubeVersion"] != version  # helm's default
    assert config_map(online, "web-shop")["data"]["kubeVersion"] == version  # the cluster's


def config_map(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == name]
    return found


def test_secret_values_are_masked_unless_asked_and_sync_sends_them(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit({"secret.yaml": SECRET})
    url = git_server.file_url(git_repo)

    stream = gitopsd("build", url, *scope(namespace))
    as_yaml = gitopsd("build", url, *scope(namespace), "-o", "yaml")
    shown = built(gitopsd, url, *scope(namespace), "--show-secrets")

    for run in (stream, as_yaml):
        assert run.code == 0 and "CANARY" not in run.text and "Q0FOQVJZ" not in run.text
    [secret] = contract.parsed(as_yaml.out, "BuildResult", form="yaml")["objects"]
    assert (secret["stringData"], secret["data"]) == ({"password": "***"}, {"token": "***"})
    assert list(yaml.safe_load_all(stream.out)) == [secret]
    assert shown[0]["stringData"] == {"password": "CANARY-build-string-data"}
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    core: Any = client.CoreV1Api(admin_api)
    stored = core.read_namespaced_secret("db", namespace).data
    assert base64.b64decode(stored["password"]) == b"CANARY-build-string-data"
