"""The schema of a GitSync's status: its conditions, and the drift, health and inventory
of what it saw last."""

from __future__ import annotations

from gitopsd.gitsync.history import MAX_MESSAGE, MAX_SYNCS
from gitopsd.gitsync.openapi import object_, string

MAX_DRIFTED_SHOWN = 20
"""Drifted objects the status lists by name; all are counted."""

CONDITION = object_(
    "One aspect of the GitSync's state (Kubernetes API conventions).",
    {
        "type": string("Ready, Reconciling or Stalled.", maxLength=316),
        "status": string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
        "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
        "lastTransitionTime": string("When status last changed.", format="date-time"),
        "reason": string("A CamelCase word for programs.", maxLength=1024),
        "message": string("Details for people.", maxLength=32768),
    },
    required=["type", "status", "lastTransitionTime", "reason", "message"],
)
FIELD = object_(
    "A field that differs, the manager that owns it live, and the drift rule that decided "
    "what becomes of it, if one did.",
    {
        "path": string("The field's path."),
        "manager": string("Its field manager."),
        "decision": string("What the rule decided.", enum=["ignore", "accept", "heal", "alert"]),
        "rule": string("The rule: its name, or where it is written."),
    },
)
DRIFT = object_(
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
            "items": object_(
                "A drifted object.",
                {
                    "object": string("group/Kind/namespace/name"),
                    "state": string("missing, modified, extraneous or unowned."),
                    "fields": {"type": "array", "items": FIELD},
                    "reason": string("Why an unowned object is not written."),
                },
            ),
        },
        "accepted": {"type": "integer", "minimum": 0},
        "acceptedObjects": {
            "type": "array",
            "description": f"The first {MAX_DRIFTED_SHOWN} objects with fields the drift "
            "policy accepts (no drift).",
            "maxItems": MAX_DRIFTED_SHOWN,
            "items": object_(
                "An object with accepted fields.",
                {
                    "object": string("group/Kind/namespace/name"),
                    "fields": {"type": "array", "items": FIELD},
                },
            ),
        },
    },
)
HEALTH = object_(
    "The health of the revision's objects, assessed last (kstatus: Current, InProgress, "
    "Failed, Terminating, NotFound, Unknown).",
    {
        "status": string(
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
            "items": object_(
                "An object that is not Current.",
                {
                    "object": string("group/Kind/namespace/name"),
                    "status": string("Its health."),
                    "reason": string("A CamelCase word."),
                    "message": string("Why.", maxLength=1024),
                },
            ),
        },
    },
)
INVENTORY = object_(
    "What the revision applied holds.",
    {
        "total": {"type": "integer", "minimum": 0},
        "kinds": {
            "type": "array",
            "items": object_(
                "Objects of one group/kind.",
                {"groupKind": string("Kind.group"), "count": {"type": "integer"}},
            ),
        },
    },
)
SYNC = object_(
    "A sync that did something: applied a revision or changed objects, or failed.",
    {
        "revision": string("The revision it read or applied (full commit id)."),
        "startedAt": string("When it started.", format="date-time"),
        "durationSeconds": {"type": "number", "minimum": 0},
        "outcome": string("Succeeded or Failed.", enum=["Succeeded", "Failed"]),
        "reason": string("Why it failed: a CamelCase word, as Ready's.", maxLength=1024),
        "message": string("Why it failed, shortened.", maxLength=MAX_MESSAGE),
        "counts": {
            "type": "object",
            "description": "Objects by action (created, configured, pruned, replaced...); "
            "an action it did not take is left out.",
            "additionalProperties": {"type": "integer", "minimum": 0},
        },
    },
)
STATUS = object_(
    "What gitopsd saw and did (kstatus-compatible: kubectl wait --for=condition=Ready).",
    {
        "observedGeneration": {"type": "integer", "format": "int64"},
        "conditions": {
            "type": "array",
            "items": CONDITION,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
        "lastAttemptedRevision": string("The revision read last."),
        "lastAppliedRevision": string("The revision applied whole last."),
        "lastHandledReconcileAt": string(
            "The value of the gitopsd.io/reconcile-requested-at annotation that the last "
            "reconcile answered (Flux's convention: set the annotation to anything new, "
            "then wait for this to equal it)."
        ),
        "lastSyncTime": string("When a revision was last applied whole.", format="date-time"),
        "drift": DRIFT,
        "health": HEALTH,
        "inventory": INVENTORY,
        "history": {
            "type": "array",
            "description": f"The last {MAX_SYNCS} syncs that did something, newest first.",
            "maxItems": MAX_SYNCS,
            "items": SYNC,
        },
    },
)
