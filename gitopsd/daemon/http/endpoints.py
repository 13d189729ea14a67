"""The daemon's HTTP surface, on three servers that share no connection cap:

- the webhooks (`listen`), the only one a git host, and so anyone on the network, needs to
  reach: POST /hooks/<source> and /hooks/gitsyncs/<namespace>/<name>;
- the probes (`probeListen`): GET /metrics, /healthz and /readyz, for the kubelet and
  Prometheus alone (the shipped NetworkPolicy admits no one else), so whatever holds the
  webhooks' connections never starves a probe;
- the control API of `gitopsd get` and `gitopsd reconcile` (`controlListen`), bound to
  loopback: GET /api/v1/sources, POST /api/v1/sources/<name>/reconcile, GET
  /api/v1/sources/<name>/objects and /history, and POST /api/v1/sources/<name>/suspend
  and /resume;
- the read-only status page (`statusPage.listen`, when configured): GET / and
  /sources/<name>, HTML for people (gitopsd.pages), on loopback or with a bearer token.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import unquote

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from gitopsd import pages
from gitopsd.daemon.http.transport import Early, Reply, Request, Server, serve

log = logging.getLogger("gitopsd.http")
NOT_FOUND: Reply = (404, b"not found\n", "text/plain")


@dataclass(frozen=True)
class Webhook:
    """A webhook: the key its calls are signed with, and what a correctly signed call
    triggers (it must return at once: the server's one thread waits for it)."""

    secret: bytes
    trigger: Callable[[], None]
    refused: Callable[[], None] = lambda: None
    """Hears of a call whose signature did not match (the key may have been rotated)."""


SIGNATURE_HEADERS = ("x-hub-signature-256", "x-gitlab-token", "x-signature")
"""The headers a webhook call is signed in (`signed`): what a forwarded call carries on."""
FORWARDED_HEADER = "x-gitopsd-forwarded"
"""On a call one replica forwarded to another: forwarded no further."""


@dataclass(frozen=True)
class Forward:
    """A webhook another replica serves (sharding): the call is handed to `send` (its body
    and signature headers) for that replica to check and act on, and answered at once."""

    send: Callable[[bytes, dict[str, str]], None]


class ControlApi(Protocol):
    """What the control API serves (gitopsd.daemon.control)."""

    def sources(self) -> list[dict[str, Any]]: ...

    def reconcile(self, name: str) -> tuple[int, dict[str, Any]]: ...

    def objects(self, name: str) -> tuple[int, dict[str, Any]]: ...

    def history(self, name: str) -> tuple[int, dict[str, Any]]: ...

    def suspend(self, name: str, suspended: bool) -> tuple[int, dict[str, Any]]: ...


@dataclass(frozen=True)
class Webhooks:
    """What the webhook listener serves: a signed POST to a webhook's path, nothing else."""

    webhook_of: Callable[[str], Webhook | Forward | None]
    """The webhook at /hooks/<path>, by its path: served here, or by another replica."""

    def at_head(self, client: str, request: Request) -> Early | None:
        """Refuses at once what is no webhook call; None: its body is read, then `answer`
        answers."""
        if request.method != "POST" or not self._called(request):
            return Early(NOT_FOUND)
        return None

    def answer(self, request: Request, body: bytes) -> Reply:
        name, webhook = request.path.removeprefix("/hooks/"), self._called(request)
        if webhook is None or (
            isinstance(webhook, Forward) and FORWARDED_HEADER in request.headers
        ):
            return NOT_FOUND  # a forwarded call is forwarded once
        if isinstance(webhook, Forward):
            signature = {h: v for h, v in request.headers.items() if h in SIGNATURE_HEADERS}
            webhook.send(body, signature)
            return 202, b"forwarded to the replica that serves it\n", "text/plain"
        if not signed(webhook.secret, body, request.headers):
            log.warning("webhook rejected: bad signature", extra={"source": name})
            webhook.refused()
            return 401, b"bad signature\n", "text/plain"
        webhook.trigger()
        return 202, b"accepted\n", "text/plain"  # the payload only triggers a fetch

    def _called(self, request: Request) -> Webhook | Forward | None:
        """The webhook `request` calls, if it calls one."""
        if not request.path.startswith("/hooks/"):
            return None
        return self.webhook_of(request.path.removeprefix("/hooks/"))


@dataclass(frozen=True)
class Probes:
    """What the probe listener serves: /metrics, /healthz and /readyz, each answered at
    its head (no request here takes a body)."""

    registry: CollectorRegistry
    ready: Callable[[], bool]

    def at_head(self, client: str, request: Request) -> Early:
        if request.method != "GET":
            return Early(NOT_FOUND)
        return Early(self.answer(request, b""), drop_body=False)

    def answer(self, request: Request, body: bytes) -> Reply:
        if request.path == "/metrics":
            return 200, generate_latest(self.registry), CONTENT_TYPE_LATEST
        if request.path == "/healthz":
            return 200, b"ok\n", "text/plain"
        if request.path == "/readyz":
            if self.ready():
                return 200, b"ready\n", "text/plain"
            return 503, b"not ready\n", "text/plain"
        return NOT_FOUND


@dataclass(frozen=True)
class Control:
    """What the control listener serves: the control API, to loopback clients only, each
    request answered at its head."""

    control: ControlApi

    def at_head(self, client: str, request: Request) -> Early:
        return Early(_control(self.control, client, request))

    def answer(self, request: Request, body: bytes) -> Reply:
        return NOT_FOUND  # never asked: every request is answered at its head


SOURCES = "/api/v1/sources"
RECONCILE = "/reconcile"
OBJECTS = "/objects"
SUSPEND = "/suspend"
RESUME = "/resume"
HISTORY = "/history"
CONTROL_HEADER = "x-gitopsd-control"
"""Required on every control request: a web page cannot send it without asking first (a
CORS preflight nothing here answers), so a browser cannot be made to call the API."""
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
REFUSED = (
    b"the control API answers loopback clients only, addressed by a loopback name and "
    b"with the X-Gitopsd-Control header (gitopsd get/reconcile; kubectl port-forward)\n"
)


def serve_control(address: tuple[str, int], control: ControlApi) -> Server:
    """The control listener (bind it to loopback; each request is checked again)."""
    return serve(address, Control(control))


def signed(secret: bytes, body: bytes, headers: Mapping[str, str]) -> bool:
    """Whether the call carries `secret`'s proof, in the scheme its headers name: GitHub's
    X-Hub-Signature-256, GitLab's X-Gitlab-Token (the token itself), or a generic
    X-Signature (Flux's generic-hmac receiver: sha256= or sha512=, the hex HMAC of the raw
    body). A call with none of them is not signed."""
    if "x-hub-signature-256" in headers:
        return signature_valid(secret, body, headers["x-hub-signature-256"])
    if "x-gitlab-token" in headers:
        return _same(secret, headers["x-gitlab-token"].encode("latin-1"))
    if "x-signature" in headers:
        algorithm, _, _ = headers["x-signature"].partition("=")
        if algorithm in ("sha256", "sha512"):
            expected = f"{algorithm}=" + hmac.new(secret, body, algorithm).hexdigest()
            return _same(expected.encode(), headers["x-signature"].encode("latin-1"))
    return False


def _same(expected: bytes, given: bytes) -> bool:
    return bool(expected) and hmac.compare_digest(expected, given)


def signature_valid(secret: bytes, body: bytes, header: str | None) -> bool:
    """GitHub's scheme: X-Hub-Signature-256: sha256=<hex HMAC of the raw body>."""
    if header is None or not header.isascii():  # compare_digest refuses non-ASCII text
        return False
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header)


