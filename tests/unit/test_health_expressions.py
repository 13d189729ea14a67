"""A source's own health rules in CEL (as Flux's healthCheckExprs), evaluated by the CEL
project's runtime: each expression, its order, what an unevaluable one means, and refusal of
an invalid one at load, naming the source and the kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitopsd.configfile import load
from gitopsd.health import HealthCheck, Status, assess
from gitopsd.objects import GroupKind

WIDGET = HealthCheck(
    "example.com/v1",
    "Widget",
    current="status.state == 'Ready'",
    in_progress="status.state == 'Pending'",
    failed="status.state == 'Broken' || status.retries > 3",
)
CHECKS = {GroupKind("example.com", "Widget"): WIDGET}


def widget(status: dict[str, Any] | None = None, generation: int = 1) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "generation": generation},
    }
    return body | ({"status": status} if status is not None else {})


CASES: dict[str, tuple[dict[str, Any] | None, Status]] = {
    "current": ({"state": "Ready"}, Status.CURRENT),
    "in progress": ({"state": "Pending"}, Status.IN_PROGRESS),
    "failed": ({"state": "Broken"}, Status.FAILED),
    "failed by another field": ({"state": "Starting", "retries": 4}, Status.FAILED),
    "none holds": ({"state": "Starting", "retries": 1}, Status.IN_PROGRESS),
    "no status yet": (None, Status.IN_PROGRESS),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_the_expressions_decide_the_health_of_their_kind(case: str) -> None:
    status, expected = CASES[case]
    found = assess(widget(status), CHECKS)
    assert found.status == expected
    assert found.reason == "HealthCheckExpr"


def test_without_the_rule_the_kind_goes_by_its_conditions() -> None:
    assert assess(widget({"state": "Broken"})).status == Status.CURRENT  # no conditions


def test_an_expression_that_cannot_be_evaluated_holds_not_and_says_why() -> None:
    found = assess(widget(None), CHECKS)
    assert "not yet current: status.state == 'Ready'" in found.message
    assert "state" in found.message  # the missing key, as the runtime names it


@pytest.mark.case("BI-21")
def test_the_iteration_budget_bounds_an_expression() -> None:
    """BI-21."""
    costly = HealthCheck(
        "example.com/v1",
        "Widget",
        current="spec.items.all(x, spec.items.all(y, spec.items.all(z, x + y + z >= 0)))",
    )
    body = widget({}) | {"spec": {"items": list(range(1000))}}
    found = assess(body, {GroupKind("example.com", "Widget"): costly})
    assert found.status == Status.IN_PROGRESS
    assert "budget" in found.message.lower()


def test_a_status_of_an_older_generation_is_in_progress_first() -> None:
    body = widget({"state": "Ready", "observedGeneration": 1}, generation=2)
    assert assess(body, CHECKS).status == Status.IN_PROGRESS


def test_a_rule_replaces_the_built_in_rule_of_a_load_balancer_service() -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "frontend-external"},
        "spec": {"type": "LoadBalancer"},
        "status": {"loadBalancer": {}},
    }
    assert assess(service).status == Status.IN_PROGRESS  # no load balancer provider
    rule = HealthCheck("v1", "Service", current="spec.type == 'LoadBalancer'")
    assert assess(service, {GroupKind("", "Service"): rule}).status == Status.CURRENT


INVALID = {
    "a syntax error": ({"current": "status.state =="}, "current: "),
    "an unknown variable": ({"current": "foo.state == 'x'"}, "current: "),
    "no current": ({"failed": "true"}, "current: expected a non-empty string"),
    "too long": ({"current": "true && " * 200 + "true"}, "longer than 1024"),
    "an unknown field": ({"current": "true", "healthy": "true"}, "unknown field(s) healthy"),
}


@pytest.mark.parametrize("case", INVALID, ids=list(INVALID))
def test_an_invalid_rule_is_refused_at_load_naming_the_source_and_kind(
    case: str, tmp_path: Path
) -> None:
    fields, message = INVALID[case]
    rule = {"apiVersion": "example.com/v1", "kind": "Widget", **fields}
    source = {
        "name": "shop",
        "repository": "https://git.example.com/a.git",
        "healthCheckExprs": [rule],
    }
    path = tmp_path / "gitopsd.yaml"
    path.write_text(json.dumps({"sources": [source]}))

    [(name, error)] = load(path).invalid_sources

    assert name == "shop" and "source shop: healthCheckExprs[0]" in error
    assert message in error
    if "expected" not in message and "unknown" not in message:
        assert "(example.com/v1 Widget)" in error


def test_one_rule_per_kind(tmp_path: Path) -> None:
    rule = {"apiVersion": "v1", "kind": "Service", "current": "true"}
    source = {"name": "shop", "repository": "https://git.example.com/a.git"}
    path = tmp_path / "gitopsd.yaml"
    path.write_text(json.dumps({"sources": [source | {"healthCheckExprs": [rule, rule]}]}))
    [(_, error)] = load(path).invalid_sources
    assert "one rule per kind: Service" in error
