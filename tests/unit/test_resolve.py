"""Resolving a new revision costs work only for what changed: the target of an unchanged
file's manifest is the one resolved before, as long as its kind resolves as before."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from gitopsd.changes import Target
from gitopsd.cluster.discovery import Discovery
from gitopsd.config import SyncSettings
from gitopsd.errors import ManifestError
from gitopsd.manifests import ParseCache, load
from gitopsd.objects import ObjectKey, Resource
from gitopsd.reconcile.resolving import Served, resolve
from tests.harness.discovery_table import Table

CONFIG_MAPS = Resource("", "v1", "ConfigMap", "configmaps", namespaced=True)
WIDGETS = Resource("example.com", "example.com/v1", "Widget", "widgets", namespaced=True)
SETTINGS = SyncSettings("app", default_namespace="team")


def config_map(name: str, value: str = "v") -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  k: {value}\n"


WIDGET = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n"


class Revisions:
    """Revisions of a directory read as git would: a blob id per file's content."""

    def __init__(self, root: Path, served: Table) -> None:
        self.root, self.kinds = root, Served(cast(Discovery, served))
        self.cache, self.targets = ParseCache(), cast(dict[ObjectKey, Target], {})

    def commit(self, files: dict[str, str]) -> dict[ObjectKey, Target]:
        for rel, text in files.items():
            (self.root / rel).write_text(text)
        blob_ids = {p.name: str(hash(p.read_text())) for p in self.root.glob("*.yaml")}
        found = load(self.root, ["."], cache=self.cache, blob_ids=blob_ids)
        self.targets = resolve(found, self.kinds, SETTINGS, self.targets)
        return self.targets


def key(name: str, kind: str = "ConfigMap", group: str = "") -> ObjectKey:
    return ObjectKey(group, kind, "team", name)


def test_a_new_revision_keeps_the_targets_of_unchanged_files(tmp_path: Path) -> None:
    revisions = Revisions(tmp_path, Table({("v1", "ConfigMap"): CONFIG_MAPS}))
    first = revisions.commit({"a.yaml": config_map("a"), "b.yaml": config_map("b")})

    second = revisions.commit({"b.yaml": config_map("b", "changed")})

    assert second[key("a")] is first[key("a")]  # namespace defaulted and labelled once
    assert second[key("b")] is not first[key("b")]
    assert second[key("b")].body["data"] == {"k": "changed"}
    assert second[key("a")].body["metadata"]["namespace"] == "team"


def test_a_kind_that_resolves_otherwise_now_is_resolved_again(tmp_path: Path) -> None:
    served = Table({("v1", "ConfigMap"): CONFIG_MAPS})
    revisions = Revisions(tmp_path, served)
    crd = (
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "metadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n"
        "  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n"
        "  versions: [{name: v1, served: true}]\n"
    )
    served.resources[("apiextensions.k8s.io/v1", "CustomResourceDefinition")] = Resource(
        "apiextensions.k8s.io",
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        namespaced=False,
    )
    first = revisions.commit({"crd.yaml": crd, "w.yaml": WIDGET})
    assert first[key("w", "Widget", "example.com")].resource is None  # its CRD comes along

    served.resources[("example.com/v1", "Widget")] = WIDGETS
    second = revisions.commit({})

    assert second[key("w", "Widget", "example.com")].resource == WIDGETS


def test_an_object_written_twice_is_refused_also_when_one_is_kept(tmp_path: Path) -> None:
    revisions = Revisions(tmp_path, Table({("v1", "ConfigMap"): CONFIG_MAPS}))
    revisions.commit({"a.yaml": config_map("a")})

    with pytest.raises(ManifestError) as caught:
        revisions.commit({"b.yaml": config_map("a", "again")})

    assert str(caught.value).startswith("b.yaml:1: duplicate object ConfigMap/team/a")
