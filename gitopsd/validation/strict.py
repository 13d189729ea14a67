"""Which fields an object may have, made explicit in its schema as `additionalProperties:
false`, so that a field no schema declares is an error (`keywords.UNDECLARED`).

A built-in kind's schema is its Go type's: an object schema with `properties` declares
every field it takes; one without (RawExtension, FieldsV1) takes anything. A CRD's schema is
structural: the API server prunes what it does not declare, and Strict makes that an
error, so every object schema of it is closed but where `x-kubernetes-preserve-unknown-fields`
keeps unknown fields. A custom resource's root, and an object marked
`x-kubernetes-embedded-resource`, take `apiVersion`, `kind` and `metadata` (an ObjectMeta)
whatever the schema says of them, as the API server reads them.
"""

from __future__ import annotations

from typing import Any

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def strict_document(document: dict[str, Any]) -> dict[str, Any]:
    """An OpenAPI v3 document of built-in (or served) kinds, its object schemas closed and
    its Quantity schema given the `quantity` format (its description's grammar); changed
    in place, and returned."""
    schemas = document.get("components", {}).get("schemas", {})
    for schema in schemas.values():
        _close(schema, custom=None)
    if QUANTITY in schemas:
        schemas[QUANTITY]["format"] = "quantity"
    return document


def strict_custom(schema: dict[str, Any], object_meta: str) -> dict[str, Any]:
    """A CRD version's openAPIV3Schema, as its custom resources are validated; `object_meta`
    refers to the ObjectMeta schema. Changed in place, and returned."""
    _declare_resource_fields(schema, object_meta)
    _close(schema, custom=object_meta)
    return schema


def _close(node: Any, custom: str | None) -> None:
    """Closes `node` and the schemas of its fields, items and map values; `custom` (the
    ObjectMeta reference) when it is a CRD's schema."""
    if not isinstance(node, dict):
        return
    for field_schema in (node.get("properties") or {}).values():
        _close(field_schema, custom)
    _close(node.get("items"), custom)
    _close(node.get("additionalProperties"), custom)
    if custom and node.get("x-kubernetes-embedded-resource"):
        _declare_resource_fields(node, custom)
    if _closed(node, custom is not None):
        node["additionalProperties"] = False


def _closed(node: dict[str, Any], custom: bool) -> bool:
    if "additionalProperties" in node or node.get("x-kubernetes-preserve-unknown-fields"):
        return False
    return "properties" in node or (custom and node.get("type") == "object")


def _declare_resource_fields(node: dict[str, Any], object_meta: str) -> None:
    properties = node.setdefault("properties", {})
    properties.setdefault("apiVersion", {"type": "string"})
    properties.setdefault("kind", {"type": "string"})
    properties["metadata"] = {"$ref": object_meta}
