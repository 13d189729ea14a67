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
    evaluator idles at 28 MiB; a hostile rule (14 nested maps, a string 4x longer at
    each) asks for 4 GiB and is stopped here in 0.1 s."""
    expression_seconds: float = 2.0
    """The longest one health rule may take (a normal one takes microseconds)."""
    render_memory_bytes: int = 1024 * MiB
    """The address space of a helm or kustomize process. Go reserves about 780 MiB of it at
    start and several times what it touches as the heap grows. Measured with helm 4.3: a
    chart of 10,000 objects renders in 76 MiB resident, of 50,000 (10 MiB of YAML) in 155;
    a template that builds a list or a string until memory runs out is stopped under 300
    MiB resident here (at 2 GiB, at 800: past the pod's limit with the daemon's own)."""
    render_cpu_seconds: int = 60
    """The processor time of a helm or kustomize process, its threads together (a render
    also has 60 s of wall time)."""
    renders_in_flight: int = 2
    """The renders running at once across the daemon; one namespace may hold all but one
    of them (at least one). Two renders at their worst (300 MiB each, above), the health
    rules' evaluator (128 MiB) and the daemon's own fit the Deployment's 1 GiB."""
    render_queue_seconds: float = 60.0
    """The longest a render waits for one of those slots (a render takes at most 60 s of
    wall time, and a freed slot goes first to a namespace with fewer in flight)."""


SANDBOX_SETTINGS = {
    "expression_memory_bytes": "sandbox.expressionMemory",
    "expression_seconds": "sandbox.expressionTimeout",
    "render_memory_bytes": "sandbox.renderMemory",
    "render_cpu_seconds": "sandbox.renderCPU",
    "renders_in_flight": "sandbox.rendersInFlight",
    "render_queue_seconds": "sandbox.renderQueueTimeout",
}
"""Each bound's key in the configuration file, for the errors that name it."""
