"""The GitSync CRD, written once, here: `python -m gitopsd.gitsync.schema` prints it, `make
crd` writes it to config/crd/gitsyncs.yaml, and a test fails when that file is not what
this module prints. Defaults are the daemon's own (SourceConfig, PrunePolicy), so a field
left out of a GitSync means what the same key left out of a file source means.

The API server checks what it can before a GitSync is stored: shapes, patterns, enums and
bounds per field, and CEL rules (`x-kubernetes-validations`) where a rule spans fields.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from gitopsd.config import PrunePolicy, SourceSpec
from gitopsd.configfile import Mode, SourceConfig
from gitopsd.gitsync import GROUP, KIND, PLURAL, VERSION

Schema = dict[str, Any]

DNS_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DURATION = "^([0-9]+h)?([0-9]+m)?([0-9]+(\\.[0-9]+)?s)?$"
REPOSITORY_URL = "^(https://|http://|ssh://|file://|[A-Za-z0-9._-]+@[A-Za-z0-9._-]+:)"
MAX_NAME = 50
"""A GitSync's name names its ApplySet parent gitopsd-<name> and labels metrics, as a file
source's name does (config.SOURCE_NAME)."""
MAX_DRIFTED_SHOWN = 20
"""Drifted objects the status lists by name; all are counted."""


def _string(description: str, **rules: Any) -> Schema:
    return {"type": "string", "description": description, **rules}


def _boolean(description: str, default: bool) -> Schema:
    return {"type": "boolean", "description": description, "default": default}


def _strings(description: str, default: tuple[str, ...], item: Schema) -> Schema:
    rules: Schema = {"minItems": 1} if default else {}
    return {
        "type": "array",
        "description": description,
        "default": list(default),
        "maxItems": 100,
        "items": item,
        **rules,
    }


def _duration(description: str, default_seconds: float) -> Schema:
    return _string(
        description,
        default=f"{default_seconds:g}s",
        pattern=DURATION,
        minLength=2,
        maxLength=32,
        **{
            "x-kubernetes-validations": [
                {
                    "rule": "duration(self) >= duration('1s') "
                    "&& duration(self) <= duration('168h')",
                    "message": "must be from 1s to 168h (7 days), like 30s, 5m or 1h30m",
                }
            ]
        },
    )


def _object(description: str, properties: Schema, **rules: Any) -> Schema:
    return {"type": "object", "description": description, "properties": properties, **rules}


