"""A real OpenSSH server (Debian's package, tests/sshd/provide.sh) serving git over ssh on
loopback, the way a git host does.

Each server has its own host key, made for it, and its own configuration: public-key
login only (no PAM, no password), for the test user and the one key the server makes for
the tests, and every command goes through `git-shell`, which runs only git's own
transport commands on the paths they name (any bare repository on this machine, such as
tests/harness/gitserver.py's). It listens on a free port of every address `localhost`
resolves to, so a client may connect to whichever one it looks up.
"""

from __future__ import annotations

import os
import pwd
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from tests.harness.controlplane import free_port, provided, spawn
from tests.harness.waiting import wait_for

PROVIDE_SCRIPT = Path(__file__).resolve().parent.parent / "sshd" / "provide.sh"
HOST = "localhost"
BANNER = b"SSH-2.0-"


@dataclass(frozen=True)
class SshKey:
    """A key pair made by ssh-keygen, without a passphrase."""

    private: Path

    @property
    def public(self) -> str:
        """`TYPE BASE64`, as known_hosts and authorized_keys write it."""
        kind, blob, *_ = Path(f"{self.private}.pub").read_text().split()
        return f"{kind} {blob}"


def make_key(path: Path) -> SshKey:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return SshKey(path)


@dataclass(frozen=True)
class SshServer:
    port: int
    host_key: SshKey
    client_key: SshKey
    """The one key the server lets in."""
    user: str

    def url(self, repository: Path) -> str:
        """The ssh URL of a bare repository on this machine, by its absolute path."""
        return f"ssh://{self.user}@{HOST}:{self.port}{repository}"

    @property
    def known_as(self) -> str:
        """The name ssh looks the server's key up under in known_hosts (off port 22)."""
        return f"[{HOST}]:{self.port}"

    def known_hosts_line(self, key: SshKey | None = None) -> str:
        """A known_hosts line pinning `key` (by default the server's own) for this server."""
        return f"{self.known_as} {(key or self.host_key).public}\n"


@contextmanager
def running_sshd(workdir: Path) -> Iterator[SshServer]:
    """An sshd of its own in `workdir` (keys, configuration, log), stopped when the block
    ends."""
    sshd = provided(PROVIDE_SCRIPT)["SSHD"]
    server = SshServer(
        port=free_port(),
        host_key=make_key(workdir / "host" / "ssh_host_ed25519_key"),
        client_key=make_key(workdir / "client" / "id_ed25519"),
        user=pwd.getpwuid(os.geteuid()).pw_name,
    )
    (workdir / "authorized_keys").write_text(server.client_key.public + "\n")
    addresses = _addresses()
    config = workdir / "sshd_config"
    config.write_text(_configuration(server, addresses, workdir))
    log = workdir / "sshd.log"
    # sshd re-executes itself for each connection, so it is started by its absolute path.
    process = spawn([str(sshd), "-D", "-e", "-f", str(config)], log)
    try:
        greets = partial(_greets, process, log, addresses, server.port)
        wait_for(greets, "sshd to send its banner on every address")
        yield server
    finally:
        process.terminate()
        process.wait(30)


def _configuration(server: SshServer, addresses: list[str], workdir: Path) -> str:
    listen = [f"ListenAddress {_bracketed(address)}:{server.port}" for address in addresses]
    return "\n".join(
        [
            *listen,
            f"HostKey {server.host_key.private}",
            "PidFile none",
            f"AuthorizedKeysFile {workdir / 'authorized_keys'}",
            # the keys live in a temporary directory under /tmp, which anyone may write to
            "StrictModes no",
            "UsePAM no",
            "AuthenticationMethods publickey",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            f"AllowUsers {server.user}",
            "DisableForwarding yes",
            "PermitTTY no",
            "LogLevel VERBOSE",
            # git's transport commands only, whatever the client asks to run
            'ForceCommand git-shell -c "$SSH_ORIGINAL_COMMAND"',
            "",
        ]
    )


def _addresses() -> list[str]:
    """Every address `localhost` resolves to here (127.0.0.1, and ::1 where it is listed)."""
    found = socket.getaddrinfo(HOST, None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in found))


def _bracketed(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def _greets(process: subprocess.Popen[bytes], log: Path, addresses: list[str], port: int) -> bool:
    """Whether sshd, on each of its addresses, accepts a connection and sends its banner;
    if it has exited, fails with its log."""
    if process.poll() is not None:
        raise AssertionError(f"sshd exited {process.returncode}:\n{log.read_text()}")
    return all(_banner(address, port).startswith(BANNER) for address in addresses)


def _banner(address: str, port: int) -> bytes:
    try:
        with socket.create_connection((address, port), timeout=5) as connection:
            return connection.makefile("rb").readline(256)
    except OSError:
        return b""
