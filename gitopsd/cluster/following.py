"""A kubeconfig file followed: a token rotated in it is taken without a restart.

A declared cluster's kubeconfig is most often a mounted Secret whose token another tool
rotates (a day's token from Vault, a renewed ServiceAccount token): the kubelet swaps in the
new file, as it does the in-cluster token, which the official client re-reads on its own.
So the file is looked at (a stat: microseconds, against a request's half a millisecond)
each time the client hands out the token and, when it changed, read again whole; its token
is taken if it still speaks to the same server in the same way. A changed server,
certificate authority or client certificate is the connection's, made at start: it is
logged, and taken at the next start. An unreadable file (caught mid-write, or broken)
keeps the credentials in use, logged, until it changes again."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
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
class Follower:
    """The refresh hook of a configuration read from `found`: the client calls it before it
    hands out the bearer token, which is when the file is looked at."""

    found: Path
    context: str | None
    allow_exec: bool
    hook: Callable[[Any], None] | None
    """The loader's own hook (an exec plugin's token renewed when it expires)."""
    seen: Signature = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.seen = _signature(self.found)

    def __call__(self, configuration: Any) -> None:
        if self._changed():
            self._reread(configuration)
        if self.hook is not None:
            self.hook(configuration)
            configuration.refresh_api_key_hook = self  # the loader's hook sets itself again

    def _changed(self) -> bool:
        """Whether the file changed since it was last looked at: told to one thread (the
        others carry on with the token they have while it reads the file)."""
        signature = _signature(self.found)
        with self.lock:
            changed, self.seen = signature != self.seen, signature
        return changed and signature is not None

    def _reread(self, configuration: Any) -> None:
        from kubernetes import client

        fresh = client.Configuration()
        try:
            load_into(fresh, self.found, self.context, self.allow_exec)
        except ConfigError as error:
            log.error("%s: changed and cannot be read; the credentials in use are kept", error)
            return
        moved = [
            key for key in CONNECTION_KEYS if getattr(fresh, key) != getattr(configuration, key)
        ]
        if moved:
            log.warning(
                "kubeconfig %s changed its %s: taken at the next start (the credentials in "
                "use are kept)",
                self.found,
                ", ".join(moved),
            )
            return
        configuration.api_key = fresh.api_key
        self.hook = fresh.refresh_api_key_hook
        log.info("kubeconfig %s changed: its token taken", self.found)


def follow(configuration: Any, found: Path, context: str | None, allow_exec: bool) -> None:
    """Has `configuration` (read from `found`) take a token rotated in the file."""
    hook = configuration.refresh_api_key_hook
    configuration.refresh_api_key_hook = Follower(found, context, allow_exec, hook)


def _signature(path: Path) -> Signature:
    try:
        found = path.stat()
    except OSError:
        return None
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)
