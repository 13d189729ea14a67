"""`gitopsd tree`: the objects a source holds, each with its health and drift, as `flux tree`
and `argocd app resources` list them.

A GitSync's are read from the API server, as `flux tree kustomization` reads a
Kustomization's inventory: the record in its ApplySet parent, each recorded object's live
body (its health now) and the drift its status says the daemon measured last. So no daemon
need be reached, and in a cluster no `kubectl port-forward` either. A configured source's
are asked of the daemon that runs it, or, `--in-cluster`, read the same way from the record
and the status its status ConfigMap names. A source that syncs into another cluster has its
record there: read through the context `--target-context` names."""

from __future__ import annotations

import argparse

from gitopsd import sandbox
from gitopsd.cli import documents, in_cluster
from gitopsd.cli.commands import connect
from gitopsd.cli.control import ask_source, namespace_of, read_gitsync, reference_of
from gitopsd.cli.render import emit, object_table
from gitopsd.cluster import Cluster
from gitopsd.config import Credentials
from gitopsd.configfile import GitSyncSettings
from gitopsd.configfile.clusters import HOME
from gitopsd.configfile.tenants import TenantQuota
from gitopsd.errors import ClusterError, ClusterReason, ConfigError, ExitCode
from gitopsd.gitsync import spec, status_map
from gitopsd.gitsync.schema import MAX_DRIFTED_SHOWN
from gitopsd.gitsync.status import Document
from gitopsd.health import Checks, Health, Status, assess
from gitopsd.inventory import ApplySet
from gitopsd.objects import Body, ObjectKey, body_version
from gitopsd.reconcile.desired import applyset_of
from gitopsd.reconcile.live import ListReader
from gitopsd.sandbox_bounds import SandboxBounds

READING = GitSyncSettings(
    allow_insecure=True, cross_namespace_refs=True, default_service_account="default"
)
"""What a daemon's configuration may allow, allowed: a GitSync is read here only for where
its record is and for its health rules, which none of these settings changes."""
TARGET_KEYS = ("cluster", "kubeConfig")
"""Where a GitSync syncs, read apart: whether it may is the daemon's configuration's to say,
and neither its record's name nor its health rules depend on it."""


def run_tree(arguments: argparse.Namespace) -> int:
    """The objects a source holds: a GitSync's from the cluster, a configured source's from
    the daemon that runs it, each with its health and drift."""
    if arguments.target_context and not (arguments.gitsync or arguments.in_cluster):
        raise ConfigError(
            "--target-context reads a record through the API server, with --gitsync or "
            "--in-cluster; the daemon reads its sources' clusters itself"
        )
    if arguments.gitsync:
        name, found, notes = _gitsync_tree(arguments)
    elif arguments.in_cluster:
        name, (found, notes) = arguments.name, _configured_tree(arguments)
    else:
        name, notes = arguments.name, []
        found = ask_source(arguments.daemon, "GET", name, "objects")
    if arguments.output == "text":
        emit(object_table(name, found) + "".join(f"{note}\n" for note in notes))
    else:
        source = reference_of({"name": name})
        tree = documents.object_tree(source, found["revision"], found["objects"])
        emit(documents.serialized(tree, arguments.output))
    return ExitCode.OK


def _gitsync_tree(arguments: argparse.Namespace) -> tuple[str, Document, list[str]]:
    """The GitSync read into its source as the daemon reads it (spec.read), for the record
    the daemon keeps for it (applyset_of) and its health rules."""
    cluster = connect(arguments)
    namespace = namespace_of(arguments, cluster)
    body = read_gitsync(cluster, namespace, arguments.name)
    written = body.get("spec") or {}
    wanted = {**body, "spec": {k: v for k, v in written.items() if k not in TARGET_KEYS}}
    settings = spec.read(wanted, READING).source(Credentials(password_env=None)).settings
    if settings.checks:  # a tenant's rules: evaluated in the daemon's box, under its bounds
        sandbox.bound_everything(SandboxBounds(), TenantQuota.health_rule_seconds_per_minute)
    status, name = body.get("status") or {}, f"{namespace}/{arguments.name}"
    target = _target(arguments, cluster, spec.cluster_named(written), name)
    found, notes = recorded_tree(target, applyset_of(settings), status, settings.checks)
    return name, found, notes


