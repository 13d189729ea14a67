"""A source of the configuration file: `source` reads one into its settings (SourceConfig),
`source_list` the `sources:` list, whose dependencies must name sources and form no cycle."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gitopsd import settings_table as table
from gitopsd.config import (
    EARLIER_INVENTORY_NAMESPACE,
    SOURCE_NAME,
    SOURCE_NAME_RULE,
    Credentials,
    Decryption,
    EarlierRecord,
    Limits,
    PrunePolicy,
    SourceSpec,
    SyncSettings,
    Verification,
    is_local,
    target_of,
    unsigned_kind,
)
from gitopsd.configfile.clusters import HOME
from gitopsd.configfile.fields import (
    READERS,
    mapping,
    namespace,
    secret,
    string,
    strings,
)
from gitopsd.configfile.helm import chart_settings
from gitopsd.configfile.postbuild import substitution
from gitopsd.drift_policy import read_rules
from gitopsd.errors import ConfigError
from gitopsd.health import HealthCheck
from gitopsd.names import shown
from gitopsd.settings_table import Holder, Mode
from gitopsd.target_identity import Tool


@dataclass(frozen=True)
class SourceConfig:
    name: str
    spec: SourceSpec
    settings: SyncSettings
    interval_seconds: float = table.INTERVAL.default
    mode: Mode = table.MODE.default
    self_heal: bool = table.SELF_HEAL.default
    timeout_seconds: float = table.TIMEOUT.default
    """Of a drift check too; past it the reconcile fails and backs off: it bounds a
    reconcile that crawls (a slow API server)."""
    webhook_secret: bytes | None = field(default=None, repr=False)
    """HMAC-SHA256 key for POST /hooks/<name> (GitHub style), read from webhookSecretFile at
    start; None: no webhook."""
    depends_on: tuple[str, ...] = ()
    """Sources that must have applied their current revision, and be healthy, before this
    one applies a revision of its own."""
    cluster: str = ""
    """The cluster it syncs into: a declared one's name (`clusters:`), or secret/NAME for a
    GitSync's own kubeconfig; "": the daemon's own."""

    @property
    def cluster_name(self) -> str:
        """The cluster it syncs into as metrics, status and the command line name it."""
        return self.cluster or HOME


HAND_READ_KEYS = {
    "name",
    "repository",
    "namespace",
    "inventoryNamespace",
    "webhookSecretFile",
    "dependsOn",
    "helm",
    "drift",
    "healthCheckExprs",
    "postBuild",
    "cluster",
}
"""A source's keys that are no row of the settings table (see there why)."""
BLOCKS = tuple(dict.fromkeys(row.block for row in table.TABLE if row.block))
"""A source's blocks of settings, in the table's order: guards, credentials, limits."""


def keys_in(block: str) -> set[str]:
    """The keys of a block ("": the source's top level), as the table's rows give them."""
    return {row.name for row in table.TABLE if row.key and row.block == block}


SOURCE_KEYS = HAND_READ_KEYS | keys_in("") | set(BLOCKS)


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
            config = source(item, f"{where}{line}: source {label}")
            _check_keys(item, config, f"{where}{line}: source {label}")
            good.append(config)
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
    url = string(raw, "repository", where, None)
    given = _given(raw, where)
    spec = SourceSpec(
        url=url,
        credentials=Credentials(**given[Holder.CREDENTIALS]),
        verify=Verification(**given[Holder.VERIFICATION]),
        decryption=Decryption(**given[Holder.DECRYPTION]),
        limits=Limits(**given[Holder.LIMITS]),
        helm=chart_settings(raw.get("helm"), f"{where}: helm"),
        substitution=substitution(raw.get("postBuild"), f"{where}: postBuild"),
        **given[Holder.SOURCE_SPEC],
    )
    _check_verifiable(spec, "verify" in raw, where)
    if is_local(spec.url) and "ref" in raw:
        raise ConfigError(
            f"{where}: ref: repository {spec.url} is a local directory, read as its files "
            "are now: it has no ref to choose (give it as file://PATH with allowInsecure: "
            "true to read a commit)"
        )
    settings = _settings(raw, name, where, given)
    config = SourceConfig(
        name=name,
        spec=spec,
        settings=settings,
        webhook_secret=secret(raw, "webhookSecretFile", where),
        depends_on=_dependencies(raw, name, where),
        cluster=string(raw, "cluster", where, None) if "cluster" in raw else "",
        **given[Holder.SOURCE_CONFIG],
    )
    return replace(
        config,
        settings=replace(
            settings,
            health_timeout_seconds=config.timeout_seconds,
            identity=target_of(spec, settings.default_namespace, Tool.DAEMON),
        ),
    )


def _check_keys(item: Any, config: SourceConfig, where: str) -> None:
    """A file source's verify and decryption blocks name their keys: without them they
    would do nothing, silently. (A GitSync's keys come from the Secrets its blocks name,
    which its CRD requires.)"""
    if not isinstance(item, dict):
        return
    if "verify" in item and not config.spec.verify.enabled:
        raise ConfigError(
            f"{where}: verify: give the keys a revision must be signed with: publicKeysFile "
            "(OpenPGP) or allowedSignersFile (SSH)"
        )
    if "decryption" in item and not config.spec.decryption.enabled:
        raise ConfigError(
            f"{where}: decryption: give the keys SOPS-encrypted files are decrypted with: "
            "ageKeyFile (age identities) or pgpKeyFile (OpenPGP private keys)"
        )


def _check_verifiable(spec: SourceSpec, asked: bool, where: str) -> None:
    """Only what git signs can be verified: for a directory or a chart, a verify block
    would verify nothing, silently."""
    if asked and (read := unsigned_kind(spec)):
        raise ConfigError(
            f"{where}: verify: the source reads {read}: only a git revision carries a "
            "signature to verify"
        )


def _given(raw: dict[str, Any], where: str) -> dict[Holder, dict[str, Any]]:
    """The fields of each holder that the source sets, read as their rows of the settings
    table say; a key left out is no field, so the holder's default holds."""
    blocks = {"": raw} | {
        block: mapping(raw.get(block) or {}, f"{where}: {block}", keys_in(block))
        for block in BLOCKS
    }
    given: dict[Holder, dict[str, Any]] = {holder: {} for holder in Holder}
    for row in table.TABLE:
        values = blocks[row.block]
        if row.key and row.name in values:
            inside = f"{where}: {row.block}" if row.block else where
            given[row.holder][row.field] = READERS[row.kind](values, row.name, inside, row.default)
    return given


def _dependencies(raw: dict[str, Any], name: str, where: str) -> tuple[str, ...]:
    names = strings(raw, "dependsOn", where, ())
    for needed in names:
        if needed == name or not SOURCE_NAME.match(needed):
            raise ConfigError(f"{where}: dependsOn: {shown(needed)} is not another source's name")
    return names


def _settings(
    raw: dict[str, Any], name: str, where: str, given: dict[Holder, dict[str, Any]]
) -> SyncSettings:
    default_namespace = namespace(raw, "namespace", where, SyncSettings.default_namespace)
    return SyncSettings(
        name=name,
        **_record_place(raw, name, default_namespace, where),
        default_namespace=default_namespace,
        tool=Tool.DAEMON,
        prune=PrunePolicy(**given[Holder.PRUNE_POLICY]),
        drift_rules=read_rules(raw.get("drift", []), where),
        health_checks=health_checks(raw.get("healthCheckExprs", []), where),
        **given[Holder.SYNC_SETTINGS],
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
