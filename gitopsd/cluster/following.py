"""A kubeconfig file followed: a token rotated in it is taken without a restart.

A declared cluster's kubeconfig is most often a mounted Secret whose token another tool
rotates (a day's token from Vault, a renewed ServiceAccount token): the kubelet swaps in the
new file, as it does the in-cluster token, which the official client re-reads on its own.
So the file is looked at (a stat: microseconds, against a request's half a millisecond)
before each request takes its credentials and, when it changed, read again whole by the
same loader and checks into a configuration of its own, whose credentials the requests then
take: one reference swapped, so no request mixes the two (the loader's refresh hook writes
into the configuration it was made for only). Taken if the file still speaks to the same
server in the same way: a changed server, certificate authority or client certificate is
the connection pool's, made at start; it is logged, and taken at the next start. A file
that cannot be read (caught mid-write, or broken) keeps the credentials in use, logged,
until it changes again.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitopsd.cluster.connect import load_into
from gitopsd.errors import ConfigError

CONNECTION_KEYS = ("host", "ssl_ca_cert", "cert_file", "key_file", "tls_server_name", "proxy")
"""What the connection pool was made with: a change of any takes a restart."""
log = logging.getLogger("gitopsd.cluster")

Signature = tuple[int, int, int, int] | None
"""The file as a stat sees it (device, inode, size, modification time); None: missing."""


@dataclass
class Followed:
    """The credentials of kubeconfig `found` as the file says now: called before each
    request, it answers the configuration whose credentials to send."""

    found: Path
    context: str | None
    allow_exec: bool
    current: Any
    """The official client's configuration the credentials are taken from: the one the
    connection was made with, then the last one read."""
    seen: Signature = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.seen = _signature(self.found)

    def __call__(self) -> Any:
        if self._changed():
            self._reread()
        return self.current

    def _changed(self) -> bool:
        """Whether the file changed since it was last looked at: told to one thread (the
        others carry on with the credentials they have while it reads the file)."""
        signature = _signature(self.found)
        with self.lock:
            changed, self.seen = signature != self.seen, signature
        return changed and signature is not None

    def _reread(self) -> None:
        from kubernetes import client

        fresh = client.Configuration()
        try:
            load_into(fresh, self.found, self.context, self.allow_exec)
        except ConfigError as error:
            log.error("%s: changed and cannot be read; the credentials in use are kept", error)
            return
        moved = [
            key for key in CONNECTION_KEYS if getattr(fresh, key) != getattr(self.current, key)
        ]
        if moved:
            log.warning(
                "kubeconfig %s changed its %s: taken at the next start (the credentials in "
                "use are kept)",
                self.found,
                ", ".join(moved),
            )
            return
        self.current = fresh
        log.info("kubeconfig %s changed: its token taken", self.found)


def _signature(path: Path) -> Signature:
    try:
        found = path.stat()
    except OSError:
        return None
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)
