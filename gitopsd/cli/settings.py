"""A command's flags, turned into the settings of gitopsd.config.

A setting's flag defaults to None: a flag left out keeps the dataclass's default, so each
default is written once, in its row of gitopsd.settings_table (the help texts quote it).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from gitopsd.config import (
    EARLIER_INVENTORY_NAMESPACE,
    SOURCE_NAME,
    SOURCE_NAME_RULE,
    ChartSettings,
    Credentials,
    Decryption,
    EarlierRecord,
    Limits,
    PrunePolicy,
    SourceSpec,
    Substitution,
    SyncSettings,
    VariablesFrom,
    Verification,
    is_local,
    unsigned_kind,
)
from gitopsd.configfile.helm import (
    chart_name,
    inline_values,
    release_name,
    set_values,
    version_range,
)
from gitopsd.configfile.postbuild import variable_name
from gitopsd.configfile.sources import health_checks
from gitopsd.decryption import SOPS_AGE_KEY_FILE
from gitopsd.drift_policy import read_rules
from gitopsd.errors import ConfigError
from gitopsd.names import DNS1123_LABEL, DNS1123_SUBDOMAIN, NameRule, namespace_problem, shown
from gitopsd.reconcile import naming
from gitopsd.settings_table import Holder, rows
from gitopsd.source.policy import mask_url
from gitopsd.target_identity import Tool

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Settings = TypeVar("Settings", bound="DataclassInstance")


def source_spec(arguments: argparse.Namespace) -> SourceSpec:
    url, chart = arguments.source, getattr(arguments, "helm_chart", None)
    if not _names_an_artifact(arguments):
        url, chart = _chart_apart(url, chart)
    if is_local(url):
        url = str(Path(url).resolve())
        if arguments.ref is not None:
            raise ConfigError(LOCAL_REF.format(path=url))
    spec = _given(
        SourceSpec(
            url=url,
            credentials=_given(Credentials(), arguments, Holder.CREDENTIALS),
            verify=_given(Verification(), arguments, Holder.VERIFICATION),
            decryption=_given(sops_habit(), arguments, Holder.DECRYPTION),
            limits=_given(Limits(), arguments, Holder.LIMITS),
            helm=_charts(arguments, chart),
            substitution=_substitution(arguments),
        ),
        arguments,
        Holder.SOURCE_SPEC,
    )
    _check_verification(spec, getattr(arguments, "verify_mode", None) is not None)
    return spec


def _substitution(arguments: argparse.Namespace) -> Substitution:
    """The variables of --substitute, --substitute-from and --strict-substitute."""
    values: dict[str, str] = {}
    for given in getattr(arguments, "substitute", None) or []:
        name, equals, value = given.partition("=")
        if not equals:
            raise ConfigError(f"--substitute: expected NAME=VALUE, got {shown(given)}")
        values[variable_name(name, "--substitute")] = value
    sources = []
    for given in getattr(arguments, "substitute_from", None) or []:
        kind, _, name = given.partition("/")
        kinds = {"configmap": "ConfigMap", "secret": "Secret"}
        if kind.lower() not in kinds or not name or DNS1123_SUBDOMAIN.problem(name):
            raise ConfigError(
                f"--substitute-from: expected configmap/NAME or secret/NAME, got {shown(given)}"
            )
        sources.append(VariablesFrom(kinds[kind.lower()], name))
    strict = bool(getattr(arguments, "strict_substitute", False))
    return Substitution(tuple(sorted(values.items())), tuple(sources), strict)


def sops_habit() -> Decryption:
    """The age identities sops itself reads, $SOPS_AGE_KEY_FILE, where the command line is
    not given --sops-age-key-file: the habit of those who decrypt with sops by hand."""
    named = os.environ.get(SOPS_AGE_KEY_FILE)
    return Decryption(age_key_file=Path(named) if named else None)


def _check_verification(spec: SourceSpec, mode_given: bool) -> None:
    """Verification is asked for only with keys, and only of what git signs: a mode
    without keys, or keys for a directory or a chart, would verify nothing, silently."""
    if mode_given and not spec.verify.enabled:
        raise ConfigError(
            "--verify-mode: give the keys a revision must be signed with: "
            "--verify-public-keys FILE (OpenPGP) or --verify-allowed-signers FILE (SSH)"
        )
    if spec.verify.enabled and (read := unsigned_kind(spec)):
        raise ConfigError(
            f"--verify-public-keys, --verify-allowed-signers: the source is {read}: only a "
            "git revision carries a signature to verify"
        )


def _names_an_artifact(arguments: argparse.Namespace) -> bool:
    """An oci:// source with --ref (a tag, range or digest) and no chart flag is an OCI
    artifact of manifests, as Flux's OCIRepository reads; without --ref it is a chart."""
    chart_flags = (getattr(arguments, name, None) for name in ("helm_chart", "helm_version"))
    return arguments.ref is not None and not any(flag is not None for flag in chart_flags)


def _chart_apart(source: str, chart: str | None) -> tuple[str, str | None]:
    """The registry and the chart of an OCI reference written as `helm install` takes it,
    oci://HOST/PATH/CHART, unless --helm-chart names the chart apart (or --ref names an
    artifact: `_names_an_artifact`)."""
    if chart is not None or not source.lower().startswith("oci://"):
        return source, chart
    address = source[len("oci://") :].rstrip("/")
    registry, _, named = address.rpartition("/")
    if not registry:
        raise ConfigError(
            f"{mask_url(source)}: an OCI source names its chart, oci://HOST/PATH/CHART, or "
            "its registry with --helm-chart CHART"
        )
    return f"oci://{registry}", named


