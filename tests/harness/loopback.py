"""An HTTP server on 127.0.0.1 that a test controls: what gitopsd or a tool it runs must
never reach (a canary), or what would collect what it is sent (credentials); and a port
on 127.0.0.1 where nothing listens."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Loopback:
    """Answers every GET with `status`, `headers` and `body`; keeps each request's path and
    Authorization header."""

    status: int
    path: str
    """The path `url` names (every path gets the same answer)."""
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    port: int = 0
    requests: list[tuple[str, str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"


@contextmanager
def serving(loopback: Loopback) -> Iterator[Loopback]:
    """`loopback`, served until the block ends."""

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            loopback.requests.append((self.path, self.headers.get("Authorization", "")))
            self.send_response(loopback.status)
            for name, value in (*loopback.headers, ("Content-Length", str(len(loopback.body)))):
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(loopback.body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    loopback.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield loopback
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port: int = listener.getsockname()[1]
    return port
