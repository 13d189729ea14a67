"""The commands and their flags. Help texts quote each default from gitopsd.config."""

from __future__ import annotations

import argparse
import os
from importlib.metadata import version
from pathlib import Path
from typing import Any

from gitopsd.cli.commands import run_daemon, run_diff, run_sync, run_validate
from gitopsd.cli.control import DAEMON, run_get, run_reconcile, run_resume, run_suspend
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

EXIT_CODES = """exit codes:
  0  success (diff: no drift)           4  the cluster failed, or an apply conflict
  1  diff found drift                   5  a prune guard refused a delete
  2  invalid input (file:line named)    6  not healthy (--wait, a sync wave)
  3  the source failed (git)            130, 143  stopped by SIGINT, SIGTERM"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gitopsd",
        description="Keep Kubernetes clusters in the state a git repository declares.",
        epilog=f"""examples:
  gitopsd diff https://git.example.com/org/apps.git --path prod
  gitopsd sync ./deploy --namespace shop --prune --wait
  gitopsd run --config /etc/gitopsd/gitopsd.yaml
  gitopsd get --gitsyncs -A

{EXIT_CODES}""",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gitopsd {version('gitopsd')}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")
    _add_validate(commands)
    _add_diff(commands)
    _add_sync(commands)
    _add_run(commands)
    _add_get(commands)
    _add_reconcile(commands)
    _add_suspension(commands, "suspend", run_suspend, "stop reconciling a GitSync")
    _add_suspension(commands, "resume", run_resume, "reconcile a suspended GitSync again")
    return parser


def _command(commands: Any, name: str, summary: str, examples: str) -> argparse.ArgumentParser:
    return commands.add_parser(  # type: ignore[no-any-return]
        name,
        help=summary,
        description=summary,
        epilog=f"examples:\n{examples}\n\n{EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _add_run(commands: Any) -> None:
    run = _command(
        commands,
        "run",
        "the daemon: keep the configured sources (and GitSyncs) in sync",
        "  gitopsd run --config config/gitopsd.yaml --log-format text",
    )
    run.add_argument("--config", type=Path, required=True, help="YAML file (see config/)")
    logs = run.add_argument_group("logs")
    logs.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="the least severe lines written (default info)",
    )
    logs.add_argument(
        "--log-format",
        choices=("json", "text"),
        help="JSON lines, or text (coloured on a terminal); default: text on a terminal, else json",
    )
    run.set_defaults(command=run_daemon)


def _add_validate(commands: Any) -> None:
    validate = _command(
        commands,
        "validate",
        "parse and check manifests; no cluster needed",
        "  gitopsd validate ./deploy\n"
        "  gitopsd validate https://git.example.com/org/apps.git --ref v1.2",
    )
    _source_arguments(validate)
    validate.set_defaults(command=run_validate)


def _add_diff(commands: Any) -> None:
    diff_command = _command(
        commands,
        "diff",
        "show drift between git and the cluster",
        "  gitopsd diff ./deploy --namespace shop\n  gitopsd diff ./deploy -o json | jq .drift",
    )
    _source_arguments(diff_command)
    _cluster_arguments(diff_command)
    _output_argument(diff_command)
    diff_command.set_defaults(command=run_diff)


def _add_sync(commands: Any) -> None:
    sync = _command(
        commands,
        "sync",
        "apply git's state; prune what left git with --prune",
        "  gitopsd sync ./deploy --namespace shop\n"
        "  gitopsd sync https://git.example.com/org/apps.git --path prod --prune --wait",
    )
    _source_arguments(sync)
    _cluster_arguments(sync)
    _sync_arguments(sync.add_argument_group("sync"))
    _output_argument(sync)
    sync.set_defaults(command=run_sync)


def _sync_arguments(group: argparse._ArgumentGroup) -> None:
    add = group.add_argument
    _switch(group, "--dry-run", "server-side dry-run: change nothing")
    _switch(group, "--prune", "delete owned objects that left git")
    _switch(group, "--allow-empty", "prune even when the source renders nothing")
    _switch(group, "--allow-mass-prune", "prune beyond the budget")
    add(
        "--prune-budget",
        type=_percent,
        metavar="PERCENT",
        help=f"most owned objects one sync may prune (default {PrunePolicy.budget_percent:g})",
    )
    _switch(
        group,
        "--prune-protected",
        "also prune Namespaces, CRDs, PersistentVolumes and PersistentVolumeClaims",
    )
    _switch(group, "--adopt", "take over existing objects no source owns")
    _switch(
        group,
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


def _add_get(commands: Any) -> None:
    get = _command(
        commands,
        "get",
        "list a running daemon's sources, or the cluster's GitSyncs",
        "  gitopsd get                      # the daemon's control API on 127.0.0.1:9091\n"
        "  kubectl -n gitopsd-system port-forward deploy/gitopsd 9091 &  gitopsd get\n"
        "  gitopsd get --gitsyncs -A -o json",
    )
    get.add_argument("--gitsyncs", action="store_true", help="the GitSyncs of the cluster")
    get.add_argument(
        "-A", "--all-namespaces", action="store_true", help="with --gitsyncs: every namespace"
    )
    _control_arguments(get)
    _output_argument(get)
    get.set_defaults(command=run_get)


def _add_reconcile(commands: Any) -> None:
    reconcile = _command(
        commands,
        "reconcile",
        "reconcile a source now (fetch, diff, apply) and wait until it is done",
        "  gitopsd reconcile platform                  # a source of the daemon\n"
        "  gitopsd reconcile web --gitsync -n team-a   # sets gitopsd.io/reconcile-requested-at",
    )
    reconcile.add_argument("name", metavar="NAME", help="the source, or with --gitsync the GitSync")
    reconcile.add_argument("--gitsync", action="store_true", help="NAME is a GitSync")
    reconcile.add_argument(
        "--timeout",
        type=_duration,
        default=300.0,
        metavar="DURATION",
        help="bound on the wait (default 5m)",
    )
    _control_arguments(reconcile)
    reconcile.set_defaults(command=run_reconcile)


def _add_suspension(commands: Any, name: str, command: Any, summary: str) -> None:
    suspension = _command(commands, name, summary, f"  gitopsd {name} web -n team-a")
    suspension.add_argument("name", metavar="NAME", help="the GitSync")
    _control_arguments(suspension)
    suspension.set_defaults(command=command)


def _control_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("daemon and cluster")
    group.add_argument(
        "--daemon",
        default=DAEMON,
        metavar="URL",
        help=f"the daemon's controlListen address, on loopback (default {DAEMON})",
    )
    group.add_argument(
        "--namespace",
        "-n",
        help="the GitSync's namespace (default: the kubeconfig context's, else 'default')",
    )
    _kube_arguments(group)


def _output_argument(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("output")
    group.add_argument("-o", "--output", choices=("text", "json"), default="text")


def _switch(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flag: str,
    help: str,
    dest: str | None = None,
    const: bool = True,
) -> None:
    """A flag without a value that sets a setting; left out, it is None (the default holds)."""
    parser.add_argument(flag, dest=dest, action="store_const", const=const, help=help)


def _source_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source", metavar="SOURCE", help="a local directory, or a git URL (https, ssh)"
    )
    group = parser.add_argument_group("source")
    add = group.add_argument
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
    _switch(group, "--allow-insecure-source", "permit file:// and plain http:// URLs")
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
    _limit_arguments(parser.add_argument_group("limits of one revision"))


def _limit_arguments(group: argparse._ArgumentGroup) -> None:
    for limit, setting in LIMIT_SETTINGS.items():
        default = getattr(Limits, limit)
        counts_bytes = limit.endswith("_bytes")
        group.add_argument(
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


def _kube_arguments(group: argparse._ArgumentGroup) -> None:
    add = group.add_argument
    add("--kubeconfig", help="kubeconfig file (default $KUBECONFIG, ~/.kube/config, in-cluster)")
    add("--context", help="kubeconfig context")
    add(
        "--allow-exec-credentials",
        action="store_true",
        help="let the kubeconfig run its exec/auth-provider credential plugin",
    )


def _cluster_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("cluster")
    _kube_arguments(group)
    add = group.add_argument
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
