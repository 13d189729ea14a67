"""A small HTTP/1.0 server: what it answers, its Routes say (gitopsd.daemon.http.endpoints).

One thread serves every connection from an event loop, so a client costs a socket, never a
thread or a slot that another client waits for: however many connections send half a
request line and wait (a webhook caller, or anyone who reaches the port), a probe or a
scrape whose request arrives whole is answered at once. What a client may hold is bounded
too: at most MAX_CONNECTIONS open (MAX_PER_CLIENT from one address; the others are answered
503 at once), a request head of MAX_HEAD_BYTES that must arrive whole within
HEAD_DEADLINE_SECONDS of accept (else 408), a body of MAX_PAYLOAD_BYTES, and
REQUEST_DEADLINE_SECONDS from accept to the last byte of the answer, however slowly it
trickles in. Every answer closes its connection (HTTP/1.0). Each listener is a Server of
its own, with caps of its own: what holds one listener's connections holds no other's.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger("gitopsd.http")
MAX_PAYLOAD_BYTES = 1024 * 1024
MAX_DISCARDED_BYTES = 4 * MAX_PAYLOAD_BYTES
"""A refused body up to this size is read and dropped after the answer, so a client that is
still sending it gets the answer instead of a reset connection."""
LINGER_SECONDS = 1.0
"""How long a refused body's rest is waited for between reads."""
MAX_HEAD_BYTES = 16 * 1024
"""The request line and headers: a URL or header longer than this gets 431."""
MAX_CONNECTIONS = 256
MAX_PER_CLIENT = 32
"""Callers are few (a scraper, the kubelet's probes, a git host's webhooks), so one address
holding 32 connections is misbehaving; the cap keeps it from taking all MAX_CONNECTIONS."""
HEAD_DEADLINE_SECONDS = 5.0
"""From accept to the end of the request head: the kubelet, Prometheus and git hosts send
a head in one piece, so a connection still sending its head after this is one that holds a
slot on purpose (a half-sent request), and it gives the slot back early."""
REQUEST_DEADLINE_SECONDS = 10.0
"""From accept to the last byte of the answer: a client that sends one byte just often
enough is cut off all the same."""
TICK_SECONDS = 0.25
BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 5\r\nConnection: close\r\n\r\nbusy\n"
REASONS = {
    200: "OK",
    202: "Accepted",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    409: "Conflict",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    413: "Payload Too Large",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
    503: "Service Unavailable",
}


Reply = tuple[int, bytes, str]
"""An answer's status, body and Content-Type."""
Headers = Callable[[int], Mapping[str, str]]
"""More headers of a server's answers, by their status (a page's security headers)."""


def no_headers(status: int) -> Mapping[str, str]:
    return {}


@dataclass(frozen=True)
class Early:
    """An answer given before the request's body is read."""

    reply: Reply
    drop_body: bool = True
    """Read and drop what the client still sends of its body after the answer (see
    Server._refuse_body); False: close the connection once the answer is written."""


class Routes(Protocol):
    """What a server serves: it asks at each request's head, and again once its body is in."""

    def at_head(self, client: str, request: Request) -> Early | None: ...

    def answer(self, request: Request, body: bytes) -> Reply: ...


def serve(address: tuple[str, int], routes: Routes, headers: Headers = no_headers) -> Server:
    """Starts serving in a background thread; `shutdown()` on the result stops it."""
    server = Server(address, routes, headers)
    threading.Thread(target=server.run, name="http", daemon=True).start()
    return server


def _declared_length(header: str) -> int | None:
    """The Content-Length if it is a plain number (`int()` would take other digits, such as
    "²", and refuses numbers of thousands of digits)."""
    if not (header.isascii() and header.isdigit()) or len(header) > 12:
        return None
    return int(header)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: Mapping[str, str]
    """By lower-case name."""

    @classmethod
    def parse(cls, head: bytes) -> Request | None:
        """The request line and headers; None when they are not HTTP."""
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return None
        headers = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                return None
            headers[name.strip().lower()] = value.strip()
        return cls(parts[0], parts[1], headers)


@dataclass
class Connection:
    """One client's exchange: its request read, then its answer written, then (after a
    refused body) what it still sends of the body read and dropped."""

    sock: socket.socket
    client: str
    deadline: float
    head_deadline: float
    received: bytearray = field(default_factory=bytearray)
    request: Request | None = None
    body_length: int = 0
    answer: bytes = b""
    sent: int = 0
    discard: int = 0
    """Bytes of a refused body still to be read and dropped."""
    last_read: float = 0.0

    @property
    def answered(self) -> bool:
        return bool(self.answer)


