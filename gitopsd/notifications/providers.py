"""Where notices go: a provider, as the daemon's configuration file or a GitSync declares
it, pure.

The kinds: a generic webhook (CloudEvents, HMAC-signed), a Slack-compatible incoming
webhook (Slack, Mattermost, Rocket.Chat), Alertmanager's v2 API, and the commit statuses
of GitHub, GitLab and Gitea or Forgejo. A provider's address and token are secrets (a Slack
webhook's URL is its credential): neither is ever part of a message, a log line or a label.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from gitopsd.errors import ConfigError
from gitopsd.notifications import Kind, Notice, Topic


class Type(StrEnum):
    WEBHOOK = "webhook"
    SLACK = "slack"
    ALERTMANAGER = "alertmanager"
    GITHUB = "github"
    GITLAB = "gitlab"
    GITEA = "gitea"

    @property
    def commit_status(self) -> bool:
        return self in (Type.GITHUB, Type.GITLAB, Type.GITEA)


TOKEN_NEEDED = (Type.WEBHOOK, Type.GITHUB, Type.GITLAB, Type.GITEA)
"""A webhook's calls are signed with its token; a git host's API is asked with it."""
NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
MAX_PROVIDERS = 8
"""Providers a GitSync may declare."""


@dataclass(frozen=True)
class Provider:
    """One receiver of a source's notices."""

    name: str
    """Its `provider` label on gitopsd_notifications_total."""
    type: Type
    address: str = field(repr=False)
    token: str = field(default="", repr=False)
    topics: frozenset[Topic] = frozenset()
    """What it hears of (`events`): by default all its kind can show."""
    sources: tuple[str, ...] = ()
    """The daemon's sources it hears of (names; `*` ends a prefix); none: every source."""
    tenant: str = ""
    """The namespace of the GitSync that declared it; "" for the daemon's own."""

    def hears(self, notice: Notice) -> bool:
        if notice.kind.topic not in self.topics:
            return False
        # a start is a pending commit status, and a routine sync its end: no news to a chat
        if (notice.kind == Kind.SYNC_STARTED or notice.routine) and not self.type.commit_status:
            return False
        source = notice.source
        return not self.sources or any(_matches(pattern, source) for pattern in self.sources)


def default_topics(kind: Type) -> frozenset[Topic]:
    """A commit status tells of syncs only; every other kind, of everything."""
    if kind.commit_status:
        return frozenset((Topic.SYNC, Topic.FAILURE))
    return frozenset(Topic)


def provider_of(entry: Mapping[str, Any], address: str, token: str, where: str) -> Provider:
    """A provider from its declaration (`entry`: name, type, events, sources) and its
    secrets, read apart (a file's, a Secret's); errors name `where` and the key, never a
    secret."""
    kind = _type(entry.get("type"), where)
    name = str(entry.get("name") or kind)
    if not NAME.match(name):
        raise ConfigError(f"{where}: name: {name!r} is not a lowercase DNS label")
    check_address(address, kind, where)
    if kind in TOKEN_NEEDED and not token:
        why = "signs its calls" if kind == Type.WEBHOOK else "is what the API is asked with"
        raise ConfigError(f"{where}: a {kind} provider needs a token (it {why})")
    return Provider(
        name=name,
        type=kind,
        address=address.rstrip("/"),
        token=token,
        topics=_topics(entry.get("events"), kind, where),
        sources=_strings(entry.get("sources"), "sources", where),
    )


def check_address(address: str, kind: Type, where: str) -> None:
    """An http(s) URL with a host; a git host's names its repository."""
    parts = urlsplit(address)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}: address: not an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise ConfigError(f"{where}: address: credentials belong in the token, not the URL")
    if kind.commit_status and len([p for p in parts.path.split("/") if p]) < 2:
        raise ConfigError(
            f"{where}: address: a {kind} provider's address is its repository's URL "
            "(https://HOST/OWNER/REPOSITORY)"
        )


def unique(providers: Iterable[Provider], where: str) -> tuple[Provider, ...]:
    found: dict[str, Provider] = {}
    for provider in providers:
        if provider.name in found:
            raise ConfigError(f"{where}: two providers are named {provider.name}")
        found[provider.name] = provider
    return tuple(found.values())


def _type(value: object, where: str) -> Type:
    try:
        return Type(str(value))
    except ValueError:
        known = ", ".join(Type)
        raise ConfigError(f"{where}: type: {value!r} is none of {known}") from None


def _topics(value: object, kind: Type, where: str) -> frozenset[Topic]:
    if value is None:
        return default_topics(kind)
    topics = set()
    for entry in _strings(value, "events", where):
        try:
            topics.add(Topic(entry))
        except ValueError:
            known = ", ".join(Topic)
            raise ConfigError(f"{where}: events: {entry!r} is none of {known}") from None
    return frozenset(topics)


def _strings(value: object, key: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: {key}: a list of strings is expected")
    return tuple(value)


def _matches(pattern: str, source: str) -> bool:
    return source.startswith(pattern[:-1]) if pattern.endswith("*") else source == pattern
