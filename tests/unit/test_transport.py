"""`PooledTransport` sends what `Api` gives it over the client's pool, with the client's
headers and credentials as they are at the time of each request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import urllib3

from gitopsd.cluster.transport import PooledTransport


@dataclass
class Configuration:
    """Hands out a new token each time it is asked, as a refresh hook re-reading a rotated
    service-account token does."""

    host: str
    tokens: list[str | None]

    def auth_settings(self) -> dict[str, Any]:
        token = self.tokens.pop(0)
        value = f"Bearer {token}" if token else None
        return {"BearerToken": {"in": "header", "key": "authorization", "value": value}}


@dataclass
class Pool:
    sent: list[dict[str, Any]] = field(default_factory=list)

    def urlopen(self, method: str, url: str, **options: Any) -> str:
        self.sent.append({"method": method, "url": url, **options})
        return "response"


@dataclass
class PoolManager:
    pool: Pool

    def connection_from_url(self, url: str) -> Pool:
        return self.pool


@dataclass
class RestClient:
    pool_manager: PoolManager


@dataclass
class Client:
    configuration: Configuration
    rest_client: RestClient
    default_headers: dict[str, str] = field(default_factory=lambda: {"User-Agent": "client/1"})


def transport_for(host: str, tokens: list[str | None]) -> tuple[PooledTransport, Pool]:
    pool = Pool()
    client = Client(Configuration(host, tokens), RestClient(PoolManager(pool)))
    return PooledTransport.of(client), pool


def test_each_request_carries_the_token_current_at_its_time_and_the_clients_headers() -> None:
    transport, pool = transport_for("https://127.0.0.1:6443", ["first", "rotated"])

    for _ in range(2):
        transport.send("GET", "/api/v1/namespaces", None, {"Accept": "application/json"}, (5, 30))

    assert [sent["headers"]["authorization"] for sent in pool.sent] == [
        "Bearer first",
        "Bearer rotated",
    ]
    assert all(sent["headers"]["User-Agent"] == "client/1" for sent in pool.sent)
    assert all(sent["headers"]["Accept"] == "application/json" for sent in pool.sent)


def test_no_credentials_send_no_authorization_header() -> None:
    transport, pool = transport_for("https://127.0.0.1:6443", [None])

    transport.send("GET", "/version", None, {}, (5, 30))

    assert "authorization" not in pool.sent[0]["headers"]


def test_a_server_under_a_path_is_addressed_under_it_and_redirects_are_not_followed() -> None:
    transport, pool = transport_for("https://proxy.example/k8s/clusters/c-1/", ["t"])

    transport.send("PATCH", "/api/v1/namespaces/n/configmaps/a?dryRun=All", b"{}", {}, (5, 30))

    sent = pool.sent[0]
    assert sent["url"] == "/k8s/clusters/c-1/api/v1/namespaces/n/configmaps/a?dryRun=All"
    assert sent["body"] == b"{}" and sent["redirect"] is False
    assert sent["preload_content"] is False


def test_urllib3_retries_no_answer_the_api_server_gave() -> None:
    """Statuses are Api's to retry (counted, bounded, fenced); urllib3's default would send
    a DELETE again after a 429 or 503 with Retry-After, behind the fence's back."""
    transport, pool = transport_for("https://api.example", ["t"])

    transport.send("DELETE", "/api/v1/namespaces/n/configmaps/a", b"{}", {}, (5, 30))

    retries = pool.sent[0]["retries"]
    for method in ("DELETE", "PUT", "PATCH", "POST", "GET"):
        for status in (413, 429, 500, 503):
            assert not retries.is_retry(method, status, has_retry_after=True), (method, status)
    assert retries.total == 3 and retries.allowed_methods == frozenset({"GET", "HEAD"})
    broken = urllib3.exceptions.ProtocolError("Connection aborted.")
    assert retries.increment("GET", "/api", error=broken).total == 2  # a closed pooled one
    with pytest.raises(urllib3.exceptions.ProtocolError):
        retries.increment("DELETE", "/api", error=broken)  # a write is never sent twice
    hung = urllib3.exceptions.ReadTimeoutError(None, "/api", "read timed out")  # type: ignore[arg-type]
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        retries.increment("GET", "/api", error=hung)  # a hung server is not waited for again
