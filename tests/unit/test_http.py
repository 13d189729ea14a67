"""The daemon's HTTP server on a real loopback socket: malformed requests get an answer,
and slow or many clients cannot take it over (SE-19, SE-20)."""

from __future__ import annotations

import hashlib
import hmac
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry

from gitopsd.daemon import http
from tests.harness.waiting import wait_for

SECRET = b"s3cret"
BODY = b'{"ref": "refs/heads/main"}'
GOOD = "sha256=" + hmac.new(SECRET, BODY, hashlib.sha256).hexdigest()


@dataclass
class Server:
    address: tuple[str, int]
    triggered: list[str] = field(default_factory=list)

    def exchange(self, request: bytes) -> bytes:
        """Sends `request` as is; everything the server answers until it closes."""
        with socket.create_connection(self.address, timeout=10) as connection:
            connection.sendall(request)
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
        return answer

    def status(self, request: bytes) -> int:
        answer = self.exchange(request)
        assert answer.startswith(b"HTTP/1."), f"no HTTP answer: {answer!r}"
        return int(answer.split()[1])


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    monkeypatch.setattr(http, "REQUEST_DEADLINE_SECONDS", 3.0)
    started = Server(("127.0.0.1", 0))
    hooks = {"app": http.Hook(SECRET, lambda: started.triggered.append("app"))}
    endpoints = http.Endpoints(CollectorRegistry(), lambda: True, hooks)
    running = http.serve(("127.0.0.1", 0), endpoints)
    started.address = ("127.0.0.1", running.server_address[1])
    yield started
    running.shutdown()
    running.server_close()


def post(headers: bytes, body: bytes = BODY) -> bytes:
    length = b"Content-Length: %d\r\n" % len(body)
    return b"POST /hooks/app HTTP/1.1\r\nHost: x\r\n" + length + headers + b"\r\n" + body


HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.mark.parametrize(
    "signature",
    [
        b"X-Hub-Signature-256: sha256=" + "\u00fc".encode() * 32 + b"\r\n",  # non-ASCII
        b"X-Hub-Signature-256: sha256=\xe9\xe9\r\n",  # not even UTF-8
        b"X-Hub-Signature-256: sha1=" + GOOD.encode()[7:] + b"\r\n",  # wrong prefix
        b"X-Hub-Signature-256: " + GOOD.encode()[:-2] + b"\r\n",  # wrong length
        b"",  # missing
    ],
)
def test_se20_a_malformed_signature_gets_401_and_the_server_keeps_serving(
    server: Server, signature: bytes
) -> None:
    assert server.status(post(signature)) == 401
    assert server.triggered == []
    assert server.status(HEALTHZ) == 200
    assert server.status(post(b"X-Hub-Signature-256: " + GOOD.encode() + b"\r\n")) == 202
    assert server.triggered == ["app"]


@pytest.mark.parametrize("length", [b"", b"\xb2", b"9" * 5000, b"1048577", b"-1"])
def test_se20_a_missing_odd_or_too_large_content_length_gets_413(
    server: Server, length: bytes
) -> None:
    request = b"POST /hooks/app HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + b"\r\n\r\n"
    assert server.status(request) == 413
    assert server.triggered == []


def test_se20_a_client_still_sending_an_oversized_body_reads_the_413(server: Server) -> None:
    """The answer comes before the body is read; the rest of the body is read and dropped
    so the client, still sending, is not reset (it lost the answer that way under load)."""
    assert server.status(post(b"", body=b"x" * http.MAX_DISCARDED_BYTES)) == 413
    assert server.triggered == []


def handler_threads() -> int:
    return sum(thread.name == http.HANDLER_THREAD for thread in threading.enumerate())


class Slowloris:
    """Clients that each send one more byte of an endless header every 0.2 s, noting the
    most handler threads the server ever ran and whether it answered them 503."""

    def __init__(self, address: tuple[str, int], count: int) -> None:
        self.connections = [socket.create_connection(address, timeout=10) for _ in range(count)]
        self.peak_threads = 0
        self.answers: list[bytes] = []
        self.stop = threading.Event()
        for connection in self.connections:
            connection.sendall(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
        threading.Thread(target=self._drip, daemon=True).start()

    def _drip(self) -> None:
        while not self.stop.wait(0.2):
            self.peak_threads = max(self.peak_threads, handler_threads())
            for connection in list(self.connections):
                try:
                    connection.sendall(b"a")
                except OSError:  # the server ended it
                    self._collect(connection)

    def _collect(self, connection: socket.socket) -> None:
        self.connections.remove(connection)
        try:
            self.answers.append(connection.recv(65536))
        except OSError:
            self.answers.append(b"")
        connection.close()


def test_se19_slow_clients_are_cut_off_at_the_deadline_and_threads_stay_capped(
    server: Server,
) -> None:
    slow = Slowloris(server.address, http.MAX_HANDLER_THREADS + 4)
    try:
        # Cut off by the total deadline although each read gets a byte within 0.2 s.
        wait_for(lambda: not slow.connections, "the slow clients to be cut off", 20)
        assert server.status(HEALTHZ) == 200
    finally:
        slow.stop.set()

    assert slow.peak_threads == http.MAX_HANDLER_THREADS
    assert any(answer.startswith(b"HTTP/1.0 503") for answer in slow.answers)
    wait_for(lambda: handler_threads() == 0, "the handler threads to end")
