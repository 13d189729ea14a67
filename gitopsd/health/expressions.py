"""Health rules users write, as Flux's healthCheckExprs: for one group and kind, CEL
expressions over the object that say it is in progress, failed or current, in place of the
built-in rule (a LoadBalancer Service on a cluster without a load balancer, a custom
resource with a status convention of its own).

The expressions are compiled and run by the CEL project's own runtime (cel-expr-python, the
C++ implementation Kubernetes' and Flux's Go one is specified with), never by a hand-written
evaluator. Its iteration budget bounds loops, but not what each step may build: nested
one-element maps that each make a string four times longer reach gigabytes in a fraction of
a second, and the runtime offers no cost limit. So the daemon evaluates them in a box of its
own (`gitopsd.sandbox.expressions`, given to `evaluate_with` at start), a process with a
memory and a time bound; an expression stopped at one fails its rule, naming the bound. As
in Flux, the
object's top-level fields are the variables (`status.phase == 'Ready'`): `apiVersion`,
`kind`, `metadata`, `spec`, `status` and `data`, an absent one as an empty map. They are
tried in order, in progress, failed, then current; the first that holds decides, and an
object none holds for is in progress (an expression that cannot be evaluated, a field not
there yet, holds not, and the message says why). Pure, but for where `evaluate_with` sends
the expressions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gitopsd.health.vocabulary import Health, Status
from gitopsd.objects import Body, GroupKind, group_of

VARIABLES = ("apiVersion", "kind", "metadata", "spec", "status", "data")
MAX_EXPRESSION_CHARS = 1024
REASON = "HealthCheckExpr"


@dataclass(frozen=True)
class HealthCheck:
    """The expressions of one group and kind; `current` is required."""

    api_version: str
    kind: str
    current: str
    in_progress: str = ""
    failed: str = ""
    namespace: str = ""
    """Whose rule it is: a GitSync's namespace, whose share of the evaluator it is charged
    to; "" for the configuration file's and the command line's own."""

    @property
    def group_kind(self) -> GroupKind:
        return GroupKind(group_of(self.api_version), self.kind)

    def expressions(self) -> tuple[tuple[str, Status, str], ...]:
        """(field, status, expression), in the order they are tried."""
        return (
            ("inProgress", Status.IN_PROGRESS, self.in_progress),
            ("failed", Status.FAILED, self.failed),
            ("current", Status.CURRENT, self.current),
        )

    def problem(self) -> str:
        """Why an expression cannot be compiled (naming its field), or ""."""
        for name, _, text in self.expressions():
            if len(text) > MAX_EXPRESSION_CHARS:
                return f"{name}: longer than {MAX_EXPRESSION_CHARS} characters"
            try:
                if text:
                    _compiled(text)
            except RuntimeError as error:
                return f"{name}: {_first_line(str(error))}"
        return "" if self.current else "current: an expression is required"

    def assess(self, body: Body) -> Health:
        """The health the expressions give `body`; Failed when one is stopped at a bound,
        as such a rule can never decide."""
        variables = {name: body.get(name) or {} for name in VARIABLES}
        failures = []
        for name, status, text in self.expressions():
            if not text:
                continue
            try:
                holds, why = _evaluators[0](self.namespace, text, variables)
            except BoundExceeded as error:
                return Health(Status.FAILED, REASON, f"{name}: {error}")
            if holds:
                return Health(status, REASON, f"{name}: {text}")
            if why:
                failures.append(f"{name}: {why}")
        detail = f" ({'; '.join(failures)})" if failures else ""
        return Health(Status.IN_PROGRESS, REASON, f"not yet current: {self.current}{detail}")


@functools.cache
def _cel() -> Any:
    """The CEL runtime, imported when a rule is first compiled: its 6 MiB stay out of every
    process that has no rule (the command line, most daemons)."""
    import cel_expr_python.cel as cel

    return cel


@functools.cache
def _environment() -> Any:
    cel = _cel()
    return cel.NewEnv(variables={name: cel.Type.DYN for name in VARIABLES})


@functools.lru_cache(maxsize=1024)
def _compiled(text: str) -> Any:
    return _environment().compile(text)


class BoundExceeded(Exception):
    """An expression stopped at a bound; the message names the bound and its setting."""


Evaluate = Callable[[str, str, Mapping[str, Any]], tuple[bool, str]]
"""Evaluates one expression of a namespace's (the first argument) over the variables:
whether it holds, and if it cannot be evaluated, why. Raises BoundExceeded."""


def in_process(text: str, variables: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether the expression holds, and if it cannot be evaluated, why, evaluated here:
    the box's own worker does this, and so does the command line, whose rules are its
    user's. Memory runs out as a MemoryError (std::bad_alloc), which is no RuntimeError."""
    try:
        value = _compiled(text).eval(data=dict(variables))
    except MemoryError:
        raise BoundExceeded("ran out of memory") from None
    except RuntimeError as error:  # the iteration budget spent, say
        return False, _first_line(str(error))
    if value.type() == _cel().Type.ERROR:
        return False, _first_line(str(value.value()))
    result = value.value()
    if not isinstance(result, bool):
        return False, f"gives {value.type().name()}, not a bool"
    return result, ""


def evaluate_here(namespace: str, text: str, variables: Mapping[str, Any]) -> tuple[bool, str]:
    """An Evaluate in this process, with no turns: the command line's, whose rules are all
    its one user's."""
    return in_process(text, variables)


_evaluators: list[Evaluate] = [evaluate_here]


def evaluate_with(evaluate: Evaluate) -> None:
    """Evaluates every expression with `evaluate` from now on: the daemon's box, set once at
    start (rules are the tenants' input there)."""
    _evaluators[:] = [evaluate]


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else "failed"
