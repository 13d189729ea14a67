"""getDesired: a revision read whole (resolved against the cluster's API by
`reconcile.resolving`), ready to send."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from gitopsd import archives, decryption, helm, inventory, kustomize, manifests, source
from gitopsd.changes import Target
from gitopsd.cluster import Cluster
from gitopsd.config import (
    ChartSettings,
    Credentials,
    SourceSpec,
    Substitution,
    SyncSettings,
    VariablesFrom,
    is_artifact,
    is_local,
)
from gitopsd.configfile.postbuild import variable_name
from gitopsd.errors import ClusterError, ClusterReason, ConfigError, ManifestError, ManifestReason
from gitopsd.helm.chart import RemoteDependency
from gitopsd.objects import Body, Manifest, ObjectKey
from gitopsd.plan import waves
from gitopsd.resources import CONFIG_MAPS, SECRETS
from gitopsd.substitution import Variables, substituted


@dataclass(frozen=True)
class Desired:
    revision: source.Revision
    targets: dict[ObjectKey, Target]
    """The ApplySet's members."""
    hooks: tuple[Target, ...] = ()
    """The hooks a sync of the revision runs, in no particular order."""
    warnings: tuple[str, ...] = ()
    """What people should know of the revision as a whole (it holds no manifest)."""
    variables: str = ""
    """The digest of the variables its objects were expanded with (`substitution`)."""

    @property
    def synced(self) -> dict[ObjectKey, Target]:
        """The targets whose health counts: all but those a sync never writes (`skip`)."""
        return {key: t for key, t in self.targets.items() if t.writes(present=False)}

    def in_order(self) -> list[Target]:
        """What a sync of the revision sends: the members it writes, in the order it applies
        them (`plan.waves`: the Namespaces and CRDs, then each sync wave, cluster-scoped
        objects before namespaced ones), then the hooks, by key (a sync runs them in their
        phases)."""
        synced = self.synced
        ordered = waves(synced, {key: target.wave for key, target in synced.items()}, {})
        members = [synced[key] for wave in ordered for key in wave.keys]
        return [*members, *sorted(self.hooks, key=lambda target: target.key)]

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
    directory when the source is a path, or a chart's version or an OCI artifact (held for
    the source by `charts`, the daemon's)."""
    if spec.helm.chart:
        with _reading(charts, source.CHART) as reading:
            return source.fetch_chart(spec, cache_dir, reading=reading)
    if is_artifact(spec):
        with _reading(charts, source.CHART) as reading:
            return source.fetch_artifact(spec, cache_dir, reading)
    if is_local(spec.url):
        return source.read_directory(Path(spec.url))
    return source.fetch(spec, cache_dir, shared)


def is_git(spec: SourceSpec) -> bool:
    """Whether its revisions are fetched from a git repository (not a chart, an OCI
    artifact, a path)."""
    return not (spec.helm.chart or is_local(spec.url) or is_artifact(spec))


def check_source(spec: SourceSpec, allowed_by: str = source.FLAG_ALLOWS_INSECURE) -> None:
    """Raises ConfigError for a source gitopsd would refuse to fetch, before any fetch;
    `allowed_by` names the setting that permits file:// and http:// where it is checked."""
    if spec.helm.chart:
        source.check_chart_source(spec, allowed_by)
    elif is_artifact(spec):
        source.check_artifact_source(spec, allowed_by)
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
    variables: Variables | None = None,
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
    was read so far is garbage once the error unwinds it. Its objects are expanded with
    `variables` (default: the spec's, read from `cluster` in `tenant`'s namespace)."""
    if variables is None:
        variables = variables_of(spec.substitution, cluster, tenant or namespace)
    try:
        where = (namespace, cluster, empty_allowed, charts, tenant)
        found = _read(revision, spec, cache_dir, cache, *where)
        return substituted(found, variables, spec.limits)
    except MemoryError:
        raise ManifestError(
            f"{revision.url} at {revision.sha or 'its files now'}: reading it ran out of the "
            "daemon's memory; lower the source's maxDocuments and maxRevisionBytes, or give "
            "the daemon more",
            ManifestReason.SIZE_LIMIT,
        ) from None


def variables_of(substitution: Substitution, cluster: Cluster | None, namespace: str) -> Variables:
    """The variables of a source's postBuild: each ConfigMap's and Secret's data in order,
    later ones winning, then the inline ones; read at each reconcile, so a changed value is
    used by the next (newlines dropped, as Flux does)."""
    values: dict[str, str] = {}
    secret: set[str] = set()
    for reference in substitution.sources:
        for name, value in _data_of(reference, cluster, namespace).items():
            values[name] = value.replace("\n", "")
            (secret.add if reference.kind == "Secret" else secret.discard)(name)
    for name, value in substitution.values:
        values[name] = value.replace("\n", "")
        secret.discard(name)
    return Variables(values, frozenset(secret), substitution.strict, substitution.enabled)


def _data_of(reference: VariablesFrom, cluster: Cluster | None, namespace: str) -> dict[str, str]:
    where = f"postBuild.substituteFrom: {reference.kind} {namespace}/{reference.name}"
    if cluster is None:
        raise ConfigError(f"{where}: reading it needs the cluster (--cluster)")
    resource = SECRETS if reference.kind == "Secret" else CONFIG_MAPS
    found = cluster.get(resource, namespace, reference.name)
    if found is None and reference.optional:
        return {}
    if found is None:
        raise ClusterError(
            f"{where} not found (optional: true lets a source go on without it)",
            ClusterReason.NOT_FOUND,
        )
    data = found.get("data") or {}
    if reference.kind == "Secret":
        data = {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
    return {variable_name(str(k), where): str(v) for k, v in data.items()}


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
        with _decrypting(spec, cache_dir, revision, tenant) as files:
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
                confine=files.confine,
                deferred=spec.substitution.enabled,
            )


@contextmanager
def _decrypting(
    spec: SourceSpec, cache_dir: Path, revision: source.Revision, tenant: str
) -> Iterator[decryption.Decrypting]:
    """The revision's files, its SOPS-encrypted ones read decrypted with the source's keys
    (read now: a rotated key is used from this read on)."""
    keys = decryption.keys_of(spec.decryption)
    with source.tree(spec, cache_dir, revision) as found:
        files = manifests.Directory(found) if isinstance(found, Path) else found
        decrypting = decryption.Decrypting(files, keys, tenant)
        try:
            yield decrypting
        finally:
            decrypting.close()


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


def applyset_of(settings: SyncSettings) -> inventory.ApplySet:
    return inventory.ApplySet.of_source(settings.name, settings.inventory_namespace)
