"""A tenant's kubeconfig (a GitSync's spec.kubeConfig), read as data only.

A kubeconfig can name programs to run (exec, auth-provider), files to read (a token file, a
certificate's path), a proxy and identities to impersonate: a tenant's must not make the
daemon run code, read its own files, or send requests anywhere but the server it names. Only
inline credentials of its current context are read (a token, or a client certificate and
key, and the server's CA), never through the official client's loader, which keeps every
content it ever saw in memory and in temporary files: a tenant rotating its Secret would grow
both without end. Each connection to the server is opened by the caller's `Opener`, which
resolves the name and checks the address it connects to (on the thread that sends, never
the one that reads the GitSync: a name server that hangs holds only the tenant's own poll),
and the certificate is still checked against the name.
"""

from __future__ import annotations

import base64
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import urllib3

from gitopsd.cluster.connect import Connection
from gitopsd.errors import ConfigError

CLUSTER_KEYS = {"server", "certificate-authority-data", "tls-server-name"}
USER_KEYS = {"token", "client-certificate-data", "client-key-data"}
Writer = Callable[[str, bytes | None], Path | None]
"""Keeps `content` in a private file of this name (none for None): the file's path."""
Opener = Callable[[str, int, float | None], socket.socket]
"""A socket connected to a host and port within a timeout, to an address it checked (an
OSError, saying why, where it may not)."""


@dataclass(frozen=True)
class Inline:
    """The current context of a kubeconfig, with its credentials inline."""

    host: str
    port: int
    path: str
    server_name: str
    """The name the server's certificate is checked against."""
    ca: bytes | None
    certificate: bytes | None
    key: bytes | None
    token: str | None


def read_inline(document: Any, where: str) -> Inline:
    """The kubeconfig `document` (parsed as a manifest is: bounded, aliases counted), or a
    ConfigError naming what it may not hold, never a value."""
    if not isinstance(document, dict):
        raise ConfigError(f"{where}: not a kubeconfig (expected a mapping)")
    context = _named(document, "contexts", "context", document.get("current-context"), where)
    cluster = _named(document, "clusters", "cluster", context.get("cluster"), where)
    user = _named(document, "users", "user", context.get("user"), where)
    _only(cluster, CLUSTER_KEYS, f"{where}: its cluster")
    _only(user, USER_KEYS, f"{where}: its user")
    server = urlsplit(str(cluster.get("server") or ""))
    if server.scheme != "https" or not server.hostname:
        raise ConfigError(f"{where}: its cluster's server is not an https:// address")

    def decoded(block: dict[str, Any], key: str) -> bytes | None:
        value = block.get(key)
        try:
            return base64.b64decode(str(value), validate=True) if value else None
        except ValueError:
            raise ConfigError(f"{where}: {key} is not base64") from None

    certificate, key = decoded(user, "client-certificate-data"), decoded(user, "client-key-data")
    token = user.get("token")
    if not token and not (certificate and key):
        raise ConfigError(f"{where}: its user has neither a token nor a client certificate and key")
    return Inline(
        host=server.hostname,
        port=server.port or 443,
        path=server.path.rstrip("/"),
        server_name=str(cluster.get("tls-server-name") or server.hostname),
        ca=decoded(cluster, "certificate-authority-data"),
        certificate=certificate,
        key=key,
        token=str(token) if token else None,
    )


def _named(
    document: dict[str, Any], listed: str, key: str, name: Any, where: str
) -> dict[str, Any]:
    entries = document.get(listed) or []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("name") == name:
            found = entry.get(key) or {}
            if isinstance(found, dict):
                return found
    raise ConfigError(f"{where}: its current context's {key} is not in {listed}")


def _only(block: dict[str, Any], allowed: set[str], where: str) -> None:
    """A tenant's kubeconfig holds its credentials inline, and nothing that runs, reads or
    routes: exec, auth-provider, tokenFile, file paths, proxy-url, impersonation; nor
    insecure-skip-tls-verify: its token would go to whoever answers."""
    refused = sorted(set(map(str, block)) - allowed)
    if refused:
        raise ConfigError(
            f"{where} holds {', '.join(refused)}: a GitSync's kubeconfig may hold only "
            f"{', '.join(sorted(allowed))} (it must not run programs, read the daemon's files "
            "or route elsewhere)"
        )


def configuration_of(inline: Inline, write: Writer, opener: Opener, connections: int) -> Connection:
    """A client for `inline`'s server whose every connection `opener` opens, its
    certificates the files `write` keeps (private, each call replacing those of the last)."""
    from kubernetes import client

    configuration = client.Configuration()
    configuration.connection_pool_maxsize = connections
    host = f"[{inline.host}]" if ":" in inline.host else inline.host
    configuration.host = f"https://{host}:{inline.port}{inline.path}"
    configuration.tls_server_name = inline.server_name
    configuration.ssl_ca_cert = _shown_path(write("ca.crt", inline.ca))
    configuration.cert_file = _shown_path(write("client.crt", inline.certificate))
    configuration.key_file = _shown_path(write("client.key", inline.key))
    if inline.token:
        configuration.api_key = {"authorization": f"Bearer {inline.token}"}
    server = f"the API server at https://{host}:{inline.port} (a GitSync's kubeconfig)"
    api = client.ApiClient(configuration)
    pool = api.rest_client.pool_manager.connection_from_url(configuration.host)
    pool.ConnectionCls = _Opened  # the pool the transport takes (cached by the manager)
    pool.conn_kw["opener"] = opener
    return Connection(api, server)


class _Opened(urllib3.connection.HTTPSConnection):
    """A TLS connection whose socket its opener connected (urllib3 wraps it in TLS for the
    server's name, as for any other)."""

    def __init__(self, *arguments: Any, opener: Opener, **options: Any) -> None:
        super().__init__(*arguments, **options)
        self.opener = opener

    def _new_conn(self) -> socket.socket:
        try:
            timeout = self.timeout if isinstance(self.timeout, int | float) else None
            return self.opener(self.host, self.port, timeout)
        except OSError as error:
            raise urllib3.exceptions.NewConnectionError(self, str(error)) from error


def _shown_path(path: Path | None) -> str | None:
    return str(path) if path else None