def _charts(arguments: argparse.Namespace, chart: str | None) -> ChartSettings:
    """How charts render, from the --helm-* flags (a command without them: the defaults)."""
    values = set_values(getattr(arguments, "helm_set", None) or [], "--helm-set")
    namespace = getattr(arguments, "helm_namespace", None)
    if namespace is not None and (problem := namespace_problem(namespace)):
        raise ConfigError(f"--helm-namespace: {shown(namespace)} {problem}")
    version = getattr(arguments, "helm_version", None)
    return ChartSettings(
        release_name=release_name(getattr(arguments, "helm_release", None), "--helm-release"),
        namespace=namespace,
        values_files=tuple(getattr(arguments, "helm_values", None) or ()),
        values=inline_values(values, "--helm-set"),
        chart=chart_name(chart, "--helm-chart"),
        version=ChartSettings.version
        if version is None
        else version_range(version, "--helm-version"),
    )


LOCAL_REF = (
    "--ref: {path} is a local directory, read as its files are now (uncommitted changes "
    "included), so it has no ref to choose; to sync a commit of it, give it as a git URL: "
    "file://{path} --allow-insecure-source --ref REF"
)


def sync_settings(
    arguments: argparse.Namespace, spec: SourceSpec, context_namespace: str | None = None
) -> SyncSettings:
    """`context_namespace`, the kubeconfig context's, is the default namespace for objects
    that name none, as for kubectl and Flux; the record is kept there too, unless
    --inventory-namespace says otherwise."""
    prune = _given(PrunePolicy(), arguments, Holder.PRUNE_POLICY)
    namespace = default_namespace(arguments, context_namespace)
    settings = _given(
        SyncSettings(name="", prune=prune, default_namespace=namespace),
        arguments,
        Holder.SYNC_SETTINGS,
    )
    rules = _yaml_flags(getattr(arguments, "drift_rules", None), "--drift-rule")
    checks = _yaml_flags(getattr(arguments, "health_checks", None), "--health-check-expr")
    return replace(
        settings,
        **_record_settings(arguments, spec, namespace),
        drift_rules=read_rules(rules, "--drift-rule") if rules else (),
        health_checks=health_checks(checks, "--health-check-expr") if checks else (),
    )


def default_namespace(arguments: argparse.Namespace, context_namespace: str | None) -> str:
    """--namespace, else the kubeconfig context's, else `default`: for what names none."""
    namespace = arguments.default_namespace or context_namespace or SyncSettings.default_namespace
    _checked("--namespace", namespace, DNS1123_LABEL)
    return namespace


def _record_settings(
    arguments: argparse.Namespace, spec: SourceSpec, namespace: str
) -> dict[str, Any]:
    """Which record the sync keeps, and where: the source's name (--name, else one made of
    its target's identity), the namespace of its parent (--inventory-namespace, else the one
    it applies into), the identity the parent keeps, and where an earlier gitopsd may have
    kept the record instead (`reconcile.records` moves it)."""
    identity = naming.target_identity(spec, namespace, Tool.CLI)
    name = arguments.name or naming.default_name(spec, identity)
    if not SOURCE_NAME.match(name):
        raise ConfigError(f"--name {shown(name)}: {SOURCE_NAME_RULE}")
    chosen_namespace = arguments.inventory_namespace
    if chosen_namespace is not None:
        _checked("--inventory-namespace", chosen_namespace, DNS1123_LABEL)
    inventory_namespace = chosen_namespace or namespace
    earlier = EarlierRecord(
        arguments.name or naming.earlier_default_name(spec),
        chosen_namespace or EARLIER_INVENTORY_NAMESPACE,
        named=arguments.name is not None,
    )
    moved = (earlier.name, earlier.namespace) != (name, inventory_namespace)
    return {
        "name": name,
        "inventory_namespace": inventory_namespace,
        "identity": identity,
        "earlier": (earlier,) if moved else (),
    }


def _yaml_flags(texts: list[str] | None, flag: str) -> list[Any]:
    """A repeated flag whose every value is written as YAML (a rule, say)."""
    values = []
    for text in texts or []:
        try:
            values.append(yaml.safe_load(text))
        except yaml.YAMLError as error:
            raise ConfigError(f"{flag} {shown(text)}: not YAML: {error}") from None
    return values


def _given(defaults: Settings, arguments: argparse.Namespace, holder: Holder) -> Settings:
    """`defaults`, with each field of `holder` whose row's flag was given set to the flag's
    value; a repeated flag's list becomes a tuple. A command without the flag leaves the
    field alone, as when the flag is not given."""
    flags = {row.field: row.dest for row in rows(holder) if row.flag}
    given = {field: getattr(arguments, dest, None) for field, dest in flags.items()}
    return replace(
        defaults,
        **{
            field: tuple(value) if isinstance(value, list) else value
            for field, value in given.items()
            if value is not None
        },
    )


def _checked(flag: str, value: str, rule: NameRule) -> None:
    """Names and namespaces end up in URLs: refuse what the API server would refuse."""
    problem = rule.problem(value)
    if problem:
        raise ConfigError(f"{flag} {shown(value)} {problem}")
