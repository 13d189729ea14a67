"""One daemon syncing into three clusters: its own and two more the harness starts (an API
server and etcd each), declared in its configuration or brought by a GitSync's kubeconfig
Secret. Where each write went is read from each API server's audit log."""

from __future__ import annotations

import base64
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.harness import audit
from tests.harness.canary import Canary
from tests.harness.cli import Gitopsd, Run
from tests.harness.commands import INVALID
from tests.harness.controlplane import (
    AUDITED_USER,
    PEER_USERS,
    Binaries,
    ControlPlane,
    running_control_plane,
    write_kubeconfig,
)
from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import condition, create, get, wait_ready
from tests.harness.kube import api_client
from tests.harness.waiting import wait_for

REMOTES = ("east", "west")
EXAMPLE = Path(__file__).parents[2] / "examples" / "clusters"
"""A base and an overlay per cluster, and the daemon configuration that syncs them."""
REPOSITORY = {
    str(path.relative_to(EXAMPLE)): path.read_text()
    for path in EXAMPLE.rglob("*.yaml")
    if path.name != "gitopsd.yaml"
}

SECOND = {"base/app.yaml": REPOSITORY["base/app.yaml"].replace("revision: one", "revision: two")}
"""The next commit: the base's ConfigMap at revision two."""


@pytest.fixture(scope="module")
def remotes(
    binaries: Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, ControlPlane]]:
    """Two more clusters, east and west: an API server and etcd each, no controllers."""
    with (
        running_control_plane(binaries, tmp_path_factory.mktemp("east"), False) as east,
        running_control_plane(binaries, tmp_path_factory.mktemp("west"), False) as west,
    ):
        yield {"east": east, "west": west}


@pytest.fixture
def apis(remotes: dict[str, ControlPlane], namespace: str) -> Iterator[dict[str, Any]]:
    """An admin client of each remote cluster, the test's namespace created in each."""
    found = {name: api_client(plane) for name, plane in remotes.items()}
    for api in found.values():
        core: Any = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": namespace}})
    yield found
    for api in found.values():
        api.close()


def app_of(api: Any, namespace: str) -> dict[str, Any] | None:
    """ConfigMap app's data and resourceVersion, None while it does not exist."""
    core: Any = client.CoreV1Api(api)
    found = core.list_namespaced_config_map(namespace, field_selector="metadata.name=app").items
    if not found:
        return None
    return {**(found[0].data or {}), "version": found[0].metadata.resource_version}


def config_map(api: Any, namespace: str, name: str) -> bool:
    core: Any = client.CoreV1Api(api)
    return bool(
        core.list_namespaced_config_map(namespace, field_selector=f"metadata.name={name}").items
    )


def wait_app(api: Any, namespace: str, **data: str) -> dict[str, Any]:
    def arrived() -> dict[str, Any] | None:
        app = app_of(api, namespace)
        return app if app and all(app.get(k) == v for k, v in data.items()) else None

    return wait_for(arrived, f"ConfigMap app with {data}", 60)


def declared(remotes: dict[str, ControlPlane], **namespaces: list[str]) -> list[dict[str, Any]]:
    """The remote clusters as the configuration declares them, with the audited user's
    kubeconfig (its every request logged)."""
    return [
        {
            "name": name,
            "kubeconfig": str(plane.audited_kubeconfig),
            "namespaces": namespaces.get(name, []),
        }
        for name, plane in remotes.items()
    ]


def three_clusters(daemons: Daemons, remotes: dict[str, ControlPlane], url: str) -> DaemonProcess:
    """A daemon syncing overlays/NAME into cluster NAME, each with its own substitution."""
    sources = [
        daemons.source(
            url,
            name=name,
            paths=[f"overlays/{name}"],
            postBuild={"substitute": {"CLUSTER": name}},
            prune=True,
            **({"cluster": name} if name in REMOTES else {}),
        )
        for name in ("home", *REMOTES)
    ]
    return daemons.start_with(sources, "daemon", clusters=declared(remotes)).start()


