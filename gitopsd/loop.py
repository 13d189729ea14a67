"""getDesired, getCurrent, makeChanges: the reconcile, told as a story.

The CLI, the daemon and the operator all call these; they differ only in where settings
come from and what happens with the result.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gitopsd import diff, inventory, manifests, source
from gitopsd.apply import Action, Applier, ChangeSet, Outcome, Target, prune, run_concurrently
from gitopsd.cluster import Cluster, Resource
from gitopsd.config import SourceSpec, SyncSettings
from gitopsd.errors import ApplyError, ManifestError
from gitopsd.kustomize import renderer
from gitopsd.objects import Body, GroupKind, Manifest, ObjectKey, key_of
from gitopsd.plan import Refusal, decide_prune

CONFIG_MAPS = Resource("", "v1", "ConfigMap", "configmaps", namespaced=True)


# getDesired


@dataclass(frozen=True)
class Desired:
    revision: source.Revision
    targets: dict[ObjectKey, Target]


def get_desired(
    spec: SourceSpec,
    cache_dir: Path,
    cluster: Cluster,
    settings: SyncSettings,
    cache: manifests.ParseCache | None = None,
) -> Desired:
    """The revision, read and resolved against the cluster's API: nothing is half-read."""
    revision = fetch(spec, cache_dir)
    found = read_revision(revision, spec, cache_dir, cache)
    return Desired(revision, resolve(found, cluster, settings))


def fetch(spec: SourceSpec, cache_dir: Path) -> source.Revision:
    """A git revision, or a local directory when the source is a path."""
    if is_local(spec.url):
        return source.read_directory(Path(spec.url))
    return source.fetch(spec, cache_dir)


def check_source(spec: SourceSpec) -> None:
    """Raises ConfigError for a source gitopsd would refuse to fetch, before any fetch."""
    if not is_local(spec.url):
        source.check_url(spec)


def is_local(url: str) -> bool:
    return "://" not in url and not re.match(r"^[\w.-]+@[\w.-]+:", url)


def read_revision(
    revision: source.Revision,
    spec: SourceSpec,
    cache_dir: Path,
    cache: manifests.ParseCache | None = None,
) -> list[Manifest]:
    """The manifests of exactly `revision`, its files read from git's object store (only
    those `cache` has not parsed), or a local directory's in place."""
    with source.tree(spec, cache_dir, revision) as files:
        return read_manifests(files, revision, spec, cache)


def read_manifests(
    root: Path | manifests.Tree,
    revision: source.Revision,
    spec: SourceSpec,
    cache: manifests.ParseCache | None = None,
) -> list[Manifest]:
    return manifests.load(
        root,
        spec.paths,
        include=spec.include,
        exclude=spec.exclude,
        limits=spec.limits,
        blob_ids=revision.blob_ids,
        cache=cache,
        render_kustomization=renderer(),
    )


def resolve(
    found: list[Manifest], cluster: Cluster, settings: SyncSettings
) -> dict[ObjectKey, Target]:
    """Maps each manifest to its API resource, fills in namespaces, rejects duplicates, and
    labels each as a member of the source's ApplySet: ready to send, once per revision."""
    defined = _definitions_in(found)
    applyset = applyset_of(settings)
    targets: dict[ObjectKey, Target] = {}
    resolved = [_resolve_one(m, cluster, defined, settings) for m in found]
    indexed = manifests.index(m for m, _ in resolved)
    for manifest, resource in resolved:
        body = applyset.member(manifest.body)
        targets[manifest.key] = Target(manifest.key, body, manifest.origin, resource)
    return {key: targets[key] for key in indexed}


def applyset_of(settings: SyncSettings) -> inventory.ApplySet:
    return inventory.ApplySet.of_source(settings.name, settings.inventory_namespace)


@dataclass(frozen=True)
class Definition:
    """A kind that a CRD in the revision defines."""

    group: str
    kind: str
    plural: str
    namespaced: bool
    versions: frozenset[str]


def _definitions_in(found: list[Manifest]) -> dict[GroupKind, Definition]:
    definitions = {}
    for manifest in found:
        if manifest.key.kind != "CustomResourceDefinition":
            continue
        spec = manifest.body.get("spec") or {}
        names = spec.get("names") or {}
        versions = frozenset(
            v.get("name") for v in spec.get("versions") or [] if v.get("served", True)
        )
        group_kind = GroupKind(str(spec.get("group", "")), str(names.get("kind", "")))
        definitions[group_kind] = Definition(
            group_kind.group,
            group_kind.kind,
            str(names.get("plural", "")),
            spec.get("scope") == "Namespaced",
            versions,
        )
    return definitions


