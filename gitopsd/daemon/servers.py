"""The daemon's HTTP servers, three and the status page's when configured, opened at start:
each on an address of its own, with caps of its own (gitopsd.daemon.http). An address one
of them cannot take is the configuration's to fix: an error naming the setting, the address
and what to do, not a traceback."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from gitopsd.configfile import DaemonConfig
from gitopsd.daemon.http import (
    ControlApi,
    Probes,
    Server,
    StatusPage,
    Webhooks,
    serve,
    serve_control,
    serve_status_page,
)
from gitopsd.errors import ConfigError

log = logging.getLogger("gitopsd.daemon")


def start(
    config: DaemonConfig,
    webhooks: Webhooks,
    probes: Probes,
    control: ControlApi,
    page: StatusPage | None = None,
) -> list[Server]:
    """The webhooks on `listen`, the probes and metrics on `probeListen`, the control API on
    `controlListen`, and the status page on `statusPage.listen` if it is configured (`page`),
    each served from now on."""
    with _listening("listen", config.listen):
        webhooked = serve(config.listen_address, webhooks)
    with _listening("probeListen", config.probe_listen):
        probed = serve(config.probe_address, probes)
    with _listening("controlListen", config.control_listen):
        controlled = serve_control(config.control_address, control)
    log.info("serving /hooks on %s", config.listen)
    log.info("serving /metrics, /healthz and /readyz on %s", config.probe_listen)
    log.info("serving the control API on %s", config.control_listen)
    listen, address = config.status_page.listen, config.status_page.address
    if page is None or listen is None or address is None:
        return [webhooked, probed, controlled]
    with _listening("statusPage.listen", listen):
        paged = serve_status_page(address, page)
    log.info("serving the status page on %s", listen)
    return [webhooked, probed, controlled, paged]


@contextmanager
def _listening(setting: str, address: str) -> Iterator[None]:
    try:
        yield
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            remedy = f"give {setting} another port in the configuration file, or stop what holds it"
        else:
            remedy = f"give {setting} another address in the configuration file"
        why = _system_words(error)
        raise ConfigError(f"{setting}: cannot listen on {address}: {why}; {remedy}") from None


def _system_words(error: OSError) -> str:
    """Why, as the system says it (socket.create_server appends the address to that)."""
    if error.errno is not None and error.errno > 0:
        return os.strerror(error.errno)
    return error.strerror or str(error)  # a host name that does not resolve: getaddrinfo's
