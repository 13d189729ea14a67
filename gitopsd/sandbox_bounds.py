"""Bounds on what runs a tenant's input at a cost not known up front: its health rules (CEL,
`sandbox.expressions`) and its renders (helm and kustomize, `sandbox`). Each is the daemon's
whole, set by an admin in the configuration file's `sandbox:` block (`configfile.sandbox`);
the command line keeps the defaults."""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1 << 20


@dataclass(frozen=True)
class SandboxBounds:
    """Each bound's default is measured: see its line."""

    expression_memory_bytes: int = 128 * MiB
    """The address space of the process that evaluates health rules. Measured: the
    evaluator idles at 28 MiB; the red team's rule (14 nested maps, a string 4x longer at
    each) asks for 4 GiB and is stopped here in 0.1 s."""
    expression_seconds: float = 2.0
    """The longest one health rule may take (a normal one takes microseconds)."""
    render_memory_bytes: int = 2048 * MiB
    """The address space of a helm or kustomize process. Go reserves about 780 MiB of it at
    start and several times what it touches as the heap grows: measured with helm 4.3, a
    chart renders in 46 MiB resident, and a template that doubles a string past 1 GiB is
    stopped at 390 MiB resident with this default (the pod's 1 GiB stays whole)."""
    render_cpu_seconds: int = 60
    """The processor time of a helm or kustomize process, its threads together (a render
    also has 60 s of wall time)."""


SANDBOX_SETTINGS = {
    "expression_memory_bytes": "sandbox.expressionMemory",
    "expression_seconds": "sandbox.expressionTimeout",
    "render_memory_bytes": "sandbox.renderMemory",
    "render_cpu_seconds": "sandbox.renderCPU",
}
"""Each bound's key in the configuration file, for the errors that name it."""
