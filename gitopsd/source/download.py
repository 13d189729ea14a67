"""Bounded HTTP(S) requests to the one host a chart source names, with its credentials.

Every request goes to the source's own scheme, host and port; a redirect elsewhere is
refused, except for content checked against a digest afterwards (a registry's blob, which
hosted registries serve from a storage host), and then only to https and never with the
credentials. Each response is read up to the revision's byte limit, within the fetch
deadline, from an address outside the fence (`network`). Credentials are sent
as HTTP basic auth, or traded for a bearer token where the server asks for one (the
registry token flow), and never appear in an error.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from email.message import Message
from typing import Any
from urllib.parse import urlencode, urlsplit

from gitopsd.config import Network, SourceSpec, how_to_raise
from gitopsd.errors import SourceError, SourceReason
from gitopsd.quantities import format_size
from gitopsd.source.credentials import read_password
from gitopsd.source.network import Connector, Fenced, deadline, fence_error
from gitopsd.source.policy import mask_url

_REDIRECT_REFUSED = 399
"""A status no server sends: the redirect handler's refusal, told apart from a server's."""
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
_MAX_TOKEN_BYTES = 64 * 1024


@dataclass(frozen=True)
class Response:
    body: bytes
    headers: Message


class Downloads:
    """Requests to the host of `url` for the source `spec`, bounded, with its credentials."""

    def __init__(self, spec: SourceSpec, url: str) -> None:
        self.spec, self.origin = spec, origin(url)
        password = read_password(spec.credentials)
        basic = f"{spec.credentials.username}:{password}".encode()
        self.basic = "Basic " + base64.b64encode(basic).decode() if password else None
        self.authorization = self.basic
        self.bearer_tried = False

    def get(
        self,
        url: str,
        what: str,
        accept: str = "",
        checked_later: bool = False,
        bound: str = "max_revision_bytes",
    ) -> Response:
        """The response to GET `url`, read up to the limit `bound` names (a field of
        Limits); `checked_later`: a digest checks the body, so a redirect may lead to
        another https host (without the credentials)."""
        if origin(url) != self.origin:
            raise SourceError(
                f"{what}: {mask_url(url)} is on another host than the source's; gitopsd "
                "asks only the source's own scheme, host and port",
                SourceReason.REF_MISSING,
            )
        try:
            return self._get(url, what, accept, checked_later, bound)
        except _Challenged as challenge:
            self._bearer(challenge.header, what)
            return self._get(url, what, accept, checked_later, bound)

    def _get(self, url: str, what: str, accept: str, checked_later: bool, bound: str) -> Response:
        request = urllib.request.Request(url, headers={"User-Agent": "gitopsd"})  # noqa: S310 - the scheme is checked
        if accept:
            request.add_header("Accept", accept)
        if self.authorization:
            request.add_unredirected_header("Authorization", self.authorization)
        redirects = _Redirects(self.origin, checked_later, self.authorization)
        limit = getattr(self.spec.limits, bound)
        try:
            response = self._open(request, redirects, limit, what)
        except urllib.error.HTTPError as error:
            challenge = error.headers.get("WWW-Authenticate", "") if error.headers else ""
            if (
                error.code == 401
                and challenge.lower().startswith("bearer ")
                and not self.bearer_tried
            ):
                raise _Challenged(challenge) from None
            raise _http_error(what, error.code, self.basic is not None) from None
        if len(response.body) > limit:
            raise SourceError(
                f"{what}: larger than {format_size(limit)} ({how_to_raise(bound)})",
                SourceReason.TOO_LARGE,
            )
        return response

    def _open(
        self, request: urllib.request.Request, redirects: _Redirects, limit: int, what: str
    ) -> Response:
        """The response, read up to `limit` + 1 bytes within the fetch deadline; a failure
        to reach the server is a SourceError that says the same of a closed port, a TLS
        service and a plain one; an HTTP status is raised as HTTPError."""
        network = self.spec.network
        with deadline(network.fetch_deadline_seconds) as running:
            connector = Connector(network, not self.spec.allow_insecure, running)
            opener = urllib.request.build_opener(*connector.handlers(), redirects)
            try:
                with opener.open(request, timeout=self.spec.timeout_seconds) as response:
                    body = response.read(limit + 1)
            except urllib.error.HTTPError:
                raise
            except Fenced as fenced:
                raise fence_error(what, str(fenced)) from None
            except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):
                if running.passed:
                    raise _past_deadline(what, network) from None
                raise no_answer(what, request.full_url, self.spec.allow_insecure) from None
        if running.passed:  # the body was cut short
            raise _past_deadline(what, network)
        return Response(body, response.headers)

    def _bearer(self, challenge: str, what: str) -> None:
        """Trades the credentials (or none) for a token at the realm the server names."""
        self.bearer_tried = True
        fields = dict(_CHALLENGE.findall(challenge))
        realm = fields.pop("realm", "")
        scheme = urlsplit(realm).scheme.lower()
        if scheme != "https" and not (scheme == "http" and self.spec.allow_insecure):
            raise SourceError(
                f"{what}: the token service {mask_url(realm)!r} is not https", SourceReason.AUTH
            )
        query = urlencode(
            {key: value for key, value in fields.items() if key in ("service", "scope")}
        )
        request = urllib.request.Request(f"{realm}?{query}", headers={"User-Agent": "gitopsd"})  # noqa: S310 - checked above
        if self.basic:
            request.add_unredirected_header("Authorization", self.basic)
        redirects = _Redirects(origin(realm), False, None)
        try:
            answer = self._open(request, redirects, _MAX_TOKEN_BYTES, f"{what}: token service")
        except urllib.error.HTTPError as error:
            raise _http_error(
                f"{what}: token service", error.code, self.basic is not None
            ) from None
        self.authorization = "Bearer " + _token(answer.body, what)


class _Challenged(Exception):
    def __init__(self, header: str) -> None:
        self.header = header


def _token(answer: bytes, what: str) -> str:
    try:
        parsed: Any = json.loads(answer)
    except ValueError:
        parsed = None
    token = (
        (parsed.get("token") or parsed.get("access_token")) if isinstance(parsed, dict) else None
    )
    if not isinstance(token, str) or not token or any(c in token for c in "\r\n"):
        raise SourceError(f"{what}: the token service gave no token", SourceReason.AUTH)
    return token


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect within the origin (credentials kept), and elsewhere only for a
    body checked later, to https, without them."""

    def __init__(
        self, home: tuple[str, str], checked_later: bool, authorization: str | None
    ) -> None:
        self.home, self.checked_later, self.authorization = home, checked_later, authorization

    def redirect_request(  # type: ignore[no-untyped-def]
        self, req, fp, code, msg, headers, newurl
    ) -> urllib.request.Request | None:
        target = origin(newurl)
        if target != self.home and not (self.checked_later and target[0] == "https"):
            raise urllib.error.HTTPError(newurl, _REDIRECT_REFUSED, "redirect", headers, fp)
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and target == self.home and self.authorization:
            new.add_unredirected_header("Authorization", self.authorization)
        return new


