"""The command line: argument parsing, output rendering and exit codes; no reconcile logic.

Exit codes: 0 in sync, 1 drift found (diff), 2 invalid input (including manifests the API
server rejects as invalid), 3 source failure, 4 cluster or apply failure, 5 a guard blocked
a prune, 130 interrupted (SIGINT), 143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path
from typing import Any, TextIO

import yaml

from gitopsd import configfile, daemon, diff, manifests
from gitopsd.changes import Action, ChangeSet, Hooks, Outcome
from gitopsd.cluster import Cluster
from gitopsd.config import (
    LIMIT_SETTINGS,
    SOURCE_NAME,
    SOURCE_NAME_RULE,
    Credentials,
    GiB,
    Limits,
    MiB,
    PrunePolicy,
    SourceSpec,
    SyncSettings,
)
from gitopsd.errors import ClusterError, ConfigError, GitopsdError, SourceError, TerminalError
from gitopsd.names import DNS1123_LABEL, NameRule, shown
from gitopsd.reconcile import (
    ListReader,
    Mode,
    Result,
    Source,
    State,
    SyncReport,
    desired,
    reconcile_once,
)

OK, DRIFT, INVALID, SOURCE_FAILED, CLUSTER_FAILED, PRUNE_BLOCKED = 0, 1, 2, 3, 4, 5
COLORS = {"+": "\033[32m", "-": "\033[31m", "@": "\033[36m"}
RESET = "\033[0m"


class Stop:
    """SIGINT or SIGTERM, caught: the writes in flight finish, no other write or dry-run
    starts (the cluster is fenced), nothing is pruned, the command reports what it did and
    exits 128 + the signal's number (130, 143)."""

    def __init__(self) -> None:
        self.signal: int | None = None

    @contextlib.contextmanager
    def caught(self) -> Iterator[None]:
        self.signal = None
        handlers = {number: signal.signal(number, self._catch) for number in STOP_SIGNALS}
        try:
            yield
        finally:
            for number, handler in handlers.items():
                signal.signal(number, handler)

    def _catch(self, number: int, frame: object) -> None:
        self.signal = number

    def running(self) -> bool:
        return self.signal is None


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
STOP = Stop()
"""Signals reach a process, not a command: one stop flag, reset by each `main`."""


