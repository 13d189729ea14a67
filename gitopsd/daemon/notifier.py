"""Notices sent to their providers on threads of their own, so that sending never blocks
or slows a sync: a worker only queues (`Notifier.tell`), the senders deliver from the
outbox (gitopsd.notifications.outbox: coalesced, bounded, paced, retried) and count each
message's outcome in gitopsd_notifications_total. A message not due yet (a retry's backoff,
a provider's pace) is woken by the daemon's clock.

A GitSync's providers are its tenant's: their addresses are fenced as its fetches are (no
loopback, link-local or cluster address) unless the daemon allows insecure GitSyncs. The
daemon's own providers are the administrator's, and reach what they name. A provider's
address and token appear in no log line: a Slack webhook's URL is its credential.
"""

from __future__ import annotations

import http.client
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from gitopsd.config import Network
from gitopsd.daemon.clock import Timers
from gitopsd.metrics import Recorder
from gitopsd.notifications import Notice, payloads
from gitopsd.notifications.alerts import Firing
from gitopsd.notifications.outbox import Message, Outbox, Outcome, outcome_of, provider_id
from gitopsd.notifications.providers import Provider
from gitopsd.source.network import Connector, Fenced, deadline

log = logging.getLogger("gitopsd.notifications")
SEND_SECONDS = 10.0
"""One send, connect to answer: a receiver that hangs holds a sender no longer."""
SENDERS = 2
"""Threads that send: one receiver that hangs leaves the other to the rest."""
RETRIED = frozenset({408, 425, 429})
"""Answers (beside 5xx) that a later try may cure."""


@dataclass(frozen=True)
class Settings:
    """The administrator's say (the configuration's `notifications` block)."""

    providers: tuple[Provider, ...] = ()
    page: str = ""
    """The status page's URL: commit statuses and messages link to a source's page."""
    attempts: int = 5
    resend_seconds: float = 60.0
    """How often a firing Alertmanager alert is sent again, until its cure."""
    fence_tenants: bool = True
    """A GitSync's providers cannot reach loopback or the cluster's networks."""
    network: Network = field(default_factory=Network)


