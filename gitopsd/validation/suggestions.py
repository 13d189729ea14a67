"""Why a kind has no schema, and what its author may have meant: the apiVersions that do
serve the kind, or the nearest kind there is."""

from __future__ import annotations

from difflib import get_close_matches

from gitopsd.objects import group_of
from gitopsd.validation.catalogue import Catalogue

OFFLINE_HINT = "`gitopsd validate --cluster` checks against the CRDs a cluster has"


def unknown_kind(api_version: str, kind: str, catalogue: Catalogue) -> tuple[str, str]:
    """The field to blame (`apiVersion` where the kind is served in another, else `kind`),
    and why."""
    missing = f"{api_version} has no kind {kind} in {catalogue.where} or the revision's CRDs"
    serving = sorted(version for version, name in catalogue.kinds if name == kind)
    if serving:
        return "apiVersion", f"{missing}; {kind} is served as {', '.join(serving)}"
    nearest = _nearest(api_version, kind, catalogue)
    if nearest:
        return "kind", f"{missing}: did you mean {nearest}?"
    hint = f" ({OFFLINE_HINT})" if catalogue.offline else ""
    return "kind", f"{missing}, so there is no schema to check it against{hint}"


def _nearest(api_version: str, kind: str, catalogue: Catalogue) -> str | None:
    """The closest kind of the same apiVersion, else of its group (named with its
    apiVersion); none in a group nothing serves, whose kinds nothing is known of."""
    same = [name for version, name in catalogue.kinds if version == api_version]
    close = get_close_matches(kind, same, n=1)
    if close:
        return close[0]
    group = {
        name: version
        for version, name in sorted(catalogue.kinds)
        if group_of(version) == group_of(api_version)
    }
    close = get_close_matches(kind, list(group), n=1)
    return f"{close[0]} ({group[close[0]]})" if close else None