def _control(control: ControlApi, client: str, request: Request) -> Reply:
    if not _local(client, request):
        return 403, REFUSED, "text/plain"
    if request.method == "GET" and request.path == SOURCES:
        return 200, _json(control.sources()), "application/json"
    prefix = SOURCES + "/"
    asked: dict[tuple[str, str], Callable[[str], tuple[int, dict[str, Any]]]] = {
        ("POST", RECONCILE): control.reconcile,
        ("GET", OBJECTS): control.objects,
        ("POST", SUSPEND): lambda name: control.suspend(name, True),
        ("POST", RESUME): lambda name: control.suspend(name, False),
        ("GET", HISTORY): control.history,
    }
    for (method, suffix), answer_for in asked.items():
        path = request.path
        if request.method == method and path.startswith(prefix) and path.endswith(suffix):
            status, answer = answer_for(unquote(path.removeprefix(prefix).removesuffix(suffix)))
            return status, _json(answer), "application/json"
    return 404, _json({"error": "not found"}), "application/json"


def _local(connection_client: str, request: Request) -> bool:
    """From loopback, to a loopback name (not a DNS name rebound to 127.0.0.1 by a web
    page), and with the control header (not a form a web page posted)."""
    peer = ipaddress.ip_address(connection_client).is_loopback
    return peer and _loopback_named(request) and CONTROL_HEADER in request.headers


