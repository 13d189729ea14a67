"""getDesired: a revision read whole, resolved against the cluster's API, ready to send."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from gitopsd import archives, helm, inventory, kustomize, manifests, source, synchooks
from gitopsd.changes import Target
from gitopsd.cluster import Cluster, Resource
from gitopsd.config import (
    ChartSettings,
    Credentials,
    Setting,
    SourceSpec,
    SyncSettings,
    is_local,
)
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.helm.chart import RemoteDependency
from gitopsd.objects import Body, GroupKind, Manifest, ObjectKey, Origin
from gitopsd.resources import NAMESPACES
from gitopsd.sync_options import SYNC_OPTIONS_ANNOTATION, Option


@dataclass(frozen=True)
class Desired:
    revision: source.Revision
    targets: dict[ObjectKey, Target]
    """The ApplySet's members."""
    hooks: tuple[Target, ...] = ()
    """The hooks a sync of the revision runs, in no particular order."""
    warnings: tuple[str, ...] = ()
    """What people should know of the revision as a whole (it holds no manifest)."""

    @property
    def synced(self) -> dict[ObjectKey, Target]:
        """The targets whose health counts: all but those a sync never writes (`skip`)."""
        return {key: t for key, t in self.targets.items() if t.writes(present=False)}

    @property
    def notices(self) -> list[str]:
        """What of other tools' annotations gitopsd does not honour, object by object."""
        every = (*self.targets.values(), *self.hooks)
        notices = [f"{t.key} ({t.origin}): {notice}" for t in every for notice in t.notices]
        return [*self.warnings, *notices]

    def members_of(self, applyset: inventory.ApplySet) -> Desired:
        """The revision with its targets labelled as members (and hooks) of `applyset`."""

        def relabelled(target: Target, label: Callable[[Body], Body]) -> Target:
            body = label(target.body)
            return Target(
                target.key, body, target.origin, target.resource, target.read_from, target.hook
            )

        targets = {key: relabelled(t, applyset.member) for key, t in self.targets.items()}
        hooks = tuple(relabelled(t, applyset.hook) for t in self.hooks)
        return replace(self, targets=targets, hooks=hooks)

    @classmethod
    def of(
        cls,
        revision: source.Revision,
        resolved: Mapping[ObjectKey, Target],
        warnings: tuple[str, ...] = (),
    ) -> Desired:
        """The revision's targets, hooks apart (a hook of no phase gitopsd runs: neither)."""
        members = {key: target for key, target in resolved.items() if target.hook is None}
        hooks = tuple(t for t in resolved.values() if t.hook is not None and t.hook.phases)
        return cls(revision, members, hooks, warnings)


def empty_warning(found: list[Manifest], spec: SourceSpec) -> tuple[str, ...]:
    """The warning a revision without a single manifest earns (a path the user named that
    holds nothing is an error instead: `manifests.load`)."""
    if found:
        return ()
    named = ", ".join(spec.include)
    return (
        f"the source holds no manifest: no file under {', '.join(spec.paths)} is named "
        f"{named} (or those that are hold no object); a sync of it applies nothing",
    )


def fetch(
    spec: SourceSpec,
    cache_dir: Path,
    shared: source.Shared | None = None,
    charts: source.ChartUser | None = None,
) -> source.Revision:
    """A git revision (with `shared`, one another source fetched recently), a local
    directory when the source is a path, or a chart's version (held for the source by
    `charts`, the daemon's)."""
    if spec.helm.chart:
        with _reading(charts, source.CHART) as reading:
            return source.fetch_chart(spec, cache_dir, reading=reading)
    if is_local(spec.url):
        return source.read_directory(Path(spec.url))
    return source.fetch(spec, cache_dir, shared)


def is_git(spec: SourceSpec) -> bool:
    """Whether its revisions are fetched from a git repository (not a chart, a path)."""
    return not (spec.helm.chart or is_local(spec.url))


