"""What is wrong with an object, said without its values: a problem names the file and
line, the object and the field, and what the schema wants, never what the field holds, so a
Secret's value can never leak through one."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jsonschema import ValidationError

from gitopsd.objects import ObjectKey, Origin
from gitopsd.validation.keywords import UNDECLARED

FieldPath = tuple[str | int, ...]
"""The keys and list indexes that lead to a field from its object's root."""


@dataclass(frozen=True)
class Problem:
    origin: Origin
    """The manifest's file, and the line of the field where it is known."""
    key: ObjectKey
    field: FieldPath
    message: str

    @property
    def path(self) -> str:
        """The field as `.spec.template.spec.containers[0].image`; empty for the object."""
        return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in self.field)

    def __str__(self) -> str:
        field = f" {self.path}:" if self.field else ""
        return f"{self.origin}: {self.key}:{field} {self.message}"


def message_of(error: ValidationError) -> str:
    """What the schema's keyword wants, from the keyword and its value alone."""
    keyword, wanted = str(error.validator), error.validator_value
    explain = _EXPLAINED.get(keyword)
    if explain is not None:
        return explain(wanted, error)
    template = _TEMPLATES.get(keyword, "does not satisfy the schema's {keyword} {wanted}")
    return template.format(keyword=keyword, wanted=wanted)


_TEMPLATES = {
    "additionalProperties": UNDECLARED,
    "required": "required, but not set",
    "pattern": "must match {wanted}",
    "minLength": "must be at least {wanted} characters long",
    "maxLength": "must be at most {wanted} characters long",
    "minItems": "must have at least {wanted} items",
    "maxItems": "must have at most {wanted} items",
    "minProperties": "must have at least {wanted} fields",
    "maxProperties": "must have at most {wanted} fields",
    "uniqueItems": "must not hold the same item twice",
    "multipleOf": "must be a multiple of {wanted}",
    "not": "must not match the schema under `not`",
}

_FORMATS = {
    "quantity": "must be a quantity: a number with an optional suffix, as 500m, 1.5 or 2Gi",
}


def _json_type(value: Any) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    names |= {list: "array", dict: "object", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _type(wanted: Any, error: ValidationError) -> str:
    wanted = " or ".join(wanted) if isinstance(wanted, list) else wanted
    return f"must be {wanted}, not {_json_type(error.instance)}"


def _alternatives(wanted: Any, error: ValidationError) -> str:
    """oneOf and anyOf: the types they allow, where each alternative is a type."""
    if error.validator == "oneOf" and not error.context:
        return "matches more than one of the schemas under oneOf"
    types = [branch.get("type") for branch in wanted if isinstance(branch, dict)]
    if types and all(isinstance(each, str) for each in types):
        return _type(types, error)
    return f"matches none of the schemas under {error.validator}"


def _bound(wanted: Any, error: ValidationError) -> str:
    schema = error.schema if isinstance(error.schema, dict) else {}
    lower = error.validator == "minimum"
    exclusive = schema.get("exclusiveMinimum" if lower else "exclusiveMaximum")
    words = {(True, False): "at least", (True, True): "greater than"}
    words |= {(False, False): "at most", (False, True): "less than"}
    return f"must be {words[(lower, bool(exclusive))]} {wanted}"


_EXPLAINED: dict[str, Callable[[Any, ValidationError], str]] = {
    "type": _type,
    "oneOf": _alternatives,
    "anyOf": _alternatives,
    "minimum": _bound,
    "maximum": _bound,
    "enum": lambda wanted, _: f"must be one of {', '.join(json.dumps(v) for v in wanted)}",
    "format": lambda wanted, _: _FORMATS.get(wanted, f"must be in the format {wanted}"),
    "x-kubernetes-int-or-string": lambda _, error: _type(["integer", "string"], error),
    "x-kubernetes-list-type": lambda _, error: error.message,  # made of key names alone
}
