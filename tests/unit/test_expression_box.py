"""TA-01: the daemon's health rules run in a box (a real worker process under a memory bound
and a deadline): a hostile rule is stopped at the bound, named in the health it gives,
the worker lives on for the next rule, and the bounds are read from the configuration file
with their defaults."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitopsd.configfile import load
from gitopsd.errors import ConfigError
from gitopsd.health import HealthCheck, Status, assess, expressions
from gitopsd.health.expressions import BoundExceeded, evaluate_here, evaluate_with, in_process
from gitopsd.objects import GroupKind
from gitopsd.sandbox.expressions import ExpressionBox
from gitopsd.sandbox.turns import Turns
from gitopsd.sandbox_bounds import SandboxBounds
from tests.harness.hostile_rules import slow_rule, string_bomb

TENANT = "tenant"
READY = "status.phase == 'Ready'"
VARIABLES = {"status": {"phase": "Ready"}}


@pytest.fixture
def box() -> Iterator[ExpressionBox]:
    found = ExpressionBox(SandboxBounds(), Turns(10))
    yield found
    found._stop()


def test_ta01_the_red_teams_rule_stops_at_the_memory_bound_and_the_worker_lives(
    box: ExpressionBox,
) -> None:
    with pytest.raises(BoundExceeded) as stopped:
        box.evaluate(TENANT, string_bomb(), VARIABLES)
    assert str(stopped.value) == (
        "needs more memory than 128Mi, the memory bound of health rules (sandbox.expressionMemory)"
    )
    assert box.evaluate(TENANT, READY, VARIABLES) == (True, "")


def test_ta01_a_rule_over_its_bound_is_not_evaluated_again(box: ExpressionBox) -> None:
    with pytest.raises(BoundExceeded):
        box.evaluate(TENANT, string_bomb(), VARIABLES)
    worker = box.worker
    with pytest.raises(BoundExceeded, match="not evaluated again until it changes"):
        box.evaluate(TENANT, string_bomb(), VARIABLES)
    assert box.worker is worker  # nothing asked of it


def test_ta01_a_rule_past_the_deadline_has_the_worker_killed_and_started_afresh() -> None:
    box = ExpressionBox(SandboxBounds(expression_seconds=0.2), Turns(10))
    try:
        assert box.evaluate(TENANT, READY, VARIABLES) == (True, "")
        spinning = box.worker
        assert spinning is not None
        with pytest.raises(BoundExceeded, match=r"longer than 0.2 s, .*sandbox.expressionTimeout"):
            box.evaluate(TENANT, slow_rule(steps=200), VARIABLES)
        assert spinning.poll() is not None
        assert box.worker is not None and box.worker is not spinning  # started in its turn
        assert box.evaluate(TENANT, READY, VARIABLES) == (True, "")
    finally:
        box._stop()


def test_the_workers_start_is_not_charged_to_the_first_rules_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker starts in tens of milliseconds at best, seconds on a loaded machine: were
    that charged to the deadline, a sound rule would be stopped and remembered as over it.
    The start here takes twice the deadline, which leaves the rule itself room on a loaded
    machine (a deadline of 10 ms, shorter than a start, failed under load)."""
    started = ExpressionBox._started

    def loaded_start(box: ExpressionBox) -> Any:
        worker = started(box)
        time.sleep(0.5)  # a loaded machine's start, past the deadline below
        return worker

    monkeypatch.setattr(ExpressionBox, "_started", loaded_start)
    box = ExpressionBox(SandboxBounds(expression_seconds=0.25), Turns(10))
    try:
        assert box.evaluate(TENANT, READY, VARIABLES) == (True, "")
    finally:
        box._stop()


def test_ta01_a_rule_stopped_at_a_bound_fails_its_kind_naming_the_bound(
    box: ExpressionBox,
) -> None:
    bomb = HealthCheck("v1", "ConfigMap", current=string_bomb())
    evaluate_with(box.evaluate)
    try:
        health = assess(
            {"apiVersion": "v1", "kind": "ConfigMap"}, {GroupKind("", "ConfigMap"): bomb}
        )
    finally:
        evaluate_with(evaluate_here)
    assert health.status == Status.FAILED
    assert health.message.startswith("current: needs more memory than 128Mi")


def test_ta01_memory_running_out_in_place_is_a_bound_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The command line evaluates in place: std::bad_alloc is a MemoryError, no RuntimeError."""

    class OutOfMemory:
        def eval(self, data: Any) -> Any:
            raise MemoryError("std::bad_alloc")

    monkeypatch.setattr(expressions, "_compiled", lambda text: OutOfMemory())
    with pytest.raises(BoundExceeded, match="ran out of memory"):
        in_process(READY, VARIABLES)


def test_the_sandbox_bounds_are_read_with_their_defaults(tmp_path: Path) -> None:
    path = tmp_path / "gitopsd.yaml"
    path.write_text(json.dumps({"sources": []}))
    assert load(path).sandbox == SandboxBounds()
    path.write_text(
        json.dumps(
            {"sources": [], "sandbox": {"expressionMemory": "64Mi", "expressionTimeout": "1s"}}
        )
    )
    assert load(path).sandbox == SandboxBounds(64 << 20, 1.0)
    path.write_text(json.dumps({"sources": [], "sandbox": {"expressionMemory": "lots"}}))
    with pytest.raises(ConfigError, match="sandbox: expressionMemory: expected a positive"):
        load(path)


def test_the_render_bounds_are_read_with_their_defaults(tmp_path: Path) -> None:
    path = tmp_path / "gitopsd.yaml"
    path.write_text(json.dumps({"sources": [], "sandbox": {"renderMemory": "3Gi"}}))
    bounds = load(path).sandbox
    assert (bounds.render_memory_bytes, bounds.render_cpu_seconds) == (3 << 30, 60)
    path.write_text(json.dumps({"sources": [], "sandbox": {"renderCPU": "1.5s"}}))
    assert load(path).sandbox.render_cpu_seconds == 2  # whole seconds, as the kernel counts
