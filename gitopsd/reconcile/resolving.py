"""A revision's manifests made ready to send: each kind resolved, namespaces filled in, each
object labelled as a member of the source's ApplySet (or as a hook of its source).

A kind resolves against `Kinds`: those the cluster serves (`Served`, its discovery: a sync,
a diff, the daemon, `gitopsd build --cluster`), or, offline, those Kubernetes serves by
default (`BuiltIn`: `gitopsd build`); the CRDs of the revision add theirs either way. Both
go through the one `resolve`, so a build namespaces and labels exactly as a sync does."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from gitopsd import inventory, manifests, synchooks, validation
from gitopsd.changes import Target
from gitopsd.cluster.discovery import Discovery
from gitopsd.config import Setting, SyncSettings
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.objects import GroupKind, Manifest, ObjectKey, Origin, Resource
from gitopsd.reconcile.desired import applyset_of
from gitopsd.resources import NAMESPACES
from gitopsd.sync_options import SYNC_OPTIONS_ANNOTATION, Option


@dataclass(frozen=True)
class Scope:
    """What resolving needs to know of a kind."""

    namespaced: bool
    resource: Resource | None = None
    """Where the cluster serves it; None when it is not served yet (its CRD comes with
    the sync) or is known offline only."""


class Kinds(Protocol):
    """The kinds a revision resolves against, besides those its own CRDs define."""

    def scope(self, api_version: str, kind: str) -> Scope | None:
        """The kind's scope, or None when it is none of these kinds."""

    def unknown(self, manifest: Manifest) -> str:
        """Why the kind of `manifest` resolves neither here nor by a CRD of the revision."""


@dataclass(frozen=True)
class Served:
    """The kinds the cluster serves, as its discovery says."""

    discovery: Discovery

    def scope(self, api_version: str, kind: str) -> Scope | None:
        resource = self.discovery.find(api_version, kind)
        return Scope(resource.namespaced, resource) if resource else None

    def unknown(self, manifest: Manifest) -> str:
        where = f"{manifest.origin}: {manifest.key.kind} {manifest.key.name}"
        served = self.discovery.served_versions(manifest.api_version, manifest.key.kind)
        group = manifest.key.group
        if group in self.discovery.failed_groups:
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


@dataclass(frozen=True)
class BuiltIn:
    """Offline: the kinds a default API server of the Kubernetes version gitopsd ships the
    schemas of serves (`validation.built_in`), which say each kind's scope."""

    catalogue: validation.Catalogue = field(default_factory=validation.built_in)

    def scope(self, api_version: str, kind: str) -> Scope | None:
        known = self.catalogue.find(api_version, kind)
        return Scope(known.namespaced) if known else None

    def unknown(self, manifest: Manifest) -> str:
        return (
            f"{manifest.origin}: {manifest.key.kind} {manifest.key.name}: {manifest.api_version} "
            f"{manifest.key.kind} is no kind of {self.catalogue.where} and no CRD in this "
            "revision defines it, so whether it is namespaced is not known offline; pass "
            "--cluster to resolve it against the kinds the cluster serves"
        )


def resolve(
    found: list[Manifest],
    kinds: Kinds,
    settings: SyncSettings,
    previous: Mapping[ObjectKey, Target] | None = None,
) -> dict[ObjectKey, Target]:
    """Maps each manifest to its kind, fills in namespaces, rejects duplicates, and labels
    each as a member of the source's ApplySet (or as a hook of its source): ready to send,
    once per revision.
    A target of the `previous` revision is kept, with its fingerprint, when its manifest is
    the very one read again (its file unchanged) and its kind resolves as before: a new
    revision costs work only for what changed."""
    defined = _definitions_in(found)
    applyset = applyset_of(settings)
    # each prior target holds its manifest, so no other object can have that manifest's id
    kept = {id(t.read_from): t for t in (previous or {}).values() if t.read_from is not None}

    def target_of(manifest: Manifest) -> Target:
        prior = kept.get(id(manifest))
        if prior and prior.read_from is manifest and _resolves_as(prior, manifest, kinds):
            return prior
        resolved, resource = _resolve_one(manifest, kinds, defined, settings)
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


def _resolves_as(prior: Target, manifest: Manifest, kinds: Kinds) -> bool:
    """The kind of `prior`, read from `manifest`, is served as it was."""
    scope = kinds.scope(manifest.api_version, prior.key.kind)
    return scope is not None and scope.resource is not None and scope.resource == prior.resource


@dataclass(frozen=True)
class Definition:
    """A kind that a CRD in the revision defines: its scope and the versions it serves."""

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
        definitions[group_kind] = Definition(spec.get("scope") == "Namespaced", versions)
    return definitions


def _resolve_one(
    manifest: Manifest,
    kinds: Kinds,
    defined: dict[GroupKind, Definition],
    settings: SyncSettings,
) -> tuple[Manifest, Resource | None]:
    scope = kinds.scope(manifest.api_version, manifest.key.kind) or _scope_defined(
        manifest, defined
    )
    if scope is None:
        raise ManifestError(kinds.unknown(manifest), ManifestReason.UNKNOWN_KIND)
    resolved = _with_namespace(manifest, scope.namespaced, settings.default_namespace)
    _check_confined(resolved, settings.confined_to)
    return resolved, scope.resource


def _scope_defined(manifest: Manifest, defined: dict[GroupKind, Definition]) -> Scope | None:
    """The scope a CRD of the revision gives the kind, in a version it serves."""
    definition = defined.get(manifest.key.group_kind)
    version = manifest.api_version.rpartition("/")[2]
    if definition is None or version not in definition.versions:
        return None
    return Scope(definition.namespaced)


def _check_confined(manifest: Manifest, namespace: str | None) -> None:
    key = manifest.key
    if namespace is not None and key.namespace != namespace:
        where = f"namespace {key.namespace}" if key.namespace else "the cluster scope"
        raise ManifestError(
            f"{manifest.origin}: {key}: lies in {where}, but this source may only write to "
            f"namespace {namespace} (a GitSync without serviceAccountName)",
            ManifestReason.OUT_OF_NAMESPACE,
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
