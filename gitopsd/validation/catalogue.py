"""The kinds there are schemas for, and the validator of each.

Built in: the kinds a default API server of the Kubernetes version gitopsd is tested
against serves, from the OpenAPI v3 spec it publishes (`kubernetes.json`, written by `make
schemas` from the k8s.io/kubernetes module that go.sum pins). Served: the kinds a cluster
serves, from its discovery and its own OpenAPI v3 documents (`validate --cluster`). Either
way, the CRDs of the revision add their served versions' schemas.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from typing import Any

from referencing import Registry
from referencing.jsonschema import DRAFT4

from gitopsd.objects import Manifest, Resource
from gitopsd.resources import CUSTOM_RESOURCE_DEFINITION
from gitopsd.validation.keywords import FORMATS, Kubernetes
from gitopsd.validation.strict import OBJECT_META, strict_custom, strict_document

BUILT_IN = "urn:gitopsd:kubernetes"
SCHEMAS = "#/components/schemas/"


@dataclass(frozen=True)
class Kind:
    """A kind one can validate, and where its schema is (a URI with a fragment)."""

    api_version: str
    kind: str
    namespaced: bool
    schema: str | None
    """None: the cluster serves the kind but publishes no schema of it (an aggregated API
    may not; a CRD's appears shortly after it is installed), so it cannot be checked."""


@dataclass(frozen=True)
class Catalogue:
    kinds: Mapping[tuple[str, str], Kind]
    """By (apiVersion, kind)."""
    registry: Registry[Any]
    where: str
    """Whose kinds these are, for messages: `Kubernetes v1.34.4`, or `the cluster`."""
    offline: bool = True
    """The built-in kinds alone, not a cluster's."""
    _validators: dict[Kind, Any] = field(default_factory=dict, compare=False)

    def find(self, api_version: str, kind: str) -> Kind | None:
        return self.kinds.get((api_version, kind))

    def validator(self, kind: Kind) -> Any:
        """The jsonschema validator of `kind` (which has a schema), built once."""
        if kind not in self._validators:
            schema = {"$ref": kind.schema}
            self._validators[kind] = Kubernetes(
                schema, registry=self.registry, format_checker=FORMATS
            )
        return self._validators[kind]

    def with_definitions(self, manifests: Iterable[Manifest]) -> Catalogue:
        """This catalogue and the kinds the CRDs among `manifests` define, each version
        they serve; a CRD of the revision wins over a kind of the same name served now."""
        kinds, resources = dict(self.kinds), []
        for manifest in manifests:
            if manifest.key.group_kind == CUSTOM_RESOURCE_DEFINITION:
                for kind, uri, schema in _defined(manifest.body):
                    kinds[(kind.api_version, kind.kind)] = kind
                    resources.append((uri, DRAFT4.create_resource(schema)))
        registry = self.registry.with_resources(resources)
        return Catalogue(kinds, registry, self.where, self.offline)


@cache
def built_in() -> Catalogue:
    """The kinds of the Kubernetes version gitopsd ships the schemas of."""
    shipped = json.loads(files(__package__).joinpath("kubernetes.json").read_text())
    kinds = {
        (api_version, name): Kind(
            api_version, name, kind["namespaced"], f"{BUILT_IN}{SCHEMAS}{kind['schema']}"
        )
        for api_version, served in shipped["kinds"].items()
        for name, kind in served.items()
    }
    resource = DRAFT4.create_resource(strict_document(shipped))
    return Catalogue(
        kinds, Registry().with_resource(BUILT_IN, resource), f"Kubernetes {shipped['kubernetes']}"
    )


def served(resources: Iterable[Resource], documents: Mapping[str, dict[str, Any]]) -> Catalogue:
    """A cluster's kinds: each one it serves (its discovery), and the OpenAPI v3 documents
    of those the revision uses, by apiVersion. The built-in schemas stay in the registry: a
    CRD of the revision refers to their ObjectMeta."""
    registry = built_in().registry
    schemas: dict[tuple[str, str], str] = {}
    for api_version, document in documents.items():
        uri = f"urn:gitopsd:cluster:{api_version}"
        registry = registry.with_resource(uri, DRAFT4.create_resource(strict_document(document)))
        schemas.update(_kind_schemas(api_version, document, uri))
    kinds = {
        (r.api_version, r.kind): Kind(
            r.api_version, r.kind, r.namespaced, schemas.get((r.api_version, r.kind))
        )
        for r in resources
    }
    return Catalogue(kinds, registry, "the cluster", offline=False)


def _kind_schemas(
    api_version: str, document: dict[str, Any], uri: str
) -> Iterable[tuple[tuple[str, str], str]]:
    """Each kind's schema in a group-version's document: the one that names its kind."""
    group, _, version = api_version.rpartition("/")
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            if (gvk.get("group"), gvk.get("version")) == (group, version):
                yield (api_version, gvk.get("kind")), f"{uri}{SCHEMAS}{name}"


def _defined(crd: dict[str, Any]) -> Iterable[tuple[Kind, str, dict[str, Any]]]:
    """The kinds a CRD defines, one per version it serves, with their schemas' URIs and
    schemas."""
    spec = _mapping(crd.get("spec"))
    group, kind = spec.get("group"), _mapping(spec.get("names")).get("kind")
    versions = spec.get("versions")
    if not (isinstance(group, str) and isinstance(kind, str) and isinstance(versions, list)):
        return
    namespaced = spec.get("scope") == "Namespaced"
    object_meta = f"{BUILT_IN}{SCHEMAS}{OBJECT_META}"
    for version in versions:
        if isinstance(version, dict) and version.get("served") is True:
            api_version = f"{group}/{version.get('name')}"
            schema = _mapping(_mapping(version.get("schema")).get("openAPIV3Schema"))
            uri = f"urn:gitopsd:crd:{api_version}/{kind}"
            yield Kind(api_version, kind, namespaced, uri), uri, strict_custom(schema, object_meta)


def _mapping(value: Any) -> dict[str, Any]:
    """`value` where it is a mapping, else an empty one: a malformed CRD fails its own
    schema, and defines nothing."""
    return value if isinstance(value, dict) else {}
