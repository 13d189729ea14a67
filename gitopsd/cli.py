"""The command line: argument parsing, output rendering and exit codes; no reconcile logic."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from importlib.metadata import version


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gitopsd",
        description="Keep Kubernetes clusters in the state a git repository declares.",
    )
    parser.add_argument("--version", action="version", version=f"gitopsd {version('gitopsd')}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    build_parser().parse_args(argv)
    return 0
