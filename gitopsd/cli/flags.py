"""Flags that several commands share (a source, its charts and limits, a cluster, the
output), the types of flag values, and how a command is declared (its help, examples and the
exit codes). The flags of settings are the rows of gitopsd.settings_table."""

from __future__ import annotations

import argparse
import os
from enum import Enum
from pathlib import Path
from typing import Any

from gitopsd.config import SyncSettings
from gitopsd.quantities import parse_duration, parse_size
from gitopsd.settings_table import TABLE, Group, Kind, Row, shown


def setting_flags(group: argparse._ArgumentGroup, flags: Group) -> None:
    """The flags of the settings table's rows in `flags`. A flag left out is None, so the
    row's default holds (`cli.settings`); its help quotes it."""
    for row in TABLE:
        if row.flag and row.flag.group is flags:
            group.add_argument(row.flag.name, dest=row.dest, help=_help(row), **_value(row))


def _help(row: Row) -> str:
    """The row's help as a flag's: no capital (an acronym's aside) and no full stop; then
    its default, but a switch's that is off."""
    text = row.help.removesuffix(".")
    text = text if text[1:2].isupper() else text[:1].lower() + text[1:]
    default = shown(row)
    return f"{text} (default {default})" if default and default != "off" else text


def _value(row: Row) -> dict[str, Any]:
    """How the flag takes its value: a switch sets what the default is not, a list is
    repeated, the others are read as their kind."""
    if row.kind is Kind.SWITCH:
        return {"action": "store_const", "const": not row.default}
    if row.kind in (Kind.PATHS, Kind.GLOBS):
        return {"action": "append", "metavar": row.metavar}
    if row.kind is Kind.CHOICE:
        words: type[Enum] = type(row.default)
        return {"type": words, "choices": list(words)}
    return {"type": VALUE_TYPES[row.kind], "metavar": row.metavar}


def source_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source", metavar="SOURCE", help="a local directory, or a git URL (https, ssh)"
    )
    group = parser.add_argument_group("source")
    setting_flags(group, Group.SOURCE)
    group.add_argument("--cache-dir", type=Path, default=default_cache(), help="checkout cache")
    chart_arguments(
        parser.add_argument_group(
            "charts (directories holding Chart.yaml, or a chart repository's)"
        )
    )
    variable_arguments(parser.add_argument_group("variables (Flux's postBuild substitution)"))
    setting_flags(parser.add_argument_group("limits of one revision"), Group.LIMITS)


def variable_arguments(group: argparse._ArgumentGroup) -> None:
    add = group.add_argument
    add(
        "--substitute",
        action="append",
        metavar="NAME=VALUE",
        help="a variable ${NAME} of the rendered objects expands to, repeatable; wins over "
        "--substitute-from (Flux's postBuild.substitute)",
    )
    add(
        "--substitute-from",
        action="append",
        metavar="KIND/NAME",
        help="a ConfigMap or Secret of --inventory-namespace whose data are variables, "
        "repeatable, later ones winning: configmap/NAME or secret/NAME (postBuild.substituteFrom)",
    )
    add(
        "--strict-substitute",
        action="store_true",
        help="a variable with no value and no default is an error, not empty",
    )


def chart_arguments(group: argparse._ArgumentGroup) -> None:
    add = group.add_argument
    add(
        "--helm-chart",
        metavar="NAME",
        help="the source is this chart of the chart repository at SOURCE, not git",
    )
    add(
        "--helm-version",
        metavar="RANGE",
        help="versions of --helm-chart to pick the highest of (default: *, the latest release)",
    )
    add("--helm-release", metavar="NAME", help="release name (default: the chart's directory)")
    add(
        "--helm-namespace",
        metavar="NAMESPACE",
        help="release namespace (default: --namespace, else default)",
    )
    add(
        "--helm-values",
        action="append",
        metavar="FILE",
        help="values file relative to the chart's directory, repeatable; later ones win",
    )
    add(
        "--helm-set",
        action="append",
        metavar="KEY.PATH=VALUE",
        help="a value, repeatable, after the values files (JSON values are typed: 3, true)",
    )


def count(text: str) -> int:
    number = parse_size(text)
    if not number:
        raise argparse.ArgumentTypeError(
            f"expected a positive whole number (sizes may end in Ki, Mi or Gi), got {text!r}"
        )
    return number


def positive(text: str) -> int:
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(text)


