"""The commands and their flags (the daemon's and its control commands' in control_parser).
The flags of settings are the rows of gitopsd.settings_table (`flags.setting_flags`)."""

from __future__ import annotations

import argparse
from functools import partial
from importlib.metadata import version
from typing import Any

from gitopsd.cli.check import run_check
from gitopsd.cli.commands import (
    run_build,
    run_diff,
    run_sync,
    run_validate,
    run_version,
)
from gitopsd.cli.control_parser import add_control_commands
from gitopsd.cli.flags import (
    EXIT_CODES,
    cluster_arguments,
    command,
    kube_arguments,
    output_argument,
    setting_flags,
    source_arguments,
    target_arguments,
)
from gitopsd.cli.shells import SCRIPTS, run_completion
from gitopsd.config import SyncSettings
from gitopsd.settings_table import Group


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gitopsd",
        description="Keep Kubernetes clusters in the state a git repository declares.",
        epilog=f"""examples:
  gitopsd diff https://git.example.com/org/apps.git --path prod
  gitopsd build ./deploy --namespace shop > manifests.yaml
  gitopsd sync ./deploy --namespace shop --prune --wait
  gitopsd run --config /etc/gitopsd/gitopsd.yaml
  gitopsd get --gitsyncs -A

{EXIT_CODES}""",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gitopsd {version('gitopsd')}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")
    _add_validate(commands)
    _add_build(commands)
    _add_diff(commands)
    _add_sync(commands)
    add_control_commands(commands)
    _add_version(commands)
    _add_completion(commands, parser)
    _add_check(commands)
    return parser


def _add_check(commands: Any) -> None:
    check = command(
        commands,
        "check",
        "whether gitopsd can work here: the cluster, its version, your rights, the GitSync "
        "API, helm and kubectl",
        "  gitopsd check\n"
        "  gitopsd check --pre -n shop --resource deployments.apps\n"
        "  gitopsd check -o json | jq '.checks[] | select(.ok | not)'",
    )
    check.add_argument(
        "--pre",
        action="store_true",
        help="the prerequisites alone, as before installing gitopsd: not the GitSync API",
    )
    group = check.add_argument_group("cluster")
    kube_arguments(group)
    group.add_argument(
        "--namespace",
        "-n",
        help="where a sync's rights are checked (default: the kubeconfig context's "
        "namespace, else 'default')",
    )
    group.add_argument(
        "--resource",
        dest="resources",
        action="append",
        metavar="RESOURCE",
        help="a sync's rights on this resource too, as kubectl names it (deployments.apps), "
        "repeatable; always on ConfigMaps (the ApplySet parent)",
    )
    output_argument(check)
    check.set_defaults(command=run_check, document="CheckResult")


def _add_completion(commands: Any, parser: argparse.ArgumentParser) -> None:
    completion = command(
        commands,
        "completion",
        "a script that has your shell complete gitopsd's commands, flags and their values",
        "  source <(gitopsd completion bash)           # in ~/.bashrc\n"
        "  gitopsd completion zsh > ~/.zfunc/_gitopsd  # a directory of $fpath\n"
        "  gitopsd completion fish > ~/.config/fish/completions/gitopsd.fish",
    )
    completion.add_argument(
        "shell", metavar="SHELL", choices=tuple(SCRIPTS), help="bash, zsh or fish"
    )
    completion.set_defaults(command=partial(run_completion, parser))


def _add_version(commands: Any) -> None:
    shown = command(
        commands,
        "version",
        "gitopsd's version, and the Kubernetes and Python versions it runs with",
        "  gitopsd version",
    )
    shown.set_defaults(command=run_version)


def _add_validate(commands: Any) -> None:
    validate = command(
        commands,
        "validate",
        "check manifests against their kinds' schemas (built in: no cluster needed)",
        "  gitopsd validate ./deploy\n"
        "  gitopsd validate https://git.example.com/org/apps.git --ref v1.2\n"
        "  gitopsd validate ./deploy --cluster --context staging",
    )
    source_arguments(validate)
    validate.add_argument(
        "--namespace",
        "-n",
        dest="default_namespace",
        help="the namespace charts render into and --substitute-from reads, as sync's "
        f"(default: the kubeconfig context's namespace, else {SyncSettings.default_namespace!r})",
    )
    checks = validate.add_argument_group("schemas")
    checks.add_argument(
        "--cluster",
        action="store_true",
        help="check against the kinds and schemas the cluster serves (its CRDs too), not "
        "those of the Kubernetes version built in",
    )
    kube_arguments(checks)
    output_argument(validate)
    validate.set_defaults(command=run_validate, document="ValidateResult")


def _add_build(commands: Any) -> None:
    build = command(
        commands,
        "build",
        "print the objects as a sync would send them: rendered, namespaced, labelled "
        "(no cluster needed)",
        "  gitopsd build ./deploy --namespace shop\n"
        "  gitopsd build https://git.example.com/org/apps.git --path prod -o json | jq .objects\n"
        "  gitopsd build ./deploy --cluster --context staging",
    )
    source_arguments(build)
    target_arguments(
        build.add_argument_group("target (as sync's: they decide namespaces and labels)")
    )
    kinds = build.add_argument_group(
        "kinds",
        "Without --cluster, only the kubeconfig context's namespace is read (the default "
        "namespace, as sync's): no request is made.",
    )
    kinds.add_argument(
        "--cluster",
        action="store_true",
        help="resolve kinds against those the cluster serves and render charts for its "
        "capabilities, as sync does (default: the built-in kinds and the revision's CRDs; "
        "a kind of neither needs it)",
    )
    kube_arguments(kinds)
    output = output_argument(
        build,
        "text: the objects as a YAML stream; json or yaml: one document of the versioned "
        "contract (docs/cli.md#json-and-yaml-output)",
    )
    output.add_argument(
        "--show-secrets",
        action="store_true",
        help="print Secrets' data and stringData values as git holds them (default: ***)",
    )
    build.set_defaults(command=run_build, document="BuildResult")


def _add_diff(commands: Any) -> None:
    diff_command = command(
        commands,
        "diff",
        "show drift between git and the cluster",
        "  gitopsd diff ./deploy --namespace shop\n  gitopsd diff ./deploy -o json | jq .drift",
    )
    source_arguments(diff_command)
    cluster_arguments(diff_command)
    diff_command.add_argument(
        "--show-ignored",
        action="store_true",
        help="also show the fields the drift policy ignores, and the rule that did",
    )
    output_argument(diff_command)
    diff_command.set_defaults(command=run_diff, document="DiffResult")


def _add_sync(commands: Any) -> None:
    sync = command(
        commands,
        "sync",
        "apply git's state; prune what left git with --prune",
        "  gitopsd sync ./deploy --namespace shop\n"
        "  gitopsd sync https://git.example.com/org/apps.git --path prod --prune --wait",
    )
    source_arguments(sync)
    cluster_arguments(sync)
    _sync_arguments(sync.add_argument_group("sync"))
    output = output_argument(sync)
    output.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print the result alone: no progress (a line per phase, the bar, the wait) on stderr",
    )
    sync.set_defaults(command=run_sync, document="SyncResult")


def _sync_arguments(group: argparse._ArgumentGroup) -> None:
    setting_flags(group, Group.SYNC)
    group.add_argument(
        "--wait",
        action="store_true",
        help="after applying, wait until every object of the revision is healthy (Current); "
        "exit 6 when one Failed or --timeout passed",
    )