def written(plane: ControlPlane, namespace: str, since: float) -> set[tuple[str, str]]:
    """(resource, name) of each write the daemon's user sent `plane` in `namespace`."""
    return {
        (w.resource, w.name)
        for w in audit.writes(plane, AUDITED_USER, since)
        if w.namespace == namespace and w.resource != "events" and not w.dry_run
    }


def contexts(path: Path, planes: dict[str, ControlPlane]) -> Path:
    """One kubeconfig with a context per cluster, named as it (its admin), home current."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "current-context": "home"}
    for part in ("clusters", "users", "contexts"):
        merged[part] = []
    for name, plane in planes.items():
        own = yaml.safe_load(plane.kubeconfig.read_text())
        merged["clusters"].append({"name": name, "cluster": own["clusters"][0]["cluster"]})
        merged["users"].append({"name": name, "user": own["users"][0]["user"]})
        merged["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
    path.write_text(yaml.safe_dump(merged))
    path.chmod(0o600)
    return path


def clusters_listed(run: Run) -> dict[str, str]:
    """The cluster `gitopsd get -o json` says each source syncs into."""
    items = run.document("SourceList")["items"]
    return {item["source"]["name"]: item["cluster"] for item in items}


def test_one_daemon_syncs_a_base_into_three_clusters_and_heals_one_alone(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    apis: dict[str, Any],
    control_plane: ControlPlane,
    remotes: dict[str, ControlPlane],
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    """The hidden-set case: a base and an overlay per cluster, one substitution each; what
    leaves east's overlay is pruned in east."""
    began = time.time()
    git_repo.commit(REPOSITORY)
    daemon = three_clusters(daemons, remotes, git_server.file_url(git_repo))

    home = wait_app(admin_api, namespace, cluster="home", tier="standard")
    east = wait_app(apis["east"], namespace, cluster="east")
    west = wait_app(apis["west"], namespace, cluster="west")

    wait_for(lambda: config_map(apis["east"], namespace, "cache"), "east's own ConfigMap")
    for name, plane in remotes.items():  # each cluster got its own source's writes, only
        own = {("configmaps", "app"), ("configmaps", f"gitopsd-{name}")}
        assert written(plane, namespace, began) == own | (
            {("configmaps", "cache")} if name == "east" else set()
        ), name
    core: Any = client.CoreV1Api(apis["east"])
    core.patch_namespaced_config_map("app", namespace, {"data": {"cluster": "by-hand"}})
    healed = wait_app(apis["east"], namespace, cluster="east", revision="one")
    assert healed["version"] != east["version"]
    assert app_of(admin_api, namespace) == home  # the others untouched
    assert app_of(apis["west"], namespace) == west
    for name in ("home", *REMOTES):
        cluster = "in-cluster" if name == "home" else name
        assert daemon.value("gitopsd_source_cluster_info", source=name, cluster=cluster) == 1
    assert daemon.value("gitopsd_cluster_reachable", cluster="east") == 1
    assert daemon.value("gitopsd_api_requests_total", cluster="east", verb="PATCH") > 0

    where = {"home": "in-cluster", "east": "east", "west": "west"}
    assert clusters_listed(gitopsd("get", "--daemon", daemon.control_url, "-o", "json")) == where
    kept = ["--in-cluster", namespace]  # the status ConfigMaps, at home
    wait_for(lambda: clusters_listed(gitopsd("get", *kept, "-o", "json")) == where, "statuses")
    refused = gitopsd("tree", "east", *kept)
    assert refused.code == INVALID and "syncs into cluster east" in refused.text
    assert "--target-context" in refused.text
    kubeconfig = contexts(tmp_path / "kubeconfig", {"home": control_plane, **remotes})
    at = ["--kubeconfig", str(kubeconfig), "--target-context", "east", "-o", "json"]
    tree = gitopsd("tree", "east", *kept, *at).document("ObjectTree")
    assert {entry["object"]["name"] for entry in tree["objects"]} == {"app", "cache"}  # east's

    unlisted = "resources: [../../base]\ncommonLabels: {overlay: east}\n"
    git_repo.commit(
        {"overlays/east/kustomization.yaml": unlisted, "overlays/east/cache.yaml": None}
    )
    wait_for(lambda: not config_map(apis["east"], namespace, "cache"), "cache pruned in east")
    assert app_of(apis["west"], namespace) == west


