"""A source of the configuration file: `source` reads one into its settings (SourceConfig),
`source_list` the `sources:` list, whose dependencies must name sources and form no cycle."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from gitopsd.config import (
    EARLIER_INVENTORY_NAMESPACE,
    LIMIT_SETTINGS,
    SOURCE_NAME,
    SOURCE_NAME_RULE,
    Credentials,
    EarlierRecord,
    Limits,
    PrunePolicy,
    SourceSpec,
    SyncSettings,
    is_local,
    target_of,
)
from gitopsd.configfile.fields import (
    boolean,
    mapping,
    namespace,
    path,
    percent,
    positive,
    seconds,
    secret,
    size,
    string,
    strings,
)
from gitopsd.configfile.helm import chart_settings
from gitopsd.drift_policy import read_rules
from gitopsd.errors import ConfigError
from gitopsd.health import HealthCheck
from gitopsd.names import shown
from gitopsd.target_identity import Tool


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
    "createNamespace",
    "concurrency",
    "webhookSecretFile",
    "limits",
    "dependsOn",
    "helm",
    "drift",
    "replaceOnImmutable",
    "healthCheckExprs",
}
LIMIT_KEYS = {setting.key for setting in LIMIT_SETTINGS.values()}
GUARD_KEYS = {"allowEmpty", "allowMassPrune", "pruneBudgetPercent", "pruneProtected"}
CREDENTIAL_KEYS = {"username", "passwordFile", "passwordEnv", "sshKeyFile", "knownHostsFile"}


def source_list(
    value: Any, where: str, lines: Sequence[int] = ()
) -> tuple[list[SourceConfig], list[tuple[str, str]]]:
    """The sources, and the name and error of each invalid one (named with the line it
    starts on, where `lines` has it)."""
    # An empty list is a daemon that only serves health and metrics, as a fresh in-cluster
    # install is until its ConfigMap names sources; a missing key is more likely a slip.
    if not isinstance(value, list):
        raise ConfigError(f"{where}: sources: expected a list ([] for none)")
    good: list[SourceConfig] = []
    bad: list[tuple[str, str]] = []
    for index, item in enumerate(value):
        name = item.get("name") if isinstance(item, dict) else None
        label = str(name) if name else f"sources[{index}]"
        line = f":{lines[index]}" if index < len(lines) else ""
        try:
            good.append(source(item, f"{where}{line}: source {label}"))
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
    raw = mapping(item, where, SOURCE_KEYS)
    name = string(raw, "name", where, None)
    if not SOURCE_NAME.match(name):
        raise ConfigError(f"{where}: name: {SOURCE_NAME_RULE}")
    spec = SourceSpec(
        url=string(raw, "repository", where, None),
        ref=string(raw, "ref", where, SourceSpec.ref),
        paths=strings(raw, "paths", where, SourceSpec.paths),
        include=strings(raw, "include", where, SourceSpec.include),
        exclude=strings(raw, "exclude", where, SourceSpec.exclude),
        allow_insecure=boolean(raw, "allowInsecure", where, SourceSpec.allow_insecure),
        credentials=_credentials(raw.get("credentials"), f"{where}: credentials"),
        limits=_limits(raw.get("limits"), f"{where}: limits"),
        helm=chart_settings(raw.get("helm"), f"{where}: helm"),
    )
    if is_local(spec.url) and "ref" in raw:
        raise ConfigError(
            f"{where}: ref: repository {spec.url} is a local directory, read as its files "
            "are now: it has no ref to choose (give it as file://PATH with allowInsecure: "
            "true to read a commit)"
        )
    timeout = seconds(raw, "timeout", where, SourceConfig.timeout_seconds)
    settings = _settings(raw, name, where)
    return SourceConfig(
        name=name,
        spec=spec,
        settings=replace(
            settings,
            health_timeout_seconds=timeout,
            identity=target_of(spec, settings.default_namespace, Tool.DAEMON),
        ),
        interval_seconds=seconds(raw, "interval", where, SourceConfig.interval_seconds),
        mode=_mode(raw, where),
        self_heal=boolean(raw, "selfHeal", where, SourceConfig.self_heal),
        timeout_seconds=timeout,
        webhook_secret=secret(raw, "webhookSecretFile", where),
        depends_on=_dependencies(raw, name, where),
    )


def _dependencies(raw: dict[str, Any], name: str, where: str) -> tuple[str, ...]:
    names = strings(raw, "dependsOn", where, ())
    for needed in names:
        if needed == name or not SOURCE_NAME.match(needed):
            raise ConfigError(f"{where}: dependsOn: {shown(needed)} is not another source's name")
    return names


def _settings(raw: dict[str, Any], name: str, where: str) -> SyncSettings:
    guards = mapping(raw.get("guards") or {}, f"{where}: guards", GUARD_KEYS)
    prune = PrunePolicy(
        enabled=boolean(raw, "prune", where, PrunePolicy.enabled),
        allow_empty=boolean(guards, "allowEmpty", where, PrunePolicy.allow_empty),
        allow_mass_prune=boolean(guards, "allowMassPrune", where, PrunePolicy.allow_mass_prune),
        budget_percent=percent(guards, "pruneBudgetPercent", where, PrunePolicy.budget_percent),
        prune_protected=boolean(guards, "pruneProtected", where, PrunePolicy.prune_protected),
    )
    default_namespace = namespace(raw, "namespace", where, SyncSettings.default_namespace)
    return SyncSettings(
        name=name,
        **_record_place(raw, name, default_namespace, where),
        default_namespace=default_namespace,
        tool=Tool.DAEMON,
        create_namespace=boolean(raw, "createNamespace", where, SyncSettings.create_namespace),
        force_conflicts=boolean(raw, "forceConflicts", where, SyncSettings.force_conflicts),
        adopt=boolean(raw, "adopt", where, SyncSettings.adopt),
        prune=prune,
        concurrency=positive(raw, "concurrency", where, SyncSettings.concurrency),
        drift_rules=read_rules(raw.get("drift", []), where),
        replace_on_immutable=boolean(
            raw, "replaceOnImmutable", where, SyncSettings.replace_on_immutable
        ),
        health_checks=health_checks(raw.get("healthCheckExprs", []), where),
    )


def _record_place(
    raw: dict[str, Any], name: str, default_namespace: str, where: str
) -> dict[str, Any]:
    """Where the source's parent is (inventoryNamespace, else the namespace it applies into)
    and where gitopsd kept it before that was the default (`default`), to be moved."""
    inventory = namespace(raw, "inventoryNamespace", where, default_namespace)
    earlier = EarlierRecord(name, EARLIER_INVENTORY_NAMESPACE, named=True)
    moved = "inventoryNamespace" not in raw and inventory != earlier.namespace
    return {"inventory_namespace": inventory, "earlier": (earlier,) if moved else ()}


HEALTH_CHECK_KEYS = {"apiVersion", "kind", "current", "inProgress", "failed"}
MAX_HEALTH_CHECKS = 100


def health_checks(value: Any, where: str) -> tuple[HealthCheck, ...]:
    """A source's healthCheckExprs, as Flux writes them; each expression compiled now, so a
    bad one is refused naming the source, the kind and the expression's field."""
    if not isinstance(value, list) or len(value) > MAX_HEALTH_CHECKS:
        raise ConfigError(f"{where}: healthCheckExprs: expected a list of at most 100")
    checks = tuple(
        _health_check(item, f"{where}: healthCheckExprs[{i}]") for i, item in enumerate(value)
    )
    kinds = [str(check.group_kind) for check in checks]
    repeated = sorted({kind for kind in kinds if kinds.count(kind) > 1})
    if repeated:
        raise ConfigError(f"{where}: healthCheckExprs: one rule per kind: {', '.join(repeated)}")
    return checks


