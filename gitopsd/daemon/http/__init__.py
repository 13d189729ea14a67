"""The daemon's HTTP surface: `endpoints` says what the webhook, probe and control
servers answer; `transport` carries requests and answers on a socket, bounded in what any
client may hold.
"""

from gitopsd.daemon.http.endpoints import (
    ControlApi,
    Forward,
    Probes,
    Webhook,
    Webhooks,
    serve_control,
    signature_valid,
    signed,
)
from gitopsd.daemon.http.transport import MAX_DISCARDED_BYTES, MAX_PER_CLIENT, Server, serve

__all__ = [
    "MAX_DISCARDED_BYTES",
    "MAX_PER_CLIENT",
    "ControlApi",
    "Forward",
    "Probes",
    "Server",
    "Webhook",
    "Webhooks",
    "serve",
    "serve_control",
    "signature_valid",
    "signed",
]
