"""The commands, and how their errors become exit codes.

Exit codes: 0 in sync, 1 drift found (diff), 2 invalid input (including manifests the API
server rejects as invalid), 3 source failure, 4 cluster or apply failure, 5 a guard blocked
a prune, 6 objects not healthy (one Failed, or not Current in time: `sync --wait`, or a
sync wave that held the later ones back), 130 interrupted (SIGINT), 143 terminated
(SIGTERM).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from typing import TextIO

from gitopsd import daemon, manifests, validation
from gitopsd.changes import ChangeSet, Hooks
from gitopsd.cli.render import (
    Progress,
    drift_json,
    emit,
    error_json,
    health_json,
    render_drift,
    render_health,
    render_report,
    report_json,
)
from gitopsd.cli.settings import source_spec, sync_settings
from gitopsd.cli.stop import STOP
from gitopsd.cluster import Cluster
from gitopsd.config import SyncSettings
from gitopsd.errors import ClusterError, ClusterReason, ExitCode, GitopsdError, ManifestError
from gitopsd.health import Health, Status, overall
from gitopsd.objects import Manifest, ObjectKey
from gitopsd.reconcile import (
    Bounds,
    Intent,
    ListReader,
    Result,
    Source,
    State,
    SyncReport,
    desired,
    reconcile_once,
)
from gitopsd.waiting import HealthWait, not_healthy


def run(arguments: argparse.Namespace) -> int:
    """Runs the command the arguments name: its exit code, or the code of its error."""
    try:
        code: int = arguments.command(arguments)
    except GitopsdError as error:
        _explain(error)
        return error.exit_code
    return code


def _explain(error: GitopsdError) -> None:
    """Prints the error, unless it is a request the stop fenced: that is no failure."""
    fenced = isinstance(error, ClusterError) and error.reason == ClusterReason.FENCED
    if STOP.running() or not fenced:
        print(f"gitopsd: error: {error}", file=sys.stderr)


def run_daemon(arguments: argparse.Namespace) -> int:
    return daemon.run(arguments.config, arguments.log_level, arguments.log_format)


def run_validate(arguments: argparse.Namespace) -> int:
    """Every problem of every object, each on a line of its own, then how many."""
    spec = source_spec(arguments)
    cluster = connect(arguments) if arguments.cluster else None
    revision = desired.fetch(spec, arguments.cache_dir)
    found = desired.read_revision(revision, spec, arguments.cache_dir, cluster=cluster)
    manifests.index(found)
    _notify(list(desired.empty_warning(found, spec)))
    catalogue = _catalogue(cluster, found)
    with desired.files(revision, spec, arguments.cache_dir) as files:
        positions = manifests.Positions(files, spec.limits)
        problems = validation.check(found, catalogue, positions.origin_of)
    for problem in problems:
        print(f"gitopsd: error: {problem}", file=sys.stderr)
    if problems:
        invalid = len({problem.key for problem in problems})
        count = f"{len(problems)} problem{'s' * (len(problems) > 1)}"
        raise ManifestError(f"{count} in {invalid} of {len(found)} objects")
    emit(f"{len(found)} objects valid\n")
    return ExitCode.OK


def _catalogue(cluster: Cluster | None, found: list[Manifest]) -> validation.Catalogue:
    """The built-in kinds' schemas, or, with a cluster, the kinds it serves and their
    schemas as it publishes them (of the apiVersions the revision uses)."""
    if cluster is None:
        return validation.built_in()
    documents = cluster.openapi({manifest.api_version for manifest in found})
    return validation.served(cluster.discovery.resources(), documents)


def run_diff(arguments: argparse.Namespace) -> int:
    try:
        result = _reconcile(arguments, connect(arguments), Intent.OBSERVE, Hooks())
    except GitopsdError as error:
        if arguments.output != "json":
            raise
        _explain(error)
        document = drift_json(None, [], {}) | health_json({}) | error_json(error)
        emit(json.dumps(document, indent=2) + "\n")
        return error.exit_code
    _notify(result.desired.notices)
    _notify(result.notices, "note")
    origins = {key: str(target.origin) for key, target in result.desired.targets.items()}
    drifts, sha, healths = result.drifts, result.desired.revision.sha, result.health()
    out = io.StringIO()
    ignored = arguments.show_ignored
    if arguments.output == "json":
        found = drift_json(sha, drifts, origins, result.held, ignored)
        document = found | health_json(healths) | error_json(None)
        print(json.dumps(document, indent=2, default=str), file=out)
    else:
        render_drift(drifts, origins, out, _colored(sys.stdout), result.held, ignored)
        render_health(healths, out)
    emit(out.getvalue())
    return ExitCode.DRIFT if drifts else ExitCode.OK


def run_sync(arguments: argparse.Namespace) -> int:
    """Reports what was done whatever happened: a sync that fails part-way may have
    written objects already, and says which, beside its error."""
    progress = Progress(sys.stderr)
    hooks = Hooks(
        on_revision=progress.read,
        on_plan=progress.planned,
        on_outcome=progress.tick,
        may_prune=STOP.running,
    )
    healths: dict[ObjectKey, Health] | None = None
    error: GitopsdError | None = None
    try:
        cluster = connect(arguments)
        settings = sync_settings(arguments, source_spec(arguments), cluster.namespace)
        result = _reconcile(arguments, cluster, Intent.ENFORCE, hooks)
        _notify(result.desired.notices)
        _notify(result.notices, "note")
        report = result.report or SyncReport(result.desired.revision.sha)
        if arguments.wait and not arguments.dry_run:
            healths = _wait(cluster, result, settings, progress)
        error = report.not_applied()  # the rest of the revision was applied
    except GitopsdError as caught:
        error = caught
        report = SyncReport(progress.sha or "", ChangeSet(progress.outcomes))
    finally:
        progress.done()
    if error is not None:
        _explain(error)
        if arguments.output == "text" and progress.sha is None:
            return error.exit_code  # nothing was read, so nothing was done
    _print_report(arguments.output, report, healths, error, progress.sha is not None)
    code = _sync_code(report, healths, _health_limit(arguments))
    return code if error is None or code == ExitCode.UNHEALTHY else error.exit_code


def _notify(notices: list[str], kind: str = "warning") -> None:
    """What people should know of the reconcile: what of other tools' annotations gitopsd
    does not honour (once per object, a warning), a record moved (a note)."""
    for notice in notices:
        print(f"gitopsd: {kind}: {notice}", file=sys.stderr)


def _print_report(
    output: str,
    report: SyncReport,
    healths: dict[ObjectKey, Health] | None,
    error: GitopsdError | None,
    read: bool,
) -> None:
    out = io.StringIO()
    if output == "json":
        document = report_json(report) | health_json(healths or {}) | error_json(error)
        if not read:
            document["revision"] = None
        print(json.dumps(document, indent=2), file=out)
    else:
        render_report(report, out)
        if healths is not None:
            render_health(healths, out)
    emit(out.getvalue())


def _health_limit(arguments: argparse.Namespace) -> float:
    limit: float | None = arguments.timeout
    return limit or SyncSettings.health_timeout_seconds


def _wait(
    cluster: Cluster, result: Result, settings: SyncSettings, progress: Progress
) -> dict[ObjectKey, Health]:
    """Reads every object of the revision until all are Current, one Failed, or time is up."""
    waiting = HealthWait(
        cluster, settings.concurrency, on_progress=progress.waiting, checks=settings.checks
    )
    targets = result.desired.synced.values()
    return waiting.until_healthy(targets, settings.health_timeout_seconds)


def _sync_code(report: SyncReport, healths: dict[ObjectKey, Health] | None, limit: float) -> int:
    """Not healthy (after --wait) says more than a prune refused, so it wins."""
    if healths is not None and overall(healths.values()) != Status.CURRENT:
        if STOP.running():  # unless a stop ended the wait: its own exit code and message tell
            failing = "\n".join(f"  {line}" for line in not_healthy(healths))
            why = f"not healthy (one Failed, or not Current within {limit:g} s)"
            print(f"gitopsd: error: {why}:\n{failing}", file=sys.stderr)
        return ExitCode.UNHEALTHY
    return ExitCode.PRUNE_BLOCKED if report.prune_blocked else ExitCode.OK


def _reconcile(
    arguments: argparse.Namespace, cluster: Cluster, intent: Intent, hooks: Hooks
) -> Result:
    """One reconcile from a fresh state: what the parent's stamps vouch for is taken as in
    sync (unless --refresh), everything else is measured."""
    spec = source_spec(arguments)
    settings = sync_settings(arguments, spec, cluster.namespace)
    source = Source(spec, settings, arguments.cache_dir, refresh=arguments.refresh)
    reader = ListReader(cluster, settings.concurrency, Bounds.of(settings, spec.limits))
    return reconcile_once(source, cluster, reader, State(), intent, hooks)


def connect(arguments: argparse.Namespace) -> Cluster:
    cluster = Cluster.connect(
        arguments.kubeconfig, arguments.context, arguments.allow_exec_credentials
    )
    cluster.stopping = STOP.stopped
    return cluster


def _colored(out: TextIO) -> bool:
    return out.isatty() and "NO_COLOR" not in os.environ