def main(argv: Sequence[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
    with STOP.caught():
        code = _run(arguments)
    if STOP.signal is None:
        return code
    name = signal.Signals(STOP.signal).name
    print(
        f"gitopsd: stopped by {name}: the writes in flight finished, no other write or "
        "dry-run started, nothing was pruned",
        file=sys.stderr,
    )
    return 128 + STOP.signal


def _run(arguments: argparse.Namespace) -> int:
    try:
        code: int = arguments.command(arguments)
    except TerminalError as error:
        return _fail(error, INVALID)
    except SourceError as error:
        return _fail(error, SOURCE_FAILED)
    except ClusterError as error:  # the server refusing a manifest as invalid is bad input
        return _fail(error, INVALID if error.reason == "invalid" else CLUSTER_FAILED)
    return code


def _fail(error: GitopsdError, code: int) -> int:
    _explain(error)
    return code


def _explain(error: GitopsdError) -> None:
    """Prints the error, unless it is a request the stop fenced: that is no failure."""
    fenced = isinstance(error, ClusterError) and error.reason == "fenced"
    if STOP.running() or not fenced:
        print(f"gitopsd: error: {error}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gitopsd",
        description="Keep Kubernetes clusters in the state a git repository declares.",
    )
    parser.add_argument("--version", action="version", version=f"gitopsd {version('gitopsd')}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")
    _add_validate(commands)
    _add_diff(commands)
    _add_sync(commands)
    _add_run(commands)
    return parser


def _add_run(commands: Any) -> None:
    run = commands.add_parser("run", help="the daemon: keep the configured sources in sync")
    run.add_argument("--config", type=Path, required=True, help="YAML file (see config/)")
    run.set_defaults(command=run_daemon)


def _add_validate(commands: Any) -> None:
    validate = commands.add_parser("validate", help="parse and check manifests; no cluster needed")
    _source_arguments(validate)
    validate.set_defaults(command=run_validate)


def _add_diff(commands: Any) -> None:
    diff_command = commands.add_parser("diff", help="show drift between git and the cluster")
    _source_arguments(diff_command)
    _cluster_arguments(diff_command)
    diff_command.add_argument("-o", "--output", choices=("text", "json"), default="text")
    diff_command.set_defaults(command=run_diff)


def _add_sync(commands: Any) -> None:
    sync = commands.add_parser("sync", help="apply git's state; prune what left git with --prune")
    _source_arguments(sync)
    _cluster_arguments(sync)
    add = sync.add_argument
    add("-o", "--output", choices=("text", "json"), default="text")
    add("--dry-run", action="store_true", help="server-side dry-run: change nothing")
    add("--prune", action="store_true", help="delete owned objects that left git")
    add("--allow-empty", action="store_true", help="prune even when the source renders nothing")
    add("--allow-mass-prune", action="store_true", help="prune beyond the budget")
    add(
        "--prune-budget",
        type=float,
        default=25.0,
        metavar="PERCENT",
        help="most owned objects one sync may prune (default 25)",
    )
    add(
        "--prune-protected",
        action="store_true",
        help="also prune Namespaces, CRDs, PersistentVolumes and PersistentVolumeClaims",
    )
    add("--adopt", action="store_true", help="take over existing objects no source owns")
    add(
        "--no-force-conflicts",
        dest="force_conflicts",
        action="store_false",
        help="report fields other managers own instead of taking them over",
    )
    add("--crd-timeout", type=float, default=60.0, metavar="SECONDS")
    sync.set_defaults(command=run_sync)


def _source_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("source", metavar="SOURCE", help="a local directory, or a git URL (https, ssh)")
    add("--ref", default="HEAD", help="branch, tag or commit (default: the remote's HEAD)")
    add(
        "--path",
        action="append",
        dest="paths",
        metavar="PATH",
        help="directory or file inside the source, repeatable (default: all of it)",
    )
    add(
        "--include",
        action="append",
        metavar="GLOB",
        help="file names to read (default *.yaml, *.yml, *.json)",
    )
    add("--exclude", action="append", default=[], metavar="GLOB", help="paths to skip")
    add(
        "--allow-insecure-source", action="store_true", help="permit file:// and plain http:// URLs"
    )
    add("--username", default="git", help="https user name (the token comes from the environment)")
    add(
        "--password-file",
        type=Path,
        help="file holding the https password or token (else $GITOPSD_GIT_PASSWORD)",
    )
    add("--ssh-key", type=Path, help="private key file for ssh URLs")
    add("--known-hosts", type=Path, help="pinned host keys for ssh URLs (required for ssh)")
    add("--cache-dir", type=Path, default=_default_cache(), help="checkout cache")
    add(
        "--max-object-bytes",
        type=_count,
        metavar="BYTES",
        help="largest object, as its YAML document or JSON file "
        f"(default {Limits.max_object_bytes // MiB}Mi)",
    )
    add(
        "--max-revision-bytes",
        type=_count,
        metavar="BYTES",
        help=f"all manifest files together (default {Limits.max_revision_bytes // MiB}Mi)",
    )
    add(
        "--max-documents",
        type=_count,
        metavar="COUNT",
        help=f"YAML documents in all files together (default {Limits.max_documents})",
    )
    add(
        "--max-fetch-bytes",
        type=_count,
        metavar="BYTES",
        help=f"largest pack git may receive (default {Limits.max_fetch_bytes // GiB}Gi)",
    )


def _count(text: str) -> int:
    number = configfile.parse_size(text)
    if not number:
        raise argparse.ArgumentTypeError(
            f"expected a positive whole number (sizes may end in Ki, Mi or Gi), got {text!r}"
        )
    return number


def _cluster_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--kubeconfig", help="kubeconfig file (default $KUBECONFIG, ~/.kube/config, in-cluster)")
    add("--context", help="kubeconfig context")
    add(
        "--allow-exec-credentials",
        action="store_true",
        help="let the kubeconfig run its exec/auth-provider credential plugin",
    )
    add(
        "--name",
        help="the source's name, as in the daemon's config: its ApplySet parent is the "
        "ConfigMap gitopsd-NAME (default: derived from SOURCE and --path)",
    )
    add("--inventory-namespace", default="default", help="namespace of the ApplySet parent")
    add(
        "--namespace",
        "-n",
        default="default",
        dest="default_namespace",
        help="namespace for namespaced objects that name none",
    )


def _default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "gitopsd" / "sources"


# Commands


def run_daemon(arguments: argparse.Namespace) -> int:
    return daemon.run(arguments.config)


def run_validate(arguments: argparse.Namespace) -> int:
    spec = source_spec(arguments)
    found = desired.read_revision(
        desired.fetch(spec, arguments.cache_dir), spec, arguments.cache_dir
    )
    manifests.index(found)
    print(f"{len(found)} objects valid")
    return OK


def run_diff(arguments: argparse.Namespace) -> int:
    result = _reconcile(arguments, Mode.OBSERVE, Hooks())
    origins = {key: str(target.origin) for key, target in result.desired.targets.items()}
    drifts, sha = result.drifts, result.desired.revision.sha
    if arguments.output == "json":
        print(json.dumps(drift_json(sha, drifts, origins), indent=2, default=str))
    else:
        render_drift(drifts, origins, sys.stdout, _colored(sys.stdout))
    return DRIFT if drifts else OK


def run_sync(arguments: argparse.Namespace) -> int:
    progress = Progress(sys.stderr)
    hooks = Hooks(
        on_revision=progress.read,
        on_plan=progress.planned,
        on_outcome=progress.tick,
        may_prune=STOP.running,
    )
    try:
        result = _reconcile(arguments, Mode.ENFORCE, hooks)
        report = result.report or SyncReport(result.desired.revision.sha)
    except GitopsdError as error:
        if STOP.running() or progress.sha is None:
            raise
        _explain(error)
        report = SyncReport(progress.sha, ChangeSet(progress.outcomes))
    finally:
        progress.done()
    if arguments.output == "json":
        print(json.dumps(report_json(report), indent=2))
    else:
        render_report(report, sys.stdout)
    return PRUNE_BLOCKED if report.prune_blocked else OK


def _reconcile(arguments: argparse.Namespace, mode: Mode, hooks: Hooks) -> Result:
    """One reconcile from a fresh state: everything is measured."""
    spec = source_spec(arguments)
    settings = sync_settings(arguments, spec)
    cluster = connect(arguments)
    source = Source(spec, settings, arguments.cache_dir)
    reader = ListReader(cluster, settings.concurrency)
    return reconcile_once(source, cluster, reader, State(), mode, hooks)


def source_spec(arguments: argparse.Namespace) -> SourceSpec:
    url = arguments.source
    if desired.is_local(url):
        url = str(Path(url).resolve())
    credentials = Credentials(
        username=arguments.username,
        password_file=arguments.password_file,
        ssh_key_file=arguments.ssh_key,
        known_hosts_file=arguments.known_hosts,
    )
    return SourceSpec(
        url=url,
        ref=arguments.ref,
        paths=tuple(arguments.paths or (".",)),
        include=tuple(arguments.include or SourceSpec.include),
        exclude=tuple(arguments.exclude),
        allow_insecure=arguments.allow_insecure_source,
        credentials=credentials,
        limits=limits(arguments),
    )


def limits(arguments: argparse.Namespace) -> Limits:
    given = {limit: getattr(arguments, limit) for limit in LIMIT_SETTINGS}
    return replace(Limits(), **{limit: value for limit, value in given.items() if value})


def sync_settings(arguments: argparse.Namespace, spec: SourceSpec) -> SyncSettings:
    prune = PrunePolicy(
        enabled=getattr(arguments, "prune", False),
        allow_empty=getattr(arguments, "allow_empty", False),
        allow_mass_prune=getattr(arguments, "allow_mass_prune", False),
        budget_percent=getattr(arguments, "prune_budget", 25.0),
        prune_protected=getattr(arguments, "prune_protected", False),
    )
    return SyncSettings(
        name=_source_name(arguments, spec),
        inventory_namespace=_checked(
            "--inventory-namespace", arguments.inventory_namespace, DNS1123_LABEL
        ),
        default_namespace=_checked("--namespace", arguments.default_namespace, DNS1123_LABEL),
        force_conflicts=getattr(arguments, "force_conflicts", True),
        adopt=getattr(arguments, "adopt", False),
        dry_run=getattr(arguments, "dry_run", False),
        prune=prune,
        crd_timeout_seconds=getattr(arguments, "crd_timeout", 60.0),
    )


def _source_name(arguments: argparse.Namespace, spec: SourceSpec) -> str:
    """The daemon's naming rule: --name X owns the same objects as the daemon's source X."""
    name: str = arguments.name or desired.default_name(spec)
    if not SOURCE_NAME.match(name):
        raise ConfigError(f"--name {shown(name)}: {SOURCE_NAME_RULE}")
    return name


def _checked(flag: str, value: str, rule: NameRule) -> str:
    """Names and namespaces end up in URLs: refuse what the API server would refuse."""
    problem = rule.problem(value)
    if problem:
        raise ConfigError(f"{flag} {shown(value)} {problem}")
    return value


def connect(arguments: argparse.Namespace) -> Cluster:
    cluster = Cluster.connect(
        arguments.kubeconfig, arguments.context, arguments.allow_exec_credentials
    )
    cluster.may_write = STOP.running
    return cluster


# Rendering


def render_drift(
    drifts: list[diff.Drift], origins: dict[Any, str], out: TextIO, color: bool
) -> None:
    for drift in drifts:
        where = f" ({origins[drift.key]})" if drift.key in origins else ""
        print(f"{drift.state} {drift.key}{where}", file=out)
        for change in drift.changes:
            print(
                f"  {change.path}: {_short(change.live)} -> {_short(change.desired)}"
                f"  (manager: {change.manager})",
                file=out,
            )
        for line in unified(drift):
            print(_paint(line, color), file=out)
    if not drifts:
        print("no drift", file=out)


def unified(drift: diff.Drift) -> list[str]:
    live = _yaml(drift.live).splitlines() if drift.live else []
    desired = _yaml(drift.desired).splitlines() if drift.desired else []
    return list(
        difflib.unified_diff(live, desired, f"live/{drift.key}", f"git/{drift.key}", lineterm="")
    )


def drift_json(revision: str, drifts: list[diff.Drift], origins: dict[Any, str]) -> dict[str, Any]:
    return {
        "revision": revision,
        "drift": [
            {
                "object": str(d.key),
                "group": d.key.group,
                "kind": d.key.kind,
                "namespace": d.key.namespace,
                "name": d.key.name,
                "state": str(d.state),
                "origin": origins.get(d.key),
                "changes": [vars(change) for change in d.changes],
            }
            for d in drifts
        ],
    }


class Progress:
    """A one-line progress bar on a terminal; silent otherwise."""

    WIDTH = 30

    def __init__(self, out: TextIO) -> None:
        self.total, self.done_count, self.out = 1, 0, out
        self.shown = out.isatty()
        self.sha: str | None = None
        """The revision being synced, once read."""
        self.outcomes: list[Outcome] = []
        """Every outcome so far: the report of a sync that was stopped."""

    def read(self, sha: str) -> None:
        self.sha = sha

    def planned(self, count: int) -> None:
        self.total = max(count, 1)

    def tick(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        self.done_count += 1
        if self.shown:
            filled = self.WIDTH * self.done_count // self.total
            bar = "#" * filled + "-" * (self.WIDTH - filled)
            print(
                f"\r[{bar}] {self.done_count}/{self.total} {outcome.key}"[:100].ljust(100),
                end="",
                file=self.out,
                flush=True,
            )

    def done(self) -> None:
        if self.shown and self.done_count:
            print("\r" + " " * 100 + "\r", end="", file=self.out, flush=True)


def render_report(report: SyncReport, out: TextIO) -> None:
    print(f"revision {report.revision or '(local directory)'}", file=out)
    print(f"  {'ACTION':<10} OBJECT", file=out)
    for outcome in report.changes.outcomes:
        if outcome.action != Action.UNCHANGED:
            detail = f"  ({outcome.detail})" if outcome.detail else ""
            print(f"  {outcome.action:<10} {outcome.key}{detail}", file=out)
    for key, reason in report.refused:
        print(f"  {'skipped':<10} {key}  (prune refused: {reason})", file=out)
    for takeover in report.changes.takeovers:
        print(f"  took over  {takeover}", file=out)
    counts = {action: report.changes.count(action) for action in Action}
    counts[Action.SKIPPED] += len(report.refused)
    print(", ".join(f"{n} {action}" for action, n in counts.items()), file=out)


def report_json(report: SyncReport) -> dict[str, Any]:
    return {
        "revision": report.revision,
        "outcomes": [
            {"object": str(o.key), "action": str(o.action), "detail": o.detail}
            for o in report.changes.outcomes
        ],
        "prune_refused": [{"object": str(k), "reason": str(r)} for k, r in report.refused],
        "takeovers": report.changes.takeovers,
    }


def _yaml(body: Any) -> str:
    return yaml.safe_dump(body, sort_keys=True, default_flow_style=False)


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _colored(out: TextIO) -> bool:
    return out.isatty() and "NO_COLOR" not in os.environ


def _paint(line: str, color: bool) -> str:
    if not color or line.startswith(("+++", "---")):
        return line
    start = COLORS.get(line[:1])
    return f"{start}{line}{RESET}" if start else line
