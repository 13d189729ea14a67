"""The daemon's only HTTP surface: /metrics, /healthz, /readyz and POST /hooks/<source>."""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger("gitopsd.http")
MAX_PAYLOAD_BYTES = 1024 * 1024
REQUEST_TIMEOUT_SECONDS = 10


@dataclass(frozen=True)
class Hook:
    """A webhook: the HMAC-SHA256 key and what a correctly signed call triggers (it must
    return at once: the request's thread waits for it)."""

    secret: bytes
    trigger: Callable[[], None]


@dataclass(frozen=True)
class Endpoints:
    registry: CollectorRegistry
    ready: Callable[[], bool]
    hooks: Mapping[str, Hook]


def serve(address: tuple[str, int], endpoints: Endpoints) -> ThreadingHTTPServer:
    """Starts serving in a background thread; `shutdown()` on the result stops it."""
    handler = type("Handler", (_Handler,), {"endpoints": endpoints})
    server = ThreadingHTTPServer(address, handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server


def signature_valid(secret: bytes, body: bytes, header: str | None) -> bool:
    """GitHub's scheme: X-Hub-Signature-256: sha256=<hex HMAC of the raw body>."""
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header or "")


class _Handler(BaseHTTPRequestHandler):
    endpoints: Endpoints
    timeout = REQUEST_TIMEOUT_SECONDS  # a slow client cannot hold a thread for long
    server_version = "gitopsd"
    sys_version = ""

    def do_GET(self) -> None:
        if self.path == "/metrics":
            self._answer(200, generate_latest(self.endpoints.registry), CONTENT_TYPE_LATEST)
        elif self.path == "/healthz":
            self._answer(200, b"ok\n")
        elif self.path == "/readyz":
            ready = self.endpoints.ready()
            self._answer(200 if ready else 503, b"ready\n" if ready else b"not ready\n")
        else:
            self._answer(404, b"not found\n")

    def do_POST(self) -> None:
        name = self.path.removeprefix("/hooks/")
        hook = self.endpoints.hooks.get(name) if self.path.startswith("/hooks/") else None
        if hook is None:
            self._answer(404, b"not found\n")
            return
        length = self.headers.get("Content-Length", "")
        if not length.isdigit() or int(length) > MAX_PAYLOAD_BYTES:
            self._answer(413, b"payload missing or over 1 MiB\n")
            return
        body = self.rfile.read(int(length))
        if not signature_valid(hook.secret, body, self.headers.get("X-Hub-Signature-256")):
            log.warning("webhook rejected: bad signature", extra={"source": name})
            self._answer(401, b"bad signature\n")
            return
        hook.trigger()
        self._answer(202, b"accepted\n")  # the payload only triggers a fetch; it is not trusted

    def _answer(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug(format, *args)
