"""Core kinds: PersistentVolumeClaim, Service, Namespace and Pod, by phase and address."""

from __future__ import annotations

from gitopsd.health.fields import conditions_of, list_, str_, true_condition
from gitopsd.health.vocabulary import Health, Status
from gitopsd.objects import Body


def persistent_volume_claim(body: Body) -> Health:
    phase = str_(body, "status.phase")
    if phase == "Bound":
        return Health(Status.CURRENT)
    if phase == "Lost":
        return Health(Status.FAILED, "Lost", "the bound PersistentVolume no longer exists")
    # Also while a WaitForFirstConsumer storage class waits for a Pod to use the claim.
    return Health(Status.IN_PROGRESS, "Pending", f"phase {phase}" if phase else "no phase yet")


def service(body: Body) -> Health:
    if str_(body, "spec.type", "ClusterIP") != "LoadBalancer":
        return Health(Status.CURRENT)
    if list_(body, "status.loadBalancer.ingress"):
        return Health(Status.CURRENT)
    return Health(Status.IN_PROGRESS, "Pending", "waiting for a load balancer address")


def namespace(body: Body) -> Health:
    if str_(body, "status.phase") == "Terminating":
        return Health(Status.TERMINATING, "Deleting", "the namespace's objects are being deleted")
    return Health(Status.CURRENT)


def pod(body: Body) -> Health:
    phase = str_(body, "status.phase")
    if phase == "Succeeded":
        return Health(Status.CURRENT, "Succeeded")
    if phase == "Failed":  # kstatus counts it done (Current); a failed run needs a look
        reason = str_(body, "status.reason", "Failed")  # e.g. Evicted
        return Health(Status.FAILED, reason, str_(body, "status.message"))
    if phase == "Running" and true_condition(conditions_of(body), "Ready"):
        return Health(Status.CURRENT)
    return Health(Status.IN_PROGRESS, phase or "Pending", "waiting for the Ready condition")
