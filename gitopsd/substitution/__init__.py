"""Flux's post-build variable substitution over a revision's objects, pure (`expand` knows
the syntax).

Each object, as rendered (a file's, a kustomization's, a chart's), is written out as YAML,
its substitutions expanded, and read again: a value may so become a number (`replicas:
${REPLICAS}`) or rename the object, as in Flux. An object labelled or annotated
`kustomize.toolkit.fluxcd.io/substitute: disabled` is left as written. A variable's value
that came from a Secret is Secret data: it may be used only in a Secret's data and
stringData, which gitopsd masks everywhere; used anywhere else, the revision is refused,
naming the object and the variable, never the value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import yaml

from gitopsd.config import Limits
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.manifests.bounds import check_object_size
from gitopsd.manifests.identity import manifests_of
from gitopsd.manifests.parsing import parse_documents
from gitopsd.objects import Body, Manifest
from gitopsd.substitution.expand import SubstitutionError, expand, used

DISABLED_KEY = "kustomize.toolkit.fluxcd.io/substitute"
DISABLED = "disabled"
SECRET_DATA = ("data", "stringData")


@dataclass(frozen=True)
class Variables:
    """The values a source's objects are expanded with, and which came from Secrets."""

    values: Mapping[str, str] = field(default_factory=dict)
    secret: frozenset[str] = frozenset()
    strict: bool = False
    enabled: bool = False
    """Whether the source substitutes at all (it has a postBuild): as in Flux, a `$$` is
    left as written where it does not."""

    @property
    def digest(self) -> str:
        """What identifies the values (a new value reads the revision again); no value."""
        digest = hashlib.sha256(b"%d%d" % (self.strict, self.enabled))
        for name in sorted(self.values):
            value = self.values[name].encode()
            secret = name in self.secret  # a value moved to a Secret is confined from then on
            digest.update(b"\0%s\0%d\0%d\0%s" % (name.encode(), secret, len(value), value))
        return digest.hexdigest()


def substituted(
    manifests: Iterable[Manifest], variables: Variables, limits: Limits
) -> list[Manifest]:
    """`manifests` with their substitutions expanded; raises ManifestError naming the
    object's file:line for a bad substitution, a variable with no value (strict), or a
    Secret's value used outside a Secret's data."""
    if not variables.enabled:
        return list(manifests)
    return [
        expanded for manifest in manifests for expanded in _substituted(manifest, variables, limits)
    ]


def _substituted(manifest: Manifest, variables: Variables, limits: Limits) -> list[Manifest]:
    """The object expanded, and checked whole again (its name and values holding `${` were
    left for now: `manifests_of`'s deferred checks), unless it disables substitution."""
    if b"$" not in manifest.packed:  # marshal keeps strings whole: no `$`, nothing to do
        return [manifest]
    body = manifest.body
    text, done = _yaml(body), "as written"
    if not _disabled(body):
        try:
            text, done = expand(text, variables.values, variables.strict), "after substitution"
        except SubstitutionError as error:
            raise _failed(manifest, str(error)) from None
        _confine(manifest, body, variables)
        check_object_size(str(manifest.origin), len(text.encode()), limits)
    try:
        found = manifests_of(manifest.origin.path, parse_documents(text, "", limits))
    except ManifestError as error:  # it names line 1 of the object written out: not git's
        said = str(error).removeprefix(f"{manifest.origin.path}:1: ")
        raise _failed(manifest, f"{done}: {said}") from None
    return [Manifest(made.key, made.api_version, made.body, manifest.origin) for made in found]


def _confine(manifest: Manifest, body: Body, variables: Variables) -> None:
    """A Secret's variable may be used only in a Secret's data and stringData."""
    if not variables.secret:
        return
    outside = body
    if manifest.key.kind == "Secret" and manifest.key.group == "":
        outside = {key: value for key, value in body.items() if key not in SECRET_DATA}
    named = sorted(used(_yaml(outside)) & variables.secret)
    if named:
        raise _failed(
            manifest,
            f"variable {named[0]} comes from a Secret: its value may be used only in a "
            "Secret's data or stringData, where it is masked (use a ConfigMap for a value "
            "that is not secret)",
        )


def _disabled(body: Body) -> bool:
    metadata = body.get("metadata") or {}
    marks = {**(metadata.get("labels") or {}), **(metadata.get("annotations") or {})}
    return marks.get(DISABLED_KEY) == DISABLED


def _yaml(body: Body) -> str:
    """One object as YAML, lines never folded (a substitution must stay on one line)."""
    return str(yaml.safe_dump(body, sort_keys=False, width=2**31 - 1, allow_unicode=True))


def _failed(manifest: Manifest, why: str) -> ManifestError:
    return ManifestError(
        f"{manifest.origin}: {manifest.key}: variable substitution: {why}",
        ManifestReason.INVALID,
    )
