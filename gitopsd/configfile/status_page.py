"""The read-only status page (`statusPage:`): where it listens, the bearer token it asks
for off loopback, how often it refreshes itself, and where people reach it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gitopsd.configfile.fields import address_of, host_port, mapping, on_loopback, path, seconds
from gitopsd.errors import ConfigError

KEYS = {"listen", "tokenFile", "refresh", "url"}


@dataclass(frozen=True)
class StatusPage:
    listen: str | None = None
    """host:port of the page; None: no page is served."""
    token_file: Path | None = None
    """A file holding the bearer token every request must carry (a mounted Secret, read at
    each request, so a rotated token takes effect at once); required off loopback."""
    refresh_seconds: float = 10.0
    """How often the page reloads itself (its meta refresh)."""
    url: str = ""
    """Where people reach the page (https://gitopsd.example.com), without a trailing slash:
    what links to it from elsewhere (commit statuses) are made of; "" when not said."""

    @property
    def address(self) -> tuple[str, int] | None:
        """Where the page listens; None: no page."""
        return address_of(self.listen) if self.listen else None


def status_page(value: Any, where: str) -> StatusPage:
    raw = mapping(value or {}, where, KEYS)
    listen = host_port(raw, "listen", where, None) if "listen" in raw else None
    token_file = path(raw, "tokenFile", where)
    if listen is not None and token_file is None and not on_loopback(listen):
        raise ConfigError(
            f"{where}: tokenFile: required when listen ({listen!r}) is not on loopback: "
            "the page shows every source's drift, so off loopback it asks for a bearer token"
        )
    return StatusPage(
        listen=listen,
        token_file=token_file,
        refresh_seconds=seconds(raw, "refresh", where, StatusPage.refresh_seconds),
        url=_base_url(raw, where),
    )


def _base_url(raw: dict[str, Any], where: str) -> str:
    url = raw.get("url", "")
    if url == "":
        return ""
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{where}: url: expected an http:// or https:// URL, got {url!r}")
    if parts.query or parts.fragment:
        raise ConfigError(f"{where}: url: expected a base URL, without ?query or #fragment")
    return str(url).rstrip("/")