class Notifier:
    def __init__(self, settings: Settings, recorder: Recorder, timers: Timers) -> None:
        self.settings = settings
        self.recorder = recorder
        self.timers = timers
        self.outbox = Outbox(attempts=settings.attempts)
        self.changed = threading.Condition()
        self.stopping = False
        self._declared: dict[str, tuple[Provider, ...]] = {}
        self.firing = Firing()
        self.senders = [
            threading.Thread(target=self._send_all, name=f"notify-{n}", daemon=True)
            for n in range(SENDERS)
        ]

    def start(self) -> None:
        for sender in self.senders:
            sender.start()
        resend = self.settings.resend_seconds
        self.timers.every("resend", self._resend, resend, jitter=resend * 0.1)

    def stop(self) -> None:
        """What waits is not sent (a restart tells the next outcome anew)."""
        with self.changed:
            self.stopping = True
            self.changed.notify_all()

    def teller(self, source: str, writing: Callable[[], bool]) -> Callable[[Notice], None]:
        """What source `source`'s reporter tells its notices to: the daemon's providers that
        hear of it, and those it declared itself (a GitSync's, as they are now); `writing`:
        whether this replica writes for it (its alerts are sent again only then)."""

        def tell(notice: Notice) -> None:
            self.tell((*self.settings.providers, *self.declared(source)), notice, writing)

        return tell

    def declared(self, source: str) -> tuple[Provider, ...]:
        with self.changed:
            return self._declared.get(source, ())

    def declare(self, source: str, providers: tuple[Provider, ...]) -> None:
        """A GitSync's providers, as its spec and Secrets say now: what waits for those it
        no longer declares is dropped."""
        with self.changed:
            before = self._declared.pop(source, ())
            if providers:
                self._declared[source] = providers
            gone = {provider_id(p) for p in before} - {provider_id(p) for p in providers}
            self.firing.forget(gone)
            for message in self.outbox.forget(gone):
                self._count(message, Outcome.DROPPED)

    def retire(self, source: str) -> None:
        """A source that stopped (its GitSync deleted or changed, or served elsewhere): its
        providers are dropped, and its alerts no longer sent again (a successor that still
        fails fires them anew)."""
        self.declare(source, ())
        with self.changed:
            self.firing.forget(source=source)

    def tell(
        self,
        providers: Iterable[Provider],
        notice: Notice,
        writing: Callable[[], bool] = lambda: True,
    ) -> None:
        """Queues `notice` for each provider that hears of it; never waits on a receiver."""
        hearing = [p for p in providers if p.hears(notice) and payloads.shows(p, notice)]
        if not hearing:
            return
        with self.changed:
            for provider in hearing:
                self.firing.told(provider, notice, writing)
                self._put(provider, notice)
            self.changed.notify()

    def _resend(self) -> None:
        """Firing alerts, sent again (a clock job: it only queues)."""
        with self.changed:
            for provider, notice in self.firing.again():
                self._put(provider, notice)
            self.changed.notify()

    def _put(self, provider: Provider, notice: Notice) -> None:
        for gone in self.outbox.put(provider, notice, time.monotonic()):
            self._count(gone, outcome_of(gone, notice))

    def _send_all(self) -> None:
        while (message := self._next()) is not None:
            retry, why = self._send(message)
            with self.changed:
                if not why:
                    self.outbox.sent(message)
                    self._count(message, Outcome.SENT)
                elif self.outbox.failed(message, time.monotonic(), retry):
                    self._warn(message, why, "tried again after a backoff")
                else:
                    self._warn(message, why, "given up")
                    self._count(message, Outcome.FAILED)
                self.changed.notify_all()

    def _next(self) -> Message | None:
        """The next message due, waiting for one; None once stopping."""
        with self.changed:
            while not self.stopping:
                now = time.monotonic()
                message = self.outbox.take(now)
                if message is not None:
                    return message
                wait = self.outbox.wait(now)
                if wait is not None:
                    self.timers.later("wake", self._wake, wait)
                self.changed.wait()
        return None

    def _wake(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def _send(self, message: Message) -> tuple[bool, str]:
        """Sends it: (whether a later try may succeed, why it failed or "")."""
        request = payloads.request_for(message.provider, message.notice, self.settings.page)
        if request is None:
            return False, ""
        fenced = bool(message.provider.tenant) and self.settings.fence_tenants
        headers = {"User-Agent": "gitopsd", **request.headers}
        asked = urllib.request.Request(  # noqa: S310 - http(s) only: providers.check_address
            request.url, request.body, headers, method="POST"
        )
        try:
            with deadline(SEND_SECONDS) as running:
                connector = Connector(self.settings.network, fenced, running)
                opener = urllib.request.build_opener(*connector.handlers(), _NoRedirects())
                with opener.open(asked, timeout=SEND_SECONDS) as answer:
                    answer.read(64 * 1024)
        except urllib.error.HTTPError as error:
            return error.code >= 500 or error.code in RETRIED, f"HTTP {error.code}"
        except urllib.error.URLError as error:
            return _unreachable(error.reason)
        except (Fenced, OSError, ValueError, http.client.HTTPException) as error:
            return _unreachable(error)
        return False, ""

    def _warn(self, message: Message, why: str, then: str) -> None:
        provider = message.provider
        log.warning(
            "notification %s to provider %s (%s) failed: %s; %s",
            message.notice.kind,
            provider.name,
            provider.type,
            why,
            then,
            extra={"source": message.notice.source, "attempts": message.attempts},
        )

    def _count(self, message: Message, outcome: Outcome) -> None:
        self.recorder.notified(message.notice.source, message.provider.name, outcome)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A receiver's redirect is an answer, not a new address: followed, it would carry the
    token (a commit status's, an alert's bearer) to a host no one configured."""

    def redirect_request(self, *_: object) -> None:
        return None


def _unreachable(error: object) -> tuple[bool, str]:
    """Why a receiver was not reached, without its address (a URL may be a credential)."""
    if isinstance(error, Fenced):
        return False, "its address resolves to loopback, link-local or the cluster's networks"
    if isinstance(error, TimeoutError):
        return True, f"no answer within {SEND_SECONDS:g}s"
    if isinstance(error, OSError) and error.strerror:
        return True, error.strerror
    return True, type(error).__name__
