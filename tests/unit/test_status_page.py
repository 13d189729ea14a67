"""The status page's listener on a real loopback socket: read-only, its security headers on
every answer, a bearer token when one is set (else a loopback name), a source's page at its
metrics' label; and its configuration, whose errors name the key."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gitopsd.configfile import StatusPage, load
from gitopsd.daemon import http
from gitopsd.daemon.status_page import token_reader
from gitopsd.errors import ConfigError
from gitopsd.pages import SourceDetail, SourceLine

SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


@dataclass
class Sources:
    names: tuple[str, ...] = ("app", "team/web")
    asked: list[str] = field(default_factory=list)

    def lines(self) -> list[SourceLine]:
        return [SourceLine(name) for name in self.names]

    def detail(self, name: str) -> SourceDetail | None:
        self.asked.append(name)
        return SourceDetail(SourceLine(name)) if name in self.names else None


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: str


def ask(port: int, method: str, path: str, *headers: str, host: str = "127.0.0.1") -> Answer:
    head = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", *headers]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    top, _, body = answer.decode().partition("\r\n\r\n")
    status, *fields = top.split("\r\n")
    pairs = (line.split(": ", 1) for line in fields)
    return Answer(int(status.split()[1]), {k.lower(): v for k, v in pairs}, body)


@pytest.fixture
def sources() -> Sources:
    return Sources()


def serving(page: http.StatusPage) -> Iterator[int]:
    server = http.serve_status_page(("127.0.0.1", 0), page)
    yield server.server_address[1]
    server.shutdown()


@pytest.fixture
def on_loopback(sources: Sources) -> Iterator[int]:
    yield from serving(http.StatusPage(sources, 10))


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("s3cret-token\n")
    return path


@pytest.fixture
def with_token(sources: Sources, token_file: Path) -> Iterator[int]:
    yield from serving(http.StatusPage(sources, 10, token_reader(token_file)))


def test_the_overview_and_a_sources_page_are_served_with_their_security_headers(
    on_loopback: int, sources: Sources
) -> None:
    front = ask(on_loopback, "GET", "/")
    gitsync = ask(on_loopback, "GET", "/sources/team%2Fweb")

    for answer in (front, gitsync):
        assert answer.status == 200
        assert answer.headers["content-type"] == "text/html; charset=utf-8"
        assert SECURITY_HEADERS.items() <= answer.headers.items()
        assert answer.headers["content-security-policy"].startswith("default-src 'none'; ")
    assert 'href="sources/team%2Fweb"' in front.body
    assert "GitSync team/web" in gitsync.body
    assert ask(on_loopback, "GET", "/sources/team/web?x=1").status == 200  # unquoted alike
    assert sources.asked == ["team/web", "team/web"]


def test_only_get_and_head_are_answered(on_loopback: int) -> None:
    head = ask(on_loopback, "HEAD", "/")
    whole = ask(on_loopback, "GET", "/")
    assert (head.status, head.body) == (200, "")
    assert head.headers["content-length"] == whole.headers["content-length"] != "0"
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        refused = ask(on_loopback, method, "/", "Content-Length: 0")
        assert refused.status == 405, method
        assert refused.headers["allow"] == "GET, HEAD"
        assert SECURITY_HEADERS.items() <= refused.headers.items()


def test_an_unknown_page_or_source_is_not_found(on_loopback: int) -> None:
    assert ask(on_loopback, "GET", "/sources/nope").status == 404
    assert ask(on_loopback, "GET", "/api/v1/sources").status == 404


def test_without_a_token_only_a_loopback_name_is_answered(on_loopback: int) -> None:
    """A web page whose DNS name was rebound to 127.0.0.1 cannot read the page."""
    rebound = ask(on_loopback, "GET", "/", host="evil.example.com")
    assert rebound.status == 401
    assert ask(on_loopback, "GET", "/", host="localhost").status == 200


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong", "Basic s3cret-token", "Bearer s3cret-token-and-more", "Bearer ünï"],
)
def test_with_a_token_a_request_without_it_is_unauthorized(
    with_token: int, authorization: str | None
) -> None:
    headers = [f"Authorization: {authorization}"] if authorization else []
    refused = ask(with_token, "GET", "/", *headers)

    assert refused.status == 401
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert "s3cret" not in refused.body


def test_with_the_token_any_host_is_answered_and_a_rotated_token_takes_effect(
    with_token: int, token_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bearer = "Authorization: Bearer s3cret-token"
    assert ask(with_token, "GET", "/", bearer, host="gitopsd.example.com").status == 200

    token_file.write_text("rotated")
    assert ask(with_token, "GET", "/", bearer).status == 401
    assert ask(with_token, "GET", "/", "Authorization: Bearer rotated").status == 200
    token_file.unlink()
    assert ask(with_token, "GET", "/", "Authorization: Bearer rotated").status == 401
    assert "rotated" not in caplog.text and "tokenFile" in caplog.text


# Its configuration


def config(tmp_path: Path, page: Any) -> Path:
    path = tmp_path / "gitopsd.yaml"
    path.write_text(json.dumps({"sources": [], "statusPage": page}))
    return path


def test_no_page_unless_it_is_configured(tmp_path: Path) -> None:
    assert load(config(tmp_path, {})).status_page == StatusPage()
    assert StatusPage().listen is None and StatusPage().address is None


def test_the_page_takes_its_settings_and_defaults(tmp_path: Path, token_file: Path) -> None:
    page = load(config(tmp_path, {"listen": "127.0.0.1:9293"})).status_page
    assert (page.address, page.token_file, page.refresh_seconds, page.url) == (
        ("127.0.0.1", 9293),
        None,
        10.0,
        "",
    )
    exposed = {
        "listen": "0.0.0.0:9293",
        "tokenFile": str(token_file),
        "refresh": "1m",
        "url": "https://gitopsd.example.com/",
    }
    page = load(config(tmp_path, exposed)).status_page
    assert (page.listen, page.token_file, page.refresh_seconds) == (
        "0.0.0.0:9293",
        token_file,
        60.0,
    )
    assert page.url == "https://gitopsd.example.com"


@pytest.mark.parametrize(
    ("page", "message"),
    [
        ({"listen": "0.0.0.0:9293"}, "statusPage: tokenFile: required when listen"),
        ({"listen": "gitopsd.example.com:9293"}, "statusPage: tokenFile: required"),
        ({"listen": "9293"}, "statusPage: listen: expected host:port"),
        (
            {"listen": "127.0.0.1:9290"},
            "statusPage.listen: '127.0.0.1:9290' has the port of listen",
        ),
        ({"listen": "127.0.0.1:9293", "refresh": "0s"}, "statusPage: refresh: expected a duration"),
        ({"url": "gitopsd.example.com"}, "statusPage: url: expected an http:// or https:// URL"),
        ({"url": "https://a.example/?x=1"}, "statusPage: url: expected a base URL"),
        ({"url": 7}, "statusPage: url: expected an http"),
        ({"tokenfile": "/t"}, "statusPage: unknown field(s) tokenfile"),
        ("yes", "statusPage: expected a mapping"),
    ],
)
def test_an_invalid_page_setting_is_an_error_naming_its_key(
    tmp_path: Path, page: Any, message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(config(tmp_path, page))
    assert message in str(raised.value)