REPOSITORY = _object(
    "The git repository to read.",
    {
        "url": _string(
            "https://, ssh:// or user@host:path. http:// and file:// only where the daemon's "
            "configuration allows them (gitSyncs.allowInsecure).",
            pattern=REPOSITORY_URL,
            maxLength=2048,
        ),
        "ref": _string(
            "Branch, tag or commit sha; HEAD is the remote's default branch.",
            default=SourceSpec.ref,
            minLength=1,
            maxLength=255,
            pattern="^[^\\s]+$",
        ),
        "secretRef": _object(
            "A Secret in the GitSync's namespace: `username` and `password` (https), or "
            "`identity` (an SSH private key) and `known_hosts` (ssh).",
            {"name": _string("The Secret's name.", pattern=DNS_SUBDOMAIN, maxLength=253)},
            required=["name"],
        ),
    },
    required=["url"],
    **{
        "x-kubernetes-validations": [
            {
                "rule": "!self.url.startsWith('file://') || !has(self.secretRef)",
                "message": "a file:// repository takes no secretRef",
            },
            {
                "rule": "!(self.url.startsWith('ssh://') || self.url.matches("
                "'^[A-Za-z0-9._-]+@[A-Za-z0-9._-]+:')) || has(self.secretRef)",
                "message": "an ssh repository needs a secretRef with identity and known_hosts",
            },
        ]
    },
)
RELATIVE_PATH = _string(
    "A directory or file inside the repository, relative to its root.",
    minLength=1,
    maxLength=1024,
    **{
        "x-kubernetes-validations": [
            {
                "rule": "!self.startsWith('/') && !self.matches('(^|/)\\\\.\\\\.(/|$)')",
                "message": "must be relative to the repository's root, without '..'",
            }
        ]
    },
)
GLOB = _string("A glob pattern.", minLength=1, maxLength=256)
GUARDS = _object(
    "What every prune must pass (each refusal names its rule).",
    {
        "allowEmpty": _boolean(
            "Prune even when the revision holds no object at all (usually a broken source).",
            PrunePolicy.allow_empty,
        ),
        "pruneBudgetPercent": {
            "type": "number",
            "description": "Most objects one sync may prune, as a share of the owned objects "
            "(one is always allowed).",
            "default": PrunePolicy.budget_percent,
            "minimum": 0,
            "exclusiveMinimum": True,
            "maximum": 100,
        },
        "allowMassPrune": _boolean("Prune past the budget.", PrunePolicy.allow_mass_prune),
        "pruneProtected": _boolean(
            "Also prune Namespaces, CRDs, PersistentVolumes and PersistentVolumeClaims.",
            PrunePolicy.prune_protected,
        ),
    },
    default={},
)
DEPENDENCY = _object(
    "Another GitSync.",
    {
        "name": _string("Its name.", pattern=DNS_LABEL, maxLength=MAX_NAME),
        "namespace": _string(
            "Its namespace (default: this GitSync's).", pattern=DNS_LABEL, maxLength=63
        ),
    },
    required=["name"],
)
SPEC = _object(
    "What to keep in sync, and how.",
    {
        "repository": REPOSITORY,
        "paths": _strings(
            "Directories or files inside the repository, read recursively.",
            SourceSpec.paths,
            RELATIVE_PATH,
        ),
        "include": _strings(
            "Glob patterns a file name must match to be read.", SourceSpec.include, GLOB
        ),
        "exclude": _strings(
            "Glob patterns (against the path from the root) that skip a file.",
            SourceSpec.exclude,
            GLOB,
        ),
        "interval": _duration("How often git is polled.", SourceConfig.interval_seconds),
        "timeout": _duration(
            "Deadline of one reconcile: past it nothing more is written.",
            SourceConfig.timeout_seconds,
        ),
        "mode": _string(
            "observe: measure drift only; warn: also an Event on each drifted object; "
            "enforce: apply each new revision (and prune, if enabled).",
            enum=[str(mode) for mode in Mode],
            default=str(SourceConfig.mode),
        ),
        "prune": _boolean("Delete what this GitSync applied once it left git.", False),
        "selfHeal": _boolean(
            "In enforce mode, correct drift as soon as a watch reports it.",
            SourceConfig.self_heal,
        ),
        "guards": GUARDS,
        "suspend": _boolean("Stop reconciling until set back to false.", False),
        "targetNamespace": _string(
            "Namespace of namespaced objects whose manifest names none (default: the "
            "GitSync's namespace).",
            pattern=DNS_LABEL,
            maxLength=63,
        ),
        "serviceAccountName": _string(
            "Every read and write of this GitSync impersonates this ServiceAccount of its "
            "namespace; without it, the daemon's default applies (README: operator mode).",
            pattern=DNS_SUBDOMAIN,
            maxLength=253,
        ),
        "dependsOn": {
            "type": "array",
            "description": "GitSyncs that must have applied their current revision, with "
            "every object healthy, before this one applies a new revision. A cycle stalls "
            "the GitSyncs on it.",
            "maxItems": 32,
            "items": DEPENDENCY,
        },
    },
    required=["repository"],
    **{
        "x-kubernetes-validations": [
            {
                "rule": "self.mode == 'enforce' || !self.prune",
                "message": "prune needs mode enforce: observe and warn never write",
            },
            {
                "rule": "self.prune || !self.guards.allowMassPrune",
                "message": "guards.allowMassPrune needs prune",
            },
        ]
    },
)
CONDITION = _object(
    "One aspect of the GitSync's state (Kubernetes API conventions).",
    {
        "type": _string("Ready, Reconciling or Stalled.", maxLength=316),
        "status": _string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
        "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
        "lastTransitionTime": _string("When status last changed.", format="date-time"),
        "reason": _string("A CamelCase word for programs.", maxLength=1024),
        "message": _string("Details for people.", maxLength=32768),
    },
    required=["type", "status", "lastTransitionTime", "reason", "message"],
)
FIELD = _object(
    "A field that differs, and the manager that owns it live.",
    {"path": _string("The field's path."), "manager": _string("Its field manager.")},
)
DRIFT = _object(
    "The drift measured last.",
    {
        "total": {"type": "integer", "minimum": 0},
        "missing": {"type": "integer", "minimum": 0},
        "modified": {"type": "integer", "minimum": 0},
        "extraneous": {"type": "integer", "minimum": 0},
        "unowned": {"type": "integer", "minimum": 0},
        "objects": {
            "type": "array",
            "description": f"The first {MAX_DRIFTED_SHOWN} drifted objects.",
            "maxItems": MAX_DRIFTED_SHOWN,
            "items": _object(
                "A drifted object.",
                {
                    "object": _string("group/Kind/namespace/name"),
                    "state": _string("missing, modified, extraneous or unowned."),
                    "fields": {"type": "array", "items": FIELD},
                    "reason": _string("Why an unowned object is not written."),
                },
            ),
        },
    },
)
HEALTH = _object(
    "The health of the revision's objects, assessed last (kstatus: Current, InProgress, "
    "Failed, Terminating, NotFound, Unknown).",
    {
        "status": _string(
            "Current when every object is, Failed when one is, else InProgress; Unknown "
            "until a revision was read and its objects assessed.",
            enum=["Current", "InProgress", "Failed", "Unknown"],
        ),
        "total": {"type": "integer", "minimum": 0},
        "current": {"type": "integer", "minimum": 0},
        "objects": {
            "type": "array",
            "description": f"The first {MAX_DRIFTED_SHOWN} objects that are not Current, "
            "Failed ones first.",
            "maxItems": MAX_DRIFTED_SHOWN,
            "items": _object(
                "An object that is not Current.",
                {
                    "object": _string("group/Kind/namespace/name"),
                    "status": _string("Its health."),
                    "reason": _string("A CamelCase word."),
                    "message": _string("Why.", maxLength=1024),
                },
            ),
        },
    },
)
INVENTORY = _object(
    "What the revision applied holds.",
    {
        "total": {"type": "integer", "minimum": 0},
        "kinds": {
            "type": "array",
            "items": _object(
                "Objects of one group/kind.",
                {"groupKind": _string("Kind.group"), "count": {"type": "integer"}},
            ),
        },
    },
)
STATUS = _object(
    "What gitopsd saw and did (kstatus-compatible: kubectl wait --for=condition=Ready).",
    {
        "observedGeneration": {"type": "integer", "format": "int64"},
        "conditions": {
            "type": "array",
            "items": CONDITION,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
        "lastAttemptedRevision": _string("The revision read last."),
        "lastAppliedRevision": _string("The revision applied whole last."),
        "lastHandledReconcileAt": _string(
            "The value of the gitopsd.io/reconcile-requested-at annotation that the last "
            "reconcile answered (Flux's convention: set the annotation to anything new, "
            "then wait for this to equal it)."
        ),
        "lastSyncTime": _string("When a revision was last applied whole.", format="date-time"),
        "drift": DRIFT,
        "health": HEALTH,
        "inventory": INVENTORY,
    },
)
PRINTER_COLUMNS = [
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
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
                "shortNames": ["gs"],
                "categories": ["gitopsd"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {"openAPIV3Schema": _root()},
                }
            ],
        },
    }


def _root() -> Schema:
    return _object(
        "A git repository path that gitopsd keeps applied to the cluster.",
        {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": SPEC,
            "status": STATUS,
        },
        required=["spec"],
        **{
            "x-kubernetes-validations": [
                {
                    "rule": f"size(self.metadata.name) <= {MAX_NAME} && "
                    f"self.metadata.name.matches('{DNS_LABEL}')",
                    "message": f"metadata.name: at most {MAX_NAME} lower-case letters, digits "
                    "and '-' (it names the ApplySet parent gitopsd-<name> and labels metrics)",
                }
            ]
        },
    )


def crd_yaml() -> str:
    header = "# Generated by `make crd` from gitopsd/gitsync/schema.py: edit that, not this.\n"
    return header + yaml.safe_dump(crd(), sort_keys=False, width=100)


if __name__ == "__main__":
    sys.stdout.write(crd_yaml())
