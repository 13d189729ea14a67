"""An attack on the probes (SE-19, TA-06): connections that each send half a
request line and wait, each opened again as soon as the server cuts it off."""

from __future__ import annotations

import socket
import threading


class HalfRequests:
    """`count` such connections to `address`, from the local address `source` (any of
    127.0.0.0/8 reaches loopback on Linux, so one machine plays many clients)."""

    def __init__(self, address: tuple[str, int], count: int, source: str = "127.0.0.1") -> None:
        self.address, self.source = address, source
        self.connections = [self._open() for _ in range(count)]
        self.reopened = 0
        self.stop = threading.Event()
        self.holding = threading.Thread(target=self._hold, daemon=True)
        self.holding.start()

    def _open(self) -> socket.socket:
        connection = socket.create_connection(
            self.address, timeout=10, source_address=(self.source, 0)
        )
        connection.sendall(b"GET /heal")
        return connection

    def _hold(self) -> None:
        while not self.stop.wait(0.05):
            for at, connection in enumerate(self.connections):
                connection.setblocking(False)
                try:
                    ended = connection.recv(1) == b""
                except BlockingIOError:
                    ended = False
                except OSError:
                    ended = True
                if ended:
                    connection.close()
                    self.connections[at] = self._open()
                    self.reopened += 1

    def close(self) -> None:
        """Closes the connections once the thread that holds them has let go: closed under
        it, a socket it was about to poll failed it (EBADF) in a run of the suite."""
        self.stop.set()
        self.holding.join(timeout=10)
        for connection in self.connections:
            connection.close()