def check_source(spec: SourceSpec, allowed_by: str = source.FLAG_ALLOWS_INSECURE) -> None:
    """Raises ConfigError for a source gitopsd would refuse to fetch, before any fetch;
    `allowed_by` names the setting that permits file:// and http:// where it is checked."""
    if spec.helm.chart:
        source.check_chart_source(spec, allowed_by)
    elif not is_local(spec.url):
        source.check_url(spec, allowed_by)


def read_revision(
    revision: source.Revision,
    spec: SourceSpec,
    cache_dir: Path,
    cache: manifests.ParseCache | None = None,
    *,
    namespace: str = "default",
    cluster: Cluster | None = None,
    empty_allowed: bool = False,
    charts: source.ChartUser | None = None,
    tenant: str = "",
) -> list[Manifest]:
    """The manifests of exactly `revision`, its files read from git's object store (only
    those `cache` has not parsed), or a local directory's in place. Charts render into
    `namespace` unless their settings name one, for `cluster`'s capabilities (without a
    cluster, helm's defaults). A path the source names that holds nothing to read is an
    error, unless an empty source is allowed (allowEmpty): then it is what was meant. The
    dependencies its charts fetch are what the source holds of `charts` from now on, and
    renders share the daemon's render slots as `tenant`'s (the namespace of the source's
    record, its GitSync's; the command line has no other tenant). The process running out
    of memory on the way is this revision's failure (SizeLimit), never the process's: what
    was read so far is garbage once the error unwinds it."""
    try:
        where = (namespace, cluster, empty_allowed, charts, tenant)
        return _read(revision, spec, cache_dir, cache, *where)
    except MemoryError:
        raise ManifestError(
            f"{revision.url} at {revision.sha or 'its files now'}: reading it ran out of the "
            "daemon's memory; lower the source's maxDocuments and maxRevisionBytes, or give "
            "the daemon more",
            ManifestReason.SIZE_LIMIT,
        ) from None


def _read(
    revision: source.Revision,
    spec: SourceSpec,
    cache_dir: Path,
    cache: manifests.ParseCache | None,
    namespace: str,
    cluster: Cluster | None,
    empty_allowed: bool,
    charts: source.ChartUser | None,
    tenant: str,
) -> list[Manifest]:
    with _reading(charts, source.DEPENDENCIES) as reading:
        fetch = _dependencies(spec, cache_dir, reading)
        renderer = helm.renderer(spec.helm, namespace, _capabilities(cluster), fetch, tenant)
        with source.tree(spec, cache_dir, revision) as files:
            return manifests.load(
                files,
                spec.paths,
                include=spec.include,
                exclude=spec.exclude,
                limits=spec.limits,
                cache=cache,
                render_kustomization=kustomize.renderer(
                    renderer.inflate if renderer else None, tenant
                ),
                render_chart=renderer,
                paths_named=spec.paths != SourceSpec.paths and not empty_allowed,
            )


@contextmanager
def _reading(charts: source.ChartUser | None, slot: str) -> Iterator[source.Reading | None]:
    if charts is None:
        yield None
        return
    with charts.reading(slot) as reading:
        yield reading


@contextmanager
def files(revision: source.Revision, spec: SourceSpec, cache_dir: Path) -> Iterator[manifests.Tree]:
    """The files of exactly `revision`, as `read_revision` reads them."""
    with source.tree(spec, cache_dir, revision) as found:
        yield manifests.Directory(found) if isinstance(found, Path) else found


def _dependencies(
    spec: SourceSpec, cache_dir: Path, reading: source.Reading | None
) -> helm.FetchDependency:
    """Fetches a chart's dependency from its chart repository or registry, anonymously:
    the source's credentials are for its own host only. The dependencies of one revision
    share one budget, the revision's limits: each is unpacked, then copied for its render."""
    budget = archives.Budget(spec.limits.max_revision_bytes, spec.limits.max_entries)

    def fetch(dependency: RemoteDependency) -> Path:
        chart = ChartSettings(chart=dependency.name, version=dependency.version)
        anonymous = Credentials(password_env=None)
        dependency_source = replace(
            spec, url=dependency.repository, ref="HEAD", credentials=anonymous, helm=chart
        )
        directory = source.fetch_chart(dependency_source, cache_dir, budget, reading).directory
        assert directory is not None  # noqa: S101 - a chart is always unpacked
        return directory

    return fetch


