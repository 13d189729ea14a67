"""What waits to be sent, pure (its time is given): coalesced, bounded, paced and retried.

Each provider has its own queue, keyed by source and topic: a newer notice of a key replaces
the one still waiting (one message per outcome: a sync that failed and then succeeded
before the receiver was reached is told as its success), or is merged with it (drift of
two objects, one after the other: one message names both). A queue holds at most
`per_provider` messages and all queues `total`: past either, the oldest waiting goes
(dropped). Each provider is sent at most `rate` messages a second after a burst of `burst`,
so a source that flaps cannot flood a chat, and the providers take turns, so one whose
receiver is slow or down delays no other's by more than a send. A message that failed is
tried again after a backoff, `attempts` times in all; each provider has one message of a
source in flight at a time, so its receiver hears of the source in order (drift detected
before it is healed, a failure before its cure).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from enum import StrEnum

from gitopsd.backoff import jittered
from gitopsd.notifications import Notice, Topic, merged
from gitopsd.notifications.providers import Provider

Key = tuple[str, str, str]
"""(provider's id, source, channel): what a newer message replaces."""


class Outcome(StrEnum):
    """The outcomes of gitopsd_notifications_total."""

    SENT = "sent"
    FAILED = "failed"
    """Given up on: refused by the receiver, fenced, or still failing after every attempt."""
    DROPPED = "dropped"
    """Pushed out of a full queue, its receiver too slow or down."""
    SUPERSEDED = "superseded"
    """Replaced, unsent, by a newer notice of its source and topic."""


@dataclass
class Message:
    provider: Provider
    notice: Notice
    key: Key
    attempts: int = 0
    due: float = 0.0
    """When it may be sent (monotonic seconds)."""


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class Outbox:
    per_provider: int = 100
    total: int = 10_000
    rate: float = 1.0
    burst: int = 10
    attempts: int = 5
    first_retry_seconds: float = 1.0
    max_retry_seconds: float = 60.0
    _queues: dict[str, OrderedDict[Key, Message]] = field(default_factory=dict)
    _turns: deque[str] = field(default_factory=deque)
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _flying: set[tuple[str, str]] = field(default_factory=set)
    """(provider's id, source) of the messages in flight."""
    _count: int = 0

    def put(self, provider: Provider, notice: Notice, now: float) -> list[Message]:
        """Queues `notice` for `provider`; returns the messages it pushed out or replaced
        (their outcome is `outcome_of` them)."""
        key = (provider_id(provider), notice.source, _channel(notice))
        queue = self._queue(key[0])
        gone = [queue.pop(key)] if key in queue else []
        self._count -= len(gone)
        told = merged(gone[0].notice, notice) if gone else notice
        queue[key] = Message(provider, told, key, due=now)
        self._count += 1
        while len(queue) > self.per_provider:
            gone.append(self._pop_oldest(queue))
        while self._count > self.total:
            gone.append(self._pop_oldest(max(self._queues.values(), key=len)))
        return gone

    def take(self, now: float) -> Message | None:
        """The next message due, the providers in turn, each within its pace; it is in
        flight until `sent` or `failed` is told of it."""
        for _ in range(len(self._turns)):
            ident = self._turns[0]
            self._turns.rotate(-1)
            message = self._due(ident, now)
            if message is not None:
                del self._queues[ident][message.key]
                self._count -= 1
                self._flying.add(message.key[:2])
                self._buckets[ident].tokens -= 1
                return message
        return None

    def wait(self, now: float) -> float | None:
        """Seconds until a message may be due (a retry's backoff, a pace's next token);
        None when nothing waits."""
        waits = [self._wait(ident, now) for ident in self._turns]
        return min((wait for wait in waits if wait is not None), default=None)

    def sent(self, message: Message) -> None:
        self._flying.discard(message.key[:2])

    def failed(self, message: Message, now: float, retry: bool) -> bool:
        """A send that failed: queued again after its backoff if `retry` and attempts are
        left and no newer message replaced it; says whether it was."""
        self._flying.discard(message.key[:2])
        message.attempts += 1
        queue = self._queue(message.key[0])
        if not retry or message.attempts >= self.attempts or message.key in queue:
            return False
        delay = jittered(self.first_retry_seconds, self.max_retry_seconds, message.attempts - 1)
        message.due = now + delay
        queue[message.key] = message
        queue.move_to_end(message.key, last=False)  # older than what came since
        self._count += 1
        return True

    def forget(self, provider_ids: set[str]) -> list[Message]:
        """Drops the queues of providers no longer declared (a GitSync deleted)."""
        gone: list[Message] = []
        for ident in provider_ids & set(self._queues):
            gone += self._queues.pop(ident).values()
            self._buckets.pop(ident, None)
            self._turns.remove(ident)
        self._count -= len(gone)
        return gone

    def __len__(self) -> int:
        return self._count

    def _queue(self, ident: str) -> OrderedDict[Key, Message]:
        if ident not in self._queues:
            self._queues[ident] = OrderedDict()
            self._turns.append(ident)
            self._buckets[ident] = _Bucket(float(self.burst), 0.0)
        return self._queues[ident]

    def _pop_oldest(self, queue: OrderedDict[Key, Message]) -> Message:
        self._count -= 1
        return queue.popitem(last=False)[1]

    def _due(self, ident: str, now: float) -> Message | None:
        if self._refill(ident, now) < 1:
            return None
        retrying: set[str] = set()
        for message in self._queues[ident].values():
            source = message.key[1]
            if message.key[:2] in self._flying or source in retrying:
                continue  # after its source's message in flight, or its retry: in order
            if message.due > now:
                retrying.add(source)
                continue
            return message
        return None

    def _wait(self, ident: str, now: float) -> float | None:
        """None while its only messages wait for their key's message in flight: its end
        wakes the senders."""
        waiting = [m.due for m in self._queues[ident].values() if m.key[:2] not in self._flying]
        if not waiting:
            return None
        pace = max(1 - self._refill(ident, now), 0.0) / self.rate
        return max(pace, min(waiting) - now, 0.0)

    def _refill(self, ident: str, now: float) -> float:
        bucket = self._buckets[ident]
        bucket.tokens = min(bucket.tokens + (now - bucket.at) * self.rate, float(self.burst))
        bucket.at = now
        return bucket.tokens


def provider_id(provider: Provider) -> str:
    """Whose provider it is and its name: a GitSync's are apart from the daemon's."""
    return f"{provider.tenant}/{provider.name}"


def outcome_of(replaced: Message, newer: Notice | None) -> Outcome:
    """A message `put` pushed out: superseded by `newer` of its key, else dropped."""
    if newer is not None and replaced.key[1:] == (newer.source, _channel(newer)):
        return Outcome.SUPERSEDED
    return Outcome.DROPPED


def _channel(notice: Notice) -> str:
    """What a newer notice replaces or merges with: a sync's start and end (one commit
    status), a health's change, drift detected (merged), drift healed (merged)."""
    if notice.kind.topic in (Topic.SYNC, Topic.FAILURE):
        return "sync"
    return notice.kind if notice.kind.topic == Topic.DRIFT else notice.kind.topic
