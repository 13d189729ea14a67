"""A sync's hooks, run phase by phase (`gitopsd.synchooks` says which objects, and how).

In a phase, hooks run one after another, lower weight first (a sync hook that names a sync
wave runs in that wave instead, once the wave's objects are applied: `run_wave`): an earlier
run of the hook is deleted first when its policy says so (the default), the hook is applied,
and the sync waits until it is healthy (a Job complete, a Pod succeeded, anything else
Current) or Failed, or the health timeout passes. Its delete policy then cleans it up. The
first hook that does not succeed fails the phase: the sync stops there, and runs its
sync-fail hooks.

An object is deleted as a hook only when it carries this source's hook label, under the
uid read a moment before (a cleanup only the uid of the run it cleans up, so an object made
anew under the hook's name is never taken for it); an object of that name that is not this
source's hook stops the sync, as an unowned member would. The wait judges the run's uid
only: another object under its name fails the hook. A hook is applied as members are
(`apply.write`): created only while its name is free, or written over the very run read; a
hook under a name the server generates is created once, and found by its run's label when
the create's answer is lost.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gitopsd import inventory
from gitopsd.apply import write
from gitopsd.changes import Action, Outcome, Target
from gitopsd.cluster import Cluster
from gitopsd.config import SyncSettings
from gitopsd.errors import ApplyError, ClusterError, ClusterReason, GitopsdError
from gitopsd.health import Health, Status
from gitopsd.objects import Body, ObjectKey
from gitopsd.plan import hook_waves
from gitopsd.synchooks import HOOK_RUN_LABEL, DeletePolicy, Phase, SyncHook
from gitopsd.waiting import POLL_SECONDS, HealthWait


@dataclass(frozen=True)
class HookRunner:
    cluster: Cluster
    settings: SyncSettings
    applyset: inventory.ApplySet
    hooks: Sequence[Target]
    on_outcome: Callable[[Outcome], None]

    def has(self, phase: Phase) -> bool:
        return bool(self._due(phase))

    def run(self, phase: Phase) -> None:
        """Runs the phase's hooks in order (not the sync hooks that run within a wave:
        `run_wave`); raises ApplyError at the first that fails."""
        for target in self._due(phase):
            self._run(target, phase)

    @property
    def in_waves(self) -> dict[ObjectKey, int]:
        """The sync hooks that run within the waves, each with its wave (`run_wave`)."""
        return hook_waves(self.hooks)

    def run_wave(self, keys: Sequence[ObjectKey]) -> None:
        """Runs a wave's sync hooks (`plan.Wave.hooks`) in their order, once its objects are
        applied; raises ApplyError at the first that fails."""
        by_key = {target.key: target for target in self.hooks}
        for key in keys:
            self._run(by_key[key], Phase.SYNC)

    def run_failed(self) -> None:
        """The sync-fail hooks, once a sync failed: a failure of theirs is heard as their
        outcome, and the sync's own error is the one that counts."""
        with contextlib.suppress(GitopsdError):
            self.run(Phase.SYNC_FAIL)

    def _due(self, phase: Phase) -> list[Target]:
        due = [t for t in self.hooks if t.hook is not None and t.hook.runs_apart(phase)]
        return sorted(due, key=lambda t: (t.hook.weight if t.hook else 0, str(t.key)))

    def _run(self, target: Target, phase: Phase) -> None:
        assert target.hook is not None  # noqa: S101 - run() selects hooks only
        policies, what = target.hook.delete_policies, _what(target.hook, phase)
        if self.settings.dry_run:
            self.on_outcome(Outcome(target.key, Action.HOOK, f"{what}, dry run", target.version))
            return
        target, run = self._start(target, phase)
        verdict = self._verdict(target, run)
        succeeded = verdict.status == Status.CURRENT
        cleanup = DeletePolicy.HOOK_SUCCEEDED if succeeded else DeletePolicy.HOOK_FAILED
        if cleanup in policies:
            self._clean_up(target, run)
        self.on_outcome(Outcome(target.key, Action.HOOK, f"{what}: {verdict}", target.version))
        if not succeeded:
            raise ApplyError(
                [
                    f"{target.key}: {what} did not succeed: {verdict} (waited up to "
                    f"{self.settings.health_timeout_seconds:g} s)"
                ],
                ClusterReason.UNHEALTHY,
            )

    def _start(self, target: Target, phase: Phase) -> tuple[Target, str]:
        """Applies the hook (its earlier run deleted first, if its policy says so), or
        creates it afresh under a name the server generates: the hook as it runs, and the
        uid of its run."""
        if "name" not in target.body["metadata"]:
            created = self._create(target)
            return _named(target, created["metadata"]["name"]), created["metadata"]["uid"]
        earlier = self._earlier_run(target, phase)
        assert target.hook is not None  # noqa: S101 - run() selects hooks only
        if earlier is not None and DeletePolicy.BEFORE_HOOK_CREATION in target.hook.delete_policies:
            self._delete(target, earlier)
            self._wait_gone(target, earlier)
            earlier = None
        # under the precondition every write carries: created only if still absent, else
        # written only over the run just read
        ran = write(
            self.cluster, target.served, target.body, earlier, True, subject=str(target.key)
        )
        return target, ran["metadata"]["uid"]

    def _create(self, target: Target) -> Body:
        """Creates a run of the hook under a name the server generates, labelled as that run:
        when the answer is lost after the server may have created it (a 5xx, a cut), the run
        is found by its label, and never created twice (the error stands if none is found)."""
        run = secrets.token_hex(8)
        metadata = target.body["metadata"]
        labels = {**(metadata.get("labels") or {}), HOOK_RUN_LABEL: run}
        body = {**target.body, "metadata": {**metadata, "labels": labels}}
        try:
            return self.cluster.create(target.served, body)
        except ClusterError as error:
            if getattr(error, "status", 500) < 500:
                raise  # refused: nothing was created
            selector = f"{HOOK_RUN_LABEL}={run}"
            found = self.cluster.list_objects(target.served, target.key.namespace, selector)
            if len(found) != 1:
                raise
            return found[0]

    def _earlier_run(self, target: Target, phase: Phase) -> Body | None:
        """The object the hook's name holds now, if it is an earlier run of this hook."""
        live = self._read(target)
        if live is not None and not self.applyset.owns_hook(live):
            raise ApplyError(
                [
                    f"{target.key}: is a {phase} hook of source {self.settings.name}, but an "
                    "object of that name exists that is not; nothing more was applied"
                ],
                ClusterReason.CONFLICT,
            )
        return live

    def _read(self, target: Target) -> Body | None:
        key = target.key
        return self.cluster.get(target.served, key.namespace, key.name)

    def _clean_up(self, target: Target, run: str) -> None:
        """Deletes the hook's run, if its name still holds it: the uid it was created with,
        and this source's hook label (an object made anew under its name is another's)."""
        live = self._read(target)
        if live is not None and live["metadata"]["uid"] == run and self.applyset.owns_hook(live):
            self._delete(target, live)

    def _delete(self, target: Target, live: Body) -> None:
        key, metadata = target.key, live["metadata"]
        self.cluster.delete(target.served, key.namespace, key.name, metadata["uid"])

    def _wait_gone(self, target: Target, earlier: Body) -> None:
        """Until the earlier run is gone (its pods go first: deletion is in the background,
        its finalizers may hold it a moment)."""
        deadline = time.monotonic() + self.settings.health_timeout_seconds
        uid = earlier["metadata"]["uid"]
        while (live := self._read(target)) is not None and live["metadata"]["uid"] == uid:
            if time.monotonic() > deadline or not self.cluster.writable():
                raise ApplyError(
                    [f"{target.key}: the hook's earlier run was not gone in time"],
                    ClusterReason.TIMEOUT,
                )
            time.sleep(POLL_SECONDS / 5)

    def _verdict(self, target: Target, run: str) -> Health:
        """Its run's health: an object that took its name meanwhile is no verdict of it."""
        wait = HealthWait(self.cluster, concurrency=1, runs={target.key: run})
        return wait.until_healthy([target], self.settings.health_timeout_seconds)[target.key]


def _what(hook: SyncHook, phase: Phase) -> str:
    """What a hook's outcome and failure call it: "pre-sync hook", "sync hook in wave 1"."""
    wave = hook.sync_wave if phase == Phase.SYNC else None
    return f"{phase} hook" if wave is None else f"{phase} hook in wave {wave}"


def _named(target: Target, name: str) -> Target:
    """The hook `target`, created from its generateName, as the object `name` it became."""
    body = target.body
    body["metadata"] = {**body["metadata"], "name": name}
    key = ObjectKey(target.key.group, target.key.kind, target.key.namespace, name)
    return Target(key, body, target.origin, target.resource, target.read_from, target.hook)