def duration(text: str) -> float:
    """A duration as the config file writes one (90s, 5m, 1h30m), or plain seconds."""
    seconds = float(text) if text.isascii() and text.isdigit() else parse_duration(text)
    if not seconds:
        raise argparse.ArgumentTypeError(f"expected a duration such as 90s, 5m or 1h, got {text!r}")
    return seconds


def percent(text: str) -> float:
    """As the config file's pruneBudgetPercent: above 0 and at most 100."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 100:  # also false for nan and inf
        raise argparse.ArgumentTypeError(f"expected a number above 0 and at most 100, got {text!r}")
    return value


VALUE_TYPES = {
    Kind.DURATION: duration,
    Kind.SECONDS: float,
    Kind.PERCENT: percent,
    Kind.POSITIVE: positive,
    Kind.SIZE: count,
    Kind.COUNT: count,
    Kind.TEXT: str,
    Kind.FILE: Path,
}
"""How a flag of each kind reads its value, and says what is wrong with it."""


def kube_arguments(group: argparse._ArgumentGroup) -> None:
    add = group.add_argument
    add(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig file (default $KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    add("--context", help="kubeconfig context")
    add(
        "--allow-exec-credentials",
        action="store_true",
        help="let the kubeconfig run its exec/auth-provider credential plugin",
    )
    add(
        "--insecure-skip-tls-verify",
        action="store_true",
        help="do not check the API server's certificate, as kubectl's flag (asked for here, it "
        "is not warned of; a kubeconfig that says so is, once)",
    )


def cluster_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("cluster")
    kube_arguments(group)
    target_arguments(group)
    setting_flags(group, Group.CLUSTER)
    add = group.add_argument
    add(
        "--refresh",
        action="store_true",
        help="dry-run every object, also those the ApplySet parent's stamps vouch for as in sync",
    )
    add(
        "--health-check-expr",
        dest="health_checks",
        action="append",
        metavar="RULE",
        help="a health rule of the source's own, as YAML, as Flux's healthCheckExprs "
        "(repeatable, one per kind), e.g. \"{apiVersion: v1, kind: Service, current: 'true'}\"",
    )
    add(
        "--drift-rule",
        dest="drift_rules",
        action="append",
        metavar="RULE",
        help="a drift policy rule, as YAML (repeatable; the first that matches decides), "
        "e.g. '{target: {kind: Deployment}, paths: [spec.replicas], managers: "
        "[kube-controller-manager], action: accept}'",
    )


def target_arguments(group: argparse._ArgumentGroup) -> None:
    """What makes a sync a target of its own: the namespace it applies into, and its
    record's name and place (the ApplySet its objects are labelled members of)."""
    add = group.add_argument
    add(
        "--name",
        help="the source's name, as in the daemon's config: its ApplySet parent is the "
        "ConfigMap gitopsd-NAME (default: made of SOURCE and everything that makes the sync "
        "a target of its own: --path, --include, --exclude, --namespace and the --helm-* "
        "flags; a checkout is known by its remote URL and its path in the repository)",
    )
    add(
        "--inventory-namespace",
        help="namespace of the ApplySet parent (default: the namespace it applies into, "
        "--namespace)",
    )
    setting_flags(group, Group.TARGET)
    add(
        "--namespace",
        "-n",
        dest="default_namespace",
        help="namespace for namespaced objects that name none (default: the kubeconfig "
        f"context's namespace, else {SyncSettings.default_namespace!r})",
    )


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "gitopsd" / "sources"


EXIT_CODES = """exit codes:
  0  success (diff: no drift)           4  the cluster failed, or an apply conflict
  1  diff found drift                   5  a prune guard refused a delete
  2  invalid input (file:line named)    6  not healthy (--wait, a sync wave)
  3  the source failed (git)            130, 143  stopped by SIGINT, SIGTERM"""


def command(commands: Any, name: str, summary: str, examples: str) -> argparse.ArgumentParser:
    return commands.add_parser(  # type: ignore[no-any-return]
        name,
        help=summary,
        description=summary,
        epilog=f"examples:\n{examples}\n\n{EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def output_argument(
    parser: argparse.ArgumentParser,
    help: str = "text for people; json or yaml: one document of the versioned contract "
    "(docs/cli.md#json-and-yaml-output)",
) -> argparse._ArgumentGroup:
    group = parser.add_argument_group("output")
    group.add_argument(
        "-o", "--output", choices=("text", "json", "yaml"), default="text", help=help
    )
    return group
