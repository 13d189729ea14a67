"""What a shell completes, read off the parser itself, never a list kept beside it: the
commands, each command's flags and operands, and the values each offers (its choices, a
path, or nothing that can be guessed). `gitopsd.cli.shells` writes it as each shell's script."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

PATH_METAVARS = frozenset({"FILE", "SOURCE"})
"""Values that name a file or directory (a SOURCE may be a git URL too, but a directory is
what a shell can help with)."""


class Value(StrEnum):
    """What an argument takes."""

    NONE = "none"
    """A switch: no value."""
    CHOICE = "choice"
    """One of its choices."""
    PATH = "path"
    """A file or directory: the shell completes paths, as it does by default."""
    WORD = "word"
    """Anything (a name, a URL, a duration): nothing to offer."""


@dataclass(frozen=True)
class Argument:
    names: tuple[str, ...]
    """Its flags (`-o`, `--output`); none for an operand."""
    metavar: str
    summary: str
    value: Value
    choices: tuple[str, ...] = ()
    repeatable: bool = False


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    arguments: tuple[Argument, ...]

    @property
    def flags(self) -> tuple[Argument, ...]:
        return tuple(argument for argument in self.arguments if argument.names)

    @property
    def operand(self) -> Argument | None:
        """Its first operand (no command takes more than one)."""
        return next((argument for argument in self.arguments if not argument.names), None)


@dataclass(frozen=True)
class Program:
    flags: tuple[Argument, ...]
    """Those of `gitopsd` itself, before a command."""
    commands: tuple[Command, ...]


def program(parser: argparse.ArgumentParser) -> Program:
    """The commands and flags `parser` declares, in its order."""
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    commands = tuple(
        Command(name, summary(command.description), arguments(command))
        for name, command in subparsers.choices.items()
    )
    return Program(arguments(parser), commands)


def arguments(parser: argparse.ArgumentParser) -> tuple[Argument, ...]:
    return tuple(
        Argument(
            tuple(action.option_strings),
            _metavar(action),
            summary(action.help),
            _value(action),
            tuple(str(choice) for choice in action.choices or ()),
            isinstance(action, argparse._AppendAction),
        )
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction)
    )


def summary(help: str | None) -> str:
    """A help text up to its first parenthesis, on one line: defaults and details stay in
    `--help`; a shell shows this beside the flag."""
    return " ".join((help or "").partition(" (")[0].split())


def _metavar(action: argparse.Action) -> str:
    if isinstance(action.metavar, str):
        return action.metavar
    return action.dest.upper() if action.option_strings else action.dest


def _value(action: argparse.Action) -> Value:
    if action.nargs == 0:
        return Value.NONE
    if action.choices:
        return Value.CHOICE
    if action.type is Path or _metavar(action) in PATH_METAVARS:
        return Value.PATH
    return Value.WORD
