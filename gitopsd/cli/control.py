"""The control commands, as Flux and Argo CD users reach for them: what a running daemon
serves (`get`, `reconcile NAME`, over its loopback control API) and the GitSyncs of the
cluster (`get --gitsyncs`, `reconcile --gitsync`, `suspend`, `resume`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any
from urllib.parse import quote

from gitopsd import gitsync
from gitopsd.cli import documents, in_cluster
from gitopsd.cli.commands import connect
from gitopsd.cli.progress import EVERY_SECONDS
from gitopsd.cli.render import emit, source_table
from gitopsd.cluster import Cluster, Unserved
from gitopsd.errors import ClusterError, ClusterReason, ConfigError, ExitCode
from gitopsd.gitsync import spec as gitsync_spec
from gitopsd.gitsync.status import Document, summary
from gitopsd.gitsync.status_map import annotation_patch

SOURCES = "/api/v1/sources"
DAEMON = "http://127.0.0.1:9091"
CRD_MISSING = "the GitSync CRD is not installed: kubectl apply -f config/crd/gitsyncs.yaml"


def run_get(arguments: argparse.Namespace) -> int:
    if arguments.gitsyncs:
        cluster = connect(arguments)
        namespace = "" if arguments.all_namespaces else namespace_of(arguments, cluster)
        lines = [_gitsync_line(body) for body in _gitsyncs(cluster, namespace)]
    elif arguments.in_cluster:
        lines = in_cluster.lines(connect(arguments), arguments.in_cluster)
    else:
        lines = _ask(arguments.daemon, "GET", SOURCES)
    if arguments.output == "text":
        emit(source_table(lines))
    else:
        items = [documents.source_item(reference_of(line), line) for line in lines]
        emit(documents.serialized(documents.source_list(items), arguments.output))
    return ExitCode.OK


def run_reconcile(arguments: argparse.Namespace) -> int:
    """Asks for a reconcile now and waits until it is done: 0 when it succeeded, else the
    exit code of its failure (a GitSync's status names none: 4)."""
    if arguments.gitsync:
        line = _reconcile_gitsync(arguments)
    elif arguments.in_cluster:
        line = _reconcile_in_cluster(arguments)
    else:
        line = _reconcile_source(arguments)
    code = _failure_code(line) if line["failed"] else ExitCode.OK
    if arguments.output == "text":
        verdict = "failed" if line["failed"] else "reconciled"
        emit(f"{line['name']}: {verdict}: {line['reason']}: {line['message']}\n")
    else:
        result = documents.reconcile_result(reference_of(line), line, code)
        emit(documents.serialized(result, arguments.output))
    return code


def reference_of(line: Document) -> Document:
    """A line names a GitSync NAMESPACE/NAME, a daemon's source by its name alone."""
    namespace, _, name = str(line["name"]).rpartition("/")
    kind = "GitSync" if namespace else "Source"
    return documents.source_reference(kind, namespace, name)


def _failure_code(line: Document) -> ExitCode:
    """The exit code the daemon gave the failure; 4 for a GitSync's (its status names none)
    and for anything that is not one of the documented failure codes."""
    code = line.get("exitCode")
    failures = {int(c) for c in ExitCode} - {ExitCode.OK}
    return ExitCode(code) if type(code) is int and code in failures else ExitCode.CLUSTER_FAILED


def run_suspend(arguments: argparse.Namespace) -> int:
    return _set_suspend(arguments, True)


def run_resume(arguments: argparse.Namespace) -> int:
    return _set_suspend(arguments, False)


def _set_suspend(arguments: argparse.Namespace, suspend: bool) -> int:
    """A GitSync's spec.suspend; a configured source's status ConfigMap, written by its
    daemon (asked on loopback) or, `--in-cluster`, through the API server."""
    name = arguments.name
    if arguments.gitsync:
        cluster = connect(arguments)
        namespace = namespace_of(arguments, cluster)
        read_gitsync(cluster, namespace, name)
        operation = {"op": "add", "path": "/spec/suspend", "value": suspend}
        cluster.patch(gitsync.RESOURCE, namespace, name, [operation])
        source = documents.source_reference("GitSync", namespace, name)
    elif arguments.in_cluster:
        in_cluster.suspend(connect(arguments), arguments.in_cluster, name, suspend)
        source = reference_of({"name": name})
    else:
        ask_source(arguments.daemon, "POST", name, "suspend" if suspend else "resume")
        source = reference_of({"name": name})
    if arguments.output == "text":
        what = f"GitSync {source['namespace']}/{name}" if arguments.gitsync else f"source {name}"
        emit(f"{what} {'suspended' if suspend else 'resumed'}\n")
    else:
        emit(documents.serialized(documents.suspend_result(source, suspend), arguments.output))
    return ExitCode.OK


def _reconcile_source(arguments: argparse.Namespace) -> Document:
    name = arguments.name
    token = ask_source(arguments.daemon, "POST", name, "reconcile")["token"]

    def done() -> Document | None:
        lines = _ask(arguments.daemon, "GET", SOURCES)
        line = next((found for found in lines if found.get("name") == name), None)
        return line if line and _answered(line.get("lastHandledReconcileAt"), token) else None

    return _wait(done, f"source {name} to reconcile", arguments.timeout)


def _reconcile_in_cluster(arguments: argparse.Namespace) -> Document:
    """A configured source's request, through its status ConfigMap; answered there."""
    cluster, name, namespace = connect(arguments), arguments.name, arguments.in_cluster
    token = datetime.now(UTC).isoformat()
    in_cluster.request(cluster, namespace, name, token)

    def done() -> Document | None:
        line = in_cluster.line(cluster, namespace, name)
        return line if line["lastHandledReconcileAt"] == token else None

    return _wait(done, f"source {name} to reconcile", arguments.timeout)


def _reconcile_gitsync(arguments: argparse.Namespace) -> Document:
    """Flux's convention: a new value in the reconcile-requested-at annotation, then the
    status echoing it in lastHandledReconcileAt."""
    cluster = connect(arguments)
    namespace, name = namespace_of(arguments, cluster), arguments.name
    token = datetime.now(UTC).isoformat()
    _request(cluster, namespace, name, token)

    def done() -> Document | None:
        found = cluster.get(gitsync.RESOURCE, namespace, name) or {}
        line = _gitsync_line(found)
        return line if line["lastHandledReconcileAt"] == token else None

    return _wait(done, f"GitSync {namespace}/{name} to reconcile", arguments.timeout)


def _request(cluster: Cluster, namespace: str, name: str, token: str) -> None:
    """Writes the annotation under the resourceVersion read (read again when the daemon
    wrote the GitSync's status meanwhile), unless the GitSync is suspended."""

    def requested(body: Document) -> list[dict[str, Any]]:
        if (body.get("spec") or {}).get("suspend") is True:
            hint = f"gitopsd resume {name} --gitsync -n {namespace} first"
            raise ConfigError(f"GitSync {namespace}/{name} is suspended: {hint}")
        return annotation_patch(body, gitsync.RECONCILE_REQUESTED_ANNOTATION, token)

    cluster.patch_as_read(
        gitsync.RESOURCE, partial(read_gitsync, cluster, namespace, name), requested
    )


def _gitsyncs(cluster: Cluster, namespace: str) -> list[Document]:
    try:
        return cluster.list_objects(gitsync.RESOURCE, namespace)
    except Unserved:
        raise _crd_missing(cluster) from None


def read_gitsync(cluster: Cluster, namespace: str, name: str) -> Document:
    body = cluster.get(gitsync.RESOURCE, namespace, name)
    if body is not None:
        return body
    if cluster.discovery.find(gitsync.RESOURCE.api_version, gitsync.KIND) is None:
        raise _crd_missing(cluster)  # then no GitSync can exist
    there = cluster.list_objects(gitsync.RESOURCE, namespace)
    names = [str(found["metadata"]["name"]) for found in there]
    raise _unknown(f"GitSync {name}", f"in namespace {namespace}", names)


def _crd_missing(cluster: Cluster) -> ClusterError:
    server = cluster.api.server
    return ClusterError(f"{server} serves no GitSyncs: {CRD_MISSING}", ClusterReason.NOT_FOUND)


def ask_source(daemon: str, method: str, name: str, action: str) -> Any:
    """One request about source `name` to the daemon's control API; a name it does not run
    is refused with the names it does."""
    try:
        return _ask(daemon, method, f"{SOURCES}/{quote(name, safe='')}/{action}")
    except ClusterError as error:
        if error.reason != ClusterReason.NOT_FOUND:
            raise
        names = [str(line["name"]) for line in _ask(daemon, "GET", SOURCES)]
        raise _unknown(f"source {name}", f"at {daemon}", names) from None


def _unknown(what: str, where: str, names: list[str]) -> ConfigError:
    """A name that is not there, with those that are: most often a typo."""
    there = f"those there: {', '.join(sorted(names))}" if names else "there is none"
    return ConfigError(f"no {what} {where}; {there}")


def _gitsync_line(body: Document) -> Document:
    metadata = body.get("metadata") or {}
    name = f"{metadata.get('namespace')}/{metadata.get('name')}"
    spec = body.get("spec") or {}
    line = summary(name, body.get("status") or {}, spec.get("suspend") is True)
    return line | {"cluster": gitsync_spec.cluster_named(spec)}


def namespace_of(arguments: argparse.Namespace, cluster: Cluster) -> str:
    namespace: str = arguments.namespace or cluster.namespace or "default"
    return namespace


@dataclass(frozen=True)
class Clock:
    """Time as a wait reads it and spends it."""

    now: Callable[[], float] = time.monotonic
    pause: Callable[[float], None] = time.sleep


def _wait(
    done: Callable[[], Document | None],
    what: str,
    timeout: float,
    say: Callable[[str], None] | None = None,
    clock: Clock = Clock(),
) -> Document:
    """`done()`'s answer once it has one, asked twice a second; meanwhile, every 10 s, a
    line on stderr (`say`) that it still waits, as a sync's waits say (EVERY_SECONDS)."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    started = clock.now()
    said = started
    while clock.now() < started + timeout:
        found = done()
        if found is not None:
            return found
        if clock.now() - said >= EVERY_SECONDS:
            said = clock.now()
            say(f"waiting for {what}: {said - started:.0f} s of at most {timeout:g} s")
        clock.pause(0.5)
    raise ClusterError(f"timed out after {timeout:g} s waiting for {what}", ClusterReason.TIMEOUT)


def _answered(handled: Any, token: str) -> bool:
    """The daemon's tokens grow: a later request's reconcile answers an earlier one too."""
    return str(handled).isdigit() and int(handled) >= int(token)


NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""The daemon is reached on loopback: never through $HTTP_PROXY."""


def _ask(daemon: str, method: str, path: str) -> Any:
    """One request to the daemon's control API; its answer, checked to be the API's."""
    request = urllib.request.Request(  # noqa: S310 - the scheme is the user's --daemon
        daemon.rstrip("/") + path, method=method, headers={"X-Gitopsd-Control": "1"}
    )
    try:
        with NO_PROXY.open(request, timeout=10) as answer:
            return _checked(daemon, json.loads(answer.read()))
    except urllib.error.HTTPError as error:
        raise _refused(daemon, error) from None
    except (urllib.error.URLError, OSError) as error:
        cause = getattr(error, "reason", error)
        raise ClusterError(
            f"cannot reach the gitopsd daemon at {daemon}: {cause}; is it running, and is "
            "--daemon its controlListen address? (in a cluster: kubectl port-forward "
            "-n gitopsd-system deploy/gitopsd 9091)",
            ClusterReason.UNREACHABLE,
        ) from None
    except ValueError:
        raise _not_gitopsd(daemon) from None


def _checked(daemon: str, answer: Any) -> Any:
    """The answer, once it is one the API gives: the sources' lines, a reconcile's token, a
    source's objects (with the revision they were measured at), its history, or a
    suspension."""
    lines = answer if isinstance(answer, list) else [answer]
    if not all(isinstance(line, dict) for line in lines):
        raise _not_gitopsd(daemon)
    if isinstance(answer, list) and not all(set(COLUMN_KEYS) <= line.keys() for line in lines):
        raise _not_gitopsd(daemon)
    if isinstance(answer, dict) and not any(
        found(answer) for found in (_token, _objects, _history, _held)
    ):
        raise _not_gitopsd(daemon)
    return answer


def _token(answer: Document) -> bool:
    return isinstance(answer.get("token"), str)


def _held(answer: Document) -> bool:
    """A suspension's answer."""
    return isinstance(answer.get("suspended"), bool)


def _objects(answer: Document) -> bool:
    listed = answer.get("objects")
    return isinstance(answer.get("revision"), str) and isinstance(listed, list)


def _history(answer: Document) -> bool:
    listed = answer.get("history")
    return isinstance(listed, list) and all(isinstance(entry, dict) for entry in listed)


def _refused(daemon: str, error: urllib.error.HTTPError) -> ClusterError:
    """The control API's refusal, in its words; any other answer is not the API's."""
    try:
        said = str(json.loads(error.read(4096)).get("error", ""))
    except (ValueError, AttributeError, OSError):
        said = ""
    if not said:
        return _not_gitopsd(daemon, f" (HTTP {error.code})")
    reason = ClusterReason.NOT_FOUND if error.code == 404 else ClusterReason.CONFLICT
    return ClusterError(f"the gitopsd daemon at {daemon}: {said}", reason)


def _not_gitopsd(daemon: str, detail: str = "") -> ClusterError:
    return ClusterError(
        f"{daemon} did not answer as a gitopsd daemon's control API{detail}; --daemon is "
        "its controlListen address",
        ClusterReason.SERVER,
    )


COLUMN_KEYS = ("name", "ready", "revision", "drift", "health", "suspended", "message")
