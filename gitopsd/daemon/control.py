"""What `gitopsd get`, `reconcile`, `tree` and `history` ask of a running daemon: the state
of its sources, a reconcile now, a source's objects and its last syncs. Served by http.py
on a listener of its own, bound to loopback (`controlListen`): on a laptop the user
reaches it, in a pod `kubectl port-forward`, whose connections arrive from loopback."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gitopsd.changes import Target
from gitopsd.daemon.file_sources import FileSources
from gitopsd.daemon.worker import SourceWorker
from gitopsd.diff import Drift
from gitopsd.errors import ClusterError, ExitCode
from gitopsd.gitsync import history
from gitopsd.gitsync.status import (
    Document,
    Failure,
    SourceReport,
    failed_status,
    status_of,
    summary,
)
from gitopsd.health import Health
from gitopsd.objects import ObjectKey, body_version

NOT_RUNNING = "the daemon is starting, or it is another replica's share (sharding)"
NOT_LEADING = (
    "this replica does not write for this source (a standby, or another replica's share): "
    "it only reads, so a reconcile here would apply nothing; port-forward to the pod that "
    "writes (the leader, the holder of the Lease gitopsd in gitopsd-system)"
)


@dataclass(frozen=True)
class Control:
    workers: Callable[[], list[SourceWorker]]
    """Every source running now: the configuration's, and the GitSyncs served."""
    set_aside: Callable[[], list[tuple[str, str]]] = list
    """(name, error) of the configuration's sources that cannot run."""
    files: FileSources | None = None
    """The configuration's sources: their suspension."""
    clusters: Mapping[str, str] = field(default_factory=dict)
    """The cluster each of the configuration's sources syncs into (a GitSync's is its
    worker's): for those that do not run."""

    def sources(self) -> list[Document]:
        """A `gitopsd get` line per source, in the words of a GitSync's status."""
        running = [_line(worker) for worker in self.workers()]
        resting = [_suspended(*pair) for pair in self.files.suspended()] if self.files else []
        refused = [_refused(*pair) for pair in self.set_aside()]
        idle = [
            line | {"cluster": self.clusters.get(line["name"], "")} for line in resting + refused
        ]
        return sorted(running + idle, key=_name)

    def suspend(self, name: str, suspended: bool) -> tuple[int, dict[str, Any]]:
        """Suspends or resumes source `name`, in its status ConfigMap: every replica reads
        it there, and this one after a restart. A GitSync's is its own spec.suspend."""
        files = self.files
        if "/" in name:
            namespace, _, gitsync = name.partition("/")
            verb = "suspend" if suspended else "resume"
            return 409, {
                "error": f"{name} is a GitSync: gitopsd {verb} {gitsync} --gitsync -n {namespace}"
            }
        if files is None or not files.knows(name):
            return 404, {"error": f"no source {name} runs here"}
        if not files.maps.cluster.writable():
            return 409, {"error": NOT_LEADING}
        try:
            files.suspend(name, suspended)
        except ClusterError as error:
            return 409, {"error": f"could not keep the suspension of source {name}: {error}"}
        return 200, {"suspended": suspended}

    def reconcile(self, name: str) -> tuple[int, dict[str, Any]]:
        """Asks source `name` to reconcile now: 202 with the token its line shows as
        lastHandledReconcileAt once that reconcile (or a later one) is done."""
        worker = self._worker(name)
        if worker is None and self.files and self.files.runs(name):
            return 409, {"error": f"source {name} is suspended: gitopsd resume {name} first"}
        if worker is None and self.files and self.files.knows(name):
            return 409, {"error": f"source {name} does not run here yet: {NOT_RUNNING}"}
        if worker is None:
            return 404, {"error": f"no source {name} runs here"}
        if "/" in name:  # namespace/name: the GitSync's own annotation is its request
            namespace, _, gitsync = name.partition("/")
            hint = f"gitopsd reconcile {gitsync} --gitsync -n {namespace}"
            return 409, {"error": f"{name} is a GitSync: {hint}"}
        if not worker.leading.is_set():
            return 409, {"error": NOT_LEADING}
        token = str(time.time_ns())  # grows: a caller waits for its own, or a later one
        worker.request(token)
        return 202, {"token": token}

    def objects(self, name: str) -> tuple[int, dict[str, Any]]:
        """The objects of source `name` (`gitopsd tree`): its revision's, and those it
        applied that left git, each with its health and drift as they were measured last."""
        worker = self._worker(name)
        if worker is None:
            return 404, {"error": f"no source {name} runs here"}
        desired = worker.state.desired
        report = worker.report
        targets = desired.targets if desired else {}
        listed = owned_objects(targets, report.health or {}, report.drifts or [])
        return 200, {"revision": report.applied_revision, "objects": listed}

    def history(self, name: str) -> tuple[int, dict[str, Any]]:
        """The last syncs of source `name` (`gitopsd history`), newest first: a configured
        source's as its status ConfigMap keeps them, across restarts and suspensions."""
        worker, files = self._worker(name), self.files
        if files is not None and files.knows(name):  # starting or suspended too: as kept
            kept = files.maps.status(name)
            report = worker.report if worker else files.report_of(name)
            return 200, {"history": history.merged(report.history, kept.get("history") or [])}
        if worker is None:
            return 404, {"error": f"no source {name} runs here"}
        return 200, {"history": worker.report.history}

    def _worker(self, name: str) -> SourceWorker | None:
        return next((w for w in self.workers() if w.name == name), None)


def _line(worker: SourceWorker) -> Document:
    report = worker.report
    failure = report.failure
    line = summary(worker.name, status_of(0, report, None), suspended=False)
    exit_code = failure.exit_code if failure else ExitCode.OK
    cluster = worker.config.cluster_name
    return line | {"exitCode": exit_code, "finished": report.finished, "cluster": cluster}


def _suspended(name: str, report: SourceReport) -> Document:
    line = summary(name, status_of(0, report, None, suspended=True), suspended=True)
    return line | {"exitCode": ExitCode.OK, "finished": report.finished}


def _refused(name: str, error: str) -> Document:
    failure = Failure("InvalidSpec", error, stalled=True, exit_code=ExitCode.INVALID)
    line = summary(name, failed_status(0, failure, None), suspended=False)
    return line | {"exitCode": failure.exit_code}


def _name(line: Document) -> str:
    return str(line["name"])


def owned_objects(
    targets: Mapping[ObjectKey, Target], healths: Mapping[ObjectKey, Health], drifts: list[Drift]
) -> list[Document]:
    """Each object of the revision and each the source applied that left git (an
    extraneous drift), sorted as `kubectl get` sorts: its health ("" before it was
    assessed) and its drift ("" when in sync), with the fields that differ."""
    drifted = {drift.key: drift for drift in drifts}
    versions = {key: target.version for key, target in targets.items()}
    for key, drift in drifted.items():
        body = drift.live or drift.desired or {}
        versions.setdefault(key, body_version(body))
    return [
        {
            "object": key.reference(version),
            "health": _health(healths.get(key)),
            "drift": str(drifted[key].state) if key in drifted else "",
            "fields": [change.path for change in drifted[key].changes] if key in drifted else [],
        }
        for key, version in sorted(versions.items())
    ]


def _health(health: Health | None) -> Document:
    if health is None:
        return {"status": "", "reason": "", "message": ""}
    return {"status": str(health.status), "reason": health.reason, "message": health.message}
