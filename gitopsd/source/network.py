"""The connections a source's fetch opens: only to addresses outside the fence, and only
until its deadline.

A URL a tenant gives (a git repository, a chart source, a Chart.yaml dependency, a
registry's redirect) must not reach the daemon's own neighbourhood: every address its host
resolves to is checked against loopback, link-local and the cluster's service and pod
networks before a socket opens (`Fence`), and the socket connects to the address checked
(a name resolved again could answer otherwise; git is told the address, by `gitreach`).
Where insecure sources are allowed (local use and tests) nothing is fenced. The name is
looked up on a thread of its own, waited for no longer than the fetch may still take: a
name server that never answers holds nothing past the deadline. Each request has a total
deadline from the administrator (`Network`): its sockets are shut down when it passes, so
a server that sends a byte now and then holds a thread no longer than that.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from gitopsd.config import Network
from gitopsd.errors import ConfigError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
AddressInfo = tuple[Any, ...]
"""One answer of getaddrinfo: family, type, protocol, canonical name, socket address."""
ALWAYS_FENCED = tuple(
    ipaddress.ip_network(cidr)
    for cidr in ("0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "::/128", "::1/128", "fe80::/10")
)
"""This host and its neighbours on every link: loopback, link-local (cloud metadata)."""


class Fenced(Exception):
    """A host whose address lies behind the fence (ConfigError, by `fence_error`)."""


class LookupTimedOut(TimeoutError):
    """A host whose name was not resolved within the time its fetch had left."""


class Fence:
    """The addresses no fetch of a source reaches: loopback, link-local and the cluster's
    networks (those listed and those the daemon learned until now), or none where insecure
    sources are allowed."""

    def __init__(self, network: Network, fenced: bool) -> None:
        cluster = (*network.cluster_networks, *network.learned()) if fenced else ()
        self.networks = (*ALWAYS_FENCED, *map(ipaddress.ip_network, cluster)) if fenced else ()

    def addresses(self, host: str, port: int, seconds: float) -> list[AddressInfo]:
        """What `host` resolves to, each address checked: raises Fenced if any is fenced,
        LookupTimedOut past `seconds`, OSError if the name does not resolve."""
        found = _look_up(host, port, seconds)
        if not found or any(self.fences(_address(str(info[4][0]))) for info in found):
            raise Fenced(host)
        return found

    def fences(self, address: Address) -> bool:
        mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is loopback too
        return any(address in network for network in self.networks) or (
            mapped is not None and any(mapped in network for network in self.networks)
        )


def _look_up(host: str, port: int, seconds: float) -> list[AddressInfo]:
    """getaddrinfo on a thread of its own, waited for at most `seconds`: the resolver's own
    timeouts (resolv.conf's, up to minutes) are no bound an administrator set. A lookup
    given up on ends by the resolver's timeouts, holding only its own thread."""
    found: list[AddressInfo] = []
    failed: list[OSError] = []
    done = threading.Event()

    def look_up() -> None:
        try:
            found.extend(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as error:
            failed.append(error)
        finally:
            done.set()

    threading.Thread(target=look_up, name=f"lookup-{host}"[:64], daemon=True).start()
    if not done.wait(max(seconds, 0.0)):
        raise LookupTimedOut(host)
    if failed:
        raise failed[0]
    return found


class Deadline:
    """One request's total deadline: at `seconds`, every socket it opened is shut down."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = time.monotonic()
        self.passed = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._pass)
        self._timer.daemon = True

    def watch(self, opened: socket.socket) -> None:
        with self._lock:
            self._sockets.append(opened)
            if self.passed:
                _shut(opened)

    def remaining(self) -> float:
        return self.seconds - (time.monotonic() - self.started)

    def expire(self) -> None:
        """Passes now (a lookup took what was left of it)."""
        self._pass()

    def _pass(self) -> None:
        with self._lock:
            self.passed = True
            for opened in self._sockets:
                _shut(opened)


@contextmanager
def deadline(seconds: float) -> Iterator[Deadline]:
    """A deadline that runs while the block does."""
    running = Deadline(seconds)
    running._timer.start()
    try:
        yield running
    finally:
        running._timer.cancel()


def _shut(opened: socket.socket) -> None:
    with suppress(OSError):  # closed already
        opened.shutdown(socket.SHUT_RDWR)


class Connector:
    """Opens the sockets of one request: to a checked address, under its deadline."""

    def __init__(self, network: Network, fenced: bool, running: Deadline) -> None:
        self.running = running
        self.fence = Fence(network, fenced)

    def connect(self, host: str, port: int, timeout: float | None) -> socket.socket:
        """A socket connected to `host`'s first address that answers; raises Fenced if any
        address it resolves to is fenced, OSError if none connects (the deadline passed
        if its lookup took what was left of it)."""
        try:
            addresses = self.fence.addresses(host, port, self.running.remaining())
        except LookupTimedOut:
            self.running.expire()
            raise
        failure: OSError = OSError(f"{host} has no address")
        for family, kind, protocol, _, address in addresses:
            if self.running.passed:
                break
            opened = socket.socket(family, kind, protocol)
            self.running.watch(opened)
            opened.settimeout(timeout)
            try:
                opened.connect(address)
            except OSError as error:
                opened.close()
                failure = error
                continue
            return opened
        raise failure

    def handlers(self) -> list[urllib.request.BaseHandler]:
        """urllib's handlers for http and https through this connector (no proxy: as for
        git, the environment's proxies are not the source's)."""
        return [urllib.request.ProxyHandler({}), _Plain(self), _Tls(self)]


def _address(text: str) -> Address:
    return ipaddress.ip_address(text.partition("%")[0])  # an IPv6 scope is no part of it


def fence_error(what: str, shown: str) -> ConfigError:
    return ConfigError(
        f"{what}: {shown} resolves to loopback, link-local or the cluster's networks "
        "(network.clusterNetworks), which gitopsd does not fetch from unless insecure "
        "sources are allowed"
    )


class _PlainConnection(http.client.HTTPConnection):
    def __init__(self, connector: Connector, host: str, **options: Any) -> None:
        super().__init__(host, **options)
        self.connector = connector

    def connect(self) -> None:
        self.sock = self.connector.connect(self.host, self.port, self.timeout)


class _TlsConnection(http.client.HTTPSConnection):
    def __init__(
        self, connector: Connector, context: ssl.SSLContext, host: str, **options: Any
    ) -> None:
        super().__init__(host, **options)
        self.connector, self.tls = connector, context

    def connect(self) -> None:
        opened = self.connector.connect(self.host, self.port, self.timeout)
        wrapped = self.tls.wrap_socket(
            opened, server_hostname=self.host, do_handshake_on_connect=False
        )
        self.connector.running.watch(wrapped)  # it holds the socket now: shut down as it
        wrapped.do_handshake()
        self.sock = wrapped


class _Plain(urllib.request.HTTPHandler):
    def __init__(self, connector: Connector) -> None:
        super().__init__()
        self.connector = connector

    def http_open(self, req: Any) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)

    def _connection(self, host: str, **options: Any) -> http.client.HTTPConnection:
        return _PlainConnection(self.connector, host, **options)


class _Tls(urllib.request.HTTPSHandler):
    def __init__(self, connector: Connector) -> None:
        super().__init__()
        self.connector, self.tls = connector, ssl.create_default_context()

    def https_open(self, req: Any) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)

    def _connection(self, host: str, **options: Any) -> http.client.HTTPConnection:
        return _TlsConnection(self.connector, self.tls, host, **options)