def test_a_token_rotated_in_a_declared_kubeconfig_is_taken_without_a_restart(
    daemons: Daemons,
    apis: dict[str, Any],
    remotes: dict[str, ControlPlane],
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    """The kubelet swaps a mounted Secret's file for one with a new token (a day's token
    renewed): east's next writes are the new token's user's, by the same daemon process."""
    east, renewed = remotes["east"], PEER_USERS[1]  # an admin of east's, audited apart
    kubeconfig = tmp_path / "east"
    shutil.copyfile(east.audited_kubeconfig, kubeconfig)
    git_repo.commit(REPOSITORY)
    source = daemons.source(
        git_server.file_url(git_repo),
        name="east",
        paths=["overlays/east"],
        postBuild={"substitute": {"CLUSTER": "east"}},
        cluster="east",
    )
    declared = [{"name": "east", "kubeconfig": str(kubeconfig), "namespaces": []}]
    daemon = daemons.start_with([source], "daemon", clusters=declared).start()
    wait_app(apis["east"], namespace, cluster="east", revision="one")
    pid = daemon.process.pid if daemon.process else None

    swapped = tmp_path / "east.new"
    write_kubeconfig(swapped, east.url, east.ca_file, renewed, east.peer_tokens[renewed])
    swapped.replace(kubeconfig)
    since = time.time()
    git_repo.commit(SECOND)

    wait_app(apis["east"], namespace, cluster="east", revision="two")
    applied = {
        (w.resource, w.name)
        for w in audit.writes(east, renewed, since)
        if w.namespace == namespace and not w.dry_run
    }
    assert ("configmaps", "app") in applied
    assert daemon.process is not None and daemon.process.pid == pid  # no restart
    assert "changed: its token taken" in daemon.logs()
    assert east.peer_tokens[renewed] not in daemon.logs()


@pytest.mark.parametrize("outage", ["stopped", "hung"])
def test_a_cluster_that_is_down_holds_only_its_own_source(
    outage: str,
    daemons: Daemons,
    admin_api: Any,
    apis: dict[str, Any],
    remotes: dict[str, ControlPlane],
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """West's API server stops (or hangs: SIGSTOP, its connections open and silent): home
    and east sync the next commit and heal, the daemon stays ready; west catches up once it
    is back."""
    git_repo.commit(REPOSITORY)
    daemon = three_clusters(daemons, remotes, git_server.file_url(git_repo))
    for name, api in (("home", admin_api), *((n, apis[n]) for n in REMOTES)):
        wait_app(api, namespace, cluster=name)

    west = remotes["west"]
    with west.apiserver_stopped() if outage == "stopped" else west.apiserver_paused():
        if outage == "stopped":  # a hung server is unreachable once a request times out
            daemon.wait_value(
                "gitopsd_cluster_reachable", lambda v: v == 0, "west down", cluster="west"
            )
        git_repo.commit(SECOND)
        wait_app(admin_api, namespace, cluster="home", revision="two")
        wait_app(apis["east"], namespace, cluster="east", revision="two")
        core: Any = client.CoreV1Api(apis["east"])
        core.patch_namespaced_config_map("app", namespace, {"data": {"cluster": "by-hand"}})
        wait_app(apis["east"], namespace, cluster="east")
        assert daemon.get("/readyz")[0] == 200

    wait_app(apis["west"], namespace, cluster="west", revision="two")
    daemon.wait_value("gitopsd_cluster_reachable", lambda v: v == 1, "west up", cluster="west")


def operator_for(
    daemons: Daemons, remotes: dict[str, ControlPlane], namespace: str, **git_syncs: Any
) -> DaemonProcess:
    """A daemon serving the test namespace's GitSyncs, which may target east."""
    settings = {"enabled": True, "namespaces": [namespace], "allowInsecure": True, **git_syncs}
    clusters = declared(remotes, east=[namespace])
    return daemons.start_with([], "operator", gitSyncs=settings, clusters=clusters).start()


def deployer(api: Any, namespace: str, rules: list[dict[str, Any]]) -> None:
    """Binds ServiceAccount deployer of `namespace` (as a user name: it need not exist in
    that cluster) to `rules` in `namespace`."""
    rbac: Any = client.RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "deployer"}, "rules": rules})
    subject = {"kind": "ServiceAccount", "name": "deployer", "namespace": namespace}
    role = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "deployer"}
    binding = {"metadata": {"name": "deployer"}, "roleRef": role, "subjects": [subject]}
    rbac.create_namespaced_role_binding(namespace, binding)


