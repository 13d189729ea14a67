"""Other clusters than the daemon's own: declared in the configuration, named by a GitSync,
or brought by a GitSync's kubeconfig Secret, which must hold its credentials inline."""

from __future__ import annotations

import base64
import json
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from gitopsd.cluster import Cluster
from gitopsd.cluster.kubeconfigs import configuration_of, read_inline
from gitopsd.config import Credentials, Network
from gitopsd.configfile import GitSyncSettings, load
from gitopsd.configfile.clusters import DeclaredCluster
from gitopsd.daemon.clusters import kubeconfig_document, opener_for
from gitopsd.daemon.credentials import write_private
from gitopsd.errors import ClusterError, ClusterReason, ConfigError
from gitopsd.gitsync import spec
from gitopsd.resources import CONFIG_MAPS

TOKEN = "sekrit-token-value-4f2a"
CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def kubeconfig(
    cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A kubeconfig of one context, its cluster and user as given (else inline ones)."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "remote",
        "contexts": [{"name": "remote", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [
            {
                "name": "c",
                "cluster": cluster
                or {
                    "server": "https://remote.example:6443/prefix",
                    "certificate-authority-data": base64.b64encode(CA).decode(),
                },
            }
        ],
        "users": [{"name": "u", "user": user or {"token": TOKEN}}],
    }
    return document


def test_an_inline_kubeconfig_is_read_as_its_server_name_ca_and_token() -> None:
    inline = read_inline(kubeconfig(), "Secret s")

    assert (inline.host, inline.port, inline.path) == ("remote.example", 6443, "/prefix")
    assert inline.server_name == "remote.example"
    assert (inline.ca, inline.token, inline.certificate) == (CA, TOKEN, None)


REFUSED = [
    ({"user": {"exec": {"command": "touch", "args": ["/tmp/ran"]}}}, "exec"),
    ({"user": {"auth-provider": {"name": "gcp"}}}, "auth-provider"),
    ({"user": {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}}, "tokenFile"),
    ({"user": {"client-certificate": "/etc/key.crt", "client-key": "/etc/k"}}, "client-key"),
    ({"user": {"token": TOKEN, "as": "system:admin"}}, "as"),
    ({"cluster": {"server": "https://r:6443", "certificate-authority": "/etc/ca"}}, "authority"),
    ({"cluster": {"server": "https://r:6443", "proxy-url": "http://proxy:3128"}}, "proxy-url"),
    ({"cluster": {"server": "https://r", "insecure-skip-tls-verify": True}}, "insecure"),
    ({"cluster": {"server": "http://r:8080"}}, "not an https:// address"),
    ({"user": {"username": "u"}}, "username"),
]


@pytest.mark.parametrize(("parts", "named"), REFUSED)
def test_a_kubeconfig_that_runs_reads_routes_or_skips_tls_is_refused_naming_it(
    parts: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        read_inline(kubeconfig(**parts), "GitSync t/a: Secret t/k")

    assert named in str(refused.value)
    assert str(refused.value).startswith("GitSync t/a: Secret t/k")
    assert TOKEN not in str(refused.value)


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + n)}: &{chr(98 + n)} [*{chr(97 + n)}, *{chr(97 + n)}, *{chr(97 + n)}, "
    f"*{chr(97 + n)}, *{chr(97 + n)}, *{chr(97 + n)}, *{chr(97 + n)}, *{chr(97 + n)}]\n"
    for n in range(9)
)
"""Nine levels of eight aliases each: 10 * 8^9 nodes, over a billion, once expanded."""


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (f"{{ token: {TOKEN}", "not a kubeconfig: GitSync t/a, key value:"),
        (f"- {TOKEN}", "not a kubeconfig (expected a mapping)"),
        (yaml.safe_dump({**kubeconfig(), "current-context": "x"}), "context is not in contexts"),
        (BOMB + f"token: {TOKEN}\n", "not a kubeconfig: GitSync t/a, key value:"),
        (f"a: 1\n---\nb: {TOKEN}\n", "expected one YAML document"),
    ],
)
def test_what_is_no_usable_kubeconfig_is_said_without_quoting_it(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        read_inline(kubeconfig_document(text.encode(), "GitSync t/a, key value"), "GitSync t/a")

    assert says in str(refused.value)
    assert TOKEN not in str(refused.value)


def test_a_user_without_credentials_is_refused() -> None:
    with pytest.raises(ConfigError, match="neither a token nor a client certificate"):
        read_inline(kubeconfig(user={"client-certificate-data": "QQ=="}), "Secret s")


# --- the configuration ----------------------------------------------------------------------


def write(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "gitopsd.yaml"
    path.write_text(json.dumps(document))
    return path


def source(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "repository": "https://git.example/r.git", **fields}


def test_declared_clusters_are_read_and_sources_target_them(tmp_path: Path) -> None:
    clusters = [
        {"name": "east", "kubeconfig": "/etc/east", "namespaces": ["team-a"]},
        {"name": "west", "kubeconfig": "/etc/west", "context": "w", "namespaces": ["*"]},
    ]
    sources = [source("home"), source("east", cluster="east"), source("lost", cluster="south")]
    config = load(write(tmp_path, {"clusters": clusters, "sources": sources}))

    assert [(s.name, s.cluster) for s in config.sources] == [("home", ""), ("east", "east")]
    [(name, error)] = config.invalid_sources
    assert name == "lost"
    assert "cluster: 'south' is not declared (clusters: east, west)" in error
    east, west = config.clusters
    assert east == DeclaredCluster("east", Path("/etc/east"), namespaces=("team-a",))
    assert (east.allows("team-a"), east.allows("team-b"), west.allows("any")) == (1, 0, 1)
    assert config.git_syncs.clusters == config.clusters


@pytest.mark.parametrize(
    ("clusters", "error"),
    [
        ([{"name": "in-cluster", "kubeconfig": "/k"}], "is the name of the cluster gitopsd"),
        ([{"name": "a", "kubeconfig": "/k"}, {"name": "a", "kubeconfig": "/j"}], "two clusters"),
        ([{"name": "Bad_Name", "kubeconfig": "/k"}], "name"),
        ([{"name": "a"}], "kubeconfig: the file of its credentials is required"),
        ([{"name": "a", "kubeconfig": "/k", "namespaces": ["NO"]}], "namespaces: 'NO'"),
        ([{"name": "a", "kubeconfig": "/k", "token": "x"}], "unknown field(s) token"),
    ],
)
def test_a_bad_declaration_stops_the_daemon_naming_the_field(
    tmp_path: Path, clusters: list[dict[str, Any]], error: str
) -> None:
    with pytest.raises(ConfigError, match="clusters") as refused:
        load(write(tmp_path, {"clusters": clusters, "sources": []}))

    assert error in str(refused.value)


# --- a GitSync's cluster ----------------------------------------------------------------------

NO_CREDENTIALS = Credentials(password_env=None)
SETTINGS = GitSyncSettings(
    clusters=(
        DeclaredCluster("east", Path("/etc/east"), namespaces=("team",)),
        DeclaredCluster("west", Path("/etc/west"), namespaces=("other",)),
    ),
    kubeconfig_namespaces=("team",),
)


def gitsync(namespace: str = "team", **fields: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": "app", "generation": 1},
        "spec": {"repository": {"url": "https://git.example/r.git"}, **fields},
    }


def test_a_gitsync_targets_a_cluster_declared_for_its_namespace() -> None:
    body = gitsync(cluster="east", serviceAccountName="deployer")
    read = spec.read(body, SETTINGS)

    assert (read.cluster, read.kubeconfig) == ("east", None)
    assert read.source(NO_CREDENTIALS).cluster == "east"
    assert spec.cluster_named(body["spec"]) == "east"  # as `gitopsd get` names it


def test_a_gitsyncs_own_kubeconfig_is_its_secret_and_key_labelled_by_its_name() -> None:
    ref = {"secretRef": {"name": "west-kubeconfig"}}
    body = gitsync(kubeConfig=ref, serviceAccountName="deployer")
    read = spec.read(body, SETTINGS)

    assert read.kubeconfig == ("west-kubeconfig", "value")
    assert read.source(NO_CREDENTIALS).cluster == "secret/west-kubeconfig"
    assert spec.cluster_named(body["spec"]) == "secret/west-kubeconfig"


@pytest.mark.parametrize("fields", [{}, {"kubeConfig": "k"}, {"kubeConfig": {"secretRef": []}}])
def test_a_gitsync_naming_no_cluster_is_shown_in_the_daemons_own(fields: dict[str, Any]) -> None:
    assert spec.cluster_named(gitsync(**fields)["spec"]) == "in-cluster"


@pytest.mark.parametrize(
    ("namespace", "fields", "error"),
    [
        (
            "team",
            {"cluster": "west"},
            "cluster: 'west' is not a cluster the daemon's configuration",
        ),
        ("team", {"cluster": "south"}, "(allowed: east)"),
        ("other", {"kubeConfig": {"secretRef": {"name": "k"}}}, "kubeConfigNamespaces"),
        ("team", {"kubeConfig": {"secretRef": {"name": "k"}}}, "needs serviceAccountName"),
        (
            "team",
            {"cluster": "east", "kubeConfig": {"secretRef": {"name": "k"}}},
            "cluster and kubeConfig each name a cluster",
        ),
    ],
)
def test_a_cluster_the_admin_did_not_allow_is_refused_naming_the_field(
    namespace: str, fields: dict[str, Any], error: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        spec.read(gitsync(namespace, **fields), SETTINGS)

    assert error in str(refused.value)
    assert str(refused.value).startswith(f"GitSync {namespace}/app: spec")


# --- a GitSync's own cluster, connected --------------------------------------------------------


def test_every_connection_to_a_gitsyncs_cluster_is_opened_by_its_opener(tmp_path: Path) -> None:
    """The official client's pool connects through the opener, which checks the address:
    a refusal is the request's failure, saying why."""
    asked: list[tuple[str, int]] = []

    def refusing(host: str, port: int, timeout: float | None) -> socket.socket:
        asked.append((host, port))
        raise OSError("GitSync t/a: its server resolves to loopback")

    def kept(name: str, content: bytes | None) -> Path | None:
        return write_private(tmp_path / name, content)

    inline = read_inline(kubeconfig(), "Secret s")
    cluster = Cluster.over(configuration_of(inline, kept, refusing, 1))

    with pytest.raises(ClusterError) as failed:
        cluster.get(CONFIG_MAPS, "default", "x")

    assert failed.value.reason == ClusterReason.UNREACHABLE
    assert "its server resolves to loopback" in str(failed.value)
    assert asked and asked[0] == ("remote.example", 6443)
    assert (tmp_path / "ca.crt").read_bytes() == CA
    assert oct((tmp_path / "ca.crt").stat().st_mode & 0o777) == "0o600"


def test_the_opener_fences_a_name_that_resolves_to_loopback_unless_insecure() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with pytest.raises(OSError, match="resolves to loopback, link-local or the cluster"):
            opener_for(Network(), True, "GitSync t/a")("localhost", port, 2.0)
        opener_for(Network(), False, "GitSync t/a")("localhost", port, 2.0).close()
