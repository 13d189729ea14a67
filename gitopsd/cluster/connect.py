"""Finds cluster credentials: --kubeconfig, --context, $KUBECONFIG, or the in-cluster account."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import urllib3
import yaml

from gitopsd.errors import ConfigError

IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
POOL_CONNECTIONS = 32
"""Connections kept open for reuse: at least the requests in flight of a sync (16 by
default). The client keeps 5 per CPU; on a small machine a burst of 16 then opens, and
closes again, a TLS connection for most requests."""
log = logging.getLogger("gitopsd.cluster")


@dataclass(frozen=True)
class Connection:
    """An authenticated ApiClient, and who it speaks to as whom, for errors and defaults."""

    client: Any
    server: str
    """Whom errors name: the server's address and, where known, the context and user."""
    namespace: str | None = None
    """The namespace the kubeconfig's context names, as kubectl and Flux default to."""
    credentials: Callable[[], Any] | None = None
    """The configuration each request takes its credentials from, asked anew each time (a
    followed kubeconfig's, `following`); None: the client's own."""


def api_client(
    kubeconfig: str | None = None,
    context: str | None = None,
    allow_exec: bool = False,
    connections: int = POOL_CONNECTIONS,
    insecure: bool = False,
) -> Connection:
    """An authenticated ApiClient that keeps `connections` open for reuse; kubeconfig `exec`
    and auth-provider plugins need allow_exec. `insecure`: the server's certificate is not
    checked, as asked (kubectl's --insecure-skip-tls-verify), so that is not warned of.
    The official client is imported here, when a command connects: its imports cost about
    0.3 s of processor time, which a command without a cluster (validate, build) saves."""
    from kubernetes import client

    found = kubeconfig_file(kubeconfig)
    configuration = client.Configuration()
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize, connections)
    if found is None:
        return _in_cluster(configuration)
    chosen = load_into(configuration, found, context, allow_exec)
    if insecure:
        configuration.verify_ssl = False
    _warn_if_unverified(configuration, asked=insecure)
    user = chosen.context.get("user")
    who = f"context {chosen.name}" + (f", user {user}" if user else "")
    server = f"the API server at {_shown(configuration.host)} ({who})"
    return Connection(client.ApiClient(configuration), server, chosen.context.get("namespace"))


def load_into(configuration: Any, found: Path, context: str | None, allow_exec: bool) -> _Chosen:
    """Context `context` of kubeconfig `found` (else its current one), read into the
    official client's `configuration`; a credential plugin refused unless `allow_exec`."""
    from kubernetes import config

    chosen = _context(found, context)
    if not allow_exec:
        _refuse_plugins(found, chosen)
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            str(found), context=context, client_configuration=configuration
        )
    except (config.ConfigException, OSError, yaml.YAMLError) as error:
        raise ConfigError(f"kubeconfig {found}: {_why(error)}") from None
    return chosen


def kubeconfig_file(kubeconfig: str | None = None) -> Path | None:
    """The kubeconfig read, as kubectl finds it: `kubeconfig`, else the first file $KUBECONFIG
    names, else ~/.kube/config if it exists; None: none, so the in-cluster account."""
    path = kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    if path:
        return Path(path)
    home = _home_kubeconfig()
    return home if home.exists() else None


def _home_kubeconfig() -> Path:
    return Path.home() / ".kube" / "config"  # $HOME as it is now, not at import


def context_namespace(kubeconfig: str | None = None, context: str | None = None) -> str | None:
    """The namespace the kubeconfig's context names (in a pod without a kubeconfig, its
    service account's), read without connecting: what a command that needs no cluster
    (`gitopsd build`) defaults to, as a sync would. None when it names none, or there is
    neither."""
    found = kubeconfig_file(kubeconfig)
    if found is None:
        return _service_account_namespace() if IN_CLUSTER_TOKEN.exists() else None
    namespace = _context(found, context).context.get("namespace")
    return str(namespace) if namespace else None


