"""The one seam between `Api` and the network: a request goes out, a urllib3 response
comes back.

The official client configures the connection (TLS, client certificates, proxy,
credentials and their refresh); requests then go straight to its connection pool. The
client's own request path re-walks every body in Python to serialize it and rebuilds the
URL each time: a third of the client's CPU for a server-side apply (0.85 ms against 0.55
ms per request, measured on this machine class), and a cold sync sends two per object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, Self
from urllib.parse import urlsplit

import urllib3
from urllib3.connectionpool import ConnectionPool
from urllib3.response import BaseHTTPResponse


class _Retries(urllib3.Retry):
    """What urllib3 may retry by itself: a connection that failed before the request went
    out, or a GET or HEAD whose connection broke (a pooled one the server had closed). Not a
    read that timed out: against a hung server each try would wait the whole timeout again.
    And not an answer: urllib3's default retries a 429 or 503 with a Retry-After, for DELETE
    and PUT too, unseen by `Api`, whose retries are the ones counted, bounded and fenced (a
    replica that lost its lease must not send that DELETE again)."""

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> Self:
        if isinstance(error, urllib3.exceptions.ReadTimeoutError):
            raise error
        return super().increment(method, url, response, error, _pool, _stacktrace)


RETRIES = _Retries(
    total=3, allowed_methods=frozenset({"GET", "HEAD"}), respect_retry_after_header=False
)


class Transport(Protocol):
    def send(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str],
        timeout: tuple[float, float],
    ) -> Any:
        """Sends one request to `target` (path and query) and returns the urllib3 response,
        its body not read yet."""


@dataclass(frozen=True)
class PooledTransport:
    """Sends requests over the official client's connection pool, with its credentials."""

    client: Any
    """The official client's ApiClient: configuration, default headers and the pool."""
    pool: urllib3.HTTPConnectionPool
    prefix: str
    """The path the API server is served under (a proxy's, say); mostly empty."""
    credentials: Callable[[], Any]
    """The configuration whose credentials a request sends, asked at each request."""

    @classmethod
    def of(cls, client: Any, credentials: Callable[[], Any] | None = None) -> PooledTransport:
        host = client.configuration.host
        pool = client.rest_client.pool_manager.connection_from_url(host)
        own = credentials or (lambda: client.configuration)
        return cls(client, pool, urlsplit(host).path.rstrip("/"), own)

    def send(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str],
        timeout: tuple[float, float],
    ) -> Any:
        connect, read = timeout
        return self.pool.urlopen(
            method,
            self.prefix + target,
            body=body,
            headers={**self.client.default_headers, **self._credentials(), **headers},
            timeout=urllib3.Timeout(connect=connect, read=read),
            redirect=False,  # an API server does not redirect; credentials never follow one
            retries=RETRIES,
            preload_content=False,
        )

    def _credentials(self) -> dict[str, str]:
        """The bearer token (or basic credentials) as the client would send them now: asking
        runs its refresh hook, which re-reads a rotated service-account token."""
        bearer = self.credentials().auth_settings().get("BearerToken")
        return {bearer["key"]: bearer["value"]} if bearer and bearer["value"] else {}


@dataclass(frozen=True)
class Impersonating:
    """Sends every request as `user` (the Impersonate-User header): a GitSync's requests are
    authorized as its ServiceAccount, not as the daemon."""

    inner: Transport
    user: str

    def send(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str],
        timeout: tuple[float, float],
    ) -> Any:
        impersonated = {**headers, "Impersonate-User": self.user}
        return self.inner.send(method, target, body, impersonated, timeout)
