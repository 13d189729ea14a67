"""Health assessment: live objects as their controllers write them, and the status each has."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gitopsd.health import (
    MAX_MESSAGE_CHARS,
    STATUS_FIELDS,
    Assessments,
    Health,
    Status,
    assess,
    essentials,
    overall,
)
from gitopsd.objects import Body, ObjectKey

TIME = "2025-03-04T10:15:30Z"


def obj(
    api_version: str,
    kind: str,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    **metadata: Any,
) -> Body:
    """A live object as the API server serves it: server metadata, spec, status."""
    body: Body = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "0f5b7c9e-3a52-4d8e-9f1a-6c2b8d4e7a10",
            "resourceVersion": "48213",
            "creationTimestamp": TIME,
            "generation": 1,
            **metadata,
        },
    }
    if spec is not None:
        body["spec"] = spec
    if status is not None:
        body["status"] = status
    return body


def cond(type_: str, status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    """A condition with the timestamps controllers add (and `essentials` drops)."""
    condition = {"type": type_, "status": status, "lastTransitionTime": TIME}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


# Workloads


def deployment(
    wanted: int = 3,
    conditions: list[dict[str, Any]] | None = None,
    spec: dict[str, Any] | None = None,
    generation: int = 2,
    **counts: int,
) -> Body:
    """A Deployment as kube-controller-manager reports it; `counts` override status counts."""
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "replicas": wanted,
        "updatedReplicas": wanted,
        "readyReplicas": wanted,
        "availableReplicas": wanted,
        "conditions": conditions if conditions is not None else [AVAILABLE, ROLLED_OUT],
        **counts,
    }
    body_spec = {"replicas": wanted, "progressDeadlineSeconds": 600, **(spec or {})}
    return obj("apps/v1", "Deployment", body_spec, status, generation=generation)


AVAILABLE = {
    **cond("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
    "lastUpdateTime": TIME,
}
UNAVAILABLE = cond(
    "Available",
    "False",
    "MinimumReplicasUnavailable",
    "Deployment does not have minimum availability.",
)
ROLLED_OUT = cond(
    "Progressing",
    "True",
    "NewReplicaSetAvailable",
    'ReplicaSet "web-7d9c6b8f5" has successfully progressed.',
)
ROLLING = cond(
    "Progressing", "True", "ReplicaSetUpdated", 'ReplicaSet "web-5f4d8c7b9" is progressing.'
)
TIMED_OUT = cond(
    "Progressing",
    "False",
    "ProgressDeadlineExceeded",
    'ReplicaSet "web-5f4d8c7b9" has timed out progressing.',
)


def statefulset(replicas: int = 3, strategy: dict[str, Any] | None = None, **status: Any) -> Body:
    revision = "web-6c8f7d5b9"
    full = {
        "observedGeneration": 1,
        "replicas": replicas,
        "readyReplicas": replicas,
        "currentReplicas": replicas,
        "updatedReplicas": replicas,
        "availableReplicas": replicas,
        "currentRevision": revision,
        "updateRevision": revision,
        "collisionCount": 0,
        **status,
    }
    spec = {"replicas": replicas, "serviceName": "web", "updateStrategy": strategy or {}}
    return obj("apps/v1", "StatefulSet", spec, full)


def daemonset(desired: int = 3, **status: Any) -> Body:
    full = {
        "observedGeneration": 1,
        "desiredNumberScheduled": desired,
        "currentNumberScheduled": desired,
        "updatedNumberScheduled": desired,
        "numberReady": desired,
        "numberAvailable": desired,
        "numberMisscheduled": 0,
        **status,
    }
    return obj("apps/v1", "DaemonSet", {"updateStrategy": {"type": "RollingUpdate"}}, full)


def replicaset(replicas: int = 3, **status: Any) -> Body:
    full = {
        "observedGeneration": 1,
        "replicas": replicas,
        "fullyLabeledReplicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        **status,
    }
    return obj("apps/v1", "ReplicaSet", {"replicas": replicas}, full)


def job(*conditions: dict[str, Any], spec: dict[str, Any] | None = None, **counts: int) -> Body:
    status: dict[str, Any] = {"startTime": TIME, "uncountedTerminatedPods": {}, **counts}
    if conditions:
        status["conditions"] = list(conditions)
    return obj("batch/v1", "Job", {"backoffLimit": 6, "completions": 1, **(spec or {})}, status)


# Core and API kinds


def pvc(phase: str, **metadata: Any) -> Body:
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    return obj("v1", "PersistentVolumeClaim", spec, {"phase": phase}, **metadata)


def service(type_: str, load_balancer: dict[str, Any]) -> Body:
    spec = {"type": type_, "clusterIP": "10.96.14.7", "ports": [{"port": 80}]}
    return obj("v1", "Service", spec, {"loadBalancer": load_balancer})


def namespace(phase: str, **metadata: Any) -> Body:
    body = obj("v1", "Namespace", {"finalizers": ["kubernetes"]}, {"phase": phase}, **metadata)
    del body["metadata"]["namespace"]
    return body


def pod(phase: str, *conditions: dict[str, Any], **status: Any) -> Body:
    full = {"phase": phase, "conditions": list(conditions), "podIP": "10.244.1.7", **status}
    return obj("v1", "Pod", {"containers": [{"name": "web", "image": "nginx:1.27"}]}, full)


def crd(*conditions: dict[str, Any]) -> Body:
    status = {
        "conditions": list(conditions),
        "acceptedNames": {"kind": "Widget", "plural": "widgets"},
        "storedVersions": ["v1"],
    }
    return obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", {"group": "x.io"}, status)


def api_service(*conditions: dict[str, Any]) -> Body:
    spec = {"group": "metrics.k8s.io", "version": "v1beta1", "service": {"name": "metrics"}}
    status = {"conditions": list(conditions)}
    return obj("apiregistration.k8s.io/v1", "APIService", spec, status)


def kustomization(*conditions: dict[str, Any]) -> Body:
    """A Flux Kustomization: a custom resource with kstatus's conditions."""
    status = {
        "observedGeneration": 1,
        "lastAppliedRevision": "main@sha1:4f2a9c1",
        "conditions": [{**c, "observedGeneration": 1} for c in conditions],
    }
    spec = {"interval": "10m", "path": "./apps", "sourceRef": {"kind": "GitRepository"}}
    return obj("kustomize.toolkit.fluxcd.io/v1", "Kustomization", spec, status)


