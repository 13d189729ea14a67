"""The JSON contract of the command line (docs/schemas/cli/v1): each document a command
prints, checked against the schema of its kind by a maintained validator (jsonschema), so
that the output and its published schema cannot drift apart."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas" / "cli" / "v1"
API_VERSION = "cli.gitopsd.io/v1"


@cache
def registry() -> Registry[Any]:
    """Every schema of the contract, by its $id (the kinds refer to definitions.json)."""
    resources = []
    for path in sorted(SCHEMAS.glob("*.json")):
        schema = json.loads(path.read_text())
        Draft202012Validator.check_schema(schema)
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


def kinds() -> list[str]:
    return sorted(path.stem for path in SCHEMAS.glob("*.json") if path.stem != "definitions")


def validator(kind: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / f"{kind}.json").read_text())
    return Draft202012Validator(schema, registry=registry())


def checked(document: Any, kind: str | None = None) -> dict[str, Any]:
    """`document`, once it is of the contract's version and of `kind` (any kind the
    contract has, when None), and valid against that kind's schema."""
    assert isinstance(document, dict), f"not one document: {document!r}"[:300]
    assert document.get("apiVersion") == API_VERSION, document.get("apiVersion")
    found = document.get("kind")
    assert found in kinds(), f"no schema for kind {found!r}"
    assert kind is None or found == kind, f"{found}, not {kind}"
    problems = sorted(validator(found).iter_errors(document), key=str)
    assert not problems, "\n".join(
        f"{'/'.join(map(str, problem.absolute_path))}: {problem.message}" for problem in problems
    )
    return document


def parsed(text: str, kind: str | None = None, form: str = "json") -> dict[str, Any]:
    """A command's whole output, read as `-o json` (or `-o yaml`) prints it, and checked."""
    loaded = json.loads(text) if form == "json" else yaml.safe_load(text)
    return checked(loaded, kind)


def named(reference: dict[str, str]) -> str:
    """An object reference as gitopsd's text names the object: group/Kind/namespace/name,
    the parts it has."""
    parts = [reference[part] for part in ("group", "kind", "namespace", "name")]
    return "/".join(part for part in parts if part)
