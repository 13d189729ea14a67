"""One request per object, sent concurrently: the fan-out that the diff's dry-run and the
sync's dry-run, apply and replace share, and the dry-run itself.

Each object's request is attempted once (the API client retries what it may); its failure
says the object and its file (`gitopsd.failures`). Once writes are fenced, or a request
finds the API server gone, the objects still queued are not sent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from gitopsd.changes import Target
from gitopsd.cluster import Cluster, run_concurrently
from gitopsd.config import SyncSettings
from gitopsd.errors import ClusterReason
from gitopsd.failures import Failure, attempted
from gitopsd.objects import Body, ObjectKey


class Sent(NamedTuple):
    """What a fan-out's requests came to: the answers, and every failure."""

    answers: dict[ObjectKey, Body]
    failures: list[Failure]


def send_each(
    cluster: Cluster, targets: Iterable[Target], call: Callable[[Target], Body], concurrency: int
) -> Sent:
    """`call` for every target, at most `concurrency` at once. Once a request finds the API
    server gone (no answer, or none in time), the targets still queued are not sent: each
    would wait out its own timeout against a hung server."""
    chosen = list(targets)
    gone = threading.Event()
    answers = run_concurrently(chosen, lambda t: _send(cluster, t, call, gone), concurrency)
    answered = {t.key: a for t, a in zip(chosen, answers, strict=True) if isinstance(a, dict)}
    return Sent(answered, [answer for answer in answers if isinstance(answer, Failure)])


def _send(
    cluster: Cluster, target: Target, call: Callable[[Target], Body], gone: threading.Event
) -> Body | Failure:
    """Once the cluster is fenced (stopping on a signal, or the leader lease lost), or
    `gone`, the runner still takes each queued target, but sends no request for it."""
    if not cluster.writable():
        not_sent = f"{target.key} ({target.origin}): not sent: writes are fenced"
        return Failure(target.key, not_sent, ClusterReason.FENCED)
    if gone.is_set():
        why = "an earlier request of this sync could not reach the API server"
        not_sent = f"{target.key} ({target.origin}): not sent: {why}"
        return Failure(target.key, not_sent, ClusterReason.UNREACHABLE)
    answer = attempted(target, call)
    if isinstance(answer, Failure) and answer.reason == ClusterReason.UNREACHABLE:
        gone.set()
    return answer


def dry_run(
    cluster: Cluster, settings: SyncSettings, targets: Iterable[Target], keep: bool = True
) -> Sent:
    """Server-side dry-run of every target. Its answers are kept projected, as live objects
    are (drift on a projection is drift on the whole); without `keep`, each is only checked
    and answers {}."""
    force = settings.force_conflicts

    def send(target: Target) -> Body:
        answer = cluster.apply(
            target.served, target.body, dry_run=True, force=force, projected=keep
        )
        return answer if keep else {}

    return send_each(cluster, targets, send, settings.concurrency)


def ready(
    target: Target, targets: Mapping[ObjectKey, Target], live: Mapping[ObjectKey, Body | None]
) -> bool:
    """Can be dry-run now: its kind is served and its namespace exists (not one this sync
    creates, which a dry-run would not find)."""
    key = target.key
    namespace_key = ObjectKey("", "Namespace", "", key.namespace)
    new_namespace = key.namespace and namespace_key in targets and live.get(namespace_key) is None
    return not new_namespace and target.resource is not None
