"""The daemon's own notification providers (`notifications:`), the administrator's: each a
provider of gitopsd.notifications.providers, its address and token given inline or, as
secrets are, in files (a Slack webhook's URL is its credential)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gitopsd.configfile.fields import mapping, positive, seconds, secret, string
from gitopsd.errors import ConfigError
from gitopsd.notifications.providers import Provider, provider_of, unique

KEYS = {"attempts", "resendInterval", "providers"}
PROVIDER_KEYS = {"name", "type", "address", "addressFile", "tokenFile", "events", "sources"}


@dataclass(frozen=True)
class NotificationSettings:
    providers: tuple[Provider, ...] = ()
    """The daemon's providers: they hear of every source, or of those they name."""
    attempts: int = 5
    """Tries of each message before it is counted failed (with a backoff between)."""
    resend_seconds: float = 60.0
    """How often a firing Alertmanager alert is sent again until its cure: Alertmanager
    resolves one it hears nothing of for its resolve_timeout (5 m by default)."""


def notifications(value: Any, where: str) -> NotificationSettings:
    raw = mapping(value or {}, where, KEYS)
    listed = raw.get("providers") or []
    if not isinstance(listed, list):
        raise ConfigError(f"{where}: providers: a list of providers is expected")
    providers = [_provider(entry, f"{where}: providers[{n}]") for n, entry in enumerate(listed)]
    return NotificationSettings(
        providers=unique(providers, where),
        attempts=positive(raw, "attempts", where, NotificationSettings.attempts),
        resend_seconds=seconds(raw, "resendInterval", where, NotificationSettings.resend_seconds),
    )


def _provider(entry: Any, where: str) -> Provider:
    raw = mapping(entry, where, PROVIDER_KEYS)
    if ("address" in raw) == ("addressFile" in raw):
        raise ConfigError(f"{where}: give address or addressFile (one of them)")
    address = raw.get("address")
    if address is None:
        address = (secret(raw, "addressFile", where) or b"").decode(errors="replace")
    token = (secret(raw, "tokenFile", where) or b"").decode(errors="replace")
    return provider_of(raw, string({"address": address}, "address", where, None), token, where)