def with_field(body: Body, path: str, value: Any) -> Body:
    """`body` with the dotted `path` set to `value`: for bodies with odd fields."""
    changed = copy.deepcopy(body)
    *parents, last = path.split(".")
    target = changed
    for key in parents:
        target = target[key]
    target[last] = value
    return changed


QUOTA_ERROR = (
    'pods "web-7d9c6b8f5-x2k4p" is forbidden: exceeded quota: compute, '
    "requested: limits.cpu=1, used: limits.cpu=4, limited: limits.cpu=4"
)
DISCOVERY_ERROR = (
    "failing or missing response from https://10.244.0.5:10250/apis/metrics.k8s.io/v1beta1: "
    'Get "https://10.244.0.5:10250/apis/metrics.k8s.io/v1beta1": dial tcp 10.244.0.5:10250: '
    "connect: connection refused"
)
APPLIED = "Applied revision: main@sha1:4f2a9c1"

CASES = [
    # Deployment
    pytest.param(
        deployment(conditions=[AVAILABLE, ROLLING], replicas=4, updatedReplicas=1),
        Status.IN_PROGRESS,
        "Rollout",
        "updated replicas 1/3",
        id="deployment-mid-rollout",
    ),
    pytest.param(
        deployment(conditions=[AVAILABLE, ROLLING], replicas=4),
        Status.IN_PROGRESS,
        "Rollout",
        "old replicas pending termination: 4 exist, 3 wanted",
        id="deployment-old-replicas-terminating",
    ),
    pytest.param(
        deployment(1, [UNAVAILABLE, ROLLING], readyReplicas=0, availableReplicas=0),
        Status.IN_PROGRESS,
        "Rollout",
        "ready replicas 0/1",
        id="deployment-pod-starting",
    ),
    pytest.param(
        deployment(1, [UNAVAILABLE, ROLLING], availableReplicas=0),
        Status.IN_PROGRESS,
        "Rollout",
        "available replicas 0/1",
        id="deployment-within-min-ready-seconds",
    ),
    pytest.param(
        deployment(),
        Status.CURRENT,
        "MinimumReplicasAvailable",
        "minimum availability",
        id="deployment-complete",
    ),
    pytest.param(
        deployment(conditions=[UNAVAILABLE, ROLLED_OUT]),
        Status.IN_PROGRESS,
        "MinimumReplicasUnavailable",
        "does not have minimum availability",
        id="deployment-not-available",
    ),
    pytest.param(
        deployment(conditions=[]),
        Status.CURRENT,
        "",
        "",
        id="deployment-without-conditions",
    ),
    pytest.param(
        deployment(conditions=[UNAVAILABLE, TIMED_OUT], updatedReplicas=1, availableReplicas=2),
        Status.FAILED,
        "ProgressDeadlineExceeded",
        "has timed out progressing",
        id="deployment-progress-deadline-exceeded",
    ),
    pytest.param(
        deployment(
            conditions=[AVAILABLE, cond("Progressing", "Unknown", "DeploymentPaused")],
            spec={"paused": True},
            updatedReplicas=1,
        ),
        Status.CURRENT,
        "Paused",
        "spec.paused",
        id="deployment-paused",
    ),
    pytest.param(
        obj("apps/v1", "Deployment", {"replicas": 2}),
        Status.IN_PROGRESS,
        "NoStatus",
        "not reported",
        id="deployment-without-status",
    ),
    pytest.param(
        obj("apps/v1", "Deployment", {"replicas": 2}, {}),
        Status.IN_PROGRESS,
        "NoStatus",
        "not reported",
        id="deployment-with-empty-status",
    ),
    pytest.param(
        with_field(deployment(generation=2), "metadata.generation", 3),
        Status.IN_PROGRESS,
        "ObservedGeneration",
        "status reflects generation 2, spec is at generation 3",
        id="deployment-observed-generation-behind",
    ),
    # StatefulSet
    pytest.param(statefulset(), Status.CURRENT, "", "", id="statefulset-ready"),
    pytest.param(
        statefulset(readyReplicas=2),
        Status.IN_PROGRESS,
        "Rollout",
        "ready replicas 2/3",
        id="statefulset-pod-not-ready",
    ),
    pytest.param(
        statefulset(updatedReplicas=1, currentReplicas=2, updateRevision="web-7b9d6f4c8"),
        Status.IN_PROGRESS,
        "Rollout",
        "updated replicas 1/3",
        id="statefulset-rolling",
    ),
    pytest.param(
        statefulset(currentReplicas=0, updateRevision="web-7b9d6f4c8"),
        Status.IN_PROGRESS,
        "Rollout",
        "revision web-7b9d6f4c8 replacing web-6c8f7d5b9",
        id="statefulset-revision-not-yet-current",
    ),
    pytest.param(
        statefulset(
            strategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 2}},
            updatedReplicas=1,
            currentReplicas=2,
            updateRevision="web-7b9d6f4c8",
        ),
        Status.CURRENT,
        "",
        "",
        id="statefulset-partitioned-rollout-done",
    ),
    pytest.param(
        statefulset(
            strategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 1}},
            updatedReplicas=1,
            updateRevision="web-7b9d6f4c8",
        ),
        Status.IN_PROGRESS,
        "Rollout",
        "updated replicas 1/2",
        id="statefulset-partitioned-rollout-pending",
    ),
    pytest.param(
        statefulset(strategy={"type": "OnDelete"}, updatedReplicas=0, updateRevision="web-7b"),
        Status.CURRENT,
        "",
        "",
        id="statefulset-on-delete-ready",
    ),
    pytest.param(
        statefulset(strategy={"type": "OnDelete"}, readyReplicas=1),
        Status.IN_PROGRESS,
        "Rollout",
        "ready replicas 1/3",
        id="statefulset-on-delete-not-ready",
    ),
    pytest.param(
        with_field(statefulset(replicas=3), "spec.replicas", 2),
        Status.IN_PROGRESS,
        "Rollout",
        "replicas pending termination: 3 exist, 2 wanted",
        id="statefulset-scaling-down",
    ),
    # DaemonSet
    pytest.param(daemonset(), Status.CURRENT, "", "", id="daemonset-ready"),
    pytest.param(
        daemonset(updatedNumberScheduled=1, numberAvailable=2, numberReady=2),
        Status.IN_PROGRESS,
        "Rollout",
        "updated pods 1/3",
        id="daemonset-rolling",
    ),
    pytest.param(
        daemonset(numberAvailable=2, numberReady=2, numberUnavailable=1),
        Status.IN_PROGRESS,
        "Rollout",
        "ready pods 2/3",
        id="daemonset-pod-not-ready",
    ),
    pytest.param(
        obj("apps/v1", "DaemonSet", {"updateStrategy": {"type": "RollingUpdate"}}),
        Status.IN_PROGRESS,
        "NoStatus",
        "",
        id="daemonset-without-status",
    ),
    # ReplicaSet
    pytest.param(replicaset(), Status.CURRENT, "", "", id="replicaset-ready"),
    pytest.param(
        replicaset(availableReplicas=2),
        Status.IN_PROGRESS,
        "Rollout",
        "available replicas 2/3",
        id="replicaset-pod-not-available",
    ),
    pytest.param(
        replicaset(
            replicas=2,
            readyReplicas=2,
            availableReplicas=2,
            conditions=[cond("ReplicaFailure", "True", "FailedCreate", QUOTA_ERROR)],
        ),
        Status.IN_PROGRESS,
        "FailedCreate",
        "exceeded quota",
        id="replicaset-replica-failure",
    ),
    # Job
    pytest.param(
        job(
            cond("SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number"),
            cond("Complete", "True", "CompletionsReached", "Reached expected number"),
            succeeded=1,
        ),
        Status.CURRENT,
        "CompletionsReached",
        "Reached expected number",
        id="job-complete",
    ),
    pytest.param(
        job(cond("Complete", "True"), succeeded=1),
        Status.CURRENT,
        "Complete",
        "",
        id="job-complete-before-1.31-without-reason",
    ),
    pytest.param(
        job(cond("SuccessCriteriaMet", "True", "SuccessPolicy", "Matched rules"), active=2),
        Status.CURRENT,
        "SuccessPolicy",
        "Matched rules",
        id="job-success-criteria-met",
    ),
    pytest.param(
        job(
            cond("FailureTarget", "True", "BackoffLimitExceeded", "Job has reached the backoff"),
            cond("Failed", "True", "BackoffLimitExceeded", "Job has reached the backoff"),
            failed=7,
        ),
        Status.FAILED,
        "BackoffLimitExceeded",
        "backoff",
        id="job-backoff-limit-exceeded",
    ),
    pytest.param(
        job(
            cond("Failed", "True", "DeadlineExceeded", "Job was active longer than specified"),
            failed=1,
        ),
        Status.FAILED,
        "DeadlineExceeded",
        "active longer",
        id="job-deadline-exceeded",
    ),
    pytest.param(
        job(active=1, ready=1, failed=1),
        Status.IN_PROGRESS,
        "Running",
        "active 1, succeeded 0, failed 1",
        id="job-running",
    ),
    pytest.param(
        obj("batch/v1", "Job", {"completions": 1}),
        Status.IN_PROGRESS,
        "Pending",
        "active 0, succeeded 0, failed 0",
        id="job-not-started",
    ),
    pytest.param(
        job(
            cond("Suspended", "True", "JobSuspended", "Job suspended"),
            spec={"suspend": True},
        ),
        Status.CURRENT,
        "Suspended",
        "",
        id="job-suspended",
    ),
    # CronJob
    pytest.param(
        obj(
            "batch/v1",
            "CronJob",
            {"schedule": "*/5 * * * *", "suspend": False},
            {"lastScheduleTime": TIME, "active": [{"kind": "Job", "name": "report-2901"}]},
        ),
        Status.CURRENT,
        "",
        "",
        id="cronjob-scheduling",
    ),
    pytest.param(
        obj("batch/v1", "CronJob", {"schedule": "0 3 * * *", "suspend": True}, {}),
        Status.CURRENT,
        "Suspended",
        "spec.suspend",
        id="cronjob-suspended",
    ),
    # PersistentVolumeClaim
    pytest.param(pvc("Pending"), Status.IN_PROGRESS, "Pending", "phase Pending", id="pvc-pending"),
    pytest.param(pvc("Bound"), Status.CURRENT, "", "", id="pvc-bound"),
    pytest.param(pvc("Lost"), Status.FAILED, "Lost", "no longer exists", id="pvc-lost"),
    # Service
    pytest.param(
        service("LoadBalancer", {"ingress": [{"ip": "203.0.113.10", "ipMode": "VIP"}]}),
        Status.CURRENT,
        "",
        "",
        id="service-load-balancer-with-ingress",
    ),
    pytest.param(
        service("LoadBalancer", {}),
        Status.IN_PROGRESS,
        "Pending",
        "load balancer address",
        id="service-load-balancer-waiting",
    ),
    pytest.param(service("ClusterIP", {}), Status.CURRENT, "", "", id="service-cluster-ip"),
    # Namespace
    pytest.param(namespace("Active"), Status.CURRENT, "", "", id="namespace-active"),
    pytest.param(
        namespace("Terminating", deletionTimestamp=TIME),
        Status.TERMINATING,
        "Deleting",
        f"deletion requested at {TIME}",
        id="namespace-being-deleted",
    ),
    pytest.param(
        namespace("Terminating"),
        Status.TERMINATING,
        "Deleting",
        "objects are being deleted",
        id="namespace-terminating-phase",
    ),
    # Pod
    pytest.param(
        pod("Running", cond("Ready", "True")), Status.CURRENT, "", "", id="pod-running-ready"
    ),
    pytest.param(
        pod("Running", cond("Ready", "False", "ContainersNotReady")),
        Status.IN_PROGRESS,
        "Running",
        "Ready",
        id="pod-running-not-ready",
    ),
    pytest.param(
        pod("Pending", cond("PodScheduled", "False", "Unschedulable", "0/3 nodes are available")),
        Status.IN_PROGRESS,
        "Pending",
        "",
        id="pod-pending",
    ),
    pytest.param(pod("Succeeded"), Status.CURRENT, "Succeeded", "", id="pod-succeeded"),
    pytest.param(
        pod("Failed", reason="Evicted", message="The node was low on resource: memory."),
        Status.FAILED,
        "Evicted",
        "low on resource",
        id="pod-evicted",
    ),
    # CustomResourceDefinition
    pytest.param(
        crd(
            cond("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
            cond(
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted",
            ),
        ),
        Status.CURRENT,
        "InitialNamesAccepted",
        "",
        id="crd-established",
    ),
    pytest.param(
        crd(
            cond("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
            cond("Established", "False", "Installing", "the initial names have been accepted"),
        ),
        Status.IN_PROGRESS,
        "Installing",
        "",
        id="crd-installing",
    ),
    pytest.param(
        crd(
            cond("NamesAccepted", "False", "NameConflict", '"widgets" is already in use'),
            cond("Established", "False", "NotAccepted", "not all names are accepted"),
        ),
        Status.FAILED,
        "NameConflict",
        "already in use",
        id="crd-names-not-accepted",
    ),
    pytest.param(crd(), Status.IN_PROGRESS, "Pending", "no Established", id="crd-just-created"),
    # APIService
    pytest.param(
        api_service(cond("Available", "True", "Passed", "all checks passed")),
        Status.CURRENT,
        "Passed",
        "",
        id="apiservice-available",
    ),
    pytest.param(
        api_service(cond("Available", "False", "FailedDiscoveryCheck", DISCOVERY_ERROR)),
        Status.IN_PROGRESS,
        "FailedDiscoveryCheck",
        "connection refused",
        id="apiservice-failed-discovery-check",
    ),
    # Custom resources
    pytest.param(
        kustomization(cond("Ready", "True", "ReconciliationSucceeded", APPLIED)),
        Status.CURRENT,
        "ReconciliationSucceeded",
        APPLIED,
        id="custom-ready",
    ),
    pytest.param(
        kustomization(cond("Ready", "False", "HealthCheckFailed", "timeout waiting for: web")),
        Status.IN_PROGRESS,
        "HealthCheckFailed",
        "timeout waiting",
        id="custom-not-ready",
    ),
    pytest.param(
        kustomization(cond("Ready", "Unknown", "Progressing", "reconciliation in progress")),
        Status.IN_PROGRESS,
        "Progressing",
        "",
        id="custom-ready-unknown",
    ),
    pytest.param(
        kustomization(cond("Ready", "False")),
        Status.IN_PROGRESS,
        "NotReady",
        "",
        id="custom-not-ready-without-reason",
    ),
    pytest.param(
        kustomization(
            cond("Ready", "False", "BuildFailed", "kustomize build failed"),
            cond("Stalled", "True", "BuildFailed", "kustomize build failed: accumulating"),
        ),
        Status.FAILED,
        "BuildFailed",
        "accumulating",
        id="custom-stalled",
    ),
    pytest.param(
        kustomization(
            cond("Reconciling", "True", "ProgressingWithRetry", "Detecting drift"),
            cond("Ready", "True", "ReconciliationSucceeded", APPLIED),
        ),
        Status.IN_PROGRESS,
        "ProgressingWithRetry",
        "drift",
        id="custom-reconciling",
    ),
    pytest.param(
        obj("example.io/v1", "Widget", {"size": 3}, {"conditions": [cond("Available", "True")]}),
        Status.CURRENT,
        "Available",
        "",
        id="custom-available",
    ),
    pytest.param(
        obj("example.io/v1", "Widget", {"size": 3}, {"state": "ok"}),
        Status.CURRENT,
        "",
        "",
        id="custom-without-conditions",
    ),
    pytest.param(
        obj("example.io/v1", "Widget", {"size": 3}),
        Status.CURRENT,
        "",
        "",
        id="custom-without-status",
    ),
    # Objects without status, and deletion
    pytest.param(
        obj("v1", "ConfigMap") | {"data": {"mode": "prod"}},
        Status.CURRENT,
        "",
        "",
        id="configmap",
    ),
    pytest.param(
        pvc("Bound", deletionTimestamp=TIME, finalizers=["kubernetes.io/pvc-protection"]),
        Status.TERMINATING,
        "Deleting",
        "waiting for finalizers kubernetes.io/pvc-protection",
        id="deletion-requested",
    ),
    # Malformed fields: Unknown, naming the field
    pytest.param(
        with_field(deployment(), "spec.replicas", "3"),
        Status.UNKNOWN,
        "Malformed",
        "spec.replicas should be an integer, not str",
        id="malformed-replicas-string",
    ),
    pytest.param(
        with_field(deployment(), "status.readyReplicas", True),
        Status.UNKNOWN,
        "Malformed",
        "status.readyReplicas should be an integer, not bool",
        id="malformed-replicas-boolean",
    ),
    pytest.param(
        with_field(kustomization(), "status.conditions", {"Ready": "True"}),
        Status.UNKNOWN,
        "Malformed",
        "status.conditions should be a list, not dict",
        id="malformed-conditions-not-a-list",
    ),
    pytest.param(
        with_field(kustomization(), "status.conditions", ["Ready"]),
        Status.UNKNOWN,
        "Malformed",
        "status.conditions[0] should be an object, not str",
        id="malformed-condition-not-an-object",
    ),
    pytest.param(
        kustomization({"type": "Ready", "status": True}),
        Status.UNKNOWN,
        "Malformed",
        "status.conditions[0].status should be a string, not bool",
        id="malformed-condition-status-unquoted",
    ),
    pytest.param(
        with_field(deployment(), "metadata.generation", "2"),
        Status.UNKNOWN,
        "Malformed",
        "metadata.generation should be an integer",
        id="malformed-generation",
    ),
    pytest.param(
        with_field(service("LoadBalancer", {}), "status.loadBalancer", []),
        Status.UNKNOWN,
        "Malformed",
        "status.loadBalancer should be an object, not list",
        id="malformed-load-balancer",
    ),
    pytest.param(
        with_field(pvc("Bound"), "metadata", ["web"]),
        Status.UNKNOWN,
        "Malformed",
        "metadata should be an object",
        id="malformed-metadata",
    ),
    pytest.param(
        with_field(pvc("Bound"), "apiVersion", 1),
        Status.UNKNOWN,
        "Malformed",
        "apiVersion should be a string, not int",
        id="malformed-api-version",
    ),
    pytest.param(
        with_field(deployment(), "spec.paused", "true"),
        Status.UNKNOWN,
        "Malformed",
        "spec.paused should be a boolean",
        id="malformed-paused",
    ),
]


@pytest.mark.parametrize(("body", "status", "reason", "fragment"), CASES)
def test_assess(body: Body, status: Status, reason: str, fragment: str) -> None:
    health = assess(body)
    assert (health.status, health.reason) == (status, reason)
    assert fragment in health.message
    assert health.healthy is (status is Status.CURRENT)


@pytest.mark.parametrize(("body", "status", "reason", "fragment"), CASES)
def test_essentials_assess_the_same(body: Body, status: Status, reason: str, fragment: str) -> None:
    reduced = copy.deepcopy(body)
    kept = essentials(body)
    if kept is None:
        reduced.pop("status", None)
    else:
        reduced["status"] = kept
    assert assess(reduced) == assess(body)


def test_none_is_not_found() -> None:
    assert assess(None) == Health(Status.NOT_FOUND)


def test_a_status_that_is_not_an_object_is_unknown_and_kept_as_it_is() -> None:
    body = obj("example.io/v1", "Widget", {"size": 3}) | {"status": "ok"}
    assert assess(body) == Health(
        Status.UNKNOWN, "Malformed", "status should be an object, not str"
    )
    assert essentials(body) == "ok"


def test_essentials_keep_only_what_the_rules_read() -> None:
    available = AVAILABLE | {"observedGeneration": 2}  # no rule reads a condition's
    kept = essentials(deployment(conditions=[available], collisionCount=1, unavailableReplicas=0))
    assert kept == {
        "observedGeneration": 2,
        "replicas": 3,
        "updatedReplicas": 3,
        "readyReplicas": 3,
        "availableReplicas": 3,
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "reason": "MinimumReplicasAvailable",
                "message": "Deployment has minimum availability.",
            }
        ],
    }
    assert set(kept) <= STATUS_FIELDS


