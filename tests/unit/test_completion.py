"""The completion scripts are written from the parser: every command and every flag the
parser declares is in each shell's script, in that command's part, so a new flag cannot be
forgotten; and what a flag takes is read off its declaration."""

from __future__ import annotations

import argparse
import re

import pytest

from gitopsd.cli.completion import Value, program, summary
from gitopsd.cli.parser import build_parser
from gitopsd.cli.shells import SCRIPTS


def declared() -> dict[str, list[argparse.Action]]:
    """Each command's flags and operands, read from the parser itself."""
    [commands] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {name: parser._actions for name, parser in commands.choices.items()}


def parts(shell: str, script: str) -> dict[str, str]:
    """Each command's part of a script: bash's function, zsh's `case` arm, fish's lines."""
    if shell == "bash":
        found = re.findall(r"^_gitopsd_(\w+)\(\) \{\n(.*?)^\}", script, re.M | re.S)
    elif shell == "zsh":
        found = re.findall(r"^        ([\w-]+)\)\n(.*?)^            ;;", script, re.M | re.S)
    else:
        found = re.findall(r"^complete -c gitopsd -n '__gitopsd_using ([\w-]+)'(.*)$", script, re.M)
    joined: dict[str, str] = {}
    for function, text in found:
        command = function.replace("_", "-")  # bash's function names have no dashes
        joined[command] = joined.get(command, "") + text + "\n"
    return joined


def spelled(shell: str, flag: str) -> str:
    """A flag as the script writes it: fish names `--output` `-l output`, `-o` `-s o`."""
    if shell != "fish":
        return flag
    return f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}"


def holds(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


@pytest.mark.parametrize("shell", sorted(SCRIPTS))
def test_each_script_holds_every_command_with_every_flag_and_choice(shell: str) -> None:
    found = parts(shell, SCRIPTS[shell](program(build_parser())))
    missing = [
        f"{command} {word}"
        for command, actions in declared().items()
        for action in actions
        for word in [*(spelled(shell, f) for f in action.option_strings), *(action.choices or ())]
        if not holds(found.get(command, ""), word)
    ]

    assert sorted(found) == sorted(declared())
    assert missing == []


@pytest.mark.parametrize(
    ("command", "flag", "value"),
    [
        ("sync", "--prune", Value.NONE),
        ("sync", "--output", Value.CHOICE),
        ("sync", "--kubeconfig", Value.PATH),
        ("sync", "--ssh-key", Value.PATH),
        ("sync", "--helm-values", Value.PATH),
        ("sync", "--ref", Value.WORD),
        ("sync", "--timeout", Value.WORD),
        ("run", "--config", Value.PATH),
        ("run", "--log-level", Value.CHOICE),
    ],
)
def test_what_a_flag_takes_is_read_off_its_declaration(
    command: str, flag: str, value: Value
) -> None:
    [found] = [c for c in program(build_parser()).commands if c.name == command]
    [argument] = [a for a in found.flags if flag in a.names]

    assert argument.value == value


def test_an_operand_is_completed_as_a_path_where_it_may_be_a_directory() -> None:
    operands = {c.name: c.operand for c in program(build_parser()).commands if c.operand}

    assert operands["sync"] is not None and operands["sync"].value == Value.PATH
    assert operands["reconcile"] is not None and operands["reconcile"].value == Value.WORD
    assert operands["completion"] is not None
    assert operands["completion"].choices == ("bash", "zsh", "fish")


@pytest.mark.parametrize(
    ("help", "shown"),
    [
        ("the least severe lines written (default info)", "the least severe lines written"),
        ("bound on the wait\n  (default 5m)", "bound on the wait"),
        ("text for people; json or yaml", "text for people; json or yaml"),
        (None, ""),
    ],
)
def test_a_flag_is_described_by_its_help_up_to_the_first_parenthesis(
    help: str | None, shown: str
) -> None:
    assert summary(help) == shown