class Server:
    """The event loop (see the module's docstring)."""

    def __init__(
        self, address: tuple[str, int], routes: Routes, headers: Headers = no_headers
    ) -> None:
        self.routes = routes
        self.headers = headers
        self.listener = socket.create_server(address, backlog=128)
        self.listener.setblocking(False)
        self.server_address: tuple[str, int] = self.listener.getsockname()[:2]
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.connections: dict[socket.socket, Connection] = {}
        self.per_client: Counter[str] = Counter()
        self._stopping = threading.Event()
        self._stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self._stopping.is_set():
                for key, _ in self.selector.select(TICK_SECONDS):
                    if key.fileobj is self.listener:
                        self._accept()
                    else:
                        self._step(self.connections[key.fileobj])  # type: ignore[index]
                self._expire()
        finally:
            for connection in list(self.connections.values()):
                self._close(connection)
            self._stopped.set()

    def shutdown(self) -> None:
        """Stops serving and, once the loop has stopped, closes the listener: its port is
        free again when this returns (a loop stuck past 5 s leaves it to the process's exit)."""
        self._stopping.set()
        if self._stopped.wait(5.0):
            self.selector.close()
            self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                sock, peer = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # out of file descriptors, a client gone: next round
                log.warning("accept failed: %s", error)
                return
            self._admit(sock, str(peer[0]))

    def _admit(self, sock: socket.socket, client: str) -> None:
        sock.setblocking(False)
        full = len(self.connections) >= MAX_CONNECTIONS
        if full or self.per_client[client] >= MAX_PER_CLIENT:
            with contextlib.suppress(OSError):  # a fresh socket's buffer takes these bytes
                sock.send(BUSY)
            sock.close()
            return
        now = time.monotonic()
        connection = Connection(
            sock, client, now + REQUEST_DEADLINE_SECONDS, now + HEAD_DEADLINE_SECONDS
        )
        self.connections[sock] = connection
        self.per_client[client] += 1
        self.selector.register(sock, selectors.EVENT_READ)

    def _step(self, connection: Connection) -> None:
        try:
            if connection.answered and connection.sent < len(connection.answer):
                self._write(connection)
            else:
                self._read(connection)
        except OSError as error:  # the client went away
            log.debug("connection from %s ended: %s", connection.client, error)
            self._close(connection)
        except Exception:  # a bug must not end the server, nor leave the client waiting
            log.exception("request from %s failed", connection.client)
            self._close(connection)

    def _read(self, connection: Connection) -> None:
        chunk = connection.sock.recv(64 * 1024)
        if not chunk:
            self._close(connection)
            return
        connection.last_read = time.monotonic()
        if connection.answered:  # a refused body's rest: dropped
            connection.discard -= len(chunk)
            if connection.discard <= 0:
                self._close(connection)
            return
        connection.received += chunk
        self._progress(connection)

    def _progress(self, connection: Connection) -> None:
        """Parses the head once it is whole, then waits for the body, then answers."""
        if connection.request is None:
            head, found, rest = bytes(connection.received).partition(b"\r\n\r\n")
            if not found:
                if len(connection.received) > MAX_HEAD_BYTES:
                    self._answer(connection, 431, b"request head too large\n")
                return
            request = Request.parse(head)
            if request is None:
                self._answer(connection, 400, b"bad request\n")
                return
            connection.request, connection.received = request, bytearray(rest)
            if not self._expects_body(connection, request):
                return
        if len(connection.received) >= connection.body_length:
            body = bytes(connection.received[: connection.body_length])
            self._answer(connection, *self.routes.answer(connection.request, body))

    def _expects_body(self, connection: Connection, request: Request) -> bool:
        """Answers at once what the routes answer at the head, and a body past
        MAX_PAYLOAD_BYTES or of no stated length."""
        length = _declared_length(request.headers.get("content-length", ""))
        early = self.routes.at_head(connection.client, request)
        if early is not None:
            self._refuse_body(connection, early.reply, (length or 0) if early.drop_body else 0)
            return False
        if length is None or length > MAX_PAYLOAD_BYTES:
            too_large = (413, b"payload missing or over 1 MiB\n", "text/plain")
            self._refuse_body(connection, too_large, length or 0)
            return False
        connection.body_length = length
        return True

    def _refuse_body(self, connection: Connection, reply: Reply, length: int) -> None:
        """Answers before the body is read, then reads and drops what the client still
        sends of it (up to MAX_DISCARDED_BYTES), so that a client that is still sending
        reads the answer instead of a reset connection."""
        connection.discard = min(length, MAX_DISCARDED_BYTES) - len(connection.received)
        self._answer(connection, *reply)

    def _answer(
        self, connection: Connection, status: int, body: bytes, kind: str = "text/plain"
    ) -> None:
        more = "".join(f"{name}: {value}\r\n" for name, value in self.headers(status).items())
        head = (
            f"HTTP/1.0 {status} {REASONS[status]}\r\nServer: gitopsd\r\nContent-Type: {kind}\r\n"
            f"Content-Length: {len(body)}\r\n{more}Connection: close\r\n\r\n"
        )
        heading = connection.request is not None and connection.request.method == "HEAD"
        connection.answer = head.encode() + (b"" if heading else body)  # HEAD: its length only
        self.selector.modify(connection.sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
        self._write(connection)

    def _write(self, connection: Connection) -> None:
        connection.sent += connection.sock.send(connection.answer[connection.sent :])
        if connection.sent < len(connection.answer):
            return
        if connection.discard > 0:
            connection.last_read = time.monotonic()
            self.selector.modify(connection.sock, selectors.EVENT_READ)
        else:
            self._close(connection)

    def _expire(self) -> None:
        """Cuts off every connection past its deadline, and a refused body's rest that has
        not come for LINGER_SECONDS; answers 408 to a head that did not arrive in time."""
        now = time.monotonic()
        for connection in list(self.connections.values()):
            draining = connection.discard > 0 and connection.sent == len(connection.answer)
            idle = draining and now > connection.last_read + LINGER_SECONDS
            late_head = connection.request is None and now > connection.head_deadline
            if idle or now > connection.deadline:
                self._close(connection)
            elif late_head and not connection.answered:
                self._late_head(connection)

    def _late_head(self, connection: Connection) -> None:
        try:
            self._answer(connection, 408, b"request head not received in time\n")
        except OSError:  # the client went away
            self._close(connection)

    def _close(self, connection: Connection) -> None:
        if self.connections.pop(connection.sock, None) is None:
            return
        self.per_client[connection.client] -= 1
        if not self.per_client[connection.client]:
            del self.per_client[connection.client]
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(connection.sock)
        connection.sock.close()
