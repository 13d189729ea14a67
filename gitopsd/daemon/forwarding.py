"""Webhook calls forwarded to the replica that serves their GitSync (sharding): a Service
spreads calls over the replicas, and only one of them serves each GitSync and holds its
token. One thread sends the calls on, with their body and signature headers, to the address
that replica's Lease advertises (only the daemon's account writes those); the replica that
serves the GitSync checks the signature and acts. Its answer is logged, never the headers.
"""

from __future__ import annotations

import http.client
import logging
import queue
import threading
from contextlib import suppress
from dataclasses import dataclass, field

from gitopsd.daemon.http.endpoints import FORWARDED_HEADER

log = logging.getLogger("gitopsd.http")
WAITING = 64
"""Calls waiting to be forwarded at most; more are dropped (and logged)."""
TIMEOUT_SECONDS = 5.0

Call = tuple[str, str, bytes, dict[str, str]]  # address, path, body, signature headers


@dataclass
class Forwarder:
    calls: queue.Queue[Call | None] = field(default_factory=lambda: queue.Queue(WAITING))
    """The calls to forward, in order; None once it stops."""

    def start(self) -> None:
        threading.Thread(target=self._run, name="webhook-forwarding", daemon=True).start()

    def stop(self) -> None:
        """Forwards nothing more (shutdown): the calls still waiting are dropped."""
        while True:
            with suppress(queue.Empty):
                while True:
                    self.calls.get_nowait()
            with suppress(queue.Full):
                self.calls.put_nowait(None)
                return

    def send(self, address: str, path: str, body: bytes, headers: dict[str, str]) -> None:
        """Queues the call for the replica at `address` (returns at once: the HTTP server's
        one thread calls this)."""
        try:
            self.calls.put_nowait((address, path, body, headers))
        except queue.Full:
            log.warning("webhook call for %s dropped: %d wait to be forwarded", path, WAITING)

    def _run(self) -> None:
        while (call := self.calls.get()) is not None:
            self._forward(*call)

    def _forward(self, address: str, path: str, body: bytes, headers: dict[str, str]) -> None:
        connection = http.client.HTTPConnection(address, timeout=TIMEOUT_SECONDS)
        sent = {**headers, FORWARDED_HEADER: "1", "Content-Type": "application/json"}
        try:
            connection.request("POST", f"/hooks/{path}", body, sent)
            status = connection.getresponse().status
        except (OSError, http.client.HTTPException) as error:
            log.warning("webhook call for %s not forwarded to %s: %s", path, address, error)
            return
        finally:
            connection.close()
        if status == 202:
            log.info("webhook call for %s forwarded to %s", path, address)
        else:
            log.warning("webhook call for %s forwarded to %s: answered %d", path, address, status)
