"""Kubernetes' schema dialect, as the API server reads an object with fieldValidation=Strict.

OpenAPI 3.0 schemas are JSON Schema draft 4 (a boolean `exclusiveMinimum`, `$ref` beside
nothing else), so jsonschema's Draft4Validator does the work; this module changes only
what the API server reads differently:

- null is no value: a field set to null is a field left out (the server decodes null as
  unset), so null neither fails a schema nor counts as a required field given;
- a whole number written as a float (`2.0`) is an integer, as the server converts it;
- a field the schema does not declare is one error of its own, at its own path
  (`strict.py` says which objects declare all of theirs);
- `x-kubernetes-int-or-string` takes an integer or a string;
- a list of `x-kubernetes-list-type` map or set holds no entry twice (server-side apply
  refuses "duplicate entries for key"): a map's entries are the same when their
  `x-kubernetes-list-map-keys` are (a key left out is not taken as its default, so entries
  that differ only by one are not caught);
- a string where a Quantity goes must be one (format `quantity`, which `strict.py` puts
  on the Quantity schema), as the server parses it; no other format is checked (the
  server takes an int32 field's overflow, for one).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import Draft4Validator, FormatChecker, TypeChecker, ValidationError, validators
from jsonschema.protocols import Validator

UNDECLARED = "field not declared in schema"
"""The API server's own words for an unknown field under fieldValidation=Strict."""

QUANTITY = re.compile(
    r"^(?=.)[+-]?[0-9]*(\.[0-9]*)?"  # a number, even one without digits ("1.", ".5", "+")
    r"(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"  # a suffix, or an exponent
)
"""A Quantity as apimachinery's ParseQuantity reads it: the grammar of the Quantity
schema's description, and the suffixes `n` and `u` it also takes."""


def _type(validator: Any, wanted: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    types = wanted if isinstance(wanted, list) else [wanted]
    if instance is not None and not any(validator.is_type(instance, t) for t in types):
        yield ValidationError("type")


def _is_integer(checker: TypeChecker, instance: object) -> bool:
    whole = isinstance(instance, float) and instance.is_integer()
    return whole or (isinstance(instance, int) and not isinstance(instance, bool))


def _properties(
    validator: Any, properties: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for name, subschema in properties.items():
        if instance.get(name) is not None:
            yield from validator.descend(instance[name], subschema, path=name, schema_path=name)


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    """Each undeclared field is an error at its own path, as the API server lists them."""
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    for name in sorted(set(instance) - set(declared), key=str):
        if allowed is False:
            yield ValidationError(UNDECLARED, path=[name])
        elif isinstance(allowed, dict) and instance[name] is not None:
            yield from validator.descend(instance[name], allowed, path=name)


def _required(
    validator: Any, required: list[str], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for name in required:
        if instance.get(name) is None:
            yield ValidationError("required", path=[name])


def _int_or_string(
    validator: Any, int_or_string: bool, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if int_or_string and not (
        validator.is_type(instance, "integer") or validator.is_type(instance, "string")
    ):
        yield ValidationError("int or string")


def _list_type(
    validator: Any, list_type: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    keys = schema.get("x-kubernetes-list-map-keys") if list_type == "map" else None
    if not isinstance(instance, list) or not (list_type == "set" or keys):
        return
    same = f"has the same {' and '.join(keys)} as" if keys else "is the same as"
    seen: dict[Any, int] = {}
    for index, item in enumerate(instance):
        entry = _entry(item, keys)
        if entry is not None and seen.setdefault(entry, index) != index:
            yield ValidationError(f"{same} [{seen[entry]}]", path=[index])


def _entry(item: Any, keys: list[str] | None) -> Any:
    """What makes a list item the entry it is: its keys' values (a map's), or itself (a
    set's); None for an item that cannot be compared so."""
    if keys is None:
        return item if isinstance(item, str | int | float | bool) else None
    if not isinstance(item, dict):
        return None
    values = tuple(item.get(key) for key in keys)
    return values if all(isinstance(v, str | int | float | bool | None) for v in values) else None


FORMATS = FormatChecker(formats=())
"""The formats the API server parses, and so rejects when malformed; no others."""


@FORMATS.checks("quantity")
def _is_quantity(instance: object) -> bool:
    return not isinstance(instance, str) or QUANTITY.match(instance) is not None


# jsonschema's own keyword functions take its validator classes, whose `descend` its
# Validator protocol does not declare: they are typed Any here as they are there.
Kubernetes: type[Validator] = validators.extend(  # type: ignore[no-untyped-call]
    Draft4Validator,
    validators={
        "type": _type,
        "properties": _properties,
        "additionalProperties": _additional_properties,
        "required": _required,
        "x-kubernetes-int-or-string": _int_or_string,
        "x-kubernetes-list-type": _list_type,
    },
    type_checker=Draft4Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)
"""Draft 4 as the API server reads it; give it FORMATS as its format_checker."""
