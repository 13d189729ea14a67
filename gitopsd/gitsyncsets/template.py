"""An element's GitSync, pure: the set's template with every string expanded by the
element's variables, in Flux's envsubst syntax (`${var}`, defaults, `$${var}` for the text
`${var}`), strictly: a variable with no value is an error naming the set, the element and
the field. The element's variables become the GitSync's variables too (merged into its
spec.postBuild.substitute, the template's own entries winning), so the manifests it syncs
can use them.

A GitSync is generated into the set's namespace only, labelled with the set's name and
owned by it (an owner reference with controller: true and the set's uid): the proof a
later pass reads before it updates or deletes one.
"""

from __future__ import annotations

import json
from typing import Any

from gitopsd import gitsync
from gitopsd.errors import ConfigError
from gitopsd.gitsync.spec_schema import MAX_NAME
from gitopsd.gitsyncsets import KIND, MAX_GENERATED_BYTES, RESOURCE, SET_LABEL
from gitopsd.gitsyncsets.generators import Element
from gitopsd.gitsyncsets.spec import GitSyncSet
from gitopsd.names import DNS1123_LABEL, shown
from gitopsd.objects import Body
from gitopsd.substitution.expand import SubstitutionError, expand


def generated(gitsyncset: GitSyncSet, elements: list[Element]) -> dict[str, Body]:
    """Each element's GitSync, by name; raises ConfigError for the first that cannot be
    made (so none is applied), or when two elements make one name."""
    made: dict[str, Body] = {}
    origins: dict[str, str] = {}
    size = 0
    for element in elements:
        body = gitsync_of(gitsyncset, element)
        name = body["metadata"]["name"]
        if name in made:
            raise _error(
                gitsyncset,
                element,
                f"template.metadata.name: {name} is also the name of {origins[name]}'s GitSync",
            )
        size += len(json.dumps(body))
        if size > MAX_GENERATED_BYTES:
            raise ConfigError(
                f"GitSyncSet {gitsyncset.key}: its GitSyncs add up to over "
                f"{MAX_GENERATED_BYTES} bytes: nothing was applied or deleted"
            )
        made[name], origins[name] = body, element.origin
    return made


def gitsync_of(gitsyncset: GitSyncSet, element: Element) -> Body:
    """The element's GitSync: the template expanded, owned by the set."""
    template = _expanded(gitsyncset, element, gitsyncset.template, "template")
    metadata = template.get("metadata") or {}
    name = str(metadata.get("name", ""))
    problem = DNS1123_LABEL.problem(name) or (
        f"is over {MAX_NAME} characters" if len(name) > MAX_NAME else None
    )
    if problem:
        raise _error(gitsyncset, element, f"template.metadata.name: {shown(name)} {problem}")
    namespace = metadata.get("namespace")
    if namespace not in (None, gitsyncset.namespace):
        raise _error(
            gitsyncset,
            element,
            f"template.metadata.namespace: {shown(str(namespace))}: a GitSyncSet generates "
            f"GitSyncs into its own namespace ({gitsyncset.namespace}) only",
        )
    return {
        "apiVersion": gitsync.RESOURCE.api_version,
        "kind": gitsync.KIND,
        "metadata": {
            "name": name,
            "namespace": gitsyncset.namespace,
            "labels": {**(metadata.get("labels") or {}), SET_LABEL: gitsyncset.name},
            "annotations": dict(metadata.get("annotations") or {}),
            "ownerReferences": [owner_reference(gitsyncset)],
        },
        "spec": _with_variables(template["spec"], element),
    }


def owner_reference(gitsyncset: GitSyncSet) -> Body:
    return {
        "apiVersion": RESOURCE.api_version,
        "kind": KIND,
        "name": gitsyncset.name,
        "uid": gitsyncset.uid,
        "controller": True,
    }


def owned_by(body: Body, uid: str) -> bool:
    """Whether the GitSync's controller is the set of `uid`."""
    references = (body.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("controller") is True and r.get("uid") == uid for r in references)


def _with_variables(spec: Body, element: Element) -> Body:
    post_build = dict(spec.get("postBuild") or {})
    post_build["substitute"] = {**element.values, **(post_build.get("substitute") or {})}
    return {**spec, "postBuild": post_build}


def _expanded(gitsyncset: GitSyncSet, element: Element, node: Any, field: str) -> Any:
    """`node` with every string in it expanded (mapping keys are left as written)."""
    if isinstance(node, dict):
        return {
            key: _expanded(gitsyncset, element, value, f"{field}.{key}")
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [
            _expanded(gitsyncset, element, value, f"{field}[{n}]") for n, value in enumerate(node)
        ]
    if not isinstance(node, str):
        return node
    try:
        return expand(node, element.values, strict=True)
    except SubstitutionError as error:
        raise _error(gitsyncset, element, f"{field}: {error}") from None


def _error(gitsyncset: GitSyncSet, element: Element, why: str) -> ConfigError:
    return ConfigError(
        f"GitSyncSet {gitsyncset.key}: element {element.origin}: {why}; nothing was applied "
        "or deleted"
    )
