"""How one object is synced, from its annotations, pure: gitopsd's own, and those of Argo CD
and Flux that mean the same, so that a repository written for either syncs unedited.

gitopsd's `gitopsd.io/sync-options` holds option words separated by commas (an unknown word
is refused when the manifest is read, naming its file and line); `gitopsd.io/prune:
disabled` keeps an object from ever being deleted. Of the others, what gitopsd can honour
it honours (`options_of`, `prune_disabled`; the sync wave in `objects.wave_of`, hooks in
`synchooks`); what it cannot is said once per object (`unhonoured`), never ignored silently.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import StrEnum
from typing import Any

from gitopsd.objects import ARGOCD_SYNC_WAVE_ANNOTATION, PRUNE_ANNOTATION

SYNC_OPTIONS_ANNOTATION = "gitopsd.io/sync-options"
ARGOCD = "argocd.argoproj.io/"
FLUX = "kustomize.toolkit.fluxcd.io/"
ARGOCD_SYNC_OPTIONS = ARGOCD + "sync-options"
ARGOCD_COMPARE_OPTIONS = ARGOCD + "compare-options"
FLUX_PRUNE, FLUX_SSA = FLUX + "prune", FLUX + "ssa"
FLUX_FORCE, FLUX_RECONCILE = FLUX + "force", FLUX + "reconcile"
HOOK_ANNOTATIONS = frozenset({ARGOCD + "hook", ARGOCD + "hook-delete-policy"})
"""Argo CD's hooks: `gitopsd.synchooks` reads them."""


class Option(StrEnum):
    REPLACE_ON_IMMUTABLE = "replace-on-immutable"
    """When git changes fields that cannot change once set (a Job's template, a Deployment's
    selector), delete the object, exactly as read, and create it again."""
    CREATE_ONLY = "create-only"
    """Created when absent, never written after: what differs later is not drift."""
    SKIP = "skip"
    """Never written, never drift; while it is in git it is never pruned either."""
    MERGE = "merge"
    """Fields that others' edits add (kubectl's) are kept, and are not drift."""
    IGNORE_EXTRANEOUS = "ignore-extraneous"
    """Once it left git it is not reported as drift (a prune still deletes it)."""


NONE: frozenset[Option] = frozenset()
"""The options of most objects: one instance, as every target holds its own set."""
ARGOCD_SYNC_WORDS: Mapping[str, Option | None] = {
    "Replace=true": Option.REPLACE_ON_IMMUTABLE,
    "Prune=false": None,  # prune_disabled
    "Delete=false": None,  # prune_disabled: gitopsd deletes only by pruning
    # what gitopsd always does
    "ServerSideApply=true": None,
    "ApplyOutOfSyncOnly=true": None,  # only what differs is applied
    "PruneLast=true": None,  # the prune comes after every apply
    "PrunePropagationPolicy=background": None,
    "RespectIgnoreDifferences=true": None,  # a held field is never written back
    "FailOnSharedResource=true": None,  # another source's object is refused
    "SkipDryRunOnMissingResource=true": None,  # dry-run once its CRD is established
}
FLUX_VALUES: Mapping[tuple[str, str], Option | None] = {
    (FLUX_SSA, "Ignore"): Option.SKIP,
    (FLUX_SSA, "IfNotPresent"): Option.CREATE_ONLY,
    (FLUX_SSA, "Merge"): Option.MERGE,
    (FLUX_SSA, "Override"): None,  # Flux's default, and gitopsd's
    (FLUX_FORCE, "enabled"): Option.REPLACE_ON_IMMUTABLE,
    (FLUX_FORCE, "disabled"): None,
    (FLUX_RECONCILE, "disabled"): Option.SKIP,
    (FLUX_RECONCILE, "enabled"): None,
    (FLUX_PRUNE, "disabled"): None,  # prune_disabled
    (FLUX_PRUNE, "enabled"): None,
    (FLUX + "substitute", "disabled"): None,  # read by gitopsd.substitution
}


