"""A GitSync object read into what the daemon runs: a source, and who it acts as.

The API server has checked the spec against the CRD already; reading it again through the
daemon's own source reader keeps one set of rules (and catches a GitSync stored under an
older CRD). Errors name the GitSync and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gitopsd import configfile
from gitopsd.config import Credentials, Decryption, Network, Verification
from gitopsd.configfile import GitSyncSettings, SourceConfig, cycle_through
from gitopsd.configfile.clusters import HOME
from gitopsd.errors import ConfigError
from gitopsd.gitsync import (
    CREDENTIALS_FOR_ANNOTATION,
    DELETE_POLICY_ANNOTATION,
    FINALIZER,
    RECONCILE_REQUESTED_ANNOTATION,
)
from gitopsd.names import DNS1123_SUBDOMAIN, shown
from gitopsd.objects import Body, ObjectKey
from gitopsd.settings_table import REF, TABLE
from gitopsd.target_identity import Tool

KUBECONFIG_KEY = "value"
"""The key of a kubeconfig Secret read when its secretRef names none, as Flux's."""
KUBECONFIG_LABEL = "secret"
"""What a GitSync's own kubeconfig is called on metrics and in status: secret/NAME."""
MAX_REQUEST = 256
"""The most of a reconcile request's value that its status echoes."""
SHARED_KEYS = (
    "helm",
    "postBuild",
    "drift",
    "healthCheckExprs",
    *{row.block or row.name for row in TABLE if row.gitsync},
)
"""Spec keys that are a file source's keys too, with the same meaning."""


@dataclass(frozen=True)
class GitSync:
    """One GitSync, as the controller acts on it."""

    namespace: str
    name: str
    generation: int
    deleting: bool
    finalized: bool
    """Carries gitopsd's finalizer."""
    prune_on_delete: bool
    suspend: bool = False
    secret_name: str | None = None
    verify_secret: str | None = None
    """The Secret of its namespace holding the keys its revisions must be signed with."""
    decryption_secret: str | None = None
    """The Secret of its namespace holding the keys its encrypted files decrypt with."""
    notifications: tuple[tuple[dict[str, Any], str], ...] = ()
    """Its notification providers: each declaration (name, type, events) and the Secret of
    its namespace holding its address and token."""
    webhook_secret: str | None = None
    """The Secret of its namespace whose `token` signs its webhook's calls; None: none."""
    service_account: str | None = None
    """Whom every request for it impersonates (a ServiceAccount of its namespace); None:
    the daemon itself, confined to the GitSync's namespace."""
    target_namespace: str = ""
    depends_on: tuple[str, ...] = ()
    """The GitSyncs it waits for, as namespace/name (their source names)."""
    requested: str = ""
    """Its reconcile-requested-at annotation: a request to reconcile now, or ""."""
    cluster: str = ""
    """The declared cluster it syncs into; "": the daemon's own, or its kubeconfig's."""
    kubeconfig: tuple[str, str] | None = None
    """The Secret of its namespace, and its key, holding the kubeconfig of the cluster it
    syncs into (Flux's spec.kubeConfig.secretRef); None: none."""
    fields: dict[str, Any] = field(default_factory=dict, repr=False)
    """The spec as a file source's mapping (configfile reads it)."""
    network: Network = field(default_factory=Network)
    """What its fetches may reach, and for how long: the daemon's configuration's."""

    @property
    def key(self) -> str:
        """namespace/name: its work queue key, and its `source` label on every metric."""
        return f"{self.namespace}/{self.name}"

    @property
    def url(self) -> str:
        return str(self.fields["repository"])

    @property
    def user(self) -> str | None:
        if self.service_account is None:
            return None
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"

    def source(
        self,
        credentials: Credentials,
        keys: Verification | None = None,
        decryption: Decryption | None = None,
    ) -> SourceConfig:
        """The source to run, with `credentials` (from its secretRef, written to files), the
        `keys` its revisions are verified with (from its verify.secretRef, likewise; none:
        not verified) and those its encrypted files are decrypted with (`decryption`, from
        its decryption.secretRef; none: an encrypted file is refused)."""
        where = f"GitSync {self.key}: spec"
        config = configfile.source({"name": self.name, **self.fields}, where)
        confined = self.namespace if self.service_account is None else None
        settings = config.settings
        identity = settings.identity and replace(settings.identity, tool=Tool.GITSYNC)
        checks = tuple(replace(c, namespace=self.namespace) for c in settings.health_checks)
        return replace(
            config,
            name=self.key,
            spec=replace(
                config.spec,
                credentials=credentials,
                verify=replace(keys or Verification(), mode=config.spec.verify.mode),
                decryption=decryption or Decryption(),
                network=self.network,
            ),
            settings=replace(
                settings,
                confined_to=confined,
                tool=Tool.GITSYNC,
                identity=identity,
                health_checks=checks,  # charged to this namespace's share of the evaluator
            ),
            depends_on=self.depends_on,
            cluster=f"{KUBECONFIG_LABEL}/{self.kubeconfig[0]}" if self.kubeconfig else self.cluster,
        )