def _capabilities(cluster: Cluster | None) -> Callable[[], helm.Capabilities] | None:
    if cluster is None:
        return None
    discovery = cluster.discovery
    return lambda: helm.Capabilities(discovery.kubernetes_version(), discovery.api_versions())


def resolve(
    found: list[Manifest],
    cluster: Cluster,
    settings: SyncSettings,
    previous: Mapping[ObjectKey, Target] | None = None,
) -> dict[ObjectKey, Target]:
    """Maps each manifest to its API resource, fills in namespaces, rejects duplicates, and
    labels each as a member of the source's ApplySet (or as a hook of its source): ready to
    send, once per revision.
    A target of the `previous` revision is kept, with its fingerprint, when its manifest is
    the very one read again (its file unchanged) and its kind resolves as before: a new
    revision costs work only for what changed."""
    defined = _definitions_in(found)
    applyset = applyset_of(settings)
    # each prior target holds its manifest, so no other object can have that manifest's id
    kept = {id(t.read_from): t for t in (previous or {}).values() if t.read_from is not None}

    def target_of(manifest: Manifest) -> Target:
        prior = kept.get(id(manifest))
        if prior and prior.read_from is manifest and _resolves_as(prior, manifest, cluster):
            return prior
        resolved, resource = _resolve_one(manifest, cluster, defined, settings)
        hook = synchooks.hook_of(resolved.body, str(resolved.origin))
        body = applyset.hook(resolved.body) if hook else applyset.member(resolved.body)
        return Target(resolved.key, body, resolved.origin, resource, manifest, hook)

    targets = manifests.index(target_of(manifest) for manifest in found)
    if settings.create_namespace:
        targets = _creating_namespace(targets, settings, applyset)
    return targets


def _creating_namespace(
    targets: dict[ObjectKey, Target], settings: SyncSettings, applyset: inventory.ApplySet
) -> dict[ObjectKey, Target]:
    """`targets` with the namespace it applies into, unless the revision declares it: made
    when absent, before anything else, and never written after (create-only). It is no
    member of the set, only labelled as made by it, so no prune ever deletes it."""
    name = settings.default_namespace
    key = ObjectKey("", "Namespace", "", name)
    if key in targets:
        return targets
    metadata = {
        "name": name,
        "labels": {inventory.CREATED_BY_LABEL: applyset.id},
        "annotations": {SYNC_OPTIONS_ANNOTATION: str(Option.CREATE_ONLY)},
    }
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
    origin = Origin(settings.say(Setting.CREATE_NAMESPACE), 0)
    return {key: Target(key, body, origin, NAMESPACES), **targets}


def _resolves_as(prior: Target, manifest: Manifest, cluster: Cluster) -> bool:
    """The kind of `prior`, read from `manifest`, is served as it was."""
    served = cluster.discovery.find(manifest.api_version, prior.key.kind)
    return served is not None and served == prior.resource


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
        raise ManifestError(_unserved(manifest, cluster), ManifestReason.UNKNOWN_KIND)
    namespaced = resource.namespaced if resource else bool(definition and definition.namespaced)
    resolved = _with_namespace(manifest, namespaced, settings.default_namespace)
    _check_confined(resolved, settings.confined_to)
    return resolved, resource


def _check_confined(manifest: Manifest, namespace: str | None) -> None:
    key = manifest.key
    if namespace is not None and key.namespace != namespace:
        where = f"namespace {key.namespace}" if key.namespace else "the cluster scope"
        raise ManifestError(
            f"{manifest.origin}: {key}: lies in {where}, but this source may only write to "
            f"namespace {namespace} (a GitSync without serviceAccountName)",
            ManifestReason.OUT_OF_NAMESPACE,
        )


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
            ManifestReason.INVALID,
        )
    if namespaced and not key.namespace:
        body = {**body, "metadata": {**body["metadata"], "namespace": default}}
        key = ObjectKey(key.group, key.kind, default, key.name)
    return Manifest(key, manifest.api_version, body, manifest.origin)
