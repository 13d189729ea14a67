"""The daemon's HTTP surface: `endpoints` says what /metrics, /healthz, /readyz, the
webhooks and the control API answer; `transport` carries requests and answers on a socket,
bounded in what any client may hold.
"""

from gitopsd.daemon.http.endpoints import (
    ControlApi,
    Endpoints,
    Forward,
    Hook,
    serve_control,
    signature_valid,
    signed,
)
from gitopsd.daemon.http.transport import MAX_DISCARDED_BYTES, MAX_PER_CLIENT, Server, serve

__all__ = [
    "MAX_DISCARDED_BYTES",
    "MAX_PER_CLIENT",
    "ControlApi",
    "Endpoints",
    "Forward",
    "Hook",
    "Server",
    "serve",
    "serve_control",
    "signature_valid",
    "signed",
]
