"""What `gitopsd build` prints is what a sync sends: offline, the built-in kinds and the
revision's CRDs namespace and label each object exactly as the cluster's discovery does
(one `resolve` for both), a build lists the objects in the order a sync applies them, and
the command prints them without a cluster, Secrets' values masked. (Against a real sync:
tests/integration/test_build.py.)"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest
import yaml

from gitopsd.changes import Target
from gitopsd.cli import main
from gitopsd.cluster.discovery import Discovery
from gitopsd.config import SyncSettings
from gitopsd.errors import ExitCode, ManifestError, ManifestReason
from gitopsd.manifests import load
from gitopsd.objects import APPLYSET_PART_OF_LABEL, ObjectKey, Resource
from gitopsd.reconcile.desired import Desired, applyset_of
from gitopsd.reconcile.resolving import BuiltIn, Served, resolve
from gitopsd.source import Revision
from gitopsd.synchooks import HOOK_OF_LABEL
from tests.harness import contract
from tests.harness.discovery_table import Table

SETTINGS = SyncSettings("app", default_namespace="team", inventory_namespace="team")
APPLYSET_ID = applyset_of(SETTINGS).id


def crd(kind: str, scope: str) -> str:
    plural = f"{kind.lower()}s"
    return (
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        f"metadata:\n  name: {plural}.example.com\nspec:\n  group: example.com\n"
        f"  names: {{kind: {kind}, plural: {plural}}}\n  scope: {scope}\n"
        "  versions: [{name: v1, served: true, storage: true}]\n"
    )


def manifest(api_version: str, kind: str, name: str, extra: str = "") -> str:
    return f"apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {name}\n{extra}"


REVISION = {
    "config.yaml": manifest("v1", "ConfigMap", "web"),
    "role.yaml": manifest("rbac.authorization.k8s.io/v1", "ClusterRole", "reader"),
    "elsewhere.yaml": manifest("apps/v1", "Deployment", "api", "  namespace: other\n"),
    "crd.yaml": crd("Widget", "Namespaced"),
    "widget.yaml": manifest("example.com/v1", "Widget", "w"),
}


def served(*resources: Resource) -> Served:
    table = Table({(r.api_version, r.kind): r for r in resources})
    return Served(cast(Discovery, table))


A_CLUSTER = served(
    Resource("", "v1", "ConfigMap", "configmaps", namespaced=True),
    Resource("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", namespaced=False),
    Resource("apps", "v1", "Deployment", "deployments", namespaced=True),
    Resource(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        namespaced=False,
    ),
)


def targets(
    tmp_path: Path, files: dict[str, str], kinds: BuiltIn | Served
) -> dict[ObjectKey, Target]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return resolve(load(tmp_path, ["."]), kinds, SETTINGS)


def bodies(resolved: dict[ObjectKey, Target]) -> dict[ObjectKey, object]:
    return {key: target.body for key, target in resolved.items()}


def test_offline_each_object_is_namespaced_and_labelled_as_against_the_cluster(
    tmp_path: Path,
) -> None:
    offline = targets(tmp_path, REVISION, BuiltIn())

    assert bodies(offline) == bodies(resolve(load(tmp_path, ["."]), A_CLUSTER, SETTINGS))
    assert sorted(offline) == [
        ObjectKey("", "ConfigMap", "team", "web"),
        ObjectKey("apiextensions.k8s.io", "CustomResourceDefinition", "", "widgets.example.com"),
        ObjectKey("apps", "Deployment", "other", "api"),
        ObjectKey("example.com", "Widget", "team", "w"),  # scoped by the revision's CRD
        ObjectKey("rbac.authorization.k8s.io", "ClusterRole", "", "reader"),
    ]
    for target in offline.values():
        labels = target.body["metadata"]["labels"]
        assert labels == {APPLYSET_PART_OF_LABEL: APPLYSET_ID}
        assert target.body["metadata"].get("namespace", "") == target.key.namespace
        assert target.resource is None  # where the cluster serves it is not known offline


def test_a_custom_resource_of_a_cluster_scoped_crd_gets_no_namespace_offline(
    tmp_path: Path,
) -> None:
    files = {
        "crd.yaml": crd("Zone", "Cluster"),
        "zone.yaml": manifest("example.com/v1", "Zone", "z"),
    }

    resolved = targets(tmp_path, files, BuiltIn())

    assert ObjectKey("example.com", "Zone", "", "z") in resolved


def test_a_kind_unknown_offline_is_named_with_where_and_asks_for_the_cluster(
    tmp_path: Path,
) -> None:
    files = {"gadget.yaml": manifest("example.com/v1", "Gadget", "g")}

    with pytest.raises(ManifestError) as caught:
        targets(tmp_path, files, BuiltIn())

    assert caught.value.reason == ManifestReason.UNKNOWN_KIND
    assert str(caught.value) == (
        "gadget.yaml:1: Gadget g: example.com/v1 Gadget is no kind of Kubernetes v1.34.4 and "
        "no CRD in this revision defines it, so whether it is namespaced is not known "
        "offline; pass --cluster to resolve it against the kinds the cluster serves"
    )


def test_a_cluster_scoped_kind_that_names_a_namespace_is_refused_offline_too(
    tmp_path: Path,
) -> None:
    files = {
        "role.yaml": manifest(
            "rbac.authorization.k8s.io/v1", "ClusterRole", "r", "  namespace: x\n"
        )
    }

    with pytest.raises(
        ManifestError, match="ClusterRole r is cluster-scoped but names namespace x"
    ):
        targets(tmp_path, files, BuiltIn())


def wave(number: int) -> str:
    return f"  annotations: {{gitopsd.io/sync-wave: '{number}'}}\n"


def test_a_build_lists_what_a_sync_sends_in_the_order_it_applies_it(tmp_path: Path) -> None:
    files = {
        "app.yaml": manifest("apps/v1", "Deployment", "app", wave(1)),
        "config.yaml": manifest("v1", "ConfigMap", "config"),
        "crd.yaml": crd("Widget", "Namespaced"),
        "early.yaml": manifest("v1", "ConfigMap", "early", wave(-1)),
        "migrate.yaml": manifest(
            "batch/v1", "Job", "migrate", "  annotations: {gitopsd.io/hook: pre-sync}\n"
        ),
        "namespace.yaml": manifest("v1", "Namespace", "team", wave(2)),
        "role.yaml": manifest("rbac.authorization.k8s.io/v1", "ClusterRole", "reader"),
        "skipped.yaml": manifest(
            "v1", "ConfigMap", "skipped", "  annotations: {gitopsd.io/sync-options: skip}\n"
        ),
    }
    desired = Desired.of(Revision("", None, str(tmp_path)), targets(tmp_path, files, BuiltIn()))

    ordered = desired.in_order()

    assert [f"{t.key.kind}/{t.key.name}" for t in ordered] == [
        "Namespace/team",  # the definitions first, whatever wave they name
        "CustomResourceDefinition/widgets.example.com",
        "ConfigMap/early",  # wave -1
        "ClusterRole/reader",  # wave 0: cluster-scoped, then namespaced
        "ConfigMap/config",
        "Deployment/app",  # wave 1
        "Job/migrate",  # the hooks last; a skipped object never
    ]
    assert ordered[-1].body["metadata"]["labels"] == {HOOK_OF_LABEL: APPLYSET_ID}


# The command itself, offline: a local directory of plain YAML needs neither git, kubectl,
# helm nor a cluster, and a kubeconfig that points nowhere is read for its namespace alone.

SECRET = (
    "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\n"
    "stringData: {password: CANARY-string-data}\ndata: {token: Q0FOQVJZLWRhdGE=}\n"
)
NOWHERE = """\
apiVersion: v1
kind: Config
clusters: [{name: nowhere, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: nowhere, user: u, namespace: from-context}}]
current-context: c
"""


@dataclass(frozen=True)
class Printed:
    code: int
    out: str
    err: str


def build(tmp_path: Path, files: dict[str, str], *flags: str) -> Printed:
    source = tmp_path / "source"
    source.mkdir(exist_ok=True)
    for name, text in files.items():
        (source / name).write_text(text)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(NOWHERE)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["build", str(source), "--kubeconfig", str(kubeconfig), *flags])
    return Printed(code, out.getvalue(), err.getvalue())


def test_build_prints_the_objects_as_a_yaml_stream_into_the_contexts_namespace(
    tmp_path: Path,
) -> None:
    printed = build(
        tmp_path, {"config.yaml": REVISION["config.yaml"], "role.yaml": REVISION["role.yaml"]}
    )

    assert (printed.code, printed.err) == (0, "")
    assert printed.out.startswith("---\n")
    role, config = yaml.safe_load_all(printed.out)  # cluster-scoped first
    assert (role["kind"], role["metadata"].get("namespace")) == ("ClusterRole", None)
    assert config["metadata"]["namespace"] == "from-context"
    assert set(config["metadata"]["labels"]) == {APPLYSET_PART_OF_LABEL}


def test_build_json_is_a_build_result_of_the_same_objects(tmp_path: Path) -> None:
    files = {"config.yaml": REVISION["config.yaml"]}
    stream = list(yaml.safe_load_all(build(tmp_path, files, "-n", "shop").out))

    printed = build(tmp_path, files, "-n", "shop", "-o", "json")

    found = contract.parsed(printed.out, "BuildResult")
    assert (found["revision"], found["error"]) == ("", None)  # a directory outside git
    assert found["objects"] == stream
    assert stream[0]["metadata"]["namespace"] == "shop"


def test_a_secrets_values_are_masked_unless_asked_for(tmp_path: Path) -> None:
    masked = build(tmp_path, {"secret.yaml": SECRET})
    [secret] = yaml.safe_load_all(masked.out)

    assert "CANARY" not in masked.out and "Q0FOQVJZ" not in masked.out
    assert (secret["data"], secret["stringData"]) == ({"token": "***"}, {"password": "***"})
    shown = build(tmp_path, {"secret.yaml": SECRET}, "--show-secrets", "-o", "json")
    [secret] = contract.parsed(shown.out, "BuildResult")["objects"]
    assert secret["stringData"] == {"password": "CANARY-string-data"}


def test_a_kind_unknown_offline_fails_naming_it_and_the_flag_that_resolves_it(
    tmp_path: Path,
) -> None:
    printed = build(tmp_path, {"gadget.yaml": manifest("example.com/v1", "Gadget", "g")})

    assert (printed.code, printed.out) == (ExitCode.INVALID, "")
    assert "gadget.yaml:1: Gadget g: example.com/v1 Gadget is no kind of" in printed.err
    assert "pass --cluster" in printed.err


def test_without_any_kubeconfig_the_namespace_is_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    source = tmp_path / "source"
    source.mkdir()
    (source / "config.yaml").write_text(REVISION["config.yaml"])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["build", str(source)]) == ExitCode.OK

    [config] = yaml.safe_load_all(out.getvalue())
    assert config["metadata"]["namespace"] == "default"