def _in_cluster(configuration: Any) -> Connection:
    from kubernetes import client, config

    if not IN_CLUSTER_TOKEN.exists():
        raise ConfigError(
            f"no kubeconfig: $KUBECONFIG is unset, {_home_kubeconfig()} does not exist and "
            "this is not a pod with a service account; pass --kubeconfig FILE or set KUBECONFIG"
        )
    config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    server = f"the API server at {_shown(configuration.host)} (in-cluster service account)"
    return Connection(client.ApiClient(configuration), server, _service_account_namespace())


def _service_account_namespace() -> str | None:
    namespace_file = IN_CLUSTER_TOKEN.with_name("namespace")
    namespace = namespace_file.read_text().strip() if namespace_file.exists() else None
    return namespace or None


@dataclass(frozen=True)
class _Chosen:
    name: str
    context: dict[str, Any]
    kubeconfig: dict[str, Any]


def _context(path: Path, wanted: str | None) -> _Chosen:
    """The context `wanted` (else the current one) of the kubeconfig at `path`."""
    try:
        kubeconfig = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ConfigError(
            f"kubeconfig {path} does not exist; pass --kubeconfig FILE or set KUBECONFIG"
        ) from None
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"kubeconfig {path}: {_why(error)}") from None
    if not isinstance(kubeconfig, dict):
        raise ConfigError(f"kubeconfig {path}: not a kubeconfig (expected a mapping)")
    contexts = {
        c.get("name"): c.get("context") or {}
        for c in kubeconfig.get("contexts") or []
        if isinstance(c, dict)
    }
    name = wanted or kubeconfig.get("current-context")
    if name not in contexts:
        known = ", ".join(sorted(str(n) for n in contexts)) or "none"
        which = f"no context {name!r}" if name else "no current-context"
        flag = "--context NAME" if name else "--context NAME, or `kubectl config use-context`"
        raise ConfigError(f"kubeconfig {path} has {which} (it has: {known}); pass {flag}")
    return _Chosen(str(name), contexts[name], kubeconfig)


def _why(error: Exception) -> str:
    """Why a kubeconfig could not be read, never quoting it: PyYAML's message shows the
    lines around the error, which may hold a token."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {error.problem or 'invalid YAML'}"
    if isinstance(error, yaml.YAMLError):
        return "invalid YAML"
    if isinstance(error, OSError):
        return error.strerror or type(error).__name__
    return str(error)


def _shown(host: str) -> str:
    address = urlsplit(host)
    return f"{address.scheme}://{address.netloc.rpartition('@')[2]}{address.path}"


def _warn_if_unverified(configuration: Any, asked: bool) -> None:
    """Says once that the server's certificate is not checked, instead of urllib3's two
    plain-text lines on every request (it warns about each one); nothing when the setting
    asked for it, rather than a kubeconfig found."""
    if configuration.verify_ssl:
        return
    warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)
    if asked:
        return
    log.warning(
        "TLS verification is off for the cluster at %s (insecure-skip-tls-verify): "
        "its identity is not checked",
        _shown(configuration.host),
    )


def _refuse_plugins(path: Path, chosen: _Chosen) -> None:
    """A kubeconfig can name a program to run for credentials; run none unless asked to."""
    user = _user_of(chosen.kubeconfig, chosen.context.get("user"))
    for plugin in ("exec", "auth-provider"):
        if plugin in user:
            raise ConfigError(
                f"kubeconfig {path}: the user runs an `{plugin}` credential plugin; "
                "pass --allow-exec-credentials to allow gitopsd to run it"
            )


def _user_of(kubeconfig: dict[str, Any], user_name: str | None) -> dict[str, Any]:
    users = {
        u.get("name"): u.get("user") or {}
        for u in kubeconfig.get("users") or []
        if isinstance(u, dict)
    }
    user: dict[str, Any] = users.get(user_name, {})
    return user
