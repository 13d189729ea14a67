"""Which URLs and refs gitopsd lets git touch, and how URLs are shown.

The git host is treated as hostile (docs/ARCHITECTURE.md, Trust boundaries): the URL and ref pass an
allow-list before git runs, and every URL shown is stripped of its userinfo.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from gitopsd.config import SourceSpec
from gitopsd.errors import ConfigError

FLAG_ALLOWS_INSECURE = "--allow-insecure-source is given"
URL_USERINFO_ADVICE = "put the token in $GITOPSD_GIT_PASSWORD or --password-file, not in the URL"

_DEFAULT_PORTS = {"https": 443, "http": 80, "ssh": 22}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_TRANSPORT = re.compile(r"^[A-Za-z0-9+.-]+::")  # remote helpers: ext::, fd::, ...
_SCP = re.compile(r"^(?P<user>[^@/:\s]+)@(?P<host>[^@/:\s]+):(?P<path>.*)$", re.DOTALL)
_BAD_REF = re.compile(r"\.\.|@\{|//|[\x00-\x20\x7f~^:?*\[\\]|^[-/]|[/.]$|\.lock$")
# Userinfo with a password may hold '/' or '@' unencoded, so it runs to the last '@'.
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^\s@/]*:[^\s@]*@")
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#]*@")
# scp-like `user@host:` only where a word starts: at the start, after space, quote or bracket.
_SCP_USER = re.compile(r"(?<![^\s'\"(<\[=])[^\s/@:'\"]+@(?=[^\s/:@]+:)")


def mask_url(url: str) -> str:
    """Replaces the userinfo of every URL in `url` (also free text) with `***`."""
    masked = _URL_PASSWORD.sub(r"\1***@", url)
    masked = _URL_USERINFO.sub(r"\1***@", masked)
    return _SCP_USER.sub("***@", masked)


def check_url(spec: SourceSpec, allowed_by: str = FLAG_ALLOWS_INSECURE) -> None:
    """Raises ConfigError unless the URL and ref are ones gitopsd lets git touch;
    `allowed_by` is the setting that permits file:// and http:// (the CLI's flag)."""
    _check_text(spec.url, "source URL")
    _check_ref(spec.ref)
    scheme = url_scheme(spec.url)
    if scheme in ("file", "http") and not spec.allow_insecure:
        raise ConfigError(
            f"source URL {mask_url(spec.url)}: {scheme}:// is refused unless {allowed_by} "
            "(for local use and tests)"
        )
    if _URL_PASSWORD.search(spec.url) or _has_password(spec.url):
        raise ConfigError(f"source URL {mask_url(spec.url)}: {URL_USERINFO_ADVICE}")
    if scheme == "ssh" and spec.credentials.known_hosts_file is None:
        raise ConfigError(
            f"source URL {mask_url(spec.url)}: ssh needs a known_hosts file with the host's "
            "pinned key (no trust on first use)"
        )


def _check_text(value: str, what: str) -> None:
    """Git would read a leading '-' as an option; control characters split or hide text."""
    if not value or value.startswith("-") or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ConfigError(f"{what} {mask_url(value)!r} is refused: empty, option-like or control")


def _check_ref(ref: str) -> None:
    _check_text(ref, "ref")
    if ref != "HEAD" and _BAD_REF.search(ref):
        raise ConfigError(f"ref {ref!r} is refused: not a branch, tag or commit sha")


def url_scheme(url: str) -> str:
    """The transport git would use: https, ssh (also scp-like), http or file; else refused."""
    if _TRANSPORT.match(url):
        raise ConfigError(f"source URL {mask_url(url)}: remote-helper transports are refused")
    if scheme := _SCHEME.match(url):
        name = scheme.group(1).lower()
        if name not in ("https", "ssh", "http", "file"):
            raise ConfigError(f"source URL {mask_url(url)}: scheme {name}:// is refused")
        _check_authority(url, name)
        return name
    if scp := _SCP.match(url):
        _check_parts(url, scp.group("user"), scp.group("host"), scp.group("path"))
        return "ssh"
    raise ConfigError(f"source URL {mask_url(url)}: use https://, ssh:// or user@host:path")


def endpoint(url: str) -> tuple[str, str, int]:
    """The transport, host (lower-case; an IPv6 address without brackets) and port git
    connects to for a https, http or ssh URL (scp-like too)."""
    scheme = url_scheme(url)
    scp = None if _SCHEME.match(url) else _SCP.match(url)
    if scp:
        return scheme, scp.group("host").lower(), _DEFAULT_PORTS[scheme]
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(f"source URL {mask_url(url)}: its port is no port") from None
    return scheme, parts.hostname or "", port or _DEFAULT_PORTS[scheme]


def _check_authority(url: str, scheme: str) -> None:
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed IPv6 bracket: refuse rather than guess
        raise ConfigError(f"source URL {mask_url(url)}: cannot be parsed") from None
    if scheme != "file" and not parts.hostname:
        raise ConfigError(f"source URL {mask_url(url)}: no host")
    _check_parts(url, parts.username or "", parts.hostname or "", parts.path.lstrip("/"))


def _check_parts(url: str, user: str, host: str, path: str) -> None:
    """ssh would take `-oProxyCommand=...` as a user or host for an option (CVE-2017-1000117)."""
    if any(part.startswith("-") for part in (user, host, path)):
        raise ConfigError(f"source URL {mask_url(url)}: a user, host or path starts with '-'")


def _has_password(url: str) -> bool:
    return bool(_SCHEME.match(url)) and urlsplit(url).password is not None