def _health_check(item: Any, where: str) -> HealthCheck:
    raw = mapping(item, where, HEALTH_CHECK_KEYS)
    check = HealthCheck(
        api_version=string(raw, "apiVersion", where, None),
        kind=string(raw, "kind", where, None),
        current=string(raw, "current", where, None),
        in_progress=string(raw, "inProgress", where, "-") if "inProgress" in raw else "",
        failed=string(raw, "failed", where, "-") if "failed" in raw else "",
    )
    problem = check.problem()
    if problem:
        raise ConfigError(f"{where} ({check.api_version} {check.kind}): {problem}")
    return check


def _limits(value: Any, where: str) -> Limits:
    raw = mapping(value or {}, where, LIMIT_KEYS)
    given = {
        limit: size(raw, setting.key, where, getattr(Limits, limit))
        for limit, setting in LIMIT_SETTINGS.items()
    }
    return Limits(**given)


def _credentials(value: Any, where: str) -> Credentials:
    raw = mapping(value or {}, where, CREDENTIAL_KEYS)
    return Credentials(
        username=string(raw, "username", where, Credentials.username),
        password_env=string(raw, "passwordEnv", where, Credentials.password_env),
        password_file=path(raw, "passwordFile", where),
        ssh_key_file=path(raw, "sshKeyFile", where),
        known_hosts_file=path(raw, "knownHostsFile", where),
    )


def _mode(raw: dict[str, Any], where: str) -> Mode:
    text = string(raw, "mode", where, SourceConfig.mode)
    try:
        return Mode(text)
    except ValueError:
        raise ConfigError(
            f"{where}: mode: expected observe, warn or enforce, got {text!r}"
        ) from None
