"""From documents to identified manifests, and the index that refuses an object twice.

A document becomes a `Manifest` once its identity (by Kubernetes' naming rules) and labels
are valid: names become URL path segments, so they are checked before any request.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from gitopsd import sync_options
from gitopsd.drift_policy import object_rules
from gitopsd.errors import ConfigError, ManifestError, ManifestReason
from gitopsd.manifests.yaml_loader import Documents
from gitopsd.names import name_rule, namespace_problem, shown
from gitopsd.objects import (
    APPLYSET_ID_LABEL,
    APPLYSET_PART_OF_LABEL,
    ARGOCD_SYNC_WAVE_ANNOTATION,
    SYNC_WAVE,
    SYNC_WAVE_ANNOTATION,
    GroupKind,
    Manifest,
    ObjectKey,
    Origin,
    group_of,
)
from gitopsd.synchooks import DIALECTS


class Identified(Protocol):
    """A manifest, or what became of one (a target)."""

    @property
    def key(self) -> ObjectKey: ...

    @property
    def origin(self) -> Origin: ...


Item = TypeVar("Item", bound=Identified)


def index(manifests: Iterable[Item]) -> dict[ObjectKey, Item]:
    """Manifests by object identity; an object written twice is an error naming both places."""
    by_key: dict[ObjectKey, Item] = {}
    for manifest in manifests:
        first = by_key.setdefault(manifest.key, manifest)
        if first is not manifest:
            raise ManifestError(
                f"{manifest.origin}: duplicate object {manifest.key}: "
                f"{first.origin} and {manifest.origin}",
                ManifestReason.DUPLICATE_OBJECT,
            )
    return by_key


def manifests_of(path: str, documents: Documents, deferred: bool = False) -> list[Manifest]:
    """The manifests of one file's (or one rendered kustomization's) documents. `deferred`:
    a name, namespace, wave or Secret value holding `${` is checked once its variables are
    expanded (gitopsd.substitution), not now."""
    manifests = []
    for number, (line, document) in enumerate(documents, start=1):
        origin = Origin(path, line)
        for label, body in _expand_list(origin, f"document {number}", document):
            manifests.append(_manifest(origin, label, body, deferred))
    return manifests


def _expand_list(origin: Origin, label: str, document: Any) -> list[tuple[str, Any]]:
    """`kind: List` (and FooList with items) stands for its items, as kubectl reads it."""
    body = _mapping(origin, label, document)
    kind, items = body.get("kind"), body.get("items")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
        return [(f"{label} item {number}", item) for number, item in enumerate(items, start=1)]
    return [(label, body)]


def _manifest(origin: Origin, label: str, document: Any, deferred: bool) -> Manifest:
    body = _mapping(origin, label, document)
    api_version = _required(origin, label, body, "apiVersion")
    kind = _required(origin, label, body, "kind")
    metadata = _mapping(origin, f"{label}: metadata", body.get("metadata"))
    name = _name(origin, label, metadata)
    namespace = metadata.get("namespace", "")
    if not isinstance(namespace, str):
        raise _invalid(origin, f"{label}: metadata.namespace must be a string")
    checked = name if "name" in metadata else f"{name}x"  # the server appends to a prefix
    later = _later if deferred else _now
    group_kind = GroupKind(group_of(api_version), kind)
    _check_identity(origin, label, group_kind, later(checked), later(namespace))
    _check_labels(origin, label, metadata)
    _check_wave(origin, label, metadata, later)
    _check_drift_policy(origin, label, metadata)
    if kind == "Secret" and group_of(api_version) == "":
        _check_secret(origin, f"{label}: Secret {later(name) or name}", body, later)
    key = ObjectKey(group_of(api_version), kind, namespace, name)
    return Manifest(key=key, api_version=api_version, body=body, origin=origin)


def _now(value: Any) -> Any:
    return value


def _later(value: Any) -> Any:
    """A value checked once its variables are expanded: none now."""
    return None if isinstance(value, str) and "${" in value else value


def _name(origin: Origin, label: str, metadata: dict[Any, Any]) -> str:
    """metadata.name; a sync hook may give metadata.generateName instead (it is created
    afresh each sync), and is known by that prefix."""
    if "name" in metadata or "generateName" not in metadata:
        return _required(origin, label, metadata, "name", "metadata.")
    annotations = metadata.get("annotations")
    hook = isinstance(annotations, dict) and any(d.hook in annotations for d in DIALECTS)
    if not hook:
        raise _invalid(
            origin,
            f"{label}: metadata.generateName without metadata.name is for sync hooks only "
            "(gitopsd.io/hook): an object kept in sync needs a name",
        )
    return _required(origin, label, metadata, "generateName", "metadata.")


def _mapping(origin: Origin, label: str, value: Any) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise _invalid(origin, f"{label} is not a mapping")
    return value


def _required(
    origin: Origin, label: str, body: dict[Any, Any], field: str, prefix: str = ""
) -> str:
    value = body.get(field)
    if not isinstance(value, str) or not value:
        raise _invalid(origin, f"{label}: {prefix}{field} must be a non-empty string")
    return value


def _check_identity(
    origin: Origin, label: str, group_kind: GroupKind, name: str | None, namespace: str | None
) -> None:
    """Names become URL path segments, so the API server's rules are checked before any
    request: a name such as `../../kube-system/configmaps/x` must never reach a URL (None:
    checked after substitution)."""
    problem = name_rule(group_kind).problem(name) if name is not None else None
    if problem:
        named = shown(str(name))
        raise _invalid(origin, f"{label}: {group_kind.kind} metadata.name {named} {problem}")
    problem = namespace_problem(namespace) if namespace else None
    if problem:
        raise _invalid(origin, f"{label}: metadata.namespace {shown(str(namespace))} {problem}")


def _check_labels(origin: Origin, label: str, metadata: dict[Any, Any]) -> None:
    """Applyset membership is gitopsd's to set (KEP-3659: treat such a manifest as invalid)."""
    labels = metadata.get("labels", {})
    if not isinstance(labels, dict):
        raise _invalid(origin, f"{label}: metadata.labels must be a mapping")
    for owner_label in (APPLYSET_PART_OF_LABEL, APPLYSET_ID_LABEL):
        if owner_label in labels:
            raise ManifestError(
                f"{origin}: {label}: label {owner_label} is set by gitopsd, not by manifests",
                ManifestReason.OWNER_LABEL,
            )