def test_essentials_of_a_body_without_status() -> None:
    assert essentials(obj("v1", "ConfigMap")) is None


def test_long_messages_are_cut() -> None:
    health = assess(kustomization(cond("Stalled", "True", "BuildFailed", "x" * 1000)))
    assert len(health.message) == MAX_MESSAGE_CHARS
    assert health.message.endswith("…")


def test_status_values_are_kstatus_words() -> None:
    assert [str(status) for status in Status] == [
        "Current",
        "InProgress",
        "Failed",
        "Terminating",
        "NotFound",
        "Unknown",
    ]


@pytest.mark.parametrize(
    ("health", "text"),
    [
        (
            Health(Status.IN_PROGRESS, "Rollout", "available replicas 0/1"),
            "InProgress: Rollout: available replicas 0/1",
        ),
        (Health(Status.CURRENT, "Suspended"), "Current: Suspended"),
        (Health(Status.FAILED, message="gone"), "Failed: gone"),
        (Health(Status.CURRENT), "Current"),
    ],
    ids=["all-parts", "no-message", "no-reason", "status-alone"],
)
def test_str(health: Health, text: str) -> None:
    assert str(health) == text


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([], Status.CURRENT),
        ([Status.CURRENT, Status.CURRENT], Status.CURRENT),
        ([Status.CURRENT, Status.IN_PROGRESS], Status.IN_PROGRESS),
        ([Status.IN_PROGRESS, Status.FAILED, Status.CURRENT], Status.FAILED),
        ([Status.CURRENT, Status.UNKNOWN], Status.IN_PROGRESS),
        ([Status.NOT_FOUND], Status.IN_PROGRESS),
        ([Status.TERMINATING, Status.CURRENT], Status.IN_PROGRESS),
    ],
    ids=["none", "all-current", "one-progressing", "any-failed", "unknown", "missing", "deleting"],
)
def test_overall(statuses: list[Status], expected: Status) -> None:
    assert overall(Health(status) for status in statuses) is expected


