"""The ports the harness hands its servers: free, each once, and never one an outgoing
connection could take between the probe and the server's bind."""

from __future__ import annotations

import socket

import pytest

from tests.harness.controlplane import FIRST_PORT, _first_ephemeral_port, free_port, worker_ports


def test_ports_are_free_distinct_and_below_the_ephemeral_range() -> None:
    ports = [free_port() for _ in range(200)]

    assert len(set(ports)) == len(ports)
    assert all(FIRST_PORT <= port < _first_ephemeral_port() for port in ports)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", ports[-1]))  # nothing holds it


def test_an_outgoing_connection_takes_no_port_the_harness_hands_out() -> None:
    """The premise of the range: this machine's connections come from above it."""
    with (
        socket.create_server(("127.0.0.1", 0)) as server,
        socket.create_connection(server.getsockname()) as outgoing,
    ):
        assert outgoing.getsockname()[1] >= _first_ephemeral_port() > FIRST_PORT


def test_each_test_worker_takes_ports_from_its_own_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four workers of the range 20000-32768: disjoint slices covering it; one worker (or
    none: the bench, the demo) the whole range."""
    slices = []
    for worker in range(4):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
        slices.append(worker_ports(20000, 32768))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    ports = [free_port() for _ in range(50)]
    low, high = worker_ports(FIRST_PORT, _first_ephemeral_port())

    assert slices == [(20000, 23192), (23192, 26384), (26384, 29576), (29576, 32768)]
    assert FIRST_PORT < low < high < _first_ephemeral_port()
    assert all(low <= port < high for port in ports)
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert worker_ports(20000, 32768) == (20000, 32768)