def _loopback_named(request: Request) -> bool:
    host = request.headers.get("host", "").rpartition(":")[0] or request.headers.get("host", "")
    return host.strip("[]") in LOOPBACK_NAMES or host.startswith("127.")


def _json(document: Any) -> bytes:
    return json.dumps(document).encode() + b"\n"


class StatusSources(Protocol):
    """What the status page shows (gitopsd.daemon.status_page)."""

    def lines(self) -> list[pages.SourceLine]: ...

    def detail(self, name: str) -> pages.SourceDetail | None: ...


PAGE_HEADERS = {
    "Content-Security-Policy": pages.CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
HTML = "text/html; charset=utf-8"


@dataclass(frozen=True)
class StatusPage:
    """What the status page's listener serves: GET and HEAD of its pages, each answered at
    its head, to a caller with the bearer token if one is set, else to a loopback name (not
    a DNS name rebound to 127.0.0.1 by a web page, which could read it)."""

    sources: StatusSources
    refresh_seconds: float
    token: Callable[[], bytes | None] | None = None
    """The token a caller must present, read at each request (None: not readable, so no
    one is let in); None: loopback, no token."""

    def at_head(self, client: str, request: Request) -> Early:
        return Early(self._page(request))

    def answer(self, request: Request, body: bytes) -> Reply:
        return NOT_FOUND  # never asked: every request is answered at its head

    def _page(self, request: Request) -> Reply:
        if not self._admitted(request):
            return 401, b"a bearer token is required\n", "text/plain"
        if request.method not in ("GET", "HEAD"):
            return 405, b"read-only: GET and HEAD only\n", "text/plain"
        path = request.path.partition("?")[0]
        if path == "/":
            return 200, pages.overview(self.sources.lines(), self.refresh_seconds).encode(), HTML
        detail = None
        if path.startswith(pages.SOURCES_PATH):
            detail = self.sources.detail(unquote(path.removeprefix(pages.SOURCES_PATH)))
        if detail is None:
            return NOT_FOUND
        return 200, pages.source_page(detail, self.refresh_seconds).encode(), HTML

    def _admitted(self, request: Request) -> bool:
        if self.token is None:
            return _loopback_named(request)
        expected = self.token()
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if expected is None or scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(expected, given.strip().encode("latin-1"))


def page_headers(status: int) -> Mapping[str, str]:
    """The page's headers on every answer; 401 says how to authenticate, 405 what is allowed."""
    if status == 401:
        return PAGE_HEADERS | {"WWW-Authenticate": 'Bearer realm="gitopsd"'}
    if status == 405:
        return PAGE_HEADERS | {"Allow": "GET, HEAD"}
    return PAGE_HEADERS


def serve_status_page(address: tuple[str, int], page: StatusPage) -> Server:
    return serve(address, page, page_headers)
