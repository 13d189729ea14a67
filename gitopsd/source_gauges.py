"""The gauges of a source's last state: each measurement replaces its series whole (see
`collectors.LastStates`); the names are a public contract (docs/metrics.md)."""

from __future__ import annotations

from gitopsd.collectors import SourceGauge

DRIFT_OBJECTS = SourceGauge(
    "gitopsd_drift_objects",
    "Objects that differ from git, by state and group/kind.",
    ("group_kind", "state"),
)
OBJECT_DRIFT = SourceGauge(
    "gitopsd_object_drift",
    "1 for each drifted object, with the field manager that drifted it (budgeted).",
    ("group_kind", "namespace", "name", "manager"),
)
OBJECT_DRIFT_OVER_BUDGET = SourceGauge(
    "gitopsd_object_drift_over_budget",
    "Drifted objects left out of gitopsd_object_drift by its series budget.",
)
DRIFT_POLICY_FIELDS = SourceGauge(
    "gitopsd_drift_policy_fields",
    "Fields that differ from git as a drift rule decides, by rule and action (fields "
    "it ignores are not exported).",
    ("rule", "action"),
)
HEALTH_OBJECTS = SourceGauge(
    "gitopsd_health_objects",
    "Objects of the source's revision by health status (Current, InProgress, Failed, "
    "Terminating, NotFound, Unknown) and group/kind.",
    ("group_kind", "status"),
)
HEALTH_NOW = SourceGauge(
    "gitopsd_source_health",
    "1 for the source's health now (Current when every object is, Failed when one is, "
    "else InProgress), 0 for the others.",
    ("status",),
)
LAST_SUCCESS = SourceGauge(
    "gitopsd_last_success_timestamp_seconds", "When the source last reconciled cleanly."
)
REVISION_INFO = SourceGauge(
    "gitopsd_source_revision_info",
    "The revision of the source read last (value 1).",
    ("revision",),
)
CLUSTER_INFO = SourceGauge(
    "gitopsd_source_cluster_info",
    "The cluster the source syncs into (value 1): in-cluster, a declared one, or secret/NAME.",
    ("cluster",),
)
LAST_STATE = (
    DRIFT_OBJECTS,
    OBJECT_DRIFT,
    OBJECT_DRIFT_OVER_BUDGET,
    DRIFT_POLICY_FIELDS,
    HEALTH_OBJECTS,
    HEALTH_NOW,
    LAST_SUCCESS,
    REVISION_INFO,
    CLUSTER_INFO,
)
"""The gauges of a source's last state, exported from its snapshot."""
