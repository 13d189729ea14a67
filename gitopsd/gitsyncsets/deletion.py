"""What a set's pass writes and deletes, pure, behind guards that mirror a GitSync's prune
guards (plan.decide_prune), in their words:

- a GitSync whose element went is deleted only if the set owns it (its controller owner
  reference names the set's uid); one of a wanted name that the set does not own is never
  taken over, only reported (`taken`);
- when the generators give no element at all and the set owns GitSyncs, nothing is deleted
  unless `guards.allowEmpty` (empty_source: a repository emptied or a glob mistyped looks
  just like this);
- a pass may delete at most `guards.deletionBudgetPercent` of the GitSyncs the set owns
  (one always), unless `guards.allowMassDeletion` (threshold).

A refused pass writes nothing at all: neither the deletions nor the other GitSyncs' updates,
which may be the same mistake's other half.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gitopsd.gitsyncsets.spec import Guards
from gitopsd.gitsyncsets.template import owned_by
from gitopsd.objects import Body
from gitopsd.plan import Refusal, prune_budget


@dataclass(frozen=True)
class Decision:
    apply: tuple[str, ...]
    """Names of the GitSyncs to create or update."""
    delete: tuple[str, ...]
    """Names of the set's own GitSyncs whose element went."""
    taken: tuple[str, ...]
    """Names the set would generate that a GitSync it does not own holds."""
    refused: Refusal | None = None
    """Why the pass writes nothing; None: it writes."""
    owned: int = 0
    budget: int = 0
    """Most GitSyncs the budget lets one pass delete."""

    @property
    def refusal_message(self) -> str:
        """Why, with each guard's numbers and what overrides it."""
        deleting = ", ".join(self.delete[:10]) + (" and more" if len(self.delete) > 10 else "")
        if self.refused == Refusal.EMPTY_SOURCE:
            return (
                f"the generators gave no element, so all {self.owned} GitSyncs would be "
                f"deleted ({deleting}); nothing was deleted or applied (guard: empty_source; "
                "spec.guards.allowEmpty: true allows it)"
            )
        return (
            f"{len(self.delete)} of the {self.owned} GitSyncs this set owns would be deleted "
            f"({deleting}), over the budget of {self.budget}; nothing was deleted or applied "
            "(guard: threshold; spec.guards.allowMassDeletion: true, or a larger "
            "spec.guards.deletionBudgetPercent, allows it)"
        )


def decide(
    uid: str, wanted: Mapping[str, Body], existing: Mapping[str, Body], guards: Guards
) -> Decision:
    """What a pass of the set `uid` does, from the GitSyncs it generates (`wanted`) and
    those of its namespace as read (`existing`), both by name."""
    owned = {name for name, body in existing.items() if owned_by(body, uid)}
    taken = tuple(sorted(name for name in wanted if name in existing and name not in owned))
    apply = tuple(sorted(name for name in wanted if name not in taken))
    delete = tuple(sorted(owned - set(wanted)))
    budget = prune_budget(len(owned), guards.budget_percent)
    decision = Decision(apply, delete, taken, None, len(owned), budget)
    if delete and not wanted and not guards.allow_empty:
        return _refused(decision, Refusal.EMPTY_SOURCE)
    if len(delete) > budget and not guards.allow_mass_deletion:
        return _refused(decision, Refusal.THRESHOLD)
    return decision


def _refused(decision: Decision, why: Refusal) -> Decision:
    return Decision((), decision.delete, decision.taken, why, decision.owned, decision.budget)
