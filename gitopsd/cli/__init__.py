"""The command line: argument parsing, output rendering and exit codes; no reconcile logic.

`parser` declares the flags, `settings` turns them into the settings of gitopsd.config,
`commands` runs a command and maps its errors to exit codes, `render` prints drift and
reports for people, `documents` writes them for programs (the versioned JSON contract),
`progress` tells what a sync is doing while it runs, `stop` catches the signals that stop
a command, `completion` and `shells` write the shells' completion scripts from the parser.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

from gitopsd.cli import commands
from gitopsd.cli.parser import build_parser
from gitopsd.cli.stop import STOP


def main(argv: Sequence[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
    with STOP.caught():
        code = commands.run(arguments)
    if STOP.signal is None:
        return code
    name = signal.Signals(STOP.signal).name
    print(
        f"gitopsd: stopped by {name} after {STOP.after:.0f} s: the writes in flight finished, "
        "no other write or "
        "dry-run started, nothing was pruned",
        file=sys.stderr,
    )
    return 128 + STOP.signal