CONFIG_MAPS = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]
SECRETS = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]


def test_a_gitsync_syncs_into_a_declared_cluster_as_its_service_account_there(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    apis: dict[str, Any],
    control_plane: ControlPlane,
    remotes: dict[str, ControlPlane],
    gitsync_crd: str,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    began = time.time()
    git_repo.commit(REPOSITORY)
    core: Any = client.CoreV1Api(admin_api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "deployer"}})
    deployer(apis["east"], namespace, CONFIG_MAPS)
    operator_for(daemons, remotes, namespace)
    url = git_server.file_url(git_repo)
    spec = {
        "repository": {"url": url},
        "paths": ["overlays/east"],
        "serviceAccountName": "deployer",
        "postBuild": {"substitute": {"CLUSTER": "east-gitsync"}},
    }

    create(admin_api, namespace, "east", {**spec, "cluster": "east"})
    create(admin_api, namespace, "west", {**spec, "cluster": "west"})

    wait_ready(admin_api, namespace, "east", "True", "Succeeded", deadline=90)
    wait_app(apis["east"], namespace, cluster="east-gitsync")
    assert app_of(admin_api, namespace) is None  # not at home
    writes = [
        w
        for w in audit.writes(remotes["east"], AUDITED_USER, began)
        if w.namespace == namespace and w.resource == "configmaps" and not w.dry_run
    ]
    assert writes and {w.acting_as for w in writes} == {
        f"system:serviceaccount:{namespace}:deployer"
    }
    refused = refusal(admin_api, namespace, "west", "is not a cluster the daemon's configuration")
    assert "cluster: 'west'" in refused and "(allowed: east)" in refused
    assert app_of(apis["west"], namespace) is None

    listed = gitopsd("get", "--gitsyncs", "-n", namespace, "-o", "json")
    assert clusters_listed(listed) == {"east": "east", "west": "west"}  # as named
    elsewhere = gitopsd("tree", "east", "--gitsync", "-n", namespace)
    assert elsewhere.code == INVALID
    assert f"{namespace}/east syncs into cluster east" in elsewhere.text
    kubeconfig = contexts(tmp_path / "kubeconfig", {"home": control_plane, **remotes})
    at = ["--kubeconfig", str(kubeconfig), "--target-context", "east", "-o", "json"]
    tree = gitopsd("tree", "east", "--gitsync", "-n", namespace, *at).document("ObjectTree")
    assert {entry["object"]["name"] for entry in tree["objects"]} == {"app", "cache"}


def refusal(admin_api: Any, namespace: str, name: str, says: str) -> str:
    """The Ready message of GitSync `name` once it says `says`."""

    def said() -> str | None:
        message = str(condition(get(admin_api, namespace, name), "Ready").get("message", ""))
        return message if says in message else None

    return wait_for(said, f"GitSync {name} refused: {says}")


