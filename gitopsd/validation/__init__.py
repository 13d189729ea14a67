"""Manifests checked against the schemas of their kinds, offline, as the API server would
check them with fieldValidation=Strict: every problem of every object, none left for
`sync` to find.

A `Catalogue` (`catalogue`) knows the kinds there are schemas for: the built-in kinds of
the Kubernetes version gitopsd is tested against, from the OpenAPI v3 spec that version
publishes (shipped as `kubernetes.json`), or the kinds a cluster serves, from its own
OpenAPI v3 documents; and the kinds the CRDs of the revision define. `strict` closes the
schemas so that a field they do not declare is an error, `keywords` reads them as the API
server does (jsonschema's draft 4 with Kubernetes' extensions), `problems` says what is
wrong without a value, and `suggestions` what an unknown kind may have meant.

Pure: the caller reads the cluster's documents (gitopsd.cluster) and passes them in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

from referencing.exceptions import Unresolvable

from gitopsd.objects import Manifest, Origin
from gitopsd.validation.catalogue import Catalogue, Kind, built_in, served
from gitopsd.validation.problems import FieldPath, Problem, message_of
from gitopsd.validation.suggestions import unknown_kind

__all__ = ["Catalogue", "FieldPath", "Locate", "Problem", "built_in", "check", "served"]


Locate = Callable[[Manifest, FieldPath], Origin]
"""Where a field of a manifest is written (gitopsd.manifests.Positions finds its line)."""


def check(
    manifests: Iterable[Manifest], catalogue: Catalogue, locate: Locate | None = None
) -> list[Problem]:
    """Every problem of every manifest, object by object in the order given, each
    object's by field; each at the manifest's origin, or where `locate` finds the field."""
    found = list(manifests)
    catalogue = catalogue.with_definitions(found)
    locate = locate or (lambda manifest, _: manifest.origin)
    return [
        replace(problem, origin=locate(manifest, problem.field))
        for manifest in found
        for problem in _problems(manifest, catalogue)
    ]


def _problems(manifest: Manifest, catalogue: Catalogue) -> list[Problem]:
    kind = catalogue.find(manifest.api_version, manifest.key.kind)
    if kind is None:
        field, why = unknown_kind(manifest.api_version, manifest.key.kind, catalogue)
        return [Problem(manifest.origin, manifest.key, (field,), why)]
    found = {*_scope(manifest, kind), *_schema(manifest, kind, catalogue)}
    # one field can fail twice the same way: an int-or-string of a served CRD's schema
    # says so by its extension and by anyOf
    return sorted(found, key=lambda problem: (problem.path, problem.message))


def _scope(manifest: Manifest, kind: Kind) -> Iterator[Problem]:
    namespace = manifest.key.namespace
    if namespace and not kind.namespaced:
        why = f"{kind.kind} is cluster-scoped, but names namespace {namespace}"
        yield Problem(manifest.origin, manifest.key, ("metadata", "namespace"), why)


def _schema(manifest: Manifest, kind: Kind, catalogue: Catalogue) -> list[Problem]:
    if kind.schema is None:
        why = (
            f"{catalogue.where} serves {kind.kind} {kind.api_version} but publishes no schema "
            "of it (a CRD's follows it shortly after it is installed), so it cannot be checked"
        )
        return [Problem(manifest.origin, manifest.key, ("kind",), why)]
    try:
        errors = list(catalogue.validator(kind).iter_errors(manifest.body))
    except (Unresolvable, re.error) as error:  # a CRD's schema: the server refuses the CRD
        why = f"the schema of {kind.kind} {kind.api_version} cannot be used: {error}"
        return [Problem(manifest.origin, manifest.key, (), why)]
    where = manifest.origin, manifest.key
    return [Problem(*where, tuple(e.absolute_path), message_of(e)) for e in errors]