def _resolve_one(
    manifest: Manifest,
    cluster: Cluster,
    defined: dict[GroupKind, Definition],
    settings: SyncSettings,
) -> tuple[Manifest, Resource | None]:
    resource = cluster.discovery.find(manifest.api_version, manifest.key.kind)
    definition = defined.get(manifest.key.group_kind)
    version = manifest.api_version.rpartition("/")[2]
    if resource is None and not (definition and version in definition.versions):
        raise ManifestError(_unserved(manifest, cluster), "unknown_kind")
    namespaced = resource.namespaced if resource else bool(definition and definition.namespaced)
    return _with_namespace(manifest, namespaced, settings.default_namespace), resource


def _unserved(manifest: Manifest, cluster: Cluster) -> str:
    where = f"{manifest.origin}: {manifest.key.kind} {manifest.key.name}"
    served = cluster.discovery.served_versions(manifest.api_version, manifest.key.kind)
    group = manifest.key.group
    if group in cluster.discovery.failed_groups:
        return (
            f"{where}: the cluster's discovery of group {group} failed (is its APIService "
            "available?), so the kind cannot be resolved now"
        )
    if served:
        return (
            f"{where}: apiVersion {manifest.api_version} is no longer served; "
            f"the cluster serves {', '.join(served)}"
        )
    return (
        f"{where}: the cluster has no kind {manifest.key.kind} in {manifest.api_version}, "
        "and no CRD in this revision defines it"
    )


def _with_namespace(manifest: Manifest, namespaced: bool, default: str) -> Manifest:
    key, body = manifest.key, manifest.body
    if not namespaced and key.namespace:
        raise ManifestError(
            f"{manifest.origin}: {key.kind} {key.name} is cluster-scoped but names namespace "
            f"{key.namespace}",
            "invalid",
        )
    if namespaced and not key.namespace:
        body = {**body, "metadata": {**body["metadata"], "namespace": default}}
        key = ObjectKey(key.group, key.kind, default, key.name)
    return Manifest(key, manifest.api_version, body, manifest.origin)


# getCurrent


@dataclass
class Live:
    parent: Body | None
    owned: dict[ObjectKey, Body]
    """Live objects that carry this source's ApplySet label (a claim anyone can copy)."""
    desired: dict[ObjectKey, Body | None]
    """The live object for every desired key (None: absent)."""
    recorded: inventory.Record = field(default_factory=dict)
    """What the parent records this source applied; empty when it cannot be read (a sync
    then refuses the parent)."""

    def find(self, key: ObjectKey) -> Body | None:
        """The live object of a desired or an owned key, if it exists."""
        return self.desired.get(key) or self.owned.get(key)

    def proven(self, key: ObjectKey) -> bool:
        """Labelled, and recorded as applied by this source with the uid it has now."""
        body = self.owned.get(key)
        return body is not None and self.recorded.get(key) == inventory.uid_prefix(body)


def read_live(
    cluster: Cluster, applyset: inventory.ApplySet, targets: dict[ObjectKey, Target]
) -> Live:
    """Owned objects by labelled LIST; desired objects not owned by GET (to detect conflicts)."""
    parent = cluster.get(CONFIG_MAPS, applyset.namespace, applyset.name)
    record = record_of(parent)
    group_kinds, namespaces = scope(applyset, parent, record, targets)
    owned = _list_owned(cluster, applyset, group_kinds, namespaces)
    unowned = [key for key in targets if key not in owned]
    found = run_concurrently(unowned, lambda key: _get(cluster, targets[key]), 8)
    gotten = {key: body for key, body in zip(unowned, found, strict=True) if body is not None}
    return live_from(applyset, parent, record, owned | gotten, targets)


def live_from(
    applyset: inventory.ApplySet,
    parent: Body | None,
    record: inventory.Record,
    objects: dict[ObjectKey, Body],
    targets: dict[ObjectKey, Target],
) -> Live:
    """Live state from the objects seen: every owned one, and every desired one that exists."""
    owned = {key: body for key, body in objects.items() if applyset.owns(body)}
    return Live(parent, owned, {key: objects.get(key) for key in targets}, record)


def record_of(parent: Body | None) -> inventory.Record:
    """The parent's record, decoded once per read of the parent; empty when it cannot be
    read (a sync then refuses the parent)."""
    try:
        return inventory.recorded(parent)
    except ValueError:
        return {}