def annotations_of(body: Mapping[str, Any]) -> Mapping[str, Any]:
    found = (body.get("metadata") or {}).get("annotations")
    return found if isinstance(found, dict) else {}


def options_of(body: Mapping[str, Any]) -> frozenset[Option]:
    """The object's options, from gitopsd's annotation and the others' that mean the same
    (an invalid gitopsd annotation was refused when the manifest was read)."""
    annotations = annotations_of(body)
    own = _words(annotations.get(SYNC_OPTIONS_ANNOTATION), ",")
    found = {Option(word) for word in own if word in set(Option)}
    words = _words(annotations.get(ARGOCD_SYNC_OPTIONS), ",")
    found |= {option for word in words if (option := ARGOCD_SYNC_WORDS.get(word))}
    if "IgnoreExtraneous" in _words(annotations.get(ARGOCD_COMPARE_OPTIONS), ","):
        found.add(Option.IGNORE_EXTRANEOUS)
    flux = {(name, value) for name, value in annotations.items() if isinstance(value, str)}
    found |= {option for pair in flux if (option := FLUX_VALUES.get(pair))}
    return frozenset(found) if found else NONE


def prune_disabled(body: Mapping[str, Any]) -> bool:
    """Never deleted: `gitopsd.io/prune: disabled`, Flux's `prune: disabled`, or Argo CD's
    `Prune=false` or `Delete=false`."""
    annotations = annotations_of(body)
    argocd = set(_words(annotations.get(ARGOCD_SYNC_OPTIONS), ","))
    return (
        annotations.get(PRUNE_ANNOTATION) == "disabled"
        or annotations.get(FLUX_PRUNE) == "disabled"
        or bool(argocd & {"Prune=false", "Delete=false"})
    )


def unhonoured(body: Mapping[str, Any]) -> tuple[str, ...]:
    """Each Argo CD or Flux annotation (or option of one) the object carries that gitopsd
    does not honour, said as such."""
    return tuple(_unhonoured(annotations_of(body)))


def _unhonoured(annotations: Mapping[str, Any]) -> Iterator[str]:
    for name, value in sorted(annotations.items()):
        if not name.startswith((ARGOCD, FLUX)) or name in HOOK_ANNOTATIONS:
            continue
        if name == ARGOCD_SYNC_WAVE_ANNOTATION:
            continue
        text = value if isinstance(value, str) else ""
        if name == ARGOCD_SYNC_OPTIONS:
            unknown = [w for w in _words(text, ",") if w not in ARGOCD_SYNC_WORDS]
        elif name == ARGOCD_COMPARE_OPTIONS:
            unknown = [w for w in _words(text, ",") if w != "IgnoreExtraneous"]
        elif name.startswith(FLUX) and (name, text) in FLUX_VALUES:
            unknown = []
        else:
            unknown = [text]
        for word in unknown:
            yield (
                f"annotation {name}: {word!r} is not honoured by gitopsd"
                " (docs/sync.md: Annotations)"
            )


def problem(body: Mapping[str, Any]) -> str:
    """What is wrong with the object's own sync options, or ""."""
    text = annotations_of(body).get(SYNC_OPTIONS_ANNOTATION)
    if text is None:
        return ""
    if not isinstance(text, str):
        return f"annotation {SYNC_OPTIONS_ANNOTATION} must be a string"
    unknown = [word for word in _words(text, ",") if word not in set(Option)]
    if unknown:
        known = ", ".join(option.value for option in Option)
        where = f"annotation {SYNC_OPTIONS_ANNOTATION}"
        return f"{where}: unknown option {unknown[0]!r} (known: {known})"
    return ""


def _words(text: Any, separator: str) -> list[str]:
    if not isinstance(text, str):
        return []
    return [word.strip() for word in text.split(separator) if word.strip()]
