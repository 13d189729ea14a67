"""The command line without a cluster: output rendering, and flags checked before any use."""

from __future__ import annotations

import io
import signal
from dataclasses import replace
from pathlib import Path

import pytest

from gitopsd import cli, diff
from gitopsd.changes import Action, Outcome
from gitopsd.config import Limits
from gitopsd.errors import ConfigError
from gitopsd.objects import ObjectKey

KEY = ObjectKey("", "ConfigMap", "ns", "app")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_a_bar_on_a_terminal_and_clears_it() -> None:
    out = Terminal()
    progress = cli.Progress(out)
    progress.planned(2)
    progress.tick(Outcome(KEY, Action.CREATED))
    assert "[###############---------------] 1/2 ConfigMap/ns/app" in out.getvalue()
    progress.done()
    assert out.getvalue().endswith("\r")


def test_progress_is_silent_when_not_a_terminal() -> None:
    out = io.StringIO()
    progress = cli.Progress(out)
    progress.planned(2)
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


def test_bi07_limit_flags_override_only_what_they_name() -> None:
    arguments = cli.build_parser().parse_args(
        ["validate", ".", "--max-object-bytes", "1Mi", "--max-documents", "7"]
    )

    limits = cli.source_spec(arguments).limits

    assert limits == replace(Limits(), max_object_bytes=1 << 20, max_documents=7)


@pytest.mark.parametrize("value", ["0", "3MB", "-5"])
def test_bi07_a_limit_flag_must_be_a_positive_size(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["validate", ".", "--max-revision-bytes", value])

    assert "--max-revision-bytes: expected a positive whole number" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value", "rule"),
    [
        ("--namespace", "../../kube-system", "must be a DNS-1123 label"),
        ("--inventory-namespace", "Upper", "must be a DNS-1123 label"),
        ("--name", "x?dryRun=All", "use lower-case letters, digits and '-'"),
        ("--name", "x" * 51, r"\(at most 50\)"),
    ],
)
def test_se11_names_given_on_the_command_line_are_checked(flag: str, value: str, rule: str) -> None:
    arguments = cli.build_parser().parse_args(["sync", ".", flag, value])

    with pytest.raises(ConfigError, match=f"^{flag} .*{rule}"):
        cli.sync_settings(arguments, cli.source_spec(arguments))


def test_fa21_a_command_restores_the_signal_handlers_it_replaced(tmp_path: Path) -> None:
    """In-process callers (tests, an embedding program) keep their own Ctrl-C."""
    before = {number: signal.getsignal(number) for number in cli.STOP_SIGNALS}
    assert cli.main(["validate", str(tmp_path)]) == cli.OK
    assert {number: signal.getsignal(number) for number in cli.STOP_SIGNALS} == before
    assert cli.STOP.running()