def _configured_tree(arguments: argparse.Namespace) -> tuple[Document, list[str]]:
    """A configured source's, from the record and status its status ConfigMap names (its
    healthCheckExprs are the daemon's configuration's: the built-in rules judge here)."""
    cluster = connect(arguments)
    found = in_cluster.status_map_of(cluster, arguments.in_cluster, arguments.name)
    where = status_map.where(found)
    namespace, _, parent = where.parent.partition("/")
    if not parent:  # suspended before its daemon first wrote its status
        return {"revision": "", "objects": []}, [f"{arguments.name} has not synced yet"]
    target = _target(arguments, cluster, where.cluster, f"source {arguments.name}")
    return recorded_tree(target, ApplySet(parent, namespace), status_map.status(found))


def _target(arguments: argparse.Namespace, home: Cluster, cluster: str, source: str) -> Cluster:
    """The cluster `source`'s record and objects are in: the one --target-context names, or
    without it the one its status is in, unless it syncs into another (the CLI knows no
    credentials of that one: the daemon's are its own)."""
    if arguments.target_context:
        return connect(
            argparse.Namespace(**vars(arguments) | {"context": arguments.target_context})
        )
    if cluster == HOME:
        return home
    raise ConfigError(
        f"{source} syncs into cluster {cluster}, where its record and objects are: give "
        "--target-context, your kubeconfig's context for that cluster"
    )


def recorded_tree(
    cluster: Cluster, applyset: ApplySet, status: Document, checks: Checks | None = None
) -> tuple[Document, list[str]]:
    """The objects `applyset`'s parent records, each with its health now (its live body,
    listed by the set's label kind by kind and namespace by namespace) and its drift as
    `status` (a GitSync's) says the daemon measured it last: the revision and objects the
    daemon's control API answers, and notes for people. No parent yet: no object."""
    cluster.keep_whole_status(checks or {})  # the rules may read any field of a status
    live = ListReader(cluster).read(applyset, {})
    foreign = applyset.foreign(live.parent)
    if foreign:
        raise ClusterError(
            f"{applyset.key}: exists but is not the ApplySet parent of source "
            f"{applyset.source_name}: {foreign}",
            ClusterReason.CONFLICT,
        )
    drifted = _drifted(status)
    objects = [
        _entry(key, live.owned.get(key), key.group_kind in live.unserved, cluster, checks)
        | _drift(drifted.get(str(key)))
        for key in sorted(live.recorded)
    ]
    found = {"revision": str(status.get("lastAppliedRevision") or ""), "objects": objects}
    return found, _notes(applyset, live.parent is not None, status, set(map(str, live.recorded)))


def _entry(
    key: ObjectKey, body: Body | None, unserved: bool, cluster: Cluster, checks: Checks | None
) -> Document:
    """One recorded object: its version and health as the cluster has it now (gone, it is
    NotFound, at the version the cluster serves its kind at)."""
    if unserved:
        health = Health(Status.UNKNOWN, "NotServed", f"the cluster serves no {key.group_kind}")
    else:
        health = assess(body, checks)
    served = None if body or unserved else cluster.discovery.preferred(key.group_kind)
    version = body_version(body) or (served.version if served else "")
    return {
        "object": key.reference(version),
        "health": {
            "status": str(health.status),
            "reason": health.reason,
            "message": health.message,
        },
    }


def _drifted(status: Document) -> dict[str, Document]:
    """The drifted objects a GitSync's status names (the first MAX_DRIFTED_SHOWN), by the
    object as it writes it (group/Kind/namespace/name, the empty parts left out)."""
    named = (status.get("drift") or {}).get("objects") or []
    return {str(each.get("object")): each for each in named if isinstance(each, dict)}


def _drift(drifted: Document | None) -> Document:
    if drifted is None:
        return {"drift": "", "fields": []}
    fields = [f for f in drifted.get("fields") or [] if isinstance(f, dict)]
    return {"drift": str(drifted.get("state", "")), "fields": [str(f.get("path")) for f in fields]}


def _notes(applyset: ApplySet, parent: bool, status: Document, recorded: set[str]) -> list[str]:
    """What a person should know of where the tree came from."""
    if not parent:
        return [f"no record yet ({applyset.key}): {applyset.source_name} has not synced"]
    notes = ["health as read now; drift as the daemon measured it last (its status)"]
    drift = status.get("drift") or {}
    total, named = int(drift.get("total") or 0), _drifted(status)
    if total > len(named):
        notes.append(f"the status names the first {MAX_DRIFTED_SHOWN} of {total} drifted objects")
    unrecorded = sorted(set(named) - recorded)
    if unrecorded:
        notes.append(f"drifted, not in the record (never applied): {', '.join(unrecorded)}")
    return notes
