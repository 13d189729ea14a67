"""Finds cluster credentials: --kubeconfig, --context, $KUBECONFIG, or the in-cluster account."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import urllib3
import yaml
from kubernetes import client, config

from gitopsd.errors import ConfigError

IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
POOL_CONNECTIONS = 32
"""Connections kept open for reuse: at least the requests in flight of a sync (16 by
default). The client keeps 5 per CPU; on a small machine a burst of 16 then opens, and
closes again, a TLS connection for most requests."""
log = logging.getLogger("gitopsd.cluster")


def api_client(
    kubeconfig: str | None = None,
    context: str | None = None,
    allow_exec: bool = False,
    connections: int = POOL_CONNECTIONS,
) -> Any:
    """An authenticated ApiClient that keeps `connections` open for reuse; kubeconfig `exec`
    and auth-provider plugins need allow_exec."""
    path = kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None
    default = Path.home() / ".kube" / "config"
    configuration = client.Configuration()
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize, connections)
    if path is None and not default.exists() and IN_CLUSTER_TOKEN.exists():
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return client.ApiClient(configuration)
    path = path or str(default)
    if not allow_exec:
        _refuse_plugins(Path(path), context)
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            path, context=context, client_configuration=configuration
        )
    except (config.ConfigException, OSError, yaml.YAMLError) as error:
        raise ConfigError(f"kubeconfig {path}: {error}") from None
    _warn_if_unverified(configuration)
    return client.ApiClient(configuration)


def _warn_if_unverified(configuration: Any) -> None:
    """Says once that the server's certificate is not checked, instead of urllib3's two
    plain-text lines on every request (it warns about each one)."""
    if configuration.verify_ssl:
        return
    address = urlsplit(configuration.host)
    server = f"{address.scheme}://{address.netloc.rpartition('@')[2]}{address.path}"
    log.warning(
        "TLS verification is off for the cluster at %s (insecure-skip-tls-verify): "
        "its identity is not checked",
        server,
    )
    warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)


def _refuse_plugins(path: Path, context: str | None) -> None:
    """A kubeconfig can name a program to run for credentials; run none unless asked to."""
    try:
        kubeconfig = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"kubeconfig {path}: {error}") from None
    user = _user_of(kubeconfig, context or kubeconfig.get("current-context"))
    for plugin in ("exec", "auth-provider"):
        if plugin in user:
            raise ConfigError(
                f"kubeconfig {path}: the user runs an `{plugin}` credential plugin; "
                "pass --allow-exec-credentials to allow gitopsd to run it"
            )


def _user_of(kubeconfig: dict[str, Any], context_name: str | None) -> dict[str, Any]:
    contexts = {c.get("name"): c.get("context", {}) for c in kubeconfig.get("contexts") or []}
    user_name = contexts.get(context_name, {}).get("user")
    users = {u.get("name"): u.get("user") or {} for u in kubeconfig.get("users") or []}
    user: dict[str, Any] = users.get(user_name, {})
    return user
