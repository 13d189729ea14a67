"""A name server that hears every question and answers none, for one command: run in user,
mount and network namespaces of its own (unprivileged), where 127.0.0.1:53 is ours to bind
and /etc/resolv.conf ours to mount over. The resolver then waits out its own timeouts
(resolv.conf's `timeout` times `attempts`, their most: two and a half minutes), as it
would for a tenant's name under a zone whose servers do not answer.

`python -m tests.harness.silent_dns COMMAND...` is the inside: it sets the namespace up and
runs COMMAND (whose network is loopback only)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from subprocess import PIPE

RESOLV_CONF = "nameserver 127.0.0.1\noptions timeout:30 attempts:5\n"
RESOLVER_SECONDS = 30 * 5
"""How long a lookup waits before the resolver gives up."""


def namespaces_allowed() -> bool:
    """Whether this kernel lets an unprivileged user make the namespaces."""
    try:
        done = subprocess.run(["unshare", "-rnm", "true"], capture_output=True, check=False)
    except FileNotFoundError:
        return False
    return done.returncode == 0


def run(command: list[str], timeout_seconds: float) -> subprocess.CompletedProcess[str]:
    """`command` with a silent name server, its output captured; past `timeout_seconds`
    everything it started is killed and TimeoutExpired raised."""
    inside = ["unshare", "-rnm", sys.executable, "-m", "tests.harness.silent_dns", *command]
    with subprocess.Popen(
        inside, stdout=PIPE, stderr=PIPE, text=True, start_new_session=True
    ) as running:
        try:
            out, err = running.communicate(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            os.killpg(running.pid, signal.SIGKILL)  # its group: the command's children too
            running.communicate()
            raise
    return subprocess.CompletedProcess(inside, running.returncode, out, err)


def _listen_silently() -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 53))
    while True:
        server.recvfrom(4096)  # heard, never answered


def _inside(command: list[str]) -> int:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with tempfile.TemporaryDirectory() as scratch:
        conf = Path(scratch) / "resolv.conf"
        conf.write_text(RESOLV_CONF)
        subprocess.run(["mount", "--bind", str(conf), "/etc/resolv.conf"], check=True)
        threading.Thread(target=_listen_silently, daemon=True).start()
        return subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    sys.exit(_inside(sys.argv[1:]))
