"""What the CLI says when it cannot talk to the cluster, and the kubeconfig's context
namespace as the default namespace: each through the real CLI, against the real API
server (or a port where none listens, or an HTTP server that is no API server)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.harness.cli import Gitopsd, Run
from tests.harness.commands import CLUSTER_FAILED, INVALID
from tests.harness.controlplane import ControlPlane, write_kubeconfig
from tests.harness.faultproxy import Fault, FaultProxy
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.loopback import Loopback, serving

MANIFEST = {"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {k: v}\n"}
GITSYNCS = "/apis/gitopsd.io/"
NO_SUCH_GROUP = "/apis/absent.gitopsd.io/"
"""A group no CRD defines: what the API server answers there, it answers for GitSyncs
before their CRD is installed."""
NOT_FOUND_PAGE = b"404 page not found\n"


def with_namespace(path: Path, namespace: str) -> Path:
    """The kubeconfig at `path` with a namespace in its context, as `kubectl config
    set-context --current --namespace` writes it."""
    config = json.loads(path.read_text())
    config["contexts"][0]["context"]["namespace"] = namespace
    path.write_text(json.dumps(config))
    return path


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def diff_as_alice(
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    tmp_path: Path,
    server: str,
    token: str,
) -> Run:
    """`gitopsd diff` with a kubeconfig whose user alice sends `token` to `server`."""
    git_repo.commit(MANIFEST)
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, server, gitopsd.plane.ca_file, "alice", token)
    url = git_server.file_url(git_repo)
    return gitopsd("diff", url, "--allow-insecure-source", "--kubeconfig", str(kubeconfig))


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gitopsd: error: "), text
    return lines[0]


def test_objects_without_a_namespace_go_to_the_context_namespace(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    git_repo.commit(MANIFEST)
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(
        kubeconfig, control_plane.url, control_plane.ca_file, "admin", control_plane.admin_token
    )
    with_namespace(kubeconfig, namespace)
    url = git_server.file_url(git_repo)
    flags = [
        "--allow-insecure-source",
        "--inventory-namespace",
        namespace,
        "--kubeconfig",
        str(kubeconfig),
    ]

    run = gitopsd("sync", url, *flags)

    assert run.code == 0, run.text
    assert f"created    ConfigMap/{namespace}/cm" in run.out
    core: Any = client.CoreV1Api(admin_api)
    assert core.read_namespaced_config_map("cm", namespace).data == {"k": "v"}
    # --namespace still wins over the context
    again = gitopsd("diff", url, *flags, "--namespace", "default", "-o", "json")
    assert again.code == 1, again.text
    [drift] = again.document("DiffResult")["drift"]
    assert drift["object"] == {
        "group": "",
        "version": "v1",
        "kind": "ConfigMap",
        "namespace": "default",
        "name": "cm",
    }


def test_no_kubeconfig_says_where_it_looked(
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    git_repo.commit(MANIFEST)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    url = git_server.file_url(git_repo)

    run = gitopsd("diff", url, "--allow-insecure-source", "--kubeconfig", "")

    assert run.code == INVALID
    assert one_line(run.err) == (
        f"gitopsd: error: no kubeconfig: $KUBECONFIG is unset, {tmp_path}/.kube/config does "
        "not exist and this is not a pod with a service account; pass --kubeconfig FILE or "
        "set KUBECONFIG"
    )


def test_an_unknown_context_is_named_with_those_there_are(
    gitopsd: Gitopsd, control_plane: ControlPlane, git_server: GitServer, git_repo: GitRepo
) -> None:
    git_repo.commit(MANIFEST)
    url = git_server.file_url(git_repo)

    run = gitopsd("diff", url, "--allow-insecure-source", "--context", "prod")

    assert run.code == INVALID
    assert one_line(run.err) == (
        f"gitopsd: error: kubeconfig {control_plane.kubeconfig} has no context 'prod' "
        "(it has: test); pass --context NAME"
    )


def test_an_unreachable_server_is_named_with_the_context_and_user(
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    tmp_path: Path,
) -> None:
    server = f"https://127.0.0.1:{closed_port()}"
    run = diff_as_alice(gitopsd, git_server, git_repo, tmp_path, server, "t0ken")

    assert run.code == CLUSTER_FAILED
    line = one_line(run.err)
    assert (
        f": cannot reach the API server at {server} (context test, user alice): Connection refused"
        in line
    )
    assert "HTTPSConnectionPool" not in line and "t0ken" not in line


def test_a_bad_token_is_called_so_with_what_to_do(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    tmp_path: Path,
) -> None:
    run = diff_as_alice(gitopsd, git_server, git_repo, tmp_path, control_plane.url, "not-a-token")

    assert run.code == CLUSTER_FAILED
    line = one_line(run.err)
    assert (
        f"the API server at {control_plane.url} (context test, user alice) refused the "
        "credentials (401 Unauthorized): the token or client certificate is wrong or has "
        "expired; log in again or fix the kubeconfig"
    ) in line
    assert "not-a-token" not in line


def test_a_kubeconfig_that_is_no_yaml_is_named_without_quoting_its_token(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, tmp_path: Path
) -> None:
    git_repo.commit(MANIFEST)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text('users:\n- name: alice\n  user:\n    token: "sha256~CANARYTOKEN\n')

    run = gitopsd("diff", git_server.file_url(git_repo), "--kubeconfig", str(kubeconfig))

    assert run.code == INVALID
    line = one_line(run.err)
    assert line.startswith(f"gitopsd: error: kubeconfig {kubeconfig}: line ")
    assert "CANARYTOKEN" not in run.text


def test_gitsyncs_without_their_crd_say_the_crd_is_not_installed(
    gitopsd: Gitopsd, proxy: FaultProxy, namespace: str, tmp_path: Path
) -> None:
    """The session's API server may serve GitSyncs already (another test installed the
    CRD), so the proxy passes their requests on to a group that no CRD defines."""
    moved = proxy.inject(
        Fault(
            lambda request: request.path.startswith(GITSYNCS),
            moved=lambda path: path.replace(GITSYNCS, NO_SUCH_GROUP, 1),
        )
    )
    kubeconfig = proxy.kubeconfig(tmp_path / "kubeconfig")

    run = gitopsd("get", "--gitsyncs", "-n", namespace, "--kubeconfig", str(kubeconfig))

    assert moved.fired == 1
    assert run.code == CLUSTER_FAILED
    assert one_line(run.err) == (
        f"gitopsd: error: the API server at {proxy.url} (context test, user admin) serves no "
        "GitSyncs: the GitSync CRD is not installed: kubectl apply -f config/crd/gitsyncs.yaml"
    )
    assert proxy.plane.admin_token not in run.text


def test_get_gitsyncs_from_a_server_that_is_no_api_server_says_so(
    gitopsd: Gitopsd, namespace: str, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    with serving(Loopback(404, "", NOT_FOUND_PAGE)) as server:
        write_kubeconfig(kubeconfig, server.url, gitopsd.plane.ca_file, "alice", "t0ken")
        run = gitopsd("get", "--gitsyncs", "-n", namespace, "--kubeconfig", str(kubeconfig))

    assert run.code == CLUSTER_FAILED
    path = f"/apis/gitopsd.io/v1alpha1/namespaces/{namespace}/gitsyncs"
    assert one_line(run.err) == (
        f"gitopsd: error: the API server at {server.url} (context test, user alice) is not a "
        f"Kubernetes API server: it answers GET {path} with HTTP 404 and GET /version with no "
        "Kubernetes version (HTTP 404); check the server address in the kubeconfig"
    )
    assert "t0ken" not in run.text


def test_diff_against_a_server_that_is_no_api_server_says_so(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, tmp_path: Path
) -> None:
    with serving(Loopback(404, "", NOT_FOUND_PAGE)) as server:
        run = diff_as_alice(gitopsd, git_server, git_repo, tmp_path, server.url, "t0ken")

    assert run.code == CLUSTER_FAILED
    line = one_line(run.err)
    server_is = f"the API server at {server.url} (context test, user alice) is not a Kubernetes"
    assert f"gitopsd: error: {server_is} API server: it answers GET /" in line
    assert line.endswith(
        "with HTTP 404 and GET /version with no Kubernetes version (HTTP 404); check the "
        "server address in the kubeconfig"
    )
    assert "t0ken" not in run.text