def dependencies(spec: Body, namespace: str) -> tuple[str, ...]:
    """The namespace/name of each GitSync `spec` depends on (the CRD checked their shape)."""
    needed = [d for d in spec.get("dependsOn") or [] if isinstance(d, dict)]
    return tuple(f"{d.get('namespace') or namespace}/{d.get('name')}" for d in needed)


def check_parent(wanted: GitSync, taken: frozenset[tuple[str, str]]) -> None:
    """Its ApplySet parent is no file source's (`taken`: their names and namespaces)."""
    if (wanted.name, wanted.namespace) in taken:
        raise ConfigError(
            f"GitSync {wanted.key}: its ApplySet parent ConfigMap gitopsd-{wanted.name} "
            f"in {wanted.namespace} is a file source's (same name and inventoryNamespace)"
        )


def check_dependencies(wanted: GitSync, bodies: Mapping[ObjectKey, Body]) -> None:
    """A GitSync on a cycle of dependencies would wait for itself forever."""
    if cycle := dependency_cycle(wanted, bodies):
        raise ConfigError(
            f"GitSync {wanted.key}: spec.dependsOn forms a cycle: {' -> '.join(cycle)}"
        )


def dependency_cycle(wanted: GitSync, bodies: Mapping[ObjectKey, Body]) -> list[str] | None:
    """The GitSyncs (namespace/name) on a cycle of dependencies through `wanted`, with the
    others as `bodies` hold them; none when it waits for no one who waits for it."""
    graph = {
        f"{key.namespace}/{key.name}": dependencies(body.get("spec") or {}, key.namespace)
        for key, body in bodies.items()
    }
    graph[wanted.key] = wanted.depends_on
    return cycle_through(graph, wanted.key)


def read(body: Body, settings: GitSyncSettings) -> GitSync:
    """The GitSync in `body`; raises ConfigError naming the field it cannot use."""
    metadata = body.get("metadata") or {}
    namespace, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
    spec = body.get("spec") or {}
    annotations = metadata.get("annotations") or {}
    where = f"GitSync {namespace}/{name}: spec"
    repository = spec.get("repository") or {}
    verify = spec.get("verify") or {}
    fields = {key: spec[key] for key in SHARED_KEYS if key in spec}
    if verify:  # its keys are a Secret's, not a file source's files
        fields["verify"] = {k: v for k, v in verify.items() if k != "secretRef"}
    account = spec.get("serviceAccountName") or settings.default_service_account
    if account is not None and DNS1123_SUBDOMAIN.problem(str(account)):
        raise ConfigError(f"{where}: serviceAccountName: {shown(str(account))} is not a name")
    depends_on = dependencies(spec, namespace)
    _check_cross_namespace(depends_on, namespace, settings, where)
    target = spec.get("targetNamespace") or namespace
    if account is None and target != namespace:
        raise ConfigError(
            f"{where}: targetNamespace: {target} is not the GitSync's namespace; without "
            "serviceAccountName a GitSync may only write to its own namespace"
        )
    fields |= {
        "repository": repository.get("url"),
        "ref": repository.get("ref", REF.default),
        "namespace": target,
        "inventoryNamespace": namespace,
        "allowInsecure": settings.allow_insecure,
    }
    gitsync = GitSync(
        namespace=namespace,
        name=name,
        generation=int(metadata.get("generation") or 0),
        deleting=bool(metadata.get("deletionTimestamp")),
        finalized=FINALIZER in (metadata.get("finalizers") or []),
        prune_on_delete=annotations.get(DELETE_POLICY_ANNOTATION) == "prune",
        suspend=spec.get("suspend") is True,
        secret_name=(repository.get("secretRef") or {}).get("name"),
        verify_secret=_secret_of(verify, "verify", where),
        decryption_secret=_secret_of(spec.get("decryption") or {}, "decryption", where),
        notifications=_notifications(spec.get("notifications"), where),
        webhook_secret=((spec.get("webhook") or {}).get("secretRef") or {}).get("name"),
        service_account=account,
        target_namespace=target,
        depends_on=depends_on,
        requested=requested_of(body),
        cluster=_cluster_of(spec, namespace, settings, where),
        kubeconfig=_kubeconfig_of(spec, namespace, settings, where, account),
        fields=fields,
        network=settings.network,
    )
    gitsync.source(Credentials(password_env=None))  # every field checked now
    return gitsync