def scope(
    applyset: inventory.ApplySet,
    parent: Body | None,
    record: inventory.Record,
    targets: dict[ObjectKey, Target],
) -> tuple[set[GroupKind], set[str]]:
    """The group-kinds and namespaces this source's objects may live in: as recorded (the
    record itself, so an edited annotation cannot hide a member from prune; the annotations
    for parents written before there was a record) and where git puts them now."""
    keys = [*record, *targets]
    group_kinds = inventory.recorded_group_kinds(parent) | {key.group_kind for key in keys}
    namespaces = inventory.recorded_namespaces(parent, applyset.namespace)
    return group_kinds, namespaces | {key.namespace for key in keys if key.namespace}


def _list_owned(
    cluster: Cluster,
    applyset: inventory.ApplySet,
    group_kinds: set[GroupKind],
    namespaces: set[str],
) -> dict[ObjectKey, Body]:
    owned: dict[ObjectKey, Body] = {}
    for group_kind in sorted(group_kinds):
        resource = cluster.discovery.preferred(group_kind)
        if resource is None:
            continue  # not served now, so not listable: prune refuses its objects
        scopes = sorted(namespaces) if resource.namespaced else [""]
        for namespace in scopes:
            for body in cluster.list_objects(resource, namespace, applyset.selector):
                owned[key_of(body)] = body
    return owned


def _get(cluster: Cluster, target: Target) -> Body | None:
    if target.resource is None:
        return None  # its CRD is not served yet, so it cannot exist
    return cluster.get(target.resource, target.key.namespace, target.key.name)


# makeChanges


@dataclass
class SyncReport:
    revision: str
    changes: ChangeSet = field(default_factory=ChangeSet)
    refused: list[tuple[ObjectKey, Refusal]] = field(default_factory=list)

    @property
    def prune_blocked(self) -> bool:
        return bool(self.refused)


def resource_version(key: ObjectKey, live: Body) -> str:
    return str((live.get("metadata") or {}).get("resourceVersion", ""))


@dataclass
class DriftMemo:
    """The drift found per object, valid while git's body and the live object's version stay
    put: an unchanged object costs no dry-run. `version_of` names the version of the body
    measured (never a newer one the watch has seen since: that edit would pass for measured);
    the watch cache gives one that status-only updates do not move."""

    version_of: Callable[[ObjectKey, Body], str] = resource_version
    seen: dict[ObjectKey, tuple[str, str, diff.Drift | None]] = field(default_factory=dict)

    def fresh(self, target: Target, live: Body) -> bool:
        fingerprint, version, _ = self.seen.get(target.key, ("", "", None))
        return (fingerprint, version) == (target.fingerprint, self.version_of(target.key, live))

    def remember(self, target: Target, live: Body, found: diff.Drift | None) -> None:
        self.seen[target.key] = (target.fingerprint, self.version_of(target.key, live), found)

    def recall(self, key: ObjectKey) -> diff.Drift | None:
        return self.seen[key][2] if key in self.seen else None

    def keep_only(self, keys: Iterable[ObjectKey]) -> None:
        """Forgets objects that left git."""
        for key in self.seen.keys() - keys:
            del self.seen[key]


def drift(
    cluster: Cluster,
    settings: SyncSettings,
    targets: dict[ObjectKey, Target],
    live: Live,
    memo: DriftMemo | None = None,
) -> list[diff.Drift]:
    """What differs between git and the cluster: missing, modified and extraneous objects.
    Only objects whose git body or live version changed since `memo` saw them are dry-run."""
    memo = memo if memo is not None else DriftMemo()
    present = {k: b for k, b in live.desired.items() if b is not None and targets[k].resource}
    stale = [targets[key] for key, body in present.items() if not memo.fresh(targets[key], body)]
    expected = _dry_run_all(cluster, settings, stale, live)
    for target in stale:
        current = present[target.key]
        found = diff.compare(target.key, expected[target.key], current, target.body)
        memo.remember(target, current, found)
    memo.keep_only(targets)
    drifts = [diff.missing(k, t.body) for k, t in targets.items() if live.desired[k] is None]
    drifts += [found for key in present if (found := memo.recall(key))]
    drifts += [
        diff.extraneous(k, body)
        for k, body in live.owned.items()
        if k not in targets and live.proven(k)
    ]
    return sorted(drifts, key=lambda d: d.key)


def _dry_run_all(
    cluster: Cluster, settings: SyncSettings, targets: list[Target], live: Live
) -> dict[ObjectKey, Body]:
    applier = Applier(cluster, settings, live.desired, lambda key: None)
    return applier.dry_run(targets)


