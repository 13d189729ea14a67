"""Health rules (CEL) a hostile tenant writes, shared by the tests and the tenants
benchmark: each costs what no iteration budget sees."""

from __future__ import annotations

import string

NAMES = string.ascii_lowercase


def string_bomb(levels: int = 14) -> str:
    """A hostile rule: one-element maps nested `levels` deep, each binding a string four
    times longer than the one before ("aaaa" to 1 GiB at 14; about 4 GiB held at once)."""
    expression = f"size({NAMES[levels]})"
    for level in reversed(range(levels)):
        outer, inner = NAMES[level], NAMES[level + 1]
        expression = f"[{outer}+{outer}+{outer}+{outer}].map({inner}, {expression})"
    return f"size(['aaaa'].map(a, {expression})) == 1"


def slow_rule(steps: int = 50) -> str:
    """A rule that holds, after a while: a 16 MiB string searched steps x steps times, with
    20 MiB held (measured: 0.55 s at 50 on the CI machine class; the time grows as the
    square of `steps`)."""
    ones = ",".join(["1"] * steps)
    expression = f"[{ones}].all(y, [{ones}].all(z, !{NAMES[11]}.contains('b')))"
    for level in reversed(range(11)):
        outer, inner = NAMES[level], NAMES[level + 1]
        expression = f"[{outer}+{outer}+{outer}+{outer}].all({inner}, {expression})"
    return f"['aaaa'].all(a, {expression})"
