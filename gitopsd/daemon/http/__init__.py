"""The daemon's HTTP surface: `endpoints` says what the webhook, probe, control and status
page servers answer; `transport` carries requests and answers on a socket, bounded in what
any client may hold.
"""

from gitopsd.daemon.http.endpoints import (
    ControlApi,
    Forward,
    Probes,
    StatusPage,
    StatusSources,
    Webhook,
    Webhooks,
    serve_control,
    serve_status_page,
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
    "StatusPage",
    "StatusSources",
    "Webhook",
    "Webhooks",
    "serve",
    "serve_control",
    "serve_status_page",
    "signature_valid",
    "signed",
]