def sync(
    cluster: Cluster,
    settings: SyncSettings,
    targets: dict[ObjectKey, Target],
    revision: str,
    live: Live,
    on_outcome: Callable[[Outcome], None] = lambda outcome: None,
    may_prune: Callable[[], bool] = lambda: True,
) -> SyncReport:
    """Applies git's objects (dry-run first, staged), records them, then prunes what left
    git, if allowed. `may_prune` is asked right before pruning starts: a daemon shutting
    down says no."""
    applyset = applyset_of(settings)
    _refuse_foreign_parent(applyset, live, settings)
    _refuse_unowned(applyset, live, settings)
    report = SyncReport(revision)
    applier = Applier(cluster, settings, live.desired, lambda key: _served(cluster, targets[key]))
    applier.on_outcome = on_outcome
    record = {**live.recorded}
    try:
        report.changes = applier.run(targets)
    finally:  # what was applied is recorded even when a later object failed
        record |= applier.changes.applied
        _write_record(cluster, settings, applyset, live.recorded, record)
    if may_prune():
        _prune(cluster, settings, applyset, live, targets, record, report)
    return report


def _prune(
    cluster: Cluster,
    settings: SyncSettings,
    applyset: inventory.ApplySet,
    live: Live,
    members: dict[ObjectKey, Target],
    record: inventory.Record,
    report: SyncReport,
) -> None:
    policy = settings.prune
    if not policy.enabled:
        return
    unserved = _unserved_kinds(cluster, record)
    decision = decide_prune(members, live.owned, record, policy, unserved)
    report.refused.extend(decision.refused)
    if settings.dry_run:
        report.changes.outcomes += [Outcome(k, Action.PRUNED, "dry run") for k in decision.delete]
        return
    result = prune(cluster, applyset, decision, record, cluster.discovery.preferred)
    report.changes.outcomes += result.pruned
    report.refused.extend(result.refused)
    # What is gone leaves the record; an object that failed to delete stays, to be retried,
    # and so does one of a kind not served now, which cannot be seen to be gone.
    gone = {o.key for o in result.pruned}
    gone |= {
        key
        for key in record
        if key not in members and not live.proven(key) and key.group_kind not in unserved
    }
    remaining = {key: uid for key, uid in record.items() if key not in gone}
    _write_record(cluster, settings, applyset, record, remaining)
    if result.error is not None:
        raise result.error


def _unserved_kinds(cluster: Cluster, record: inventory.Record) -> set[GroupKind]:
    """The recorded group-kinds discovery cannot resolve now."""
    group_kinds = {key.group_kind for key in record}
    return {gk for gk in group_kinds if cluster.discovery.preferred(gk) is None}


def _write_record(
    cluster: Cluster,
    settings: SyncSettings,
    applyset: inventory.ApplySet,
    before: inventory.Record,
    record: inventory.Record,
) -> None:
    """Writes the parent with `record`, unless the parent holds exactly that already (a sync
    that changed nothing writes nothing; nor does a first sync whose dry-run failed). The
    records are compared, not their encodings: a heal of one object compresses nothing."""
    if settings.dry_run or record == before:
        return
    cluster.apply(CONFIG_MAPS, applyset.parent(record), dry_run=False, force=True)


def _refuse_foreign_parent(
    applyset: inventory.ApplySet, live: Live, settings: SyncSettings
) -> None:
    """A parent another tool or source wrote is neither trusted nor overwritten."""
    reason = applyset.foreign(live.parent)
    if reason:
        raise ApplyError(
            [
                f"{applyset.key}: exists but is not the ApplySet parent of source "
                f"{settings.name}: {reason}; nothing was applied or pruned"
            ],
            "conflict",
        )


def _refuse_unowned(applyset: inventory.ApplySet, live: Live, settings: SyncSettings) -> None:
    """An existing object that this source does not own is taken over only with --adopt."""
    if settings.adopt:
        return
    foreign = [(k, b) for k, b in live.desired.items() if b is not None and not applyset.owns(b)]
    if foreign:
        raise ApplyError([_foreign(key, body) for key, body in foreign], "conflict")


def _foreign(key: ObjectKey, body: Body) -> str:
    owner = inventory.owner_of(body)
    by = f"it belongs to ApplySet {owner}" if owner else "no gitopsd source manages it"
    return f"{key}: exists and {by}; pass --adopt to take it over"


def _served(cluster: Cluster, target: Target) -> Resource | None:
    api_version = target.body["apiVersion"]
    return cluster.discovery.find(api_version, target.key.kind)


def default_name(spec: SourceSpec) -> str:
    """A stable source name: its base name plus a hash of where it points."""
    base = re.sub(r"[^a-z0-9-]+", "-", Path(spec.url.rstrip("/")).name.lower().removesuffix(".git"))
    digest = hashlib.sha256(f"{spec.url}\n{sorted(spec.paths)}".encode()).hexdigest()[:8]
    return f"{base.strip('-')[:30] or 'source'}-{digest}"
