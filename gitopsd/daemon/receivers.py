"""A GitSync's notification providers: each declaration of its spec with the `address` and
`token` of its Secret (Flux's Provider keys), read with the GitSync's own rights where it has
a ServiceAccount, as its webhook's token is. The Secret's values go only to the address it
holds itself, fenced as the GitSync's fetches are (gitopsd.daemon.notifier)."""

from __future__ import annotations

from dataclasses import replace

from gitopsd.cluster import Cluster
from gitopsd.daemon.credentials import secret_values
from gitopsd.errors import ClusterError, ClusterReason, ConfigError
from gitopsd.gitsync.spec import GitSync
from gitopsd.notifications.providers import Provider, provider_of


def providers_of(cluster: Cluster, wanted: GitSync) -> tuple[Provider, ...]:
    providers = []
    for n, (declared, secret_name) in enumerate(wanted.notifications):
        field = f"spec.notifications[{n}].secretRef"
        data, where = secret_values(cluster, wanted, secret_name, field)
        address = data.get("address", b"").decode(errors="replace").strip()
        if not address:
            raise ClusterError(f"{where} has no key address", ClusterReason.NOT_FOUND)
        token = data.get("token", b"").decode(errors="replace").strip()
        try:
            provider = provider_of(declared, address, token, where)
        except ConfigError as error:
            raise ClusterError(str(error), ClusterReason.INVALID) from None
        providers.append(replace(provider, tenant=wanted.namespace))
    return tuple(providers)
