"""The configuration file's `sandbox:` block: the bounds on what runs a tenant's input at a
cost not known up front (`sandbox_bounds.SandboxBounds`), each with its default."""

from __future__ import annotations

import math
from typing import Any

from gitopsd.configfile.fields import mapping, positive, seconds, size
from gitopsd.sandbox_bounds import SandboxBounds

SANDBOX_KEYS = {
    "expressionMemory",
    "expressionTimeout",
    "renderMemory",
    "renderCPU",
    "rendersInFlight",
    "renderQueueTimeout",
}


def sandbox_bounds(value: Any, where: str) -> SandboxBounds:
    raw = mapping(value or {}, where, SANDBOX_KEYS)
    defaults = SandboxBounds()
    return SandboxBounds(
        expression_memory_bytes=size(
            raw, "expressionMemory", where, defaults.expression_memory_bytes
        ),
        expression_seconds=seconds(raw, "expressionTimeout", where, defaults.expression_seconds),
        render_memory_bytes=size(raw, "renderMemory", where, defaults.render_memory_bytes),
        render_cpu_seconds=math.ceil(seconds(raw, "renderCPU", where, defaults.render_cpu_seconds)),
        renders_in_flight=positive(raw, "rendersInFlight", where, defaults.renders_in_flight),
        render_queue_seconds=seconds(
            raw, "renderQueueTimeout", where, defaults.render_queue_seconds
        ),
    )
