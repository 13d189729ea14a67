"""Operator mode: GitSync objects served as sources, by the controller pattern.

An informer per served namespace (or one for all) keeps every GitSync; a change of one
(not of its status) puts its key on a de-duplicating queue, and so does each poll and drift
check of its source. One thread takes the keys and reconciles each GitSync: its finalizer,
its source's worker (started, replaced when its spec changed, retired when it is suspended
or gone), its credentials, then its status (written through the status subresource, only
when it changed) and the Events a change of status is worth. A key that fails is retried
with backoff. Only the leader writes; a standby keeps its caches warm, as for file sources.
"""

from __future__ import annotations

import base64
import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apscheduler.schedulers.base import BaseScheduler

from gitopsd import gitsync
from gitopsd.backoff import Backoff
from gitopsd.cluster import Cluster, Resource
from gitopsd.cluster.cache import Informer
from gitopsd.config import Credentials
from gitopsd.configfile import GitSyncSettings, SourceConfig, cycle_through
from gitopsd.daemon.queue import WorkQueue
from gitopsd.daemon.worker import SourceWorker, poll_waiting, waiting_for
from gitopsd.errors import ClusterError, ClusterReason, ConfigError, GitopsdError
from gitopsd.gitsync.spec import GitSync, credentials_allowed, dependencies, read, requested_of
from gitopsd.gitsync.status import (
    Failure,
    SourceReport,
    Status,
    events,
    failed_status,
    status_of,
)
from gitopsd.metrics import Recorder
from gitopsd.objects import Body, ObjectKey
from gitopsd.reconcile import Source, desired, withdraw

log = logging.getLogger("gitopsd.gitsync")
GITSYNCS = Resource(gitsync.GROUP, gitsync.VERSION, gitsync.KIND, gitsync.PLURAL, True)
SECRETS = Resource("", "v1", "Secret", "secrets", namespaced=True)
NAMESPACES = Resource("", "v1", "Namespace", "namespaces", namespaced=False)
RETIRE_GRACE_SECONDS = 30.0
"""How long a retired source's reconcile in flight may take to end (its writes are fenced
at once): a deletion's prune waits for it."""
GITSYNCS_ALLOW_INSECURE = "the daemon's configuration says gitSyncs.allowInsecure: true"
"""What permits a GitSync's file:// or http:// repository, as its refusal says."""
SECRET_FILES = ("password", "identity", "known_hosts")
"""The keys of a secretRef's Secret that become files of the same names (Flux's keys)."""


@dataclass
class Served:
    """A GitSync whose source runs."""

    gitsync: GitSync
    source: SourceConfig
    worker: SourceWorker


