"""The commands and their flags. Help texts quote each default from gitopsd.config."""

from __future__ import annotations

import argparse
import os
from importlib.metadata import version
from pathlib import Path
from typing import Any

from gitopsd.cli.commands import run_daemon, run_diff, run_sync, run_validate
from gitopsd.config import (
    LIMIT_SETTINGS,
    Credentials,
    Limits,
    PrunePolicy,
    SourceSpec,
    SyncSettings,
    format_size,
    parse_duration,
    parse_size,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gitopsd",
        description="Keep Kubernetes clusters in the state a git repository declares.",
    )
    parser.add_argument("--version", action="version", version=f"gitopsd {version('gitopsd')}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")
    _add_validate(commands)
    _add_diff(commands)
    _add_sync(commands)
    _add_run(commands)
    return parser


def _add_run(commands: Any) -> None:
    run = commands.add_parser("run", help="the daemon: keep the configured sources in sync")
    run.add_argument("--config", type=Path, required=True, help="YAML file (see config/)")
    run.set_defaults(command=run_daemon)


def _add_validate(commands: Any) -> None:
    validate = commands.add_parser("validate", help="parse and check manifests; no cluster needed")
    _source_arguments(validate)
    validate.set_defaults(command=run_validate)


def _add_diff(commands: Any) -> None:
    diff_command = commands.add_parser("diff", help="show drift between git and the cluster")
    _source_arguments(diff_command)
    _cluster_arguments(diff_command)
    diff_command.add_argument("-o", "--output", choices=("text", "json"), default="text")
    diff_command.set_defaults(command=run_diff)


def _add_sync(commands: Any) -> None:
    sync = commands.add_parser("sync", help="apply git's state; prune what left git with --prune")
    _source_arguments(sync)
    _cluster_arguments(sync)
    add = sync.add_argument
    add("-o", "--output", choices=("text", "json"), default="text")
    _switch(sync, "--dry-run", "server-side dry-run: change nothing")
    _switch(sync, "--prune", "delete owned objects that left git")
    _switch(sync, "--allow-empty", "prune even when the source renders nothing")
    _switch(sync, "--allow-mass-prune", "prune beyond the budget")
    add(
        "--prune-budget",
        type=_percent,
        metavar="PERCENT",
        help=f"most owned objects one sync may prune (default {PrunePolicy.budget_percent:g})",
    )
    _switch(
        sync,
        "--prune-protected",
        "also prune Namespaces, CRDs, PersistentVolumes and PersistentVolumeClaims",
    )
    _switch(sync, "--adopt", "take over existing objects no source owns")
    _switch(
        sync,
        "--no-force-conflicts",
        "report fields other managers own instead of taking them over",
        dest="force_conflicts",
        const=False,
    )
    add(
        "--crd-timeout",
        type=float,
        metavar="SECONDS",
        help="bound on waiting for new CRDs to be Established "
        f"(default {SyncSettings.crd_timeout_seconds:g})",
    )
    add(
        "--wait",
        action="store_true",
        help="after applying, wait until every object of the revision is healthy (Current); "
        "exit 6 when one Failed or --timeout passed",
    )
    add(
        "--timeout",
        type=_duration,
        metavar="DURATION",
        help="bound on --wait and on each sync wave's wait for health, such as 90s, 5m or 1h "
        f"(default {_shown_duration(SyncSettings.health_timeout_seconds)})",
    )
    sync.set_defaults(command=run_sync)


def _switch(
    parser: argparse.ArgumentParser,
    flag: str,
    help: str,
    dest: str | None = None,
    const: bool = True,
) -> None:
    """A flag without a value that sets a setting; left out, it is None (the default holds)."""
    parser.add_argument(flag, dest=dest, action="store_const", const=const, help=help)


def _source_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("source", metavar="SOURCE", help="a local directory, or a git URL (https, ssh)")
    add("--ref", help="branch, tag or commit (default: the remote's HEAD)")
    add(
        "--path",
        action="append",
        dest="paths",
        metavar="PATH",
        help="directory or file inside the source, repeatable (default: all of it)",
    )
    add(
        "--include",
        action="append",
        metavar="GLOB",
        help=f"file names to read (default {', '.join(SourceSpec.include)})",
    )
    add("--exclude", action="append", metavar="GLOB", help="paths to skip")
    _switch(parser, "--allow-insecure-source", "permit file:// and plain http:// URLs")
    add(
        "--username",
        help=f"https user name (default {Credentials.username}; the token comes from the "
        "environment)",
    )
    add(
        "--password-file",
        type=Path,
        help=f"file holding the https password or token (else ${Credentials.password_env})",
    )
    add("--ssh-key", type=Path, help="private key file for ssh URLs")
    add("--known-hosts", type=Path, help="pinned host keys for ssh URLs (required for ssh)")
    add("--cache-dir", type=Path, default=_default_cache(), help="checkout cache")
    _limit_arguments(parser)


def _limit_arguments(parser: argparse.ArgumentParser) -> None:
    for limit, setting in LIMIT_SETTINGS.items():
        default = getattr(Limits, limit)
        counts_bytes = limit.endswith("_bytes")
        parser.add_argument(
            setting.flag,
            dest=limit,
            type=_count,
            metavar="BYTES" if counts_bytes else "COUNT",
            help=f"{setting.meaning} (default {format_size(default) if counts_bytes else default})",
        )


def _count(text: str) -> int:
    number = parse_size(text)
    if not number:
        raise argparse.ArgumentTypeError(
            f"expected a positive whole number (sizes may end in Ki, Mi or Gi), got {text!r}"
        )
    return number


def _positive(text: str) -> int:
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(text)


def _duration(text: str) -> float:
    """A duration as the config file writes one (90s, 5m, 1h30m), or plain seconds."""
    seconds = float(text) if text.isascii() and text.isdigit() else parse_duration(text)
    if not seconds:
        raise argparse.ArgumentTypeError(f"expected a duration such as 90s, 5m or 1h, got {text!r}")
    return seconds


def _shown_duration(seconds: float) -> str:
    return f"{seconds / 60:g}m" if seconds % 60 == 0 else f"{seconds:g}s"


def _percent(text: str) -> float:
    """As the config file's pruneBudgetPercent: above 0 and at most 100."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 100:  # also false for nan and inf
        raise argparse.ArgumentTypeError(f"expected a number above 0 and at most 100, got {text!r}")
    return value


def _cluster_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--kubeconfig", help="kubeconfig file (default $KUBECONFIG, ~/.kube/config, in-cluster)")
    add("--context", help="kubeconfig context")
    add(
        "--allow-exec-credentials",
        action="store_true",
        help="let the kubeconfig run its exec/auth-provider credential plugin",
    )
    add(
        "--name",
        help="the source's name, as in the daemon's config: its ApplySet parent is the "
        "ConfigMap gitopsd-NAME (default: derived from SOURCE and --path; a checkout by its "
        "remote URL and its path in the repository)",
    )
    add(
        "--inventory-namespace",
        help=f"namespace of the ApplySet parent (default {SyncSettings.inventory_namespace!r})",
    )
    add(
        "--namespace",
        "-n",
        dest="default_namespace",
        help="namespace for namespaced objects that name none (default: the kubeconfig "
        f"context's namespace, else {SyncSettings.default_namespace!r})",
    )
    add(
        "--concurrency",
        type=_positive,
        metavar="N",
        help=f"API requests in flight at once (default {SyncSettings.concurrency})",
    )
    add(
        "--refresh",
        action="store_true",
        help="dry-run every object, also those the ApplySet parent's stamps vouch for as in sync",
    )


def _default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "gitopsd" / "sources"
