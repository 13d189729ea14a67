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
import os
import platform
import sys
from dataclasses import dataclass
from importlib.metadata import version
from typing import TextIO

from gitopsd import manifests, validation
from gitopsd.changes import ChangeSet, Listener
from gitopsd.cli import documents
from gitopsd.cli.progress import Progress
from gitopsd.cli.render import (
    emit,
    render_drift,
    render_health,
    render_manifests,
    render_report,
)
from gitopsd.cli.settings import default_namespace, source_spec, sync_settings
from gitopsd.cli.stop import STOP
from gitopsd.cluster import Cluster, context_namespace
from gitopsd.config import SyncSettings
from gitopsd.errors import ClusterError, ClusterReason, ExitCode, GitopsdError, ManifestError
from gitopsd.health import Health, Status, overall
from gitopsd.masking import mask
from gitopsd.objects import Manifest, ObjectKey, body_version, version_of
from gitopsd.reconcile import (
    Bounds,
    Intent,
    ListReader,
    Pass,
    Result,
    Source,
    State,
    SyncReport,
    build,
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
        if getattr(arguments, "output", "text") != "text":
            failed = documents.failed(arguments.document, error, _named_source(arguments))
            emit(documents.serialized(failed, arguments.output))
        return error.exit_code
    return code


def _named_source(arguments: argparse.Namespace) -> documents.Document | None:
    """The source a control command names, as its document refers to it."""
    if arguments.document not in ("ReconcileResult", "SuspendResult", "ObjectTree", "SyncHistory"):
        return None
    if getattr(arguments, "gitsync", True):  # suspend and resume name GitSyncs alone
        return documents.source_reference("GitSync", arguments.namespace or "", arguments.name)
    return documents.source_reference("Source", "", arguments.name)


def _explain(error: GitopsdError) -> None:
    """Prints the error, unless it is a request the stop fenced: that is no failure."""
    fenced = isinstance(error, ClusterError) and error.reason == ClusterReason.FENCED
    if STOP.running() or not fenced:
        print(f"gitopsd: error: {error}", file=sys.stderr)


def run_daemon(arguments: argparse.Namespace) -> int:
    """The daemon is imported here alone: its scheduler, servers and metrics would add to
    the start of every other command (about 0.1 s of processor time)."""
    from gitopsd import daemon

    return daemon.run(arguments.config, arguments.log_level, arguments.log_format)


def run_version(arguments: argparse.Namespace) -> int:
    """As `--version`, with what it was built and tested against, for a bug report."""
    kubernetes = validation.built_in().where
    emit(
        f"gitopsd {version('gitopsd')}\n"
        f"{kubernetes} (the schemas built in, and the version it is tested against)\n"
        f"Python {platform.python_version()}\n"
    )
    return ExitCode.OK


def run_validate(arguments: argparse.Namespace) -> int:
    """Every problem of every object, each on a line of its own, then how many."""
    spec = source_spec(arguments)
    cluster = connect(arguments) if arguments.cluster else None
    namespace = default_namespace(arguments, _context_namespace(arguments, cluster))
    revision = desired.fetch(spec, arguments.cache_dir)
    found = desired.read_revision(
        revision, spec, arguments.cache_dir, namespace=namespace, cluster=cluster
    )
    manifests.index(found)
    _notify(list(desired.empty_warning(found, spec)))
    catalogue = _catalogue(cluster, found)
    with desired.files(revision, spec, arguments.cache_dir) as files:
        positions = manifests.Positions(files, spec.limits)
        problems = validation.check(found, catalogue, positions.origin_of)
    for problem in problems:
        print(f"gitopsd: error: {problem}", file=sys.stderr)
    error = _invalid(problems, len(found))
    if arguments.output != "text":
        versions = {manifest.key: version_of(manifest.api_version) for manifest in found}
        result = documents.validate_result(len(found), problems, _lookup(versions), error)
        emit(documents.serialized(result, arguments.output))
    elif error is None:
        emit(f"{len(found)} objects valid\n")
    if error is not None:
        print(f"gitopsd: error: {error}", file=sys.stderr)
        return error.exit_code
    return ExitCode.OK


def _invalid(problems: list[validation.Problem], objects: int) -> ManifestError | None:
    if not problems:
        return None
    invalid = len({problem.key for problem in problems})
    count = f"{len(problems)} problem{'s' * (len(problems) > 1)}"
    return ManifestError(f"{count} in {invalid} of {objects} objects")


def _catalogue(cluster: Cluster | None, found: list[Manifest]) -> validation.Catalogue:
    """The built-in kinds' schemas, or, with a cluster, the kinds it serves and their
    schemas as it publishes them (of the apiVersions the revision uses)."""
    if cluster is None:
        return validation.built_in()
    documents = cluster.openapi({manifest.api_version for manifest in found})
    return validation.served(cluster.discovery.resources(), documents)


def run_build(arguments: argparse.Namespace) -> int:
    """The objects a sync of the source would send, in the order it applies them, as it
    sends them; Secrets' values masked unless asked for. Offline unless --cluster."""
    cluster = connect(arguments) if arguments.cluster else None
    namespace = _context_namespace(arguments, cluster)
    spec = source_spec(arguments)
    source = Source(spec, sync_settings(arguments, spec, namespace), arguments.cache_dir)
    built = build(source, cluster)
    _notify(built.notices)
    shown = arguments.show_secrets
    objects = [t.body if shown else mask(t.body) for t in built.in_order()]
    if arguments.output == "text":
        emit(render_manifests(objects))
    else:
        result = documents.build_result(built.revision.sha, objects, None)
        emit(documents.serialized(result, arguments.output))
    return ExitCode.OK


def _context_namespace(arguments: argparse.Namespace, cluster: Cluster | None) -> str | None:
    """The kubeconfig context's namespace, read without a request unless a cluster is
    connected already: where sync would put what names no namespace."""
    if cluster is None:
        return context_namespace(arguments.kubeconfig, arguments.context)
    return cluster.namespace


def run_diff(arguments: argparse.Namespace) -> int:
    result = _reconcile(arguments, connect(arguments), Intent(Pass.OBSERVE), Listener())
    _notify(result.desired.notices)
    _notify(result.notices, "note")
    origins = {key: str(target.origin) for key, target in result.desired.targets.items()}
    drifts, sha, healths = result.drifts, result.desired.revision.sha, result.health()
    out = io.StringIO()
    ignored = arguments.show_ignored
    if arguments.output != "text":
        versions = _versions(result)
        found = documents.diff_result(
            sha, drifts, origins, healths, versions, None, result.held, ignored
        )
        out.write(documents.serialized(found, arguments.output))
    else:
        render_drift(drifts, origins, out, _colored(sys.stdout), result.held, ignored)
        render_health(healths, out)
    emit(out.getvalue())
    return ExitCode.DRIFT if drifts else ExitCode.OK


def run_sync(arguments: argparse.Namespace) -> int:
    """Reports what was done whatever happened: a sync that fails part-way may have
    written objects already, and says which, beside its error."""
    progress = Progress(sys.stderr, quiet=arguments.quiet)
    listener = progress.listener()
    intent = Intent(Pass.ENFORCE, may_prune=STOP.running)  # a stopped sync prunes nothing
    healths: dict[ObjectKey, Health] | None = None
    error: GitopsdError | None = None
    result: Result | None = None
    try:
        cluster = connect(arguments)
        settings = sync_settings(arguments, source_spec(arguments), cluster.namespace)
        result = _reconcile(arguments, cluster, intent, listener)
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
    found = _Found(report, healths, _versions(result), progress.sha is not None)
    _print_report(arguments.output, found, error)
    code = _sync_code(report, healths, _health_limit(arguments))
    return code if error is None or code == ExitCode.UNHEALTHY else error.exit_code


def _notify(notices: list[str], kind: str = "warning") -> None:
    """What people should know of the reconcile: what of other tools' annotations gitopsd
    does not honour (once per object, a warning), a record moved (a note)."""
    for notice in notices:
        print(f"gitopsd: {kind}: {notice}", file=sys.stderr)


@dataclass(frozen=True)
class _Found:
    """What a sync did and found, whether it ended well or not."""

    report: SyncReport
    healths: dict[ObjectKey, Health] | None
    versions: documents.Versions
    read: bool
    """A revision was read (else nothing was done)."""


def _print_report(output: str, found: _Found, error: GitopsdError | None) -> None:
    if output != "text":
        result = documents.sync_result(
            found.report, found.read, found.healths, found.versions, error
        )
        emit(documents.serialized(result, output))
        return
    out = io.StringIO()
    render_report(found.report, out)
    if found.healths is not None:
        render_health(found.healths, out)
    emit(out.getvalue())


def _versions(result: Result | None) -> documents.Versions:
    """The version each object is named by: git's for what the revision holds, the
    cluster's for what it no longer does; "" when the command failed before reading."""
    if result is None:
        return lambda key: ""
    targets, live = result.desired.targets, result.live

    def version(key: ObjectKey) -> str:
        target = targets.get(key)
        if target is not None:
            return target.version
        body = live.find(key)
        return body_version(body)

    return version


def _lookup(versions: dict[ObjectKey, str]) -> documents.Versions:
    return lambda key: versions.get(key, "")


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
    arguments: argparse.Namespace, cluster: Cluster, intent: Intent, listener: Listener
) -> Result:
    """One reconcile from a fresh state: what the parent's stamps vouch for is taken as in
    sync (unless --refresh), everything else is measured."""
    spec = source_spec(arguments)
    settings = sync_settings(arguments, spec, cluster.namespace)
    source = Source(spec, settings, arguments.cache_dir, refresh=arguments.refresh)
    reader = ListReader(cluster, settings.concurrency, Bounds.of(settings, spec.limits))
    return reconcile_once(source, cluster, reader, State(), intent, listener)


def connect(arguments: argparse.Namespace) -> Cluster:
    return Cluster.connect(
        arguments.kubeconfig,
        arguments.context,
        arguments.allow_exec_credentials,
        insecure=arguments.insecure_skip_tls_verify,
        stopping=STOP.stopped,
    )


def _colored(out: TextIO) -> bool:
    return out.isatty() and "NO_COLOR" not in os.environ
