"""The GitSync CRD, written once, here: `python -m gitopsd.gitsync.schema` prints it, `make
crd` writes it to config/crd/gitsyncs.yaml, and a test fails when that file is not what
this module prints. Defaults are the daemon's own (SourceConfig, PrunePolicy), so a field
left out of a GitSync means what the same key left out of a file source means.

The API server checks what it can before a GitSync is stored: shapes, patterns, enums and
bounds per field, and CEL rules (`x-kubernetes-validations`) where a rule spans fields.

Here the CRD is assembled: `spec_schema` and `status_schema` hold its two halves, built
from the nodes of `openapi`.
"""

from __future__ import annotations

import sys

from gitopsd.gitsync import KIND, PLURAL
from gitopsd.gitsync.openapi import Schema, crd_file, custom_resource
from gitopsd.gitsync.spec_schema import MAX_NAME, SPEC
from gitopsd.gitsync.status_schema import MAX_DRIFTED_SHOWN, STATUS

__all__ = ["MAX_DRIFTED_SHOWN", "crd", "crd_yaml"]

PRINTER_COLUMNS: list[Schema] = [
    {
        "name": "Ready",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
    },
    {"name": "Mode", "type": "string", "jsonPath": ".spec.mode"},
    {"name": "Revision", "type": "string", "jsonPath": ".status.lastAppliedRevision"},
    {"name": "Drift", "type": "integer", "jsonPath": ".status.drift.total"},
    {"name": "Health", "type": "string", "jsonPath": ".status.health.status"},
    {"name": "Suspended", "type": "boolean", "jsonPath": ".spec.suspend"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {
        "name": "Message",
        "type": "string",
        "priority": 1,
        "jsonPath": '.status.conditions[?(@.type=="Ready")].message',
    },
]


def crd() -> Schema:
    """The CustomResourceDefinition of gitsyncs.gitopsd.io."""
    names = {"kind": KIND, "plural": PLURAL, "short": "gs", "maxName": MAX_NAME}
    names["why"] = " (it names the ApplySet parent gitopsd-<name> and labels metrics)"
    description = "A git repository path that gitopsd keeps applied to the cluster."
    return custom_resource(names, PRINTER_COLUMNS, description, SPEC, STATUS)


def crd_yaml() -> str:
    return crd_file(crd(), "gitopsd/gitsync/schema.py")


if __name__ == "__main__":
    sys.stdout.write(crd_yaml())