def kubeconfig_secret(plane: ControlPlane, token: str, user: dict[str, Any] | None = None) -> str:
    """A kubeconfig of `plane` with its credentials inline, as a Secret's value (base64)."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "remote",
        "contexts": [{"name": "remote", "context": {"cluster": "remote", "user": "remote"}}],
        "clusters": [
            {
                "name": "remote",
                "cluster": {
                    "server": plane.url,
                    "certificate-authority-data": base64.b64encode(
                        plane.ca_file.read_bytes()
                    ).decode(),
                },
            }
        ],
        "users": [{"name": "remote", "user": user or {"token": token}}],
    }
    return base64.b64encode(yaml.safe_dump(document).encode()).decode()


def test_a_gitsyncs_own_kubeconfig_syncs_into_its_cluster_and_runs_nothing(
    daemons: Daemons,
    admin_api: Any,
    apis: dict[str, Any],
    remotes: dict[str, ControlPlane],
    gitsync_crd: str,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    canary: Canary,
    tmp_path: Path,
) -> None:
    """Its token reaches west alone: not its status, the daemon's logs or metrics; a
    kubeconfig that would run a program is refused and runs none."""
    began = time.time()
    peer, west = PEER_USERS[0], remotes["west"]  # an admin of west's, audited
    git_repo.commit(REPOSITORY)
    core: Any = client.CoreV1Api(admin_api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "deployer"}})
    deployer(admin_api, namespace, SECRETS)
    ran = tmp_path / "ran"
    exec_user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "touch",
            "args": [str(ran)],
        }
    }
    for name, value in (
        ("west", kubeconfig_secret(west, west.peer_tokens[peer])),
        ("runs", kubeconfig_secret(west, "", exec_user)),
    ):
        secret = {"metadata": {"name": name}, "data": {"value": value}}
        core.create_namespaced_secret(namespace, secret)
    daemon = operator_for(daemons, remotes, namespace, kubeConfigNamespaces=[namespace])
    spec = {
        "repository": {"url": git_server.file_url(git_repo)},
        "paths": ["overlays/west"],
        "serviceAccountName": "deployer",
        "postBuild": {"substitute": {"CLUSTER": "west-own"}},
    }

    create(admin_api, namespace, "west", {**spec, "kubeConfig": {"secretRef": {"name": "west"}}})
    create(admin_api, namespace, "runs", {**spec, "kubeConfig": {"secretRef": {"name": "runs"}}})

    wait_ready(admin_api, namespace, "west", "True", "Succeeded", deadline=90)
    wait_app(apis["west"], namespace, cluster="west-own")
    assert {w.resource for w in audit.writes(west, peer, began) if w.namespace == namespace} >= {
        "configmaps"
    }
    refusal(admin_api, namespace, "runs", "its user holds exec")
    assert not ran.exists()
    token = west.peer_tokens[peer]
    seen = str(get(admin_api, namespace, "west")) + daemon.logs() + daemon.metrics()
    assert token not in seen
    assert (
        daemon.value(
            "gitopsd_source_cluster_info", source=f"{namespace}/west", cluster="secret/west"
        )
        == 1
    )


def test_a_gitsyncs_kubeconfig_cannot_reach_the_daemons_neighbourhood(
    daemons: Daemons,
    admin_api: Any,
    remotes: dict[str, ControlPlane],
    gitsync_crd: str,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """Where GitSyncs are fenced (no allowInsecure), a kubeconfig whose server is on
    loopback is refused before any request is sent there."""
    began = time.time()
    west = remotes["west"]
    peer = PEER_USERS[1]
    core: Any = client.CoreV1Api(admin_api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "deployer"}})
    deployer(admin_api, namespace, SECRETS)
    value = kubeconfig_secret(west, west.peer_tokens[peer])
    core.create_namespaced_secret(
        namespace, {"metadata": {"name": "west"}, "data": {"value": value}}
    )
    settings = {"enabled": True, "namespaces": [namespace], "kubeConfigNamespaces": ["*"]}
    daemons.start_with([], "operator", gitSyncs=settings).start()
    spec = {
        "repository": {"url": "https://git.example.invalid/app.git"},
        "serviceAccountName": "deployer",
        "kubeConfig": {"secretRef": {"name": "west"}},
    }

    create(admin_api, namespace, "west", spec)

    refusal(admin_api, namespace, "west", "resolves to loopback, link-local or the cluster's")
    assert audit.requests(west, peer, began) == []
