"""Renders in flight are bounded as a whole and shared fairly between namespaces (TA-01's
renders in a box, of TA-03's class, what the daemon holds for all tenants at once).
The slots are tested here with real threads; renders taking them, in a daemon inside the
Deployment's memory limit, in test_tenant_box.py."""

from __future__ import annotations

import json
import threading
from contextlib import ExitStack
from pathlib import Path

import pytest

from gitopsd.configfile import load
from gitopsd.errors import ConfigError, Remedy, SourceError
from gitopsd.sandbox.slots import RenderSlots
from gitopsd.sandbox_bounds import SandboxBounds
from tests.harness.waiting import wait_for

SHORT = 0.2
"""A deadline for the waits that must fail: how long it is decides nothing."""


def test_ta01_no_namespace_holds_every_slot_and_none_past_the_total() -> None:
    slots = RenderSlots(3, SHORT)
    with ExitStack() as held:
        held.enter_context(slots.held("a", "one"))
        held.enter_context(slots.held("a", "two"))
        with pytest.raises(SourceError) as refused, slots.held("a", "a/chart: helm template"):
            pass
        held.enter_context(slots.held("b", "three"))  # the slot namespace a may not take
        with pytest.raises(SourceError), slots.held("c", "four"):
            pass
    message = str(refused.value)
    assert message.startswith("a/chart: helm template waited 0.2 s (sandbox.renderQueueTimeout)")
    assert "renders in flight are at most 3 (sandbox.rendersInFlight)" in message
    assert "at most 2 for one namespace; a had 2 running" in message
    assert refused.value.remedy == Remedy.BACK_OFF  # its poll tries again, the revision stays
    with slots.held("c", "five"):  # all given back
        pass


def test_ta01_one_slot_is_one_namespace_s_at_a_time() -> None:
    slots = RenderSlots(1, SHORT)
    with slots.held("a", "one"), pytest.raises(SourceError), slots.held("b", "two"):
        pass


def test_ta01_a_freed_slot_goes_to_the_namespace_that_rendered_least_recently() -> None:
    """Namespace a waited first for its second render, c after it; when a's first ends, c
    (which has started nothing) goes first, then a."""
    slots = RenderSlots(2, 60)
    started: list[str] = []
    finish = threading.Event()

    def render(namespace: str) -> None:
        with slots.held(namespace, namespace):
            started.append(namespace)
            finish.wait(60)

    with ExitStack() as held:
        first_of_a = held.enter_context(ExitStack())
        first_of_a.enter_context(slots.held("a", "a"))
        held.enter_context(slots.held("b", "b"))
        waiting = [threading.Thread(target=render, args=(name,)) for name in ("a", "c")]
        for count, thread in enumerate(waiting, start=1):
            thread.start()  # in this order: a waits first, then c
            wait_for(lambda: _waiting(slots) == count, f"{count} renders waiting")  # noqa: B023
        first_of_a.close()
        wait_for(lambda: started == ["c"], "c's render started")
    wait_for(lambda: started == ["c", "a"], "a's second render started")
    finish.set()
    for thread in waiting:
        thread.join(60)


def _waiting(slots: RenderSlots) -> int:
    with slots._changed:  # who waits is known only inside
        return len(slots._waiting)


def test_the_render_slots_are_read_with_their_defaults(tmp_path: Path) -> None:
    path = tmp_path / "gitopsd.yaml"
    path.write_text(json.dumps({"sources": []}))
    bounds = load(path).sandbox
    assert (bounds.renders_in_flight, bounds.render_queue_seconds) == (2, 60.0)
    assert bounds.render_memory_bytes == 1 << 30
    settings = {"rendersInFlight": 4, "renderQueueTimeout": "2m"}
    path.write_text(json.dumps({"sources": [], "sandbox": settings}))
    assert load(path).sandbox == SandboxBounds(renders_in_flight=4, render_queue_seconds=120.0)
    path.write_text(json.dumps({"sources": [], "sandbox": {"rendersInFlight": 0}}))
    with pytest.raises(ConfigError, match="sandbox: rendersInFlight: expected a positive"):
        load(path)
