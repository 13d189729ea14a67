"""What waits to be sent, pure (its time is given): coalesced, bounded, paced and retried.

Each provider has its own queue, keyed by source and topic: a newer notice of a key replaces
the one still waiting (one message per outcome: a sync that failed and then succeeded
before the receiver was reached is told as its success), or is merged with it (drift of
two objects, one after the other: one message names both). A queue holds at most
`per_provider` messages and all queues `total_bytes`: past either, the oldest waiting goes
(dropped), of the tenant that holds most. Each provider is sent at most `rate` messages a
second after a burst of `burst`, so a source that flaps cannot flood a chat; the tenants
take turns (and within one, its providers), so a tenant whose receivers are slow or down
delays no other's by more than a send. A message that failed is tried again after a
backoff, `attempts` times in all; each provider has one message of a source in flight at a
time, so its receiver hears of the source in order (drift detected before it is healed, a
failure before its cure).
"""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
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
    total_bytes: int = 16 * 1024 * 1024
    """What all queues may hold together (each notice's `size`): past it, the oldest
    message of the tenant that holds most goes, so a tenant's flood drops its own."""
    rate: float = 1.0
    burst: int = 10
    attempts: int = 5
    first_retry_seconds: float = 1.0
    max_retry_seconds: float = 60.0
    _queues: dict[str, OrderedDict[Key, Message]] = field(default_factory=dict)
    _tenants: deque[str] = field(default_factory=deque)
    """The tenants in turn ("" the administrator's providers)..."""
    _turns: dict[str, deque[str]] = field(default_factory=dict)
    """...and each one's providers in turn: a tenant with many providers has one turn."""
    _held: Counter[str] = field(default_factory=Counter)
    """The bytes each tenant's waiting messages hold."""
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _flying: set[tuple[str, str]] = field(default_factory=set)
    """(provider's id, source) of the messages in flight."""

    def put(self, provider: Provider, notice: Notice, now: float) -> list[Message]:
        """Queues `notice` for `provider`; returns the messages it pushed out or replaced
        (their outcome is `outcome_of` them)."""
        key = (provider_id(provider), notice.source, _channel(notice))
        queue = self._queue(provider)
        gone = [self._pop(queue, key)] if key in queue else []
        told = merged(gone[0].notice, notice) if gone else notice
        self._push(queue, Message(provider, told, key, due=now))
        while len(queue) > self.per_provider:
            gone.append(self._pop(queue, next(iter(queue))))
        while sum(self._held.values()) > self.total_bytes:
            gone.append(self._pop_oldest_of(max(self._held, key=self._held.__getitem__)))
        return gone

    def take(self, now: float) -> Message | None:
        """The next message due, the tenants in turn and each one's providers in turn, each
        within its pace; it is in flight until `sent` or `failed` is told of it."""
        for _ in range(len(self._tenants)):
            turns = self._turns[self._tenants[0]]
            self._tenants.rotate(-1)
            for _ in range(len(turns)):
                ident = turns[0]
                turns.rotate(-1)
                message = self._due(ident, now)
                if message is not None:
                    self._pop(self._queues[ident], message.key)
                    self._flying.add(message.key[:2])
                    self._buckets[ident].tokens -= 1
                    return message
        return None

    def wait(self, now: float) -> float | None:
        """Seconds until a message may be due (a retry's backoff, a pace's next token);
        None when nothing waits."""
        waits = [self._wait(ident, now) for ident in self._queues]
        return min((wait for wait in waits if wait is not None), default=None)

    def sent(self, message: Message) -> None:
        self._flying.discard(message.key[:2])

    def failed(self, message: Message, now: float, retry: bool) -> bool:
        """A send that failed: queued again after its backoff if `retry` and attempts are
        left and no newer message replaced it; says whether it was."""
        self._flying.discard(message.key[:2])
        message.attempts += 1
        queue = self._queues.get(message.key[0])
        if queue is None or not retry or message.attempts >= self.attempts or message.key in queue:
            return False
        delay = jittered(self.first_retry_seconds, self.max_retry_seconds, message.attempts - 1)
        message.due = now + delay
        self._push(queue, message)
        queue.move_to_end(message.key, last=False)  # older than what came since
        return True

    def forget(self, provider_ids: set[str]) -> list[Message]:
        """Drops the queues of providers no longer declared (a GitSync deleted)."""
        gone: list[Message] = []
        for ident in provider_ids & set(self._queues):
            queue = self._queues[ident]
            gone += [self._pop(queue, key) for key in list(queue)]
            tenant = ident.partition("/")[0]
            del self._queues[ident], self._buckets[ident]
            self._turns[tenant].remove(ident)
            if not self._turns[tenant]:
                del self._turns[tenant]
                self._tenants.remove(tenant)
        return gone

    def __len__(self) -> int:
        return sum(len(queue) for queue in self._queues.values())

    def _queue(self, provider: Provider) -> OrderedDict[Key, Message]:
        ident = provider_id(provider)
        if ident not in self._queues:
            self._queues[ident] = OrderedDict()
            self._buckets[ident] = _Bucket(float(self.burst), 0.0)
            if provider.tenant not in self._turns:
                self._turns[provider.tenant] = deque()
                self._tenants.append(provider.tenant)
            self._turns[provider.tenant].append(ident)
        return self._queues[ident]

    def _push(self, queue: OrderedDict[Key, Message], message: Message) -> None:
        queue[message.key] = message
        self._held[message.provider.tenant] += message.notice.size

    def _pop(self, queue: OrderedDict[Key, Message], key: Key) -> Message:
        message = queue.pop(key)
        self._held[message.provider.tenant] -= message.notice.size
        if not self._held[message.provider.tenant]:
            del self._held[message.provider.tenant]
        return message

    def _pop_oldest_of(self, tenant: str) -> Message:
        fullest = max(self._turns[tenant], key=lambda ident: len(self._queues[ident]))
        queue = self._queues[fullest]
        return self._pop(queue, next(iter(queue)))

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