def origin(url: str) -> tuple[str, str]:
    """The scheme and host:port a URL names (a port that is none names no origin at all)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return parts.scheme.lower(), "\0invalid"
    return parts.scheme.lower(), f"{parts.hostname or ''}:{port or ''}"


PLAIN_HTTP = (
    " (nothing answered as https there; a server that speaks plain HTTP is read only with "
    "--allow-insecure-source, allowInsecure: true)"
)
"""Said alike of a closed port, a TLS service and a plain one: the error is no scanner."""


def no_answer(what: str, url: str, allow_insecure: bool) -> SourceError:
    """One message whatever the cause (a closed port, a TLS service, a plain one), with
    the remedy of the one a person most often meets: a plain-HTTP registry."""
    scheme, authority = origin(url)
    hint = PLAIN_HTTP if scheme == "https" and not allow_insecure else ""
    return SourceError(
        f"{what}: no HTTP answer from {mask_url(f'{scheme}://{authority}')}{hint}",
        SourceReason.UNREACHABLE,
    )


NO_CREDENTIALS = (
    "the server asks for credentials and none were given (--username and --password-file; "
    "a configured source's credentials: username, passwordFile; a GitSync's "
    "repository.secretRef)"
)


def _http_error(what: str, code: int, credentials_given: bool) -> SourceError:
    if code == _REDIRECT_REFUSED:
        return SourceError(
            f"{what}: redirected to another host; gitopsd asks only the source's own "
            "scheme, host and port",
            SourceReason.REF_MISSING,
        )
    if code in (401, 403) and not credentials_given:
        return SourceError(f"{what}: HTTP {code}: {NO_CREDENTIALS}", SourceReason.AUTH)
    if code in (401, 403):
        return SourceError(f"{what}: HTTP {code}: check the credentials", SourceReason.AUTH)
    if code == 404:
        return SourceError(f"{what}: HTTP 404: not found", SourceReason.REF_MISSING)
    return SourceError(f"{what}: HTTP {code}", SourceReason.UNREACHABLE)


def _past_deadline(what: str, network: Network) -> SourceError:
    return SourceError(
        f"{what}: not fetched within the fetch deadline of "
        f"{network.fetch_deadline_seconds:g} s (network.fetchDeadline)",
        SourceReason.TIMEOUT,
    )
