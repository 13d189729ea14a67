"""The alerts firing at each Alertmanager, pure: an Alertmanager client must send a firing
alert again and again (as Prometheus does at each evaluation), or Alertmanager resolves it
once its resolve_timeout passes with no word (5 m by default), while the sync still fails.
Each alert is kept from its bad news until its cure, and sent again on the daemon's clock.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from gitopsd.notifications import Notice
from gitopsd.notifications.outbox import provider_id
from gitopsd.notifications.payloads import ALERTS
from gitopsd.notifications.providers import Provider, Type

Alert = tuple[str, str, str]
"""(provider's id, source, alert name)."""


@dataclass
class Firing:
    alerts: dict[Alert, tuple[Provider, Notice, Callable[[], bool]]] = field(default_factory=dict)

    def told(self, provider: Provider, notice: Notice, writing: Callable[[], bool]) -> None:
        """Bad news fires its alert (kept as first told: its startsAt stays), sent again
        while `writing` (this replica writes for the source: one that lost it would fire
        what the new writer cured); a cure ends it."""
        if provider.type != Type.ALERTMANAGER:
            return
        alert = (provider_id(provider), notice.source, ALERTS[notice.kind.topic])
        if not notice.kind.bad:
            self.alerts.pop(alert, None)
        elif alert not in self.alerts:
            self.alerts[alert] = (provider, notice, writing)

    def again(self) -> list[tuple[Provider, Notice]]:
        """What to send again now: the alerts of the sources this replica writes for."""
        return [(p, notice) for p, notice, writing in self.alerts.values() if writing()]

    def forget(self, provider_ids: Collection[str] = (), source: str = "") -> None:
        """Alerts of providers no longer declared, or of a source gone: no one cures them."""
        for alert in [a for a in self.alerts if a[0] in provider_ids or a[1] == source]:
            del self.alerts[alert]
