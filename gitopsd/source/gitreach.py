"""Where, and for how long, one git command of a source may reach over the network.

git would resolve the source's host itself and connect to whatever the name says then.
Instead the host is resolved here, within the command's time, each address checked against
the fence (`network.Fence`: loopback, link-local, the cluster's networks), and git is told
to connect only to the addresses checked: curl's resolve list for https and http
(`http.curloptResolve`, for every name on the port, so neither the case of a name nor its
IDN spelling lets curl look it up again), ssh's `HostName` for ssh, with `HostKeyAlias`
keeping the host's name for its pinned key. git follows no redirect (runner's options).

A command ends at the administrator's `network.gitDeadline`, its lookup included, and
its error names that bound. A command that gets no answer from a git server fails with
one message, whatever answered instead (a closed port, a TLS service, a plain one): the
status is no port scanner.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from gitopsd.config import SourceSpec
from gitopsd.source.network import Fence, Fenced, fence_error
from gitopsd.source.policy import endpoint, mask_url, url_scheme


@dataclass(frozen=True)
class Limit:
    """The time one git command may take, and how its error says it ran out."""

    seconds: float
    said: str
    started: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return max(self.seconds - (time.monotonic() - self.started), 0.0)


@dataclass(frozen=True)
class Reach:
    """What one git command gets: its time, its options and its environment."""

    limit: Limit
    env: Mapping[str, str]
    options: tuple[str, ...] = ()


def limit(spec: SourceSpec, network: bool) -> Limit:
    """The administrator's git deadline for a command that reaches the network; the
    source's timeout for one on the cache."""
    if network:
        admin = spec.network.git_deadline_seconds
        deadline = f"the git deadline of {admin:g} s (network.gitDeadline)"
        return Limit(admin, f"not done within {deadline}")
    return Limit(spec.timeout_seconds, f"no answer within {spec.timeout_seconds:g} s")


def local(spec: SourceSpec, env: Mapping[str, str]) -> Reach:
    """A command that reaches no network (it reads the cache)."""
    return Reach(limit(spec, network=False), env)


def remote(spec: SourceSpec, env: Mapping[str, str]) -> Reach:
    """A command that reaches the source's host: to its checked addresses only. Raises
    ConfigError if the host resolves behind the fence, LookupTimedOut if its lookup takes
    the command's time, OSError if it does not resolve."""
    bound = limit(spec, network=True)
    if url_scheme(spec.url) == "file":
        return Reach(bound, env)
    scheme, host, port = endpoint(spec.url)
    try:
        found = Fence(spec.network, fenced=not spec.allow_insecure).addresses(
            host, port, bound.left()
        )
    except Fenced:
        raise fence_error(f"git source {mask_url(spec.url)}", host) from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    if scheme == "ssh":
        return Reach(bound, {**env, "GIT_SSH_COMMAND": _ssh_to(env, host, port, addresses)})
    return Reach(bound, env, ("-c", f"http.curloptResolve=*:{port}:{','.join(addresses)}"))


def _ssh_to(env: Mapping[str, str], host: str, port: int, addresses: list[str]) -> str:
    """ssh to the first address checked (ssh takes one), its key looked up under the host's
    name as ssh writes it in known_hosts."""
    words = ["-o", f"HostName={addresses[0]}", "-o", f"HostKeyAlias={_known_as(host, port)}"]
    words += ["-o", "CheckHostIP=no"]  # the address is ours, not one known_hosts pins
    return " ".join([env["GIT_SSH_COMMAND"], *map(shlex.quote, words)])


def _known_as(host: str, port: int) -> str:
    """The host's name as known_hosts writes it: [host]:port off port 22."""
    return host if port == 22 else f"[{host}]:{port}"


_UNPINNED = re.compile(r"host key is known for", re.IGNORECASE)
_ANOTHER_PINNED = re.compile(
    r"remote host identification has changed|host key for .* has changed", re.IGNORECASE
)


def host_key_refused(url: str, stderr: str) -> str | None:
    """Why ssh refused the host's key, in words that name the host as known_hosts does:
    no key pinned for it, or another key than the one it showed; None for another cause."""
    known_as = _known_as(*endpoint(url)[1:])
    if _UNPINNED.search(stderr):
        return (
            f"the host key of {known_as} is not known: no key is pinned for it in the "
            f"known_hosts file, and none is trusted on first use; pin it there {PINNED_WHERE}"
        )
    if _ANOTHER_PINNED.search(stderr):
        return (
            f"the host key of {known_as} is not the one pinned for it in the known_hosts "
            f"file {PINNED_WHERE}"
        )
    return None


PINNED_WHERE = (
    "(--known-hosts; a configured source's credentials: knownHostsFile; a GitSync's "
    "repository.secretRef, its known_hosts key)"
)


def no_answer(url: str) -> str:
    """The one cause of a command no git server answered, whatever listened."""
    if url_scheme(url) == "file":
        return f"no git repository at {url}"
    scheme, host, port = endpoint(url)
    shown = f"[{host}]" if ":" in host else host
    return f"no git answer from {mask_url(f'{scheme}://{shown}:{port}')}"