def _cluster_of(spec: Body, namespace: str, settings: GitSyncSettings, where: str) -> str:
    """The declared cluster it names, if the admin allowed its namespace to target it."""
    name = str(spec.get("cluster") or "")
    if not name:
        return ""
    declared = next((c for c in settings.clusters if c.name == name), None)
    if declared is None or not declared.allows(namespace):
        allowed = [c.name for c in settings.clusters if c.allows(namespace)]
        raise ConfigError(
            f"{where}: cluster: {shown(name)} is not a cluster the daemon's configuration "
            f"allows namespace {namespace} to target (allowed: {', '.join(allowed) or 'none'})"
        )
    if spec.get("kubeConfig"):
        raise ConfigError(f"{where}: cluster and kubeConfig each name a cluster: give one")
    return name


def _kubeconfig_of(
    spec: Body, namespace: str, settings: GitSyncSettings, where: str, account: str | None
) -> tuple[str, str] | None:
    """The Secret and key of its own kubeconfig, if the admin allows its namespace that. It
    is read as its ServiceAccount: with the daemon's rights, whoever may create a GitSync
    could sync with the credentials of a kubeconfig they may not read."""
    reference = (spec.get("kubeConfig") or {}).get("secretRef") or {}
    if not reference:
        return None
    if not settings.allows_kubeconfig(namespace):
        raise ConfigError(
            f"{where}: kubeConfig: GitSyncs of namespace {namespace} may not bring their own "
            "kubeconfig; the daemon's configuration allows it with gitSyncs.kubeConfigNamespaces"
        )
    if account is None:
        raise ConfigError(
            f"{where}: kubeConfig: needs serviceAccountName, the account its Secret is read as"
        )
    name, key = reference.get("name"), reference.get("key") or KUBECONFIG_KEY
    if not isinstance(name, str) or DNS1123_SUBDOMAIN.problem(name):
        raise ConfigError(f"{where}: kubeConfig: secretRef: name: the Secret's name is required")
    return name, str(key)


def _secret_of(block: Mapping[str, Any], key: str, where: str) -> str | None:
    """The Secret of keys its block `key` names (verify, decryption): without one the block
    would do nothing, silently."""
    if not block:
        return None
    if key == "decryption" and block.get("provider", "sops") != "sops":
        raise ConfigError(f"{where}: decryption: provider: sops is the only one")
    name = (block.get("secretRef") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}: {key}: secretRef: the Secret of the keys is required")
    return name


def _notifications(listed: Any, where: str) -> tuple[tuple[dict[str, Any], str], ...]:
    """Each provider's declaration and its Secret's name, names unique."""
    found, names = [], set()
    for n, entry in enumerate(listed or []):
        declared = {key: value for key, value in entry.items() if key != "secretRef"}
        name = str(declared.get("name") or declared.get("type"))
        if name in names:
            raise ConfigError(f"{where}: notifications: two providers are named {name}")
        names.add(name)
        secret = (entry.get("secretRef") or {}).get("name")
        if not isinstance(secret, str) or not secret:
            raise ConfigError(f"{where}: notifications[{n}]: secretRef: its Secret is required")
        found.append((declared, secret))
    return tuple(found)


def cluster_named(spec: Body) -> str:
    """The cluster a GitSync's spec names, in the words of its metrics: a declared one's
    name, secret/NAME for its own kubeconfig, else in-cluster. As written: whether it may
    sync there is the daemon's to say (its Ready condition)."""
    kubeconfig = spec.get("kubeConfig")
    reference = kubeconfig.get("secretRef") if isinstance(kubeconfig, dict) else None
    if isinstance(reference, dict) and reference.get("name"):
        return f"{KUBECONFIG_LABEL}/{reference['name']}"
    return str(spec.get("cluster") or HOME)


def requested_of(body: Body) -> str:
    """The GitSync's reconcile-requested-at annotation: a request to reconcile now, or ""."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(RECONCILE_REQUESTED_ANNOTATION, ""))[:MAX_REQUEST]


def _check_cross_namespace(
    depends_on: tuple[str, ...], namespace: str, settings: GitSyncSettings, where: str
) -> None:
    """A dependency in another namespace would tell this GitSync's tenant the state of
    another's, so it is refused unless the daemon's configuration allows it."""
    others = [name for name in depends_on if not name.startswith(f"{namespace}/")]
    if others and not settings.cross_namespace_refs:
        raise ConfigError(
            f"{where}: dependsOn: {', '.join(others)} is in another namespace; a GitSync may "
            "depend only on GitSyncs of its own namespace unless the daemon's configuration "
            "sets gitSyncs.crossNamespaceRefs: true"
        )


def credentials_allowed(secret: Body, url: str) -> bool:
    """Whether `secret` opts in to being sent to `url` by a GitSync acting with the daemon's
    rights: its CREDENTIALS_FOR_ANNOTATION names the URL, or a prefix of it ending in `/`."""
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    listed = str(annotations.get(CREDENTIALS_FOR_ANNOTATION, ""))
    allowed = [entry.strip() for entry in listed.split(",") if entry.strip()]
    return any(url == entry or (entry.endswith("/") and url.startswith(entry)) for entry in allowed)
