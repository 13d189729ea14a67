"""Sync hooks, pure: which objects of a revision are hooks, in which phase, cleaned up how.

A hook is applied in its phase of a sync (pre-sync, before anything else; sync, after the
ordinary objects, or, when it names a sync wave, in that wave, as Argo CD runs it; post-sync,
once they are healthy; sync-fail, when a sync failed), and the sync waits until it is
healthy (a Job complete) before it goes on. Hooks are not members
of the ApplySet: never pruned as ordinary objects, never reported as drift, and a heal never
runs them. They carry `HOOK_OF_LABEL` instead, and only an object with this source's value
there is ever deleted as a hook.

gitopsd's own annotations come first; Argo CD's and Helm's mean the same where their meaning
is unambiguous, so a repository written for either tool syncs unchanged. Hooks that belong
to what gitopsd never does (Helm's delete, rollback and test hooks, Argo CD's Skip and
PostDelete) are never applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from gitopsd.errors import ManifestError
from gitopsd.objects import SYNC_WAVE, SYNC_WAVE_ANNOTATION, Body, named_wave

HOOK_OF_LABEL = "gitopsd.io/hook-of"
"""The ApplySet id of the source a hook object belongs to."""
HOOK_RUN_LABEL = "gitopsd.io/hook-run"
"""A run of a hook created under a name the server generates: when the create's answer is
lost (a 5xx, a cut connection), the run is found by it, never created again."""


class Phase(StrEnum):
    PRE_SYNC = "pre-sync"
    SYNC = "sync"
    POST_SYNC = "post-sync"
    SYNC_FAIL = "sync-fail"


class DeletePolicy(StrEnum):
    BEFORE_HOOK_CREATION = "before-hook-creation"
    HOOK_SUCCEEDED = "hook-succeeded"
    HOOK_FAILED = "hook-failed"


@dataclass(frozen=True)
class Dialect:
    """One tool's annotations: the hook's phases, its delete policy, its order."""

    hook: str
    phases: Mapping[str, Phase | None]
    """Each value the hook annotation may list; None: a phase gitopsd never runs."""
    delete_policy: str
    policies: Mapping[str, DeletePolicy]
    weight: str


_OWN_POLICIES = {policy.value: policy for policy in DeletePolicy}
DIALECTS = (
    Dialect(
        "gitopsd.io/hook",
        {phase.value: phase for phase in Phase},
        "gitopsd.io/hook-delete-policy",
        _OWN_POLICIES,
        SYNC_WAVE_ANNOTATION,
    ),
    Dialect(
        "argocd.argoproj.io/hook",
        {
            "PreSync": Phase.PRE_SYNC,
            "Sync": Phase.SYNC,
            "PostSync": Phase.POST_SYNC,
            "SyncFail": Phase.SYNC_FAIL,
            "Skip": None,
            "PostDelete": None,
        },
        "argocd.argoproj.io/hook-delete-policy",
        {
            "BeforeHookCreation": DeletePolicy.BEFORE_HOOK_CREATION,
            "HookSucceeded": DeletePolicy.HOOK_SUCCEEDED,
            "HookFailed": DeletePolicy.HOOK_FAILED,
        },
        "argocd.argoproj.io/sync-wave",
    ),
    Dialect(
        "helm.sh/hook",
        {
            "pre-install": Phase.PRE_SYNC,
            "pre-upgrade": Phase.PRE_SYNC,
            "post-install": Phase.POST_SYNC,
            "post-upgrade": Phase.POST_SYNC,
            **dict.fromkeys(
                ("pre-delete", "post-delete", "pre-rollback", "post-rollback", "test"), None
            ),
            **dict.fromkeys(("test-success", "test-failure", "crd-install"), None),
        },
        "helm.sh/hook-delete-policy",
        _OWN_POLICIES,
        "helm.sh/hook-weight",
    ),
)
DEFAULT_POLICIES = frozenset({DeletePolicy.BEFORE_HOOK_CREATION})
"""As Argo CD and Helm: a hook that names no policy is deleted before it is created again."""


@dataclass(frozen=True)
class SyncHook:
    phases: frozenset[Phase]
    """Empty: a hook of something gitopsd never does; it is never applied."""
    delete_policies: frozenset[DeletePolicy]
    weight: int
    """Order within a phase: lower first."""
    wave: int | None = None
    """The sync wave its annotations name (gitopsd's, else Argo CD's; Helm's weight is no
    wave), if any."""

    @property
    def sync_wave(self) -> int | None:
        """The wave of the sync phase it runs in, after that wave's objects are applied: the
        one a sync hook names. None: it runs in its phases' own turn (a sync hook that names
        no wave runs after every wave)."""
        return self.wave if Phase.SYNC in self.phases else None

    def runs_apart(self, phase: Phase) -> bool:
        """It runs in `phase`'s own turn, and not within a wave (`sync_wave`)."""
        in_wave = phase == Phase.SYNC and self.sync_wave is not None
        return phase in self.phases and not in_wave


def hook_of(body: Body, where: str) -> SyncHook | None:
    """The object's hook, if its annotations make it one; raises ManifestError, naming
    `where` and the annotation, for a value none of the tools defines."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    if not isinstance(annotations, dict):
        return None
    for dialect in DIALECTS:
        if dialect.hook in annotations:
            return _read(dialect, annotations, where, named_wave(body))
    return None


def _read(
    dialect: Dialect, annotations: Mapping[str, object], where: str, wave: int | None
) -> SyncHook:
    phases = {
        dialect.phases[value]
        for value in _values(annotations, dialect.hook, dialect.phases, where)
        if dialect.phases[value] is not None
    }
    policies = frozenset(
        dialect.policies[value]
        for value in _values(annotations, dialect.delete_policy, dialect.policies, where)
    )
    weight = str(annotations.get(dialect.weight, "0")).strip()
    if not SYNC_WAVE.match(weight):
        raise ManifestError(
            f"{where}: annotation {dialect.weight}: {weight!r} is not a whole number"
        )
    return SyncHook(
        frozenset(phase for phase in phases if phase is not None),
        policies or DEFAULT_POLICIES,
        int(weight),
        wave,
    )


def _values(
    annotations: Mapping[str, object], key: str, known: Mapping[str, object], where: str
) -> list[str]:
    text = annotations.get(key)
    if text is None:
        return []
    values = [value.strip() for value in str(text).split(",") if value.strip()]
    unknown = [value for value in values if value not in known]
    if unknown or not values:
        raise ManifestError(
            f"{where}: annotation {key}: {str(text)[:100]!r} is not a list of {', '.join(known)}"
        )
    return values
