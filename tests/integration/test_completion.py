"""`gitopsd completion SHELL`, loaded into the real shell as a user loads it, completes the
commands, a command's flags and a flag's choices; and, where a flag or operand takes a path,
the files there (bash leaves paths to readline's own completion, which only a terminal
shows; tests.harness.shells says how each shell is asked)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from gitopsd.cli.parser import build_parser
from tests.harness.cli import offline
from tests.harness.shells import COMPLETERS

[SUBPARSERS] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
COMMANDS = sorted(SUBPARSERS.choices)
Completes = Callable[[str], list[str]]


@pytest.fixture(params=sorted(COMPLETERS))
def completes(request: pytest.FixtureRequest, shells: dict[str, Path], tmp_path: Path) -> Completes:
    """What the shell of the parameter offers for a line typed, in an empty directory."""
    shell: str = request.param
    printed = offline("completion", shell)
    assert printed.code == 0 and not printed.err, printed.text
    script = tmp_path / f"gitopsd.{shell}"
    script.write_text(printed.out)
    typed_in = tmp_path / "here"
    typed_in.mkdir()
    return lambda line: COMPLETERS[shell](shells[shell], script, line, typed_in)


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        pytest.param("gitopsd ", COMMANDS, id="the-commands"),
        pytest.param(
            "gitopsd sync --pr", ["--prune", "--prune-budget", "--prune-protected"], id="flags"
        ),
        pytest.param("gitopsd diff -o ", ["json", "text", "yaml"], id="a-flags-choices"),
        pytest.param("gitopsd completion ", ["bash", "fish", "zsh"], id="an-operands-choices"),
        pytest.param("gitopsd get --namespace ", [], id="a-value-nothing-can-guess"),
    ],
)
def test_the_shell_completes_what_the_parser_declares(
    completes: Completes, line: str, offered: list[str]
) -> None:
    assert completes(line) == offered


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_a_flag_that_takes_a_file_completes_the_files_there(
    shell: str, shells: dict[str, Path], tmp_path: Path
) -> None:
    script = tmp_path / f"gitopsd.{shell}"
    script.write_text(offline("completion", shell).out)
    here = tmp_path / "here"
    (here / "config").mkdir(parents=True)
    (here / "gitopsd.yaml").write_text("sources: []\n")

    found = COMPLETERS[shell](shells[shell], script, "gitopsd run --config ", here)

    assert [name.rstrip("/") for name in found] == ["config", "gitopsd.yaml"]
