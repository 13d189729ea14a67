"""Output rendering of the command line, without a cluster."""

from __future__ import annotations

import io

import pytest

from gitopsd import cli, diff
from gitopsd.apply import Action, Outcome
from gitopsd.objects import ObjectKey

KEY = ObjectKey("", "ConfigMap", "ns", "app")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_a_bar_on_a_terminal_and_clears_it() -> None:
    out = Terminal()
    progress = cli.Progress(2, out)
    progress.tick(Outcome(KEY, Action.CREATED))
    assert "[###############---------------] 1/2 ConfigMap/ns/app" in out.getvalue()
    progress.done()
    assert out.getvalue().endswith("\r")


def test_progress_is_silent_when_not_a_terminal() -> None:
    out = io.StringIO()
    progress = cli.Progress(2, out)
    progress.tick(Outcome(KEY, Action.CREATED))
    progress.done()
    assert out.getvalue() == ""


@pytest.mark.parametrize("color", [True, False])
def test_a_unified_diff_is_colored_only_on_request(color: bool) -> None:
    drift = diff.Drift(
        KEY,
        diff.State.MODIFIED,
        (diff.FieldChange("data.k", "a", "b", "kubectl-edit"),),
        live={"data": {"k": "a"}},
        desired={"data": {"k": "b"}},
    )
    out = io.StringIO()
    cli.render_drift([drift], {KEY: "cm.yaml:1"}, out, color)
    text = out.getvalue()
    assert (
        'modified ConfigMap/ns/app (cm.yaml:1)\n  data.k: "a" -> "b"  (manager: kubectl-edit)'
        in text
    )
    assert ("\033[31m-  k: a\033[0m" in text) is color
    assert ("\033[32m+  k: b\033[0m" in text) is color
    assert "-  k: a" in text and "+  k: b" in text


def test_no_drift_says_so() -> None:
    out = io.StringIO()
    cli.render_drift([], {}, out, False)
    assert out.getvalue() == "no drift\n"