def test_assessments_are_kept_per_resource_version_for_the_objects_still_wanted() -> None:
    web, gone = ObjectKey("apps", "Deployment", "n", "web"), ObjectKey("", "ConfigMap", "n", "x")
    rolling = deployment()
    rolling["metadata"]["resourceVersion"] = "7"
    memo = Assessments()

    first = memo.of({web: rolling, gone: None}, [web, gone])
    assert first == {web: assess(rolling), gone: Health(Status.NOT_FOUND)}
    assert set(memo.remembered) == {web}  # nothing to key an absent object by

    edited = copy.deepcopy(rolling)
    edited["status"] = "malformed, but at the same version"
    assert memo.of({web: edited}, [web]) == {web: first[web]}  # not assessed again
    edited["metadata"]["resourceVersion"] = "8"
    assert memo.of({web: edited}, [web])[web].status == Status.UNKNOWN
    assert memo.of({}, []) == {} and memo.remembered == {}


def test_health_assessed_again_is_remembered_for_the_next_assessment_of_all() -> None:
    """A status alone moved is assessed again between reconciles (`again`); the next
    reconcile's assessment of every object takes it from there, not from the body again."""
    web, api = (
        ObjectKey("apps", "Deployment", "n", "web"),
        ObjectKey("apps", "Deployment", "n", "api"),
    )
    rolling = deployment() | {"metadata": {"resourceVersion": "7"}}
    memo = Assessments()
    memo.of({web: rolling, api: rolling}, [web, api])

    moved = copy.deepcopy(rolling)
    moved["metadata"]["resourceVersion"] = "8"
    again = memo.again({web: moved})
    moved["status"] = "malformed, but at the version assessed again"

    assert memo.of({web: moved, api: rolling}, [web, api])[web] == again[web]


def test_assessments_share_one_instance_of_each_health() -> None:
    keys = [ObjectKey("apps", "Deployment", "n", f"web-{i}") for i in range(3)]
    found = {
        key: deployment() | {"metadata": {"resourceVersion": str(i)}} for i, key in enumerate(keys)
    }

    healths = Assessments().of(found, keys)

    assert len({id(health) for health in healths.values()}) == 1
