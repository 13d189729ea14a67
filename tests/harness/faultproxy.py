"""A fault-injecting HTTPS proxy in front of the real kube-apiserver.

It terminates TLS with the API server's own serving certificate (valid for 127.0.0.1 on
any port, signed by the test CA), so a kubeconfig that names the proxy instead of the API
server is all a client needs. Each request either passes through to the API server (a
fresh TLS connection, its bearer token untouched, so the audit log still names the real
user) or meets the first matching `Fault`: delayed, answered by the proxy itself (429 with
Retry-After, 500, an HTML page with 200, a truncated body; or 504 once the API server did
the work), cut without an answer, or passed on to another path (what the API server
answers there, as for a resource type it does not serve).
`cut_connections()` ends every connection in flight, watches included, mid-stream.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit

from tests.harness.controlplane import ControlPlane, write_kubeconfig

HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "host"})


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: str

    @property
    def is_watch(self) -> bool:
        return "watch=true" in self.query


@dataclass(frozen=True)
class Answer:
    """What the proxy says instead of the API server; `truncated` declares a longer body
    than it sends, then hangs up."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    truncated: bool = False


def write_of_config_map(name: str) -> Callable[[Request], bool]:
    """A `Fault.when` matching the writes (a PATCH, not a dry-run) of ConfigMap `name`."""

    def matches(request: Request) -> bool:
        is_write = request.method == "PATCH" and "dryRun" not in request.query
        return is_write and request.path.endswith(f"/configmaps/{name}")

    return matches


HTML_PAGE = Answer(200, b"<html><body>Please sign in</body></html>", "text/html")


def throttled(retry_after_seconds: int) -> Answer:
    body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","code":429}'
    return Answer(429, body, headers=(("Retry-After", str(retry_after_seconds)),))


@dataclass
class Fault:
    """For requests `when` matches: wait `delay_seconds` (and at `hold`, until as many
    requests as it has parties are there: proof that they were in flight at once), then
    cut the connection, give `answer`, or (with neither) pass the request on. `meanwhile`
    runs first: a write of the test's own that lands while the request is in flight.
    `times` bounds how often it fires."""

    when: Callable[[Request], bool]
    answer: Answer | None = None
    cut: bool = False
    delay_seconds: float = 0.0
    hold: threading.Barrier | None = None
    times: int | None = None
    fired: int = 0
    fired_at: list[float] = field(default_factory=list)
    """When it fired (monotonic seconds), each time."""
    meanwhile: Callable[[], None] | None = None
    forwarded: bool = False
    """With `answer`: the request is passed on first, and the API server's answer replaced
    by `answer` (a gateway that timed out after the server did the work)."""
    moved: Callable[[str], str] | None = None
    """The request is passed on to the path this gives for its own (its query kept)."""


@dataclass
class FaultProxy:
    plane: ControlPlane
    faults: list[Fault] = field(default_factory=list)
    stopped: threading.Event = field(default_factory=threading.Event)
    accepted: int = 0
    """Connections clients opened to the proxy so far."""
    _open: set[Any] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"https://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FaultProxy:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(self.plane.pki / "server.crt", self.plane.pki / "server.key")
        self._server = _TlsServer(("127.0.0.1", 0), _Handler, tls, self)
        threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self.cut_connections()

    def kubeconfig(self, path: Path, user: str = "admin", token: str = "") -> Path:
        """A kubeconfig that reaches the API server through this proxy (admin by default)."""
        write_kubeconfig(path, self.url, self.plane.ca_file, user, token or self.plane.admin_token)
        return path

    def inject(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()

    def cut_connections(self) -> None:
        """Hangs up every connection in flight, on both sides: a watch ends mid-stream."""
        with self._lock:
            sockets = list(self._open)
        for sock in sockets:
            _hang_up(sock)

    def fault_for(self, request: Request) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.when(request) and (fault.times is None or fault.fired < fault.times):
                    fault.fired += 1
                    fault.fired_at.append(time.monotonic())
                    return fault
        return None

    def track(self, sock: Any, is_open: bool) -> None:
        with self._lock:
            (self._open.add if is_open else self._open.discard)(sock)

    def count_accepted(self) -> None:
        with self._lock:
            self.accepted += 1


class _TlsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: Any, tls: ssl.SSLContext, proxy: FaultProxy
    ) -> None:
        super().__init__(address, handler)
        self.tls = tls
        self.proxy = proxy

    def get_request(self) -> tuple[Any, Any]:
        sock, address = self.socket.accept()
        # the handshake happens in the connection's own thread, not in the accept loop
        return self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Broken connections are what this server is for: no tracebacks."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _TlsServer

    def setup(self) -> None:
        self.connection = self.request
        self.request.do_handshake()
        self.server.proxy.count_accepted()
        self.server.proxy.track(self.request, True)
        super().setup()

    def finish(self) -> None:
        self.server.proxy.track(self.request, False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test's assertions say what mattered."""

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (OSError, http.client.HTTPException):
            self.close_connection = True

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        request = Request(self.command, parts.path, parts.query)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        proxy = self.server.proxy
        fault = proxy.fault_for(request)
        if fault and fault.meanwhile:
            fault.meanwhile()
        if fault and fault.delay_seconds:
            proxy.stopped.wait(fault.delay_seconds)
        if fault and fault.hold:
            fault.hold.wait()  # a broken barrier cuts the connection: the client sees it
        if (fault and fault.cut) or proxy.stopped.is_set():
            self._hang_up()
        elif fault and fault.answer and not fault.forwarded:
            self._answer(fault.answer)
        else:
            self._forward(_target(parts, fault), body, fault.answer if fault else None)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def _answer(self, answer: Answer) -> None:
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        for name, value in answer.headers:
            self.send_header(name, value)
        declared = len(answer.body) + (100 if answer.truncated else 0)
        self.send_header("Content-Length", str(declared))
        self.end_headers()
        self.wfile.write(answer.body)
        if answer.truncated:
            self._hang_up()

    def _forward(self, target: str, body: bytes, instead: Answer | None = None) -> None:
        upstream_tls = ssl.create_default_context(cafile=str(self.server.proxy.plane.ca_file))
        plane = self.server.proxy.plane
        upstream = http.client.HTTPSConnection("127.0.0.1", plane.port, context=upstream_tls)
        try:
            upstream.connect()  # refused while the API server is down: the client sees a cut
            self.server.proxy.track(upstream.sock, True)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            upstream.request(self.command, target, body or None, headers)
            response = upstream.getresponse()
            if instead is None:
                self._relay(response)
            else:
                response.read()
                self._answer(instead)
        except (OSError, http.client.HTTPException):
            self._hang_up()
        finally:
            if upstream.sock is not None:
                self.server.proxy.track(upstream.sock, False)
            upstream.close()

    def _relay(self, response: http.client.HTTPResponse) -> None:
        """Passes the answer on chunk by chunk (watches stream); a body that breaks off
        upstream breaks off here too, without the closing chunk."""
        self.send_response(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        while chunk := response.read1(64 * 1024):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        self.wfile.write(b"0\r\n\r\n")

    def _hang_up(self) -> None:
        self.close_connection = True
        _hang_up(self.request)


def _target(parts: SplitResult, fault: Fault | None) -> str:
    """Where a request is passed on: its own path, or the one its fault moves it to."""
    path = fault.moved(parts.path) if fault and fault.moved else parts.path
    return f"{path}?{parts.query}" if parts.query else path


def _hang_up(sock: Any) -> None:
    """Shuts the socket down under TLS: the peer sees the connection end, no close_notify."""
    with contextlib.suppress(OSError):  # already gone
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
