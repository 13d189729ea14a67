"""The parsers of the daemon (`run`) and of the commands that ask it or the cluster's GitSyncs
(`get`, `reconcile`, `suspend`, `resume`, `tree`, `history`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gitopsd.cli.commands import run_daemon
from gitopsd.cli.control import (
    DAEMON,
    run_get,
    run_reconcile,
    run_resume,
    run_suspend,
)
from gitopsd.cli.flags import command, duration, kube_arguments, output_argument
from gitopsd.cli.history import run_history
from gitopsd.cli.in_cluster import CONTROL_NAMESPACE
from gitopsd.cli.tree import run_tree


def add_control_commands(commands: Any) -> None:
    _add_run(commands)
    _add_get(commands)
    _add_reconcile(commands)
    _add_suspension(commands, "suspend", run_suspend, "stop reconciling a source or GitSync")
    _add_suspension(commands, "resume", run_resume, "reconcile a suspended source again")
    _add_tree(commands)
    _add_history(commands)


def _add_run(commands: Any) -> None:
    run = command(
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


def _add_get(commands: Any) -> None:
    get = command(
        commands,
        "get",
        "list a running daemon's sources, or the cluster's GitSyncs",
        "  gitopsd get                      # the daemon's control API on 127.0.0.1:9091\n"
        "  gitopsd get --in-cluster         # an in-cluster daemon's, through the API server\n"
        "  gitopsd get --gitsyncs -A -o json",
    )
    get.add_argument("--gitsyncs", action="store_true", help="the GitSyncs of the cluster")
    get.add_argument(
        "-A", "--all-namespaces", action="store_true", help="with --gitsyncs: every namespace"
    )
    _control_arguments(get)
    output_argument(get)
    get.set_defaults(command=run_get, document="SourceList")


def _add_reconcile(commands: Any) -> None:
    reconcile = command(
        commands,
        "reconcile",
        "reconcile a source now (fetch, diff, apply) and wait until it is done",
        "  gitopsd reconcile platform                  # a source of the daemon\n"
        "  gitopsd reconcile platform --in-cluster     # of the daemon in the cluster\n"
        "  gitopsd reconcile web --gitsync -n team-a   # sets gitopsd.io/reconcile-requested-at",
    )
    _named_source(reconcile)
    reconcile.add_argument(
        "--timeout",
        type=duration,
        default=300.0,
        metavar="DURATION",
        help="bound on the wait (default 5m)",
    )
    _control_arguments(reconcile)
    output_argument(reconcile)
    reconcile.set_defaults(command=run_reconcile, document="ReconcileResult")


def _add_suspension(commands: Any, name: str, run: Any, summary: str) -> None:
    examples = (
        f"  gitopsd {name} platform                  # a source of the daemon, kept in its status\n"
        f"  gitopsd {name} platform --in-cluster     # of the daemon in the cluster\n"
        f"  gitopsd {name} web --gitsync -n team-a   # a GitSync's spec.suspend"
    )
    suspension = command(commands, name, summary, examples)
    _named_source(suspension)
    _control_arguments(suspension)
    output_argument(suspension)
    suspension.set_defaults(command=run, document="SuspendResult")


def _add_tree(commands: Any) -> None:
    tree = command(
        commands,
        "tree",
        "list the objects a source holds, with their health and drift",
        "  gitopsd tree platform                  # a source of the daemon, from its daemon\n"
        "  gitopsd tree web --gitsync -n team-a   # a GitSync, from its record in the cluster\n"
        "  gitopsd tree east --in-cluster --target-context east   # one syncing into cluster east\n"
        "  gitopsd tree platform -o json | jq '.objects[] | select(.drift != \"\")'",
    )
    _named_source(tree)
    _control_arguments(tree)
    tree.add_argument(
        "--target-context",
        metavar="CONTEXT",
        help="the kubeconfig context of the cluster the source syncs into, where its record "
        "and objects are (default: the cluster of its status, when it syncs there)",
    )
    output_argument(tree)
    tree.set_defaults(command=run_tree, document="ObjectTree")


def _add_history(commands: Any) -> None:
    history = command(
        commands,
        "history",
        "list a source's last syncs: revision, start, duration, outcome, objects changed",
        "  gitopsd history platform                  # a source of the daemon\n"
        "  gitopsd history web --gitsync -n team-a   # a GitSync's status (no daemon needed)\n"
        "  gitopsd history platform -o json | jq '.history[0].objects.pruned'",
    )
    _named_source(history)
    _control_arguments(history)
    output_argument(history)
    history.set_defaults(command=run_history, document="SyncHistory")


def _named_source(parser: argparse.ArgumentParser) -> None:
    """A daemon's source by its name, or a GitSync with --gitsync (in --namespace)."""
    parser.add_argument("name", metavar="NAME", help="the source, or with --gitsync the GitSync")
    parser.add_argument("--gitsync", action="store_true", help="NAME is a GitSync")


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
    group.add_argument(
        "--in-cluster",
        nargs="?",
        const=CONTROL_NAMESPACE,
        metavar="NAMESPACE",
        help="reach the daemon's sources through the API server: their status ConfigMaps in "
        f"its controlNamespace (default {CONTROL_NAMESPACE}), no port-forward",
    )
    kube_arguments(group)
