"""Probes a tenant cannot starve (TA-06): the kubelet's probes and Prometheus' scrapes have
a listener of their own, so whoever fills the webhooks' listener (a tenant with pods on
eight addresses) holds none of the probes' connections, and the pod is not restarted."""

from __future__ import annotations

import socket
from pathlib import Path

import yaml

from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.half_requests import HalfRequests
from tests.harness.waiting import wait_for

DEPLOYMENT = Path(__file__).resolve().parents[2] / "config" / "manager" / "deployment.yaml"
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: gitopsd\r\n\r\n"
ADDRESSES = [f"127.0.0.{n}" for n in range(2, 10)]
"""Eight tenant pods (any of 127.0.0.0/8 reaches loopback on Linux)."""
PER_ADDRESS = 32
"""The most one address may hold, so eight of them fill the listener's 256."""


def liveness_timeout_seconds() -> float:
    """How long the kubelet waits for an answer, as the shipped Deployment says."""
    deployment = yaml.safe_load(DEPLOYMENT.read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return float(container["livenessProbe"]["timeoutSeconds"])


def address(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host, int(port)


def probe(target: tuple[str, int], timeout_seconds: float, source: str = "127.0.0.1") -> int:
    """The status a probe gets, timed as the kubelet times it (0: none in time)."""
    try:
        with socket.create_connection(
            target, timeout=timeout_seconds, source_address=(source, 0)
        ) as connection:
            connection.sendall(HEALTHZ)
            return int(connection.recv(65536).split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def busy(daemon: DaemonProcess) -> bool:
    """The webhooks' listener is full: one more caller, from an address of its own, gets
    503 at once."""
    answer = probe(address(daemon.config["listen"]), 5.0, source="127.0.0.10")
    return answer == 503


def test_ta06_probes_are_answered_while_eight_addresses_fill_the_webhook_listener(
    daemons: Daemons,
) -> None:
    daemon = daemons.start_with([], "probed").start()
    webhooks = address(daemon.config["listen"])
    attack = [HalfRequests(webhooks, PER_ADDRESS, source) for source in ADDRESSES]
    try:
        wait_for(lambda: busy(daemon), "the webhooks' listener to be full", 60)
        timeout = liveness_timeout_seconds()
        answers = [probe(address(daemon.config["probeListen"]), timeout) for _ in range(10)]
    finally:
        for held in attack:
            held.close()

    assert answers.count(200) >= 9, answers
    assert daemon.process is not None and daemon.process.poll() is None
