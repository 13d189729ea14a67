"""The daemon's only HTTP surface: /metrics, /healthz, /readyz and POST /hooks/<source>.

Bounded so no client can exhaust it: at most MAX_HANDLER_THREADS requests at once (the
others are answered 503 at once), each cut off at REQUEST_DEADLINE_SECONDS however slowly
it trickles in.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger("gitopsd.http")
MAX_PAYLOAD_BYTES = 1024 * 1024
MAX_DISCARDED_BYTES = 4 * MAX_PAYLOAD_BYTES
"""A refused body up to this size is read and dropped after the 413, so a client that is
still sending it gets the answer instead of a reset connection."""
LINGER_SECONDS = 1.0
MAX_HANDLER_THREADS = 8
"""Callers are few (a scraper, the kubelet's probes, a git host's webhooks) and every answer
is cheap, so 8 is plenty; a fixed cap keeps a flood of connections from costing a thread
(and its memory) each."""
REQUEST_DEADLINE_SECONDS = 10.0
"""From accept to the last byte of the answer. A socket timeout bounds each read, not a
client that sends one byte just often enough to hold its thread for ever."""
HANDLER_THREAD = "http-request"
BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 5\r\n\r\nbusy\n"


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


def serve(address: tuple[str, int], endpoints: Endpoints) -> HTTPServer:
    """Starts serving in a background thread; `shutdown()` on the result stops it."""
    handler = type("Handler", (_Handler,), {"endpoints": endpoints})
    server = _BoundedServer(address, handler)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server


def signature_valid(secret: bytes, body: bytes, header: str | None) -> bool:
    """GitHub's scheme: X-Hub-Signature-256: sha256=<hex HMAC of the raw body>."""
    if header is None or not header.isascii():  # compare_digest refuses non-ASCII text
        return False
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header)


def _declared_length(header: str) -> int | None:
    """The Content-Length if it is a plain number (`int()` would take other digits, such as
    "²", and refuses numbers of thousands of digits)."""
    if not (header.isascii() and header.isdigit()) or len(header) > 12:
        return None
    return int(header)


class _BoundedServer(HTTPServer):
    """A thread per request, up to MAX_HANDLER_THREADS; the accept loop cuts off requests
    that outlive their deadline (it runs `service_actions` every half second)."""

    def __init__(self, address: tuple[str, int], handler: type[_Handler]) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(MAX_HANDLER_THREADS)
        self._deadlines: dict[socket.socket, float] = {}
        self._lock = threading.Lock()

    def process_request(  # type: ignore[override]  # a TCP server: never a datagram pair
        self, request: socket.socket, client_address: object
    ) -> None:
        if not self._slots.acquire(blocking=False):
            _refuse(request)
            self.shutdown_request(request)
            return
        with self._lock:
            self._deadlines[request] = time.monotonic() + REQUEST_DEADLINE_SECONDS
        args = (request, client_address)
        threading.Thread(target=self._handle, args=args, name=HANDLER_THREAD, daemon=True).start()

    def _handle(self, request: socket.socket, client_address: object) -> None:
        try:
            self.finish_request(request, client_address)
        except OSError as error:  # the client went away, or its deadline passed
            log.debug("request from %s ended: %s", client_address, error)
        except Exception:
            log.exception("request from %s failed", client_address)
        finally:
            with self._lock:
                del self._deadlines[request]
            self.shutdown_request(request)
            self._slots.release()

    def service_actions(self) -> None:
        now = time.monotonic()
        with self._lock:
            expired = [request for request, deadline in self._deadlines.items() if deadline < now]
        for request in expired:
            _cut(request)


def _refuse(request: socket.socket) -> None:
    """Answers 503 without waiting: a fresh socket's send buffer takes these few bytes."""
    try:
        request.setblocking(False)
        request.send(BUSY)
    except OSError:
        pass  # a client that is gone or not reading gets no answer


def _cut(request: socket.socket) -> None:
    """Ends the reads and writes its handler is blocked in, which then frees its thread."""
    with contextlib.suppress(OSError):  # it ended meanwhile
        request.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    endpoints: Endpoints
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
        length = _declared_length(self.headers.get("Content-Length", ""))
        if length is None or length > MAX_PAYLOAD_BYTES:
            self._answer(413, b"payload missing or over 1 MiB\n")
            self._linger(length or 0)
            return
        body = self.rfile.read(length)
        if not signature_valid(hook.secret, body, self.headers.get("X-Hub-Signature-256")):
            log.warning("webhook rejected: bad signature", extra={"source": name})
            self._answer(401, b"bad signature\n")
            return
        hook.trigger()
        self._answer(202, b"accepted\n")  # the payload only triggers a fetch; it is not trusted

    def _linger(self, length: int) -> None:
        """After refusing a body, reads and drops what the client still sends of it (up to
        MAX_DISCARDED_BYTES, for at most LINGER_SECONDS between reads), so that a client that
        is still sending reads the answer instead of a reset connection."""
        self.wfile.flush()
        self.connection.settimeout(LINGER_SECONDS)
        remaining = min(length, MAX_DISCARDED_BYTES)
        with contextlib.suppress(OSError):  # a timeout or a client that went away: done
            while remaining > 0 and (chunk := self.rfile.read1(min(remaining, 64 * 1024))):
                remaining -= len(chunk)

    def _answer(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug(format, *args)
