"""A scripted transport for `Api` (its `Transport` seam): answers as urllib3 gives them, or
errors, played in order without a server, and every request it was sent kept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import urllib3

CUT = urllib3.exceptions.ProtocolError("Connection broken: IncompleteRead(12 bytes read)")


@dataclass
class Raw:
    """The urllib3 response under a watch: chunks, then possibly a broken connection."""

    chunks: list[bytes]
    broken: bool = False

    def stream(self, amount: int, decode_content: bool) -> Iterator[bytes]:
        yield from self.chunks
        if self.broken:
            raise CUT

    def release_conn(self) -> None:
        pass


@dataclass
class Answer:
    """A urllib3 response as `Api` reads it: a body, or a stream of chunks (`raw`)."""

    status: int
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    raw: Raw | None = None
    cut: bool = False
    """The connection breaks while the body is read."""

    def read(self) -> bytes:
        if self.cut:
            raise CUT
        return self.body

    def stream(self, amount: int, decode_content: bool) -> Iterator[bytes]:
        assert self.raw is not None, "a watch's answer streams"
        yield from self.raw.stream(amount, decode_content)

    def release_conn(self) -> None:
        pass


@dataclass
class Transport:
    """Plays the scripted answers (or raises the scripted errors) in order."""

    script: list[Answer | Exception]
    sent: list[str] = field(default_factory=list)
    bodies: list[Any] = field(default_factory=list)
    """The body of each request sent, decoded (None for none)."""

    def send(self, method: str, target: str, body: bytes | None = None, *_: Any) -> Answer:
        self.sent.append(f"{method} {target}")
        self.bodies.append(json.loads(body) if body else None)
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


def throttled() -> Answer:
    return Answer(429, b'{"message": "slow down"}', {"Retry-After": "0"})
