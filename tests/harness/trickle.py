"""A loopback HTTP server that answers slowly: its headers at once, then one byte of a body
it never finishes every `pause_seconds`, until the client goes or the server stops (the red
team's chart repository that holds a fetch). Until `trickling` is set it answers 404 at
once, so a source can be tried before it hangs."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Trickle:
    pause_seconds: float = 0.5
    port: int = 0
    trickling: threading.Event = field(default_factory=threading.Event)
    stopped: threading.Event = field(default_factory=threading.Event)
    held: set[socket.socket] = field(default_factory=set)
    """The connections it holds now."""
    accepted: int = 0
    """Connections accepted so far."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/charts"

    def holding(self) -> int:
        with self.lock:
            return len(self.held)

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            connection.recv(65536)  # the request (small): what it asks is answered alike
            if not self.trickling.is_set():
                connection.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                return
            with self.lock:
                self.held.add(connection)
            try:
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
                while not self.stopped.wait(self.pause_seconds):
                    connection.sendall(b" ")
            except OSError:
                pass  # the client went
            finally:
                with self.lock:
                    self.held.discard(connection)


@contextmanager
def serving(trickle: Trickle) -> Iterator[Trickle]:
    """`trickle`, served until the block ends (or `trickle.stopped` is set)."""
    listener = socket.create_server(("127.0.0.1", 0))
    trickle.port = listener.getsockname()[1]

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return  # closed
            trickle.accepted += 1
            threading.Thread(target=trickle._answer, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield trickle
    finally:
        trickle.stopped.set()
        listener.close()
