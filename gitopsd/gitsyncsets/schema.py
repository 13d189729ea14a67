"""The GitSyncSet CRD, written once, here: `python -m gitopsd.gitsyncsets.schema` prints it,
`make crd` writes it to config/crd/gitsyncsets.yaml, and a test fails when that file is not
what this module prints.

The template's spec is a GitSync's, but its strings may hold variables (`${basename}`), so
the API server cannot check it as one: it is kept as written, and each element's GitSync is
checked once expanded (by gitsync.spec, then by a dry-run of every one before any is
written).
"""

from __future__ import annotations

import sys

from gitopsd.configfile.postbuild import VARIABLE_NAME
from gitopsd.gitsync.openapi import (
    DNS_SUBDOMAIN,
    Schema,
    boolean,
    crd_file,
    custom_resource,
    duration,
    object_,
    string,
)
from gitopsd.gitsync.spec_schema import MAX_NAME, REPOSITORY
from gitopsd.gitsyncsets import KIND, MAX_ELEMENTS, PLURAL
from gitopsd.gitsyncsets.spec import Guards
from gitopsd.settings_table import INTERVAL

STRINGS: Schema = {"type": "object", "additionalProperties": {"type": "string"}}
ELEMENT = STRINGS | {
    "description": f"Variables by name (each matching {VARIABLE_NAME.pattern}): strings.",
    "minProperties": 1,
    "maxProperties": 64,
    "additionalProperties": {"type": "string", "maxLength": 1024},
}
LIST = object_(
    "One element each, as written.",
    {"elements": {"type": "array", "maxItems": MAX_ELEMENTS, "items": ELEMENT}},
    required=["elements"],
)
GIT = object_(
    "A directory each of the repository's revision (Argo CD's git directory generator), "
    "with the variables path and basename.",
    {
        "repository": REPOSITORY,
        "directories": {
            "type": "array",
            "description": "Globs of directories (* and ? within a name, ** any names); an "
            "excluded one wins wherever it is listed.",
            "minItems": 1,
            "maxItems": 32,
            "items": object_(
                "A glob of directories.",
                {
                    "path": string(
                        "Relative to the repository's root.", minLength=1, maxLength=256
                    ),
                    "exclude": boolean("Leave out the directories it matches.", False),
                },
                required=["path"],
            ),
        },
    },
    required=["repository", "directories"],
)
CLUSTERS: Schema = {
    "type": "object",
    "description": "One element each per cluster the daemon's configuration declares and "
    "allows for the set's namespace, with the variable cluster (its name).",
}  # no `properties: {}`: the API server drops an empty one, and a file's apply then conflicts


def _generator(description: str, nested: bool) -> Schema:
    kinds: Schema = {"list": LIST, "git": GIT, "clusters": CLUSTERS}
    if not nested:
        kinds["matrix"] = object_(
            "Every pair of its two generators' elements, their variables merged.",
            {
                "generators": {
                    "type": "array",
                    "minItems": 2,
                    "maxItems": 2,
                    "items": _generator("A generator of the pair (no matrix).", True),
                }
            },
            required=["generators"],
        )
    one_of = " + ".join(f"(has(self.{kind}) ? 1 : 0)" for kind in kinds)
    return object_(
        description,
        kinds,
        **{
            "x-kubernetes-validations": [
                {"rule": f"{one_of} == 1", "message": f"exactly one of {', '.join(kinds)}"}
            ]
        },
    )


TEMPLATE = object_(
    "Each element's GitSync; every string expanded with its variables (${var}, "
    "${var:=default}; $${var} for the text ${var}).",
    {
        "metadata": object_(
            "The GitSync's name (each element's must differ), labels and annotations "
            "(gitopsd.io/delete-policy: prune deletes what it applied when its element goes).",
            {
                "name": string("Its name.", minLength=1, maxLength=1024),
                "namespace": string(
                    "The set's own, if given: a set generates into its namespace only, and "
                    "a template naming another is refused.",
                    maxLength=1024,
                ),
                "labels": STRINGS | {"description": "Labels."},
                "annotations": STRINGS | {"description": "Annotations."},
            },
            required=["name"],
        ),
        "spec": {
            "type": "object",
            "description": "A GitSync's spec (its variables are merged into postBuild.substitute).",
            "x-kubernetes-preserve-unknown-fields": True,
        },
    },
    required=["metadata", "spec"],
)
GUARDS = object_(
    "What a pass that deletes GitSyncs must pass (as a GitSync's prune guards); a refused "
    "pass writes nothing.",
    {
        "allowEmpty": boolean(
            "Delete every GitSync when the generators give no element at all.",
            Guards.allow_empty,
        ),
        "deletionBudgetPercent": {
            "type": "number",
            "description": "Most GitSyncs one pass may delete, as a share of those the set "
            "owns (one is always allowed).",
            "default": Guards.budget_percent,
            "minimum": 0,
            "exclusiveMinimum": True,
            "maximum": 100,
        },
        "allowMassDeletion": boolean("Delete past the budget.", Guards.allow_mass_deletion),
    },
    default={},
)
SPEC = object_(
    "What GitSyncs to generate.",
    {
        "generators": {
            "type": "array",
            "description": "Their elements, one GitSync each.",
            "minItems": 1,
            "maxItems": 16,
            "items": _generator("A generator.", False),
        },
        "template": TEMPLATE,
        "guards": GUARDS,
        "interval": duration("How often the generators are read again.", INTERVAL.default),
        "serviceAccountName": string(
            "Its git generators' Secrets are read as this ServiceAccount of its namespace "
            "(as a GitSync's); without it, only a Secret that opts in to the URL is used.",
            pattern=DNS_SUBDOMAIN,
            maxLength=253,
        ),
    },
    required=["generators", "template"],
)
STATUS = object_(
    "What its last pass did.",
    {
        "observedGeneration": {"type": "integer"},
        "conditions": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        "gitSyncs": {"type": "array", "items": {"type": "string"}},
        "total": {"type": "integer", "description": "How many GitSyncs it holds."},
    },
)
PRINTER_COLUMNS: list[Schema] = [
    {
        "name": "Ready",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
    },
    {"name": "GitSyncs", "type": "integer", "jsonPath": ".status.total"},
    {
        "name": "Reason",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {
        "name": "Message",
        "type": "string",
        "priority": 1,
        "jsonPath": '.status.conditions[?(@.type=="Ready")].message',
    },
]


def crd() -> Schema:
    """The CustomResourceDefinition of gitsyncsets.gitopsd.io."""
    names = {"kind": KIND, "plural": PLURAL, "short": "gss", "maxName": MAX_NAME}
    description = (
        "GitSyncs generated from a list, a repository's directories or the declared "
        "clusters, and their cross product, from one template."
    )
    return custom_resource(names, PRINTER_COLUMNS, description, SPEC, STATUS)


def crd_yaml() -> str:
    return crd_file(crd(), "gitopsd/gitsyncsets/schema.py")


if __name__ == "__main__":
    sys.stdout.write(crd_yaml())
