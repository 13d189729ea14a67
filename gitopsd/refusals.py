"""Why a prune was refused, said to people: one line per guard, with its numbers, the
objects it kept and what overrides it, in the words of the place the source's settings are
written (the command line's flags, the configuration's keys, a GitSync's fields). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from gitopsd.config import Setting, SyncSettings
from gitopsd.objects import ObjectKey
from gitopsd.plan import PruneDecision, Refusal

SHOWN_REFUSED = 10
"""Objects a refusal names; it counts the rest."""


def explain_refusals(
    refused: Sequence[tuple[ObjectKey, Refusal]], decision: PruneDecision, settings: SyncSettings
) -> list[str]:
    """One line per guard that refused: why, with its numbers, the objects it kept (the
    first ten) and what overrides it, in the words of the place `settings` come from."""
    by_reason: dict[Refusal, list[ObjectKey]] = {}
    for key, reason in refused:
        by_reason.setdefault(reason, []).append(key)
    return [
        f"prune refused ({reason}): {_why_refused(reason, len(keys), decision, settings)}; "
        f"kept {_first(keys)}"
        for reason, keys in by_reason.items()
    ]


def _why_refused(
    reason: Refusal, count: int, decision: PruneDecision, settings: SyncSettings
) -> str:
    say = settings.say
    objects = f"{count} object{'s' if count != 1 else ''}"
    return {
        Refusal.EMPTY_SOURCE: f"the source renders no object, so all {objects} it owns would "
        f"go (a broken source, most likely; {say(Setting.ALLOW_EMPTY)} overrides it)",
        Refusal.THRESHOLD: f"{count} of the {decision.owned} objects it owns left git, over "
        f"the limit of {decision.budget} ({settings.prune.budget_percent:g}%) one sync may "
        f"prune ({say(Setting.PRUNE_BUDGET)} or {say(Setting.ALLOW_MASS_PRUNE)} overrides it)",
        Refusal.PROTECTED: f"{objects} of a protected kind (Namespace, CRD, PersistentVolume, "
        f"PersistentVolumeClaim; {say(Setting.PRUNE_PROTECTED)} overrides it, never for the "
        "system namespaces)",
        Refusal.DISABLED: f"{objects} annotated not to be pruned (remove the annotation)",
        Refusal.NOT_OWNED: f"{objects} carrying this source's label that its record does not "
        "name with the uid they have (remove the label)",
        Refusal.HELD_BACK: f"{objects} of a kind one of whose objects this sync refused (a "
        "sync that applies the kind whole prunes them)",
        Refusal.DISCOVERY_INCOMPLETE: f"{objects} of a kind the cluster does not serve now "
        "(serve it again: an object that is gone then leaves the record)",
    }[reason]


def _first(keys: Sequence[ObjectKey]) -> str:
    shown = ", ".join(str(key) for key in keys[:SHOWN_REFUSED])
    rest = len(keys) - SHOWN_REFUSED
    return f"{shown} and {rest} more" if rest > 0 else shown