@dataclass
class GitSyncController:
    settings: GitSyncSettings
    cluster: Cluster
    recorder: Recorder
    cache_dir: Path
    leading: threading.Event
    stopping: threading.Event
    scheduler: BaseScheduler
    taken_parents: frozenset[tuple[str, str]] = frozenset()
    """(name, namespace) of the file sources' ApplySet parents: a GitSync may not share one."""
    served: dict[ObjectKey, Served] = field(default_factory=dict)
    written: dict[ObjectKey, Status] = field(default_factory=dict)
    """The status written last per GitSync (the watch may not have brought it back yet)."""
    retries: dict[ObjectKey, tuple[float, Backoff]] = field(default_factory=dict)
    queue: WorkQueue = field(default_factory=WorkQueue)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.informers = [
            Informer(
                self.cluster,
                GITSYNCS,
                namespace,
                _everything,
                self._changed,
                self.stopping,
                whole=True,
            )
            for namespace in self.settings.namespaces or ("",)
        ]

    def start(self) -> None:
        for informer in self.informers:
            where = informer.namespace or "all-namespaces"
            threading.Thread(target=informer.run, name=f"gitsyncs-{where}", daemon=True).start()
        threading.Thread(target=self._run, name="gitsync-controller", daemon=True).start()

    def ready(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers)

    def workers(self) -> list[SourceWorker]:
        with self.lock:
            return [served.worker for served in self.served.values()]

    def requeue_all(self) -> None:
        """A new leader writes every status and finalizer afresh."""
        self.written.clear()
        for informer in self.informers:
            with informer.lock:
                self.queue.add_all(set(informer.store))

    def _changed(self, key: ObjectKey, body: Body | None) -> None:
        self.queue.add(key)

    def _run(self) -> None:
        while not self.stopping.is_set():
            keys = self.queue.take(timeout_seconds=0.5) | self._due()
            for key in sorted(keys):
                if self.stopping.is_set():
                    return
                self._sync_safely(key)

    def _due(self) -> set[ObjectKey]:
        now = time.monotonic()
        return {key for key, (at, _) in list(self.retries.items()) if at <= now}

    def _sync_safely(self, key: ObjectKey) -> None:
        """Reconciles one GitSync; a failure is logged and retried with backoff."""
        try:
            self._sync(key)
        except GitopsdError as error:
            self._retry_later(key, error)
        except Exception:  # a bug must not end the controller
            log.exception("GitSync %s/%s failed unexpectedly", key.namespace, key.name)
            self._retry_later(key, None)
        else:
            self.retries.pop(key, None)

    def _retry_later(self, key: ObjectKey, error: GitopsdError | None) -> None:
        _, backoff = self.retries.get(key, (0.0, Backoff()))
        delay = backoff.failed()
        self.retries[key] = (time.monotonic() + delay, backoff)
        if error is not None:
            where = {"source": f"{key.namespace}/{key.name}", "stage": str(error.stage)}
            log.error("%s; retrying in %.1f s", error, delay, extra=where)

    def _sync(self, key: ObjectKey) -> None:
        body = self._body(key)
        if body is None:  # deleted: its source, files and metric series go with it
            self._retire(key)
            self.written.pop(key, None)
            shutil.rmtree(self._home(key.namespace, key.name), ignore_errors=True)
            self.recorder.forget(f"{key.namespace}/{key.name}")
            return
        try:
            wanted = read(body, self.settings)
        except ConfigError as error:
            self._retire(key)
            metadata = body["metadata"]
            if metadata.get("deletionTimestamp"):
                policy = (metadata.get("annotations") or {}).get(gitsync.DELETE_POLICY_ANNOTATION)
                skipped = f"its spec is invalid, so nothing was pruned: {error}"
                self._release(body, skipped if policy == "prune" else "")
                return
            self._write_failure(key, body, error)
            return
        if wanted.deleting:
            self._finalize(key, body, wanted)
            return
        if not wanted.finalized and self.leading.is_set():
            self._add_finalizer(body)
        if wanted.suspend:
            retired = self._retire(key)
            last = retired.report if retired else SourceReport(finished=1)
            self._write_status(key, body, last, suspended=True)
            return
        self._serve(key, body, wanted)

    def _body(self, key: ObjectKey) -> Body | None:
        for informer in self.informers:
            found = informer.get(key)
            if found is not None:
                return found
        return None

    def _serve(self, key: ObjectKey, body: Body, wanted: GitSync) -> None:
        try:
            source = wanted.source(self._credentials(wanted))
            desired.check_source(source.spec, GITSYNCS_ALLOW_INSECURE)
            self._check_parent(wanted)
            self._check_dependencies(wanted)
        except GitopsdError as error:  # its Secret may change: retried with backoff
            self._retire(key)
            self._write_failure(key, body, error)
            raise
        with self.lock:
            served = self.served.get(key)
        if served is None or (served.source, served.gitsync.user) != (source, wanted.user):
            self._retire(key)
            served = self._start(key, wanted, source)
        if wanted.requested != served.worker.requested:
            served.worker.request(wanted.requested)
        self._write_status(key, body, served.worker.report)

    def _check_parent(self, wanted: GitSync) -> None:
        if (wanted.name, wanted.namespace) in self.taken_parents:
            raise ConfigError(
                f"GitSync {wanted.key}: its ApplySet parent ConfigMap gitopsd-{wanted.name} "
                f"in {wanted.namespace} is a file source's (same name and inventoryNamespace)"
            )

    def _start(self, key: ObjectKey, wanted: GitSync, source: SourceConfig) -> Served:
        cluster = self.cluster.impersonating(wanted.user) if wanted.user else self.cluster
        worker = SourceWorker(
            source,
            cluster,
            self.recorder,
            self._home(key.namespace, key.name) / "git",
            self.leading,
            self.stopping,
            on_report=lambda: self._reported(key, wanted.key),
            dependencies_waiting=lambda: waiting_for(source.depends_on, self._by_source()),
        )
        worker.requested = wanted.requested  # its first poll answers a request made before
        served = Served(wanted, source, worker)
        with self.lock:
            self.served[key] = served
        log.info("serving", extra={"source": wanted.key, "mode": source.mode})
        worker.schedule(self.scheduler, _job(key), worker.poll_soon)
        return served

    def _reported(self, key: ObjectKey, source: str) -> None:
        self.queue.add(key)  # its status
        poll_waiting(self.workers(), source)

    def _by_source(self) -> dict[str, SourceWorker]:
        return {worker.name: worker for worker in self.workers()}

    def _check_dependencies(self, wanted: GitSync) -> None:
        """A GitSync on a cycle of dependencies would wait for itself forever."""
        graph = {}
        for informer in self.informers:
            with informer.lock:
                bodies = list(informer.store.values())
            for body in bodies:
                metadata = body.get("metadata") or {}
                namespace = str(metadata.get("namespace", ""))
                name = f"{namespace}/{metadata.get('name')}"
                graph[name] = dependencies(body.get("spec") or {}, namespace)
        graph[wanted.key] = wanted.depends_on
        cycle = cycle_through(graph, wanted.key)
        if cycle:
            raise ConfigError(
                f"GitSync {wanted.key}: spec.dependsOn forms a cycle: {' -> '.join(cycle)}"
            )

    def _retire(self, key: ObjectKey) -> SourceWorker | None:
        with self.lock:
            served = self.served.pop(key, None)
        if served is None:
            return None
        served.worker.retire(RETIRE_GRACE_SECONDS)
        return served.worker

    def _home(self, namespace: str, name: str) -> Path:
        """Its own cache: no GitSync reads a checkout fetched with another's credentials."""
        return self.cache_dir / "gitsyncs" / namespace / name

    def _credentials(self, wanted: GitSync) -> Credentials:
        """Its secretRef as files the git runner reads at each fetch (so a rotated Secret
        is used from the next poll on); never the daemon's own credentials."""
        if wanted.secret_name is None:
            return Credentials(password_env=None)
        data = {k: base64.b64decode(v) for k, v in (self._secret(wanted).get("data") or {}).items()}
        folder = self._home(wanted.namespace, wanted.name) / "credentials"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        paths = {name: _write_private(folder / name, data.get(name)) for name in SECRET_FILES}
        username = data.get("username", b"").decode(errors="replace").strip()
        return Credentials(
            username=username or Credentials.username,
            password_env=None,
            password_file=paths["password"],
            ssh_key_file=paths["identity"],
            known_hosts_file=paths["known_hosts"],
        )

    def _secret(self, wanted: GitSync) -> Body:
        """Its secretRef, read as its ServiceAccount where it has one (the API server decides
        whether that account may read it); otherwise with the daemon's rights, and used only
        if the Secret opts in to the GitSync's URL: whoever may create a GitSync must never
        have the daemon send a Secret they could not read to a server of their choosing."""
        name = f"{wanted.namespace}/{wanted.secret_name}"
        where = f"GitSync {wanted.key}: Secret {name} (spec.repository.secretRef)"
        reader = self.cluster.impersonating(wanted.user) if wanted.user else self.cluster
        try:
            secret = reader.get(SECRETS, wanted.namespace, str(wanted.secret_name))
        except ClusterError as error:
            raise ClusterError(f"{where}: {error}", error.reason) from None
        if secret is None:
            raise ClusterError(f"{where} not found", ClusterReason.NOT_FOUND)
        if wanted.user is None and not credentials_allowed(secret, wanted.url):
            raise ClusterError(
                f"{where} does not allow its use for this repository URL: a GitSync without "
                "a ServiceAccount may use only a Secret annotated "
                f"{gitsync.CREDENTIALS_FOR_ANNOTATION} with its URL (or a prefix of it "
                "ending in /); none of its values was used",
                ClusterReason.FORBIDDEN,
            )
        return secret

    def _write_status(
        self, key: ObjectKey, body: Body, report: SourceReport, suspended: bool = False
    ) -> None:
        self._publish(key, body, lambda gen, was: status_of(gen, report, was, suspended))

    def _write_failure(self, key: ObjectKey, body: Body, error: GitopsdError) -> None:
        failure, handled = Failure.of(error), requested_of(body)
        self._publish(key, body, lambda gen, was: failed_status(gen, failure, was, handled))

    def _publish(
        self, key: ObjectKey, body: Body, status_for: Callable[[int, Status | None], Status]
    ) -> None:
        """Writes the status `status_for(generation, previous status)` if it changed (leader
        only), with the Events the change is worth."""
        if not self.leading.is_set():
            return
        live = body.get("status") or None
        previous = self.written.get(key, live)
        status = status_for(int(body["metadata"].get("generation") or 0), previous)
        if status == live:
            self.written[key] = status
            return
        self.cluster.apply_status(GITSYNCS, key.namespace, key.name, status)
        self.written[key] = status
        for event in events(previous, status):
            self.cluster.event(body, event.reason, event.message, event.type)

    def _add_finalizer(self, body: Body) -> None:
        metadata = body["metadata"]
        held = metadata.get("finalizers")
        operation: dict[str, Any] = (
            {"op": "add", "path": "/metadata/finalizers/-", "value": gitsync.FINALIZER}
            if held
            else {"op": "add", "path": "/metadata/finalizers", "value": [gitsync.FINALIZER]}
        )
        self._patch(body, [operation])

    def _finalize(self, key: ObjectKey, body: Body, wanted: GitSync) -> None:
        """Its source stops; with delete-policy prune, what it applied is withdrawn first.
        Then the finalizer goes, and the API server deletes the GitSync."""
        self._retire(key)
        self.written.pop(key, None)
        if not wanted.finalized or not self.leading.is_set():
            return
        if wanted.prune_on_delete:
            self._withdraw(body, wanted)
        self._release(body)
        log.info("deleted", extra={"source": wanted.key})

    def _release(self, body: Body, warning: str = "") -> None:
        """Removes the finalizer (the API server then deletes the GitSync), if it holds it;
        `warning` says what was left undone."""
        finalizers = body["metadata"].get("finalizers") or []
        if gitsync.FINALIZER not in finalizers or not self.leading.is_set():
            return
        if warning:
            self.cluster.event(body, "PruneSkipped", warning)
        index = finalizers.index(gitsync.FINALIZER)
        self._patch(body, [{"op": "remove", "path": f"/metadata/finalizers/{index}"}])

    def _withdraw(self, body: Body, wanted: GitSync) -> None:
        namespace = self.cluster.get(NAMESPACES, "", wanted.namespace) or {}
        if (namespace.get("metadata") or {}).get("deletionTimestamp"):
            message = f"namespace {wanted.namespace} is being deleted: nothing pruned"
            self.cluster.event(body, "PruneSkipped", message)
            return
        cluster = self.cluster.impersonating(wanted.user) if wanted.user else self.cluster
        source = wanted.source(Credentials(password_env=None))
        home = self._home(wanted.namespace, wanted.name) / "git"
        report = withdraw(Source(source.spec, source.settings, home), cluster)
        pruned = [o.key for o in report.changes.outcomes]
        self.cluster.event(
            body,
            "Pruned",
            f"deleted with delete-policy prune: pruned {len(pruned)} objects",
            "Normal",
        )
        if report.refused:
            kept = "; ".join(f"{key} ({reason})" for key, reason in report.refused)
            self.cluster.event(body, "PruneBlocked", f"kept by the prune guards: {kept}")

    def _patch(self, body: Body, operations: list[dict[str, Any]]) -> None:
        """A JSON patch of the GitSync as seen: a newer version fails the test, and is
        handled when its own watch event arrives."""
        metadata = body["metadata"]
        version = {
            "op": "test",
            "path": "/metadata/resourceVersion",
            "value": metadata["resourceVersion"],
        }
        self.cluster.patch(
            GITSYNCS, metadata["namespace"], metadata["name"], [version, *operations]
        )


def _everything(key: ObjectKey, body: Body) -> bool:
    return True


def _job(key: ObjectKey) -> str:
    return f"gitsync:{key.namespace}/{key.name}"


def _write_private(path: Path, content: bytes | None) -> Path | None:
    """`content` in a file only this process's user may read; None (and no file) without."""
    if content is None:
        path.unlink(missing_ok=True)
        return None
    if path.exists() and path.read_bytes() == content:
        return path
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    partial.touch(mode=0o600)
    partial.write_bytes(content)
    partial.replace(path)
    return path
