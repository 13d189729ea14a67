"""The commands, and how their errors become exit codes.

Exit codes: 0 in sync, 1 drift found (diff), 2 invalid input (including manifests the API
server rejects as invalid), 3 source failure, 4 cluster or apply failure, 5 a guard blocked
a prune, 130 interrupted (SIGINT), 143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TextIO

from gitopsd import daemon, manifests
from gitopsd.changes import ChangeSet, Hooks
from gitopsd.cli.render import Progress, drift_json, render_drift, render_report, report_json
from gitopsd.cli.settings import source_spec, sync_settings
from gitopsd.cli.stop import STOP
from gitopsd.cluster import Cluster
from gitopsd.errors import ClusterError, ClusterReason, GitopsdError, SourceError, TerminalError
from gitopsd.reconcile import (
    ListReader,
    Mode,
    Result,
    Source,
    State,
    SyncReport,
    desired,
    reconcile_once,
)

OK, DRIFT, INVALID, SOURCE_FAILED, CLUSTER_FAILED, PRUNE_BLOCKED = 0, 1, 2, 3, 4, 5


def run(arguments: argparse.Namespace) -> int:
    """Runs the command the arguments name: its exit code, or the code of its error."""
    try:
        code: int = arguments.command(arguments)
    except TerminalError as error:
        return _fail(error, INVALID)
    except SourceError as error:
        return _fail(error, SOURCE_FAILED)
    except ClusterError as error:  # the server refusing a manifest as invalid is bad input
        return _fail(error, INVALID if error.reason == ClusterReason.INVALID else CLUSTER_FAILED)
    return code


def _fail(error: GitopsdError, code: int) -> int:
    _explain(error)
    return code


def _explain(error: GitopsdError) -> None:
    """Prints the error, unless it is a request the stop fenced: that is no failure."""
    fenced = isinstance(error, ClusterError) and error.reason == ClusterReason.FENCED
    if STOP.running() or not fenced:
        print(f"gitopsd: error: {error}", file=sys.stderr)


def run_daemon(arguments: argparse.Namespace) -> int:
    return daemon.run(arguments.config)


def run_validate(arguments: argparse.Namespace) -> int:
    spec = source_spec(arguments)
    found = desired.read_revision(
        desired.fetch(spec, arguments.cache_dir), spec, arguments.cache_dir
    )
    manifests.index(found)
    print(f"{len(found)} objects valid")
    return OK


def run_diff(arguments: argparse.Namespace) -> int:
    result = _reconcile(arguments, Mode.OBSERVE, Hooks())
    origins = {key: str(target.origin) for key, target in result.desired.targets.items()}
    drifts, sha = result.drifts, result.desired.revision.sha
    if arguments.output == "json":
        print(json.dumps(drift_json(sha, drifts, origins), indent=2, default=str))
    else:
        render_drift(drifts, origins, sys.stdout, _colored(sys.stdout))
    return DRIFT if drifts else OK


def run_sync(arguments: argparse.Namespace) -> int:
    progress = Progress(sys.stderr)
    hooks = Hooks(
        on_revision=progress.read,
        on_plan=progress.planned,
        on_outcome=progress.tick,
        may_prune=STOP.running,
    )
    try:
        result = _reconcile(arguments, Mode.ENFORCE, hooks)
        report = result.report or SyncReport(result.desired.revision.sha)
    except GitopsdError as error:
        if STOP.running() or progress.sha is None:
            raise
        _explain(error)
        report = SyncReport(progress.sha, ChangeSet(progress.outcomes))
    finally:
        progress.done()
    if arguments.output == "json":
        print(json.dumps(report_json(report), indent=2))
    else:
        render_report(report, sys.stdout)
    return PRUNE_BLOCKED if report.prune_blocked else OK


def _reconcile(arguments: argparse.Namespace, mode: Mode, hooks: Hooks) -> Result:
    """One reconcile from a fresh state: what the parent's stamps vouch for is taken as in
    sync (unless --refresh), everything else is measured."""
    spec = source_spec(arguments)
    settings = sync_settings(arguments, spec)
    cluster = connect(arguments)
    source = Source(spec, settings, arguments.cache_dir, refresh=arguments.refresh)
    reader = ListReader(cluster, settings.concurrency)
    return reconcile_once(source, cluster, reader, State(), mode, hooks)


def connect(arguments: argparse.Namespace) -> Cluster:
    cluster = Cluster.connect(
        arguments.kubeconfig, arguments.context, arguments.allow_exec_credentials
    )
    cluster.may_write = STOP.running
    return cluster


def _colored(out: TextIO) -> bool:
    return out.isatty() and "NO_COLOR" not in os.environ
