"""The daemon's YAML configuration file (annotated example: config/gitopsd.yaml).

A file that cannot be read, or whose top level is invalid, stops the daemon at start with
an error naming the field. An invalid source is set aside with its error; the others run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from gitopsd.config import (
    LIMIT_SETTINGS,
    SOURCE_NAME,
    SOURCE_NAME_RULE,
    Credentials,
    Limits,
    PrunePolicy,
    SourceSpec,
    SyncSettings,
    is_local,
    parse_duration,
    parse_size,
)
from gitopsd.errors import ConfigError, ManifestError
from gitopsd.manifests import parse_file
from gitopsd.names import DNS1123_SUBDOMAIN, namespace_problem, shown

MAX_DURATION_SECONDS = 7 * 24 * 3600.0


class Mode(StrEnum):
    OBSERVE = "observe"  # drift is measured and exported; nothing is written
    WARN = "warn"  # as observe, plus a Kubernetes Event on each drifted object
    ENFORCE = "enforce"  # new revisions are applied (and pruned, if enabled)


@dataclass(frozen=True)
class SourceConfig:
    name: str
    spec: SourceSpec
    settings: SyncSettings
    interval_seconds: float = 60.0
    mode: Mode = Mode.ENFORCE
    self_heal: bool = True
    """In enforce mode, correct drift as soon as a watch reports it."""
    timeout_seconds: float = 600.0
    """Deadline of one reconcile (or drift check): past it nothing more is written, and the
    reconcile fails and backs off. Bounds a reconcile that crawls (a slow API server)."""
    webhook_secret: bytes | None = field(default=None, repr=False)
    """HMAC-SHA256 key for POST /hooks/<name> (GitHub style), read from webhookSecretFile at
    start; None: no webhook."""
    depends_on: tuple[str, ...] = ()
    """Sources that must have applied their current revision, and be healthy, before this
    one applies a revision of its own."""


@dataclass(frozen=True)
class LeaderElection:
    enabled: bool = False
    namespace: str = "default"
    name: str = "gitopsd"
    lease_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_seconds: float = 2.0


@dataclass(frozen=True)
class GitSyncSettings:
    """Operator mode: which GitSync objects the daemon serves, and with whose rights."""

    enabled: bool = False
    namespaces: tuple[str, ...] = ()
    """The namespaces whose GitSyncs are served; none listed: all."""
    default_service_account: str | None = None
    """The ServiceAccount (of its own namespace) a GitSync without serviceAccountName
    impersonates; None: such a GitSync acts with the daemon's rights, confined to its own
    namespace (Flux's --default-service-account)."""
    allow_insecure: bool = False
    """Permit GitSyncs to read file:// and plain http:// repositories (local use and tests:
    file:// reads the daemon's own file system)."""
    cross_namespace_refs: bool = False
    """Permit a GitSync's dependsOn to name a GitSync of another namespace (Flux's
    --no-cross-namespace-refs, inverted): its status would tell one tenant the state of
    another's GitSync, so it is off."""


@dataclass(frozen=True)
class DaemonConfig:
    listen: str = "127.0.0.1:9090"
    """host:port of /metrics, /healthz, /readyz and /hooks/<source>."""
    control_listen: str = "127.0.0.1:9091"
    """host:port of the control API (`gitopsd get`, `gitopsd reconcile`): loopback only."""
    cache_dir: Path = Path("/var/cache/gitopsd")
    kubeconfig: str | None = None
    context: str | None = None
    allow_exec_credentials: bool = False
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    object_series_budget: int = 500
    """Most gitopsd_object_drift series; further drifted objects are only counted."""
    shutdown_grace_seconds: float = 25.0
    sources: tuple[SourceConfig, ...] = ()
    git_syncs: GitSyncSettings = field(default_factory=GitSyncSettings)
    invalid_sources: tuple[tuple[str, str], ...] = ()
    """(name, error) of sources set aside at load."""

    @property
    def listen_address(self) -> tuple[str, int]:
        return _address(self.listen)

    @property
    def control_address(self) -> tuple[str, int]:
        return _address(self.control_listen)


def _address(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


LOOPBACK_HOSTS = ("127.0.0.1", "::1", "[::1]", "localhost")


TOP_KEYS = {
    "listen",
    "controlListen",
    "cacheDir",
    "kubeconfig",
    "context",
    "allowExecCredentials",
    "leaderElection",
    "objectSeriesBudget",
    "shutdownGraceSeconds",
    "sources",
    "gitSyncs",
}
SOURCE_KEYS = {
    "name",
    "repository",
    "ref",
    "paths",
    "include",
    "exclude",
    "interval",
    "timeout",
    "mode",
    "prune",
    "selfHeal",
    "guards",
    "credentials",
    "namespace",
    "inventoryNamespace",
    "allowInsecure",
    "forceConflicts",
    "adopt",
    "concurrency",
    "webhookSecretFile",
    "limits",
    "dependsOn",
}
LIMIT_KEYS = {setting.key for setting in LIMIT_SETTINGS.values()}
GUARD_KEYS = {"allowEmpty", "allowMassPrune", "pruneBudgetPercent", "pruneProtected"}
CREDENTIAL_KEYS = {"username", "passwordFile", "passwordEnv", "sshKeyFile", "knownHostsFile"}
GITSYNC_KEYS = {
    "enabled",
    "namespaces",
    "defaultServiceAccount",
    "allowInsecure",
    "crossNamespaceRefs",
}
LEADER_KEYS = {"enabled", "namespace", "name", "leaseDuration", "renewDeadline", "retryPeriod"}


def load(path: Path) -> DaemonConfig:
    document = _document(path)
    top = _mapping(document, str(path), TOP_KEYS)
    sources, invalid = _sources(top.get("sources"), str(path))
    listen = _listen(top, "listen", str(path), DaemonConfig.listen)
    control_listen = _listen(top, "controlListen", str(path), DaemonConfig.control_listen)
    if control_listen.rpartition(":")[0] not in LOOPBACK_HOSTS:
        raise ConfigError(
            f"{path}: controlListen: {control_listen!r} is not on loopback; the control API "
            "answers local clients only (in a pod: kubectl port-forward)"
        )
    return DaemonConfig(
        listen=listen,
        control_listen=control_listen,
        cache_dir=Path(_string(top, "cacheDir", str(path), str(DaemonConfig.cache_dir))),
        kubeconfig=top.get("kubeconfig"),
        context=top.get("context"),
        allow_exec_credentials=_bool(
            top, "allowExecCredentials", str(path), DaemonConfig.allow_exec_credentials
        ),
        leader_election=_leader(top.get("leaderElection"), f"{path}: leaderElection"),
        object_series_budget=_count(
            top, "objectSeriesBudget", str(path), DaemonConfig.object_series_budget
        ),
        shutdown_grace_seconds=_seconds(
            top, "shutdownGraceSeconds", str(path), DaemonConfig.shutdown_grace_seconds
        ),
        sources=tuple(sources),
        git_syncs=_git_syncs(top.get("gitSyncs"), f"{path}: gitSyncs"),
        invalid_sources=tuple(invalid),
    )


def _listen(top: dict[str, Any], key: str, where: str, default: str) -> str:
    listen = _string(top, key, where, default)
    if not re.match(r"^[\w.\-\[\]:]*:\d{1,5}$", listen):
        raise ConfigError(f"{where}: {key}: expected host:port, got {listen!r}")
    return listen


def _document(path: Path) -> Any:
    """Read as strictly as manifests are: file:line in every error, duplicate keys and
    tags refused (PyYAML would keep the last of two `mode:` keys silently)."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror}") from None
    try:
        documents = parse_file(data, str(path), Limits())
    except ManifestError as error:
        raise ConfigError(str(error)) from None
    if len(documents) > 1:
        raise ConfigError(f"{path}:{documents[1][0]}: expected one YAML document, found more")
    return documents[0][1] if documents else None


def _sources(value: Any, where: str) -> tuple[list[SourceConfig], list[tuple[str, str]]]:
    # An empty list is a daemon that only serves health and metrics, as a fresh in-cluster
    # install is until its ConfigMap names sources; a missing key is more likely a slip.
    if not isinstance(value, list):
        raise ConfigError(f"{where}: sources: expected a list ([] for none)")
    good: list[SourceConfig] = []
    bad: list[tuple[str, str]] = []
    for index, item in enumerate(value):
        name = item.get("name") if isinstance(item, dict) else None
        label = str(name) if name else f"sources[{index}]"
        try:
            good.append(source(item, f"{where}: source {label}"))
        except ConfigError as error:
            bad.append((label, str(error)))
    names = [source.name for source in good]
    duplicates = {name for name in names if names.count(name) > 1}
    if duplicates:
        raise ConfigError(f"{where}: sources: duplicate names {sorted(duplicates)}")
    known = {*names, *(label for label, _ in bad)}
    for config in [c for c in good if set(c.depends_on) - known]:
        unknown = ", ".join(sorted(set(config.depends_on) - known))
        bad.append((config.name, f"{where}: source {config.name}: dependsOn: no source {unknown}"))
        good.remove(config)
    cycle = cycle_in({c.name: c.depends_on for c in good})
    if cycle:
        raise ConfigError(f"{where}: sources: dependsOn forms a cycle: {' -> '.join(cycle)}")
    return good, bad


def cycle_in(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A cycle of dependencies, as the path that closes it (a -> b -> a), or None."""
    return next((cycle for node in sorted(graph) if (cycle := cycle_through(graph, node))), None)


def cycle_through(graph: Mapping[str, Iterable[str]], node: str) -> list[str] | None:
    """A path of dependencies from `node` back to itself, or None."""
    seen: set[str] = set()
    paths = [[node]]
    while paths:
        path = paths.pop()
        for needed in graph.get(path[-1], ()):
            if needed == node:
                return [*path, node]
            if needed not in seen:
                seen.add(needed)
                paths.append([*path, needed])
    return None


def source(item: Any, where: str) -> SourceConfig:
    """One source from its mapping (a file source's, or a GitSync's spec in that form)."""
    raw = _mapping(item, where, SOURCE_KEYS)
    name = _string(raw, "name", where, None)
    if not SOURCE_NAME.match(name):
        raise ConfigError(f"{where}: name: {SOURCE_NAME_RULE}")
    spec = SourceSpec(
        url=_string(raw, "repository", where, None),
        ref=_string(raw, "ref", where, SourceSpec.ref),
        paths=_strings(raw, "paths", where, SourceSpec.paths),
        include=_strings(raw, "include", where, SourceSpec.include),
        exclude=_strings(raw, "exclude", where, SourceSpec.exclude),
        allow_insecure=_bool(raw, "allowInsecure", where, SourceSpec.allow_insecure),
        credentials=_credentials(raw.get("credentials"), f"{where}: credentials"),
        limits=_limits(raw.get("limits"), f"{where}: limits"),
    )
    if is_local(spec.url) and "ref" in raw:
        raise ConfigError(
            f"{where}: ref: repository {spec.url} is a local directory, read as its files "
            "are now: it has no ref to choose (give it as file://PATH with allowInsecure: "
            "true to read a commit)"
        )
    timeout = _seconds(raw, "timeout", where, SourceConfig.timeout_seconds)
    return SourceConfig(
        name=name,
        spec=spec,
        settings=replace(_settings(raw, name, where), health_timeout_seconds=timeout),
        interval_seconds=_seconds(raw, "interval", where, SourceConfig.interval_seconds),
        mode=_mode(raw, where),
        self_heal=_bool(raw, "selfHeal", where, SourceConfig.self_heal),
        timeout_seconds=timeout,
        webhook_secret=_secret(raw, "webhookSecretFile", where),
        depends_on=_dependencies(raw, name, where),
    )


def _dependencies(raw: dict[str, Any], name: str, where: str) -> tuple[str, ...]:
    names = _strings(raw, "dependsOn", where, ())
    for needed in names:
        if needed == name or not SOURCE_NAME.match(needed):
            raise ConfigError(f"{where}: dependsOn: {shown(needed)} is not another source's name")
    return names


def _settings(raw: dict[str, Any], name: str, where: str) -> SyncSettings:
    guards = _mapping(raw.get("guards") or {}, f"{where}: guards", GUARD_KEYS)
    prune = PrunePolicy(
        enabled=_bool(raw, "prune", where, PrunePolicy.enabled),
        allow_empty=_bool(guards, "allowEmpty", where, PrunePolicy.allow_empty),
        allow_mass_prune=_bool(guards, "allowMassPrune", where, PrunePolicy.allow_mass_prune),
        budget_percent=_percent(guards, "pruneBudgetPercent", where, PrunePolicy.budget_percent),
        prune_protected=_bool(guards, "pruneProtected", where, PrunePolicy.prune_protected),
    )
    return SyncSettings(
        name=name,
        inventory_namespace=_namespace(
            raw, "inventoryNamespace", where, SyncSettings.inventory_namespace
        ),
        default_namespace=_namespace(raw, "namespace", where, SyncSettings.default_namespace),
        force_conflicts=_bool(raw, "forceConflicts", where, SyncSettings.force_conflicts),
        adopt=_bool(raw, "adopt", where, SyncSettings.adopt),
        prune=prune,
        concurrency=_positive(raw, "concurrency", where, SyncSettings.concurrency),
    )


def _limits(value: Any, where: str) -> Limits:
    raw = _mapping(value or {}, where, LIMIT_KEYS)
    keys = {limit: setting.key for limit, setting in LIMIT_SETTINGS.items() if setting.key in raw}
    given = {limit: _size(raw, key, where) for limit, key in keys.items()}
    return replace(Limits(), **given)


def _credentials(value: Any, where: str) -> Credentials:
    raw = _mapping(value or {}, where, CREDENTIAL_KEYS)
    return Credentials(
        username=_string(raw, "username", where, Credentials.username),
        password_env=_string(raw, "passwordEnv", where, Credentials.password_env),
        password_file=_path(raw, "passwordFile", where),
        ssh_key_file=_path(raw, "sshKeyFile", where),
        known_hosts_file=_path(raw, "knownHostsFile", where),
    )


def _git_syncs(value: Any, where: str) -> GitSyncSettings:
    raw = _mapping(value or {}, where, GITSYNC_KEYS)
    namespaces = _strings(raw, "namespaces", where, GitSyncSettings.namespaces)
    for namespace in namespaces:
        problem = namespace_problem(namespace)
        if problem:
            raise ConfigError(f"{where}: namespaces: {shown(namespace)} {problem}")
    account = raw.get("defaultServiceAccount")
    return GitSyncSettings(
        enabled=_bool(raw, "enabled", where, GitSyncSettings.enabled),
        namespaces=namespaces,
        default_service_account=None if account is None else _account(raw, where),
        allow_insecure=_bool(raw, "allowInsecure", where, GitSyncSettings.allow_insecure),
        cross_namespace_refs=_bool(
            raw, "crossNamespaceRefs", where, GitSyncSettings.cross_namespace_refs
        ),
    )


def _account(raw: dict[str, Any], where: str) -> str:
    name = _string(raw, "defaultServiceAccount", where, None)
    problem = DNS1123_SUBDOMAIN.problem(name)
    if problem:
        raise ConfigError(f"{where}: defaultServiceAccount: {shown(name)} {problem}")
    return name


def _leader(value: Any, where: str) -> LeaderElection:
    raw = _mapping(value or {}, where, LEADER_KEYS)
    election = LeaderElection(
        enabled=_bool(raw, "enabled", where, LeaderElection.enabled),
        namespace=_string(raw, "namespace", where, LeaderElection.namespace),
        name=_string(raw, "name", where, LeaderElection.name),
        lease_seconds=_seconds(raw, "leaseDuration", where, LeaderElection.lease_seconds),
        renew_deadline_seconds=_seconds(
            raw, "renewDeadline", where, LeaderElection.renew_deadline_seconds
        ),
        retry_seconds=_seconds(raw, "retryPeriod", where, LeaderElection.retry_seconds),
    )
    if not election.retry_seconds < election.renew_deadline_seconds < election.lease_seconds:
        raise ConfigError(f"{where}: need retryPeriod < renewDeadline < leaseDuration")
    return election


def _mode(raw: dict[str, Any], where: str) -> Mode:
    text = _string(raw, "mode", where, SourceConfig.mode)
    try:
        return Mode(text)
    except ValueError:
        raise ConfigError(
            f"{where}: mode: expected observe, warn or enforce, got {text!r}"
        ) from None


# Typed field readers: each error names the field and what was expected.


def _mapping(value: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping")
    unknown = sorted(set(map(str, value)) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    return value


def _string(raw: dict[str, Any], key: str, where: str, default: str | None) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: {key}: expected a non-empty string")
    return value


def _strings(
    raw: dict[str, Any], key: str, where: str, default: tuple[str, ...]
) -> tuple[str, ...]:
    """A list of non-empty strings; empty only where the default is (e.g. exclude)."""
    value = raw.get(key, list(default))
    valid = isinstance(value, list) and all(isinstance(v, str) and v for v in value)
    if not valid or (default and not value):
        wanted = "a non-empty list" if default else "a list"
        raise ConfigError(f"{where}: {key}: expected {wanted} of non-empty strings")
    return tuple(value)


def _namespace(raw: dict[str, Any], key: str, where: str, default: str) -> str:
    value = _string(raw, key, where, default)
    problem = namespace_problem(value)
    if problem:
        raise ConfigError(f"{where}: {key}: {shown(value)} {problem}")
    return value


def _size(raw: dict[str, Any], key: str, where: str) -> int:
    """A positive whole number; a string may carry a binary suffix (64Mi)."""
    value = raw[key]
    number = parse_size(value) if isinstance(value, str) else value
    if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
        raise ConfigError(
            f"{where}: {key}: expected a positive whole number (sizes may end in Ki, Mi "
            f"or Gi, like 64Mi), got {value!r}"
        )
    return number


def _bool(raw: dict[str, Any], key: str, where: str, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {key}: expected true or false")
    return value


def _count(raw: dict[str, Any], key: str, where: str, default: int) -> int:
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 100_000:
        raise ConfigError(f"{where}: {key}: expected a whole number from 0 to 100000")
    return value


def _positive(raw: dict[str, Any], key: str, where: str, default: int) -> int:
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{where}: {key}: expected a positive whole number, got {value!r}")
    return value


def _percent(raw: dict[str, Any], key: str, where: str, default: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 100:
        raise ConfigError(f"{where}: {key}: expected a number above 0 and at most 100")
    return float(value)


def _path(raw: dict[str, Any], key: str, where: str) -> Path | None:
    return Path(_string(raw, key, where, None)) if key in raw else None


def _secret(raw: dict[str, Any], key: str, where: str) -> bytes | None:
    """The contents of the file `key` names, without surrounding whitespace; never echoed."""
    path = _path(raw, key, where)
    if path is None:
        return None
    try:
        secret = path.read_bytes().strip()
    except OSError as error:
        raise ConfigError(f"{where}: {key}: cannot read {path}: {error.strerror}") from None
    if not secret:
        raise ConfigError(f"{where}: {key}: {path} is empty")
    return secret


def _seconds(raw: dict[str, Any], key: str, where: str, default: float) -> float:
    """A duration such as 30s, 5m or 1h30m (or a number of seconds)."""
    value = raw.get(key, default)
    seconds = parse_duration(value) if isinstance(value, str) else value
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        seconds = -1.0  # not a duration at all
    if not 0 < seconds <= MAX_DURATION_SECONDS:
        raise ConfigError(
            f"{where}: {key}: expected a duration above 0 and at most 7 days "
            f"(like 30s, 5m, 1h), got {value!r}"
        )
    return float(seconds)