def _check_wave(
    origin: Origin, label: str, metadata: dict[Any, Any], later: Callable[[Any], Any]
) -> None:
    annotations = metadata.get("annotations")
    for name in (SYNC_WAVE_ANNOTATION, ARGOCD_SYNC_WAVE_ANNOTATION):
        wave = later(annotations.get(name)) if isinstance(annotations, dict) else None
        if wave is not None and not (isinstance(wave, str) and SYNC_WAVE.match(wave)):
            raise _invalid(
                origin,
                f"{label}: annotation {name} must be a whole number in quotes, "
                f'such as "-1" or "2", not {shown(str(wave))}',
            )


def _check_drift_policy(origin: Origin, label: str, metadata: dict[Any, Any]) -> None:
    """An object's own drift rules are read when its drift is: refused here, with its line."""
    try:
        object_rules({"metadata": metadata})
    except ConfigError as error:
        raise _invalid(origin, f"{label}: {error}") from None
    wrong = sync_options.problem({"metadata": metadata})
    if wrong:
        raise _invalid(origin, f"{label}: {wrong}")


def _check_secret(
    origin: Origin, label: str, body: dict[Any, Any], later: Callable[[Any], Any]
) -> None:
    """A Secret's `data` is base64, which the API server checks only once it converts the
    object (500 after the dry-run began): said here with the key, never the value."""
    if "sops" in body:  # a file sops encrypted is decrypted before it is read
        raise _invalid(
            origin,
            f"{label} carries SOPS metadata that is no encrypted file's (a top-level sops "
            "block, as sops writes it): it is neither decrypted nor applied",
        )
    data = body.get("data")
    if data is None:
        return
    if not isinstance(data, dict):
        raise _invalid(origin, f"{label}: data must be a mapping")
    for key, value in data.items():
        if later(value) is not None and not _is_base64(value):
            raise _invalid(
                origin, f"{label}: data key {shown(str(key))} is not valid base64 (value not shown)"
            )


def _is_base64(value: Any) -> bool:
    """As the API server decodes `data`: standard alphabet, padded; line breaks ignored."""
    if not isinstance(value, str):
        return False
    try:
        base64.b64decode(value.replace("\n", "").replace("\r", ""), validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _invalid(origin: Origin, message: str) -> ManifestError:
    return ManifestError(f"{origin}: {message}", ManifestReason.INVALID)
