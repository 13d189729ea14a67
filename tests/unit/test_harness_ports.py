"""The ports the harness hands its servers: free, each once, and never one an outgoing
connection could take between the probe and the server's bind."""

from __future__ import annotations

import socket

from tests.harness.controlplane import FIRST_PORT, _first_ephemeral_port, free_port


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
