"""ValidatingAdmissionPolicies the tests put in a namespace's way: the API server itself
refuses the requests they match (dry-runs too), as a cluster's own policy would."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client


def deny(
    admin_api: Any,
    namespace: str,
    name: str,
    operations: list[str],
    expression: str,
    message: str,
    labels: Mapping[str, str] | None = None,
) -> Callable[[], None]:
    """Refuses each ConfigMap request of `operations` in `namespace` (or, given `labels`, in
    every namespace that has them) for which `expression` (CEL, over `object` and
    `oldObject`) is false; returns what removes the policy."""
    admission: Any = client.AdmissionregistrationV1Api(admin_api)
    name = f"{name}-{namespace}"
    rule = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
    admission.create_validating_admission_policy(
        {
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{**rule, "operations": operations}]},
                "validations": [{"expression": expression, "message": message}],
            },
        }
    )
    admission.create_validating_admission_policy_binding(
        {
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {
                        "matchLabels": labels or {"kubernetes.io/metadata.name": namespace}
                    }
                },
            },
        }
    )

    def remove() -> None:
        admission.delete_validating_admission_policy_binding(name)
        admission.delete_validating_admission_policy(name)

    return remove


def refuses(request: Callable[[], Any]) -> bool:
    """Whether the API server refuses `request` (a dry-run that a policy should match): a
    new policy takes effect once the server's informers have it, not at its creation."""
    try:
        request()
    except client.ApiException as error:
        return bool(error.status >= 400)  # a policy's 403 or 422, a dead webhook's 500
    return False


def dead_webhook(admin_api: Any, namespace: str, port: int) -> Callable[[], None]:
    """A validating webhook for ConfigMap writes in `namespace` that nothing serves (a
    closed port), with failurePolicy Fail: the API server refuses every such request, as
    when a cluster's policy engine is down; returns what removes it."""
    admission: Any = client.AdmissionregistrationV1Api(admin_api)
    name = f"dead-{namespace}.gitopsd.test"
    rule = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
    admission.create_validating_webhook_configuration(
        {
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": name,
                    "clientConfig": {"url": f"https://127.0.0.1:{port}/validate"},
                    "rules": [{**rule, "operations": ["CREATE", "UPDATE", "DELETE"]}],
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 2,
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": namespace}
                    },
                }
            ],
        }
    )
    return lambda: admission.delete_validating_webhook_configuration(name)
