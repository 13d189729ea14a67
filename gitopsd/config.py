"""Settings as frozen dataclasses, each field with its unit and default.

The CLI builds them from flags and the environment; the daemon from its YAML file. Each
default is written here only: a flag or key left out keeps it, and help texts quote it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

from gitopsd.drift_policy import Rule
from gitopsd.health.expressions import HealthCheck
from gitopsd.objects import GroupKind
from gitopsd.quantities import GiB, MiB
from gitopsd.target_identity import (
    Charts,
    TargetIdentity,
    Tool,
    canonical_url,
    paths_from_root,
)

SOURCE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,48}[a-z0-9])?$")
"""A source's name: it names the ApplySet parent gitopsd-<name> and labels metrics."""
SOURCE_NAME_RULE = "use lower-case letters, digits and '-' (at most 50)"


@dataclass(frozen=True)
class Limits:
    """Bounds on what one revision may hold; each exists because a peer was attacked without it.

    Parsed YAML takes memory: measured here, 8 MiB of Deployments (12,000 documents) parse
    to about 100 MiB, while large string payloads (dashboards in ConfigMaps) cost little
    more than their size. The document limit bounds the first case, the byte limit the second.
    """

    max_object_bytes: int = 3 * MiB
    """One object: the bytes of its YAML document, or of its JSON file. The API server
    refuses a request body over 3 MiB, so a larger object could never be applied."""
    max_revision_bytes: int = 64 * MiB
    """All manifest files of a revision together, rendered kustomizations included; a file
    that would pass it is refused before it is read."""
    max_documents: int = 50_000
    """YAML documents in a revision, all files together."""
    max_aliases: int = 100
    """YAML alias uses in one file."""
    max_expansion: int = 10
    """Nodes after alias expansion, as a multiple of the nodes written (billion laughs)."""
    max_depth: int = 100
    """Nesting of mappings and sequences."""
    max_fetch_bytes: int = 2 * GiB
    """The largest file git may write while fetching: the pack it receives (loose objects
    are never kept). A git server that streams without end is cut off here."""
    max_entries: int = 100_000
    """Files and directories of a revision listed under the source's paths (and where its
    kustomizations reach), counted as git lists them, before any is read: a pack of a few
    KiB can hold a tree of millions of paths."""
    max_kustomizations: int = 200
    """Kustomizations one render may reach (bases, components, resources, recursively):
    each costs kustomize a read and a build, so a chain of them costs time without end."""
    max_listing_bytes: int = 16 * MiB
    """A chart repository's index.yaml, a registry's page of tags or manifest, each."""
    max_versions: int = 10_000
    """Versions of one chart an index or a registry's tags (all pages) may name: each is
    built in memory, so this bounds a listing of tiny items (4 MiB of `"1",`)."""
    max_watches: int = 500
    """Kinds times namespaces a source's objects may lie in: each is a LIST (the CLI) or a
    watch and a thread (the daemon), and a source's ApplySet parent, which its tenant may
    edit, adds its record's."""


class LimitSetting(NamedTuple):
    flag: str
    """The command-line flag."""
    key: str
    """The key in a source's `limits:` block of the daemon configuration."""
    meaning: str
    """What it bounds, for the flag's help."""


LIMIT_SETTINGS = {
    "max_object_bytes": LimitSetting(
        "--max-object-bytes", "maxObjectBytes", "largest object, as its YAML document or JSON file"
    ),
    "max_revision_bytes": LimitSetting(
        "--max-revision-bytes", "maxRevisionBytes", "all manifest files together"
    ),
    "max_documents": LimitSetting(
        "--max-documents", "maxDocuments", "YAML documents in all files together"
    ),
    "max_fetch_bytes": LimitSetting(
        "--max-fetch-bytes", "maxFetchBytes", "largest pack git may receive"
    ),
    "max_entries": LimitSetting(
        "--max-entries", "maxEntries", "files and directories listed under the paths"
    ),
    "max_kustomizations": LimitSetting(
        "--max-kustomizations", "maxKustomizations", "kustomizations one render may reach"
    ),
    "max_listing_bytes": LimitSetting("--max-listing-bytes", "maxListingBytes", "a chart listing"),
    "max_versions": LimitSetting("--max-versions", "maxVersions", "versions a chart listing names"),
    "max_watches": LimitSetting(
        "--max-watches", "maxWatches", "kinds x namespaces a source lists and watches"
    ),
}
"""The limits a user may change, by Limits field."""


def how_to_raise(limit: str) -> str:
    """Where a limit is set, for the error that names it: "--max-documents, limits.maxDocuments"."""
    setting = LIMIT_SETTINGS[limit]
    return f"{setting.flag}, limits.{setting.key}"


@dataclass(frozen=True)
class Credentials:
    """Where git credentials come from. Values are read at fetch time and never logged."""

    username: str = "git"
    password_env: str | None = "GITOPSD_GIT_PASSWORD"  # noqa: S105 - a variable's name
    """Environment variable holding an https password or token, if set; None: read none (a
    GitSync must never borrow the daemon's own credentials)."""
    password_file: Path | None = None
    """File holding an https password or token (wins over the environment)."""
    ssh_key_file: Path | None = None
    known_hosts_file: Path | None = None
    """Pinned SSH host keys; required for ssh URLs (no trust on first use)."""


@dataclass(frozen=True)
class ChartSettings:
    """How `helm template` renders each chart directory (a directory holding Chart.yaml)."""

    release_name: str | None = None
    """`.Release.Name`; by default the chart directory's name."""
    namespace: str | None = None
    """`.Release.Namespace`; by default the namespace objects without one go to."""
    values_files: tuple[str, ...] = ()
    """Values files relative to the chart's directory, inside the revision; later ones win."""
    values: str = ""
    """Inline values, a mapping as JSON, applied after the values files."""
    chart: str | None = None
    """A chart of the chart repository at the source's URL, instead of a git revision."""
    version: str = "*"
    """The range of `chart`'s versions to pick the highest of (helm's `--version` syntax)."""


@dataclass(frozen=True)
class ChartInflation:
    """A chart a kustomization's `helmCharts` entry inflates, rendered by gitopsd's own chart
    renderer (kustomize's helm inflation fetches and runs helm, which the sandbox forbids)."""

    where: str
    """The entry, for errors: "app/kustomization.yaml: helmCharts[0]"."""
    name: str
    chart: str | None
    """The chart's directory in the revision (root-relative); None: fetched from `repository`."""
    repository: str = ""
    version: str = "*"
    settings: ChartSettings = field(default_factory=ChartSettings)
    """Release name and namespace, and the inline values, merged over the values files."""
    values_files: tuple[str, ...] = ()
    """Root-relative values files of the revision, later ones win."""
    include_crds: bool = False
    skip_hooks: bool = False


@dataclass(frozen=True)
class Network:
    """What a source's fetches, git's and HTTP's, may reach and for how long: the admin's."""

    fetch_deadline_seconds: float = 300.0  # one request, connect to last byte, however slow
    git_deadline_seconds: float = 60.0  # one git ls-remote or fetch, its lookup included
    cluster_networks: tuple[str, ...] = ()  # service and pod CIDRs, fenced as loopback is
    learned: Callable[[], tuple[str, ...]] = field(default=lambda: (), compare=False, repr=False)
    """The networks the cluster publishes, as the daemon learned them until now (it watches
    them): fenced beside `cluster_networks`, asked at each fetch."""


@dataclass(frozen=True)
class SourceSpec:
    """Where desired state comes from: a git repository, a local directory, or a chart of
    a chart repository."""

    url: str
    """https://, ssh:// or user@host:path; file:// and http:// only with allow_insecure; a
    chart repository's URL when `helm.chart` is set."""
    ref: str = "HEAD"
    """Branch, tag or commit sha; HEAD is the remote's default branch."""
    paths: tuple[str, ...] = (".",)
    """Directories or files inside the repository, read recursively."""
    include: tuple[str, ...] = ("*.yaml", "*.yml", "*.json")
    """Glob patterns a file name must match to be read."""
    exclude: tuple[str, ...] = ()
    """Glob patterns (matched against the path relative to the root) that skip a file."""
    allow_insecure: bool = False
    """Permit file:// and plain http:// URLs (local use and tests)."""
    credentials: Credentials = field(default_factory=Credentials)
    timeout_seconds: float = 60.0
    """Bound on each git command on the cache, and each wait for a chart server's bytes."""
    limits: Limits = field(default_factory=Limits)
    helm: ChartSettings = field(default_factory=ChartSettings)
    network: Network = field(default_factory=Network)


def target_of(
    spec: SourceSpec, namespace: str, tool: Tool, checkout: tuple[str, str] | None = None
) -> TargetIdentity:
    """The target a sync of `spec` into `namespace` is; a local directory inside a git
    checkout is given as its `checkout`, the repository's (remote URL, path inside it)."""
    where, paths = (
        (spec.url, spec.paths) if is_local(spec.url) else (canonical_url(spec.url), spec.paths)
    )
    if checkout is not None:
        where, paths = checkout[0], paths_from_root(checkout[1], spec.paths)
    helm = spec.helm
    charts = Charts(helm.chart, helm.release_name, helm.namespace, helm.values_files, helm.values)
    return TargetIdentity(tool, where, paths, namespace, spec.include, spec.exclude, charts)


def is_local(url: str) -> bool:
    """A directory read in place, without git: no scheme, and not git's user@host:path."""
    return "://" not in url and not re.match(r"^[\w.-]+@[\w.-]+:", url)


SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


@dataclass(frozen=True)
class PrunePolicy:
    """The guards every prune passes; each refusal names its rule."""

    enabled: bool = False
    """Delete owned objects that left git (`--prune`)."""
    allow_empty: bool = False
    """Prune even when the source renders no object at all (usually a broken source)."""
    allow_mass_prune: bool = False
    budget_percent: float = 25.0
    """Most objects one sync may prune, as a share of the owned objects (one is always allowed)."""
    prune_protected: bool = False
    """Also prune Namespaces, CRDs, PersistentVolumes and PersistentVolumeClaims."""
    protected_namespaces: frozenset[str] = SYSTEM_NAMESPACES
    """Namespaces never pruned, opt-in or not."""


class Setting(StrEnum):
    """A setting a remedy names, in the words of the place it is read (`SyncSettings.say`)."""

    ADOPT = "adopt"
    NAME = "name"
    REPLACE_ON_IMMUTABLE = "replace_on_immutable"
    INVENTORY_NAMESPACE = "inventory_namespace"
    CREATE_NAMESPACE = "create_namespace"
    PRUNE = "prune"
    ALLOW_EMPTY = "allow_empty"
    PRUNE_BUDGET = "prune_budget"
    ALLOW_MASS_PRUNE = "allow_mass_prune"
    PRUNE_PROTECTED = "prune_protected"


WORDS: dict[Setting, dict[Tool, str]] = {
    Setting.ADOPT: {Tool.CLI: "--adopt", Tool.DAEMON: "adopt: true", Tool.GITSYNC: "spec.adopt"},
    Setting.NAME: {Tool.CLI: "--name", Tool.DAEMON: "name", Tool.GITSYNC: "metadata.name"},
    Setting.REPLACE_ON_IMMUTABLE: {
        Tool.CLI: "--replace-on-immutable",
        Tool.DAEMON: "replaceOnImmutable: true",
        Tool.GITSYNC: "spec.replaceOnImmutable",
    },
    Setting.INVENTORY_NAMESPACE: {
        Tool.CLI: "--inventory-namespace",
        Tool.DAEMON: "inventoryNamespace",
        Tool.GITSYNC: "the GitSync's namespace",
    },
    Setting.CREATE_NAMESPACE: {
        Tool.CLI: "--create-namespace",
        Tool.DAEMON: "createNamespace: true",
        Tool.GITSYNC: "spec.createNamespace",
    },
    Setting.PRUNE: {Tool.CLI: "--prune", Tool.DAEMON: "prune: true", Tool.GITSYNC: "spec.prune"},
    Setting.ALLOW_EMPTY: {
        Tool.CLI: "--allow-empty",
        Tool.DAEMON: "guards.allowEmpty: true",
        Tool.GITSYNC: "spec.guards.allowEmpty",
    },
    Setting.PRUNE_BUDGET: {
        Tool.CLI: "--prune-budget PERCENT",
        Tool.DAEMON: "guards.pruneBudgetPercent",
        Tool.GITSYNC: "spec.guards.pruneBudgetPercent",
    },
    Setting.ALLOW_MASS_PRUNE: {
        Tool.CLI: "--allow-mass-prune",
        Tool.DAEMON: "guards.allowMassPrune: true",
        Tool.GITSYNC: "spec.guards.allowMassPrune",
    },
    Setting.PRUNE_PROTECTED: {
        Tool.CLI: "--prune-protected",
        Tool.DAEMON: "guards.pruneProtected: true",
        Tool.GITSYNC: "spec.guards.pruneProtected",
    },
}
"""Each setting as the command line, the daemon's configuration file and a GitSync name it."""


EARLIER_INVENTORY_NAMESPACE = "default"
"""Where gitopsd kept a source's record by default before it kept it where the source
applies into."""


@dataclass(frozen=True)
class EarlierRecord:
    """Where a gitopsd from before targets were told apart may have kept a source's record
    (`gitopsd.reconcile.records`): its parent, gitopsd-`name` in `namespace`."""

    name: str
    namespace: str
    named: bool
    """The user named the source (--name, a daemon source): the name is the source, so its
    record is this source's; else it is only if `target_identity.claims` says so."""


@dataclass(frozen=True)
class SyncSettings:
    """How one source is reconciled into the cluster."""

    name: str
    """The source's name (SOURCE_NAME); its ApplySet parent is the ConfigMap gitopsd-<name>.
    Keep it stable: a new name is a new source that owns nothing yet."""
    inventory_namespace: str = "default"
    """Namespace of the ApplySet parent ConfigMap (the CLI and a daemon source: by default,
    `default_namespace`, as kubectl's ApplySet does with -n)."""
    default_namespace: str = "default"
    """Namespace for namespaced objects whose manifest names none."""
    tool: Tool = Tool.CLI
    """Who syncs it: its remedies name settings in that tool's words (`say`)."""
    identity: TargetIdentity | None = None
    """What makes its target another target (`gitopsd.target_identity`), kept on its parent."""
    earlier: tuple[EarlierRecord, ...] = ()
    """Where an earlier gitopsd may have kept its record, to be found and moved."""
    create_namespace: bool = False
    """Create `default_namespace` when it does not exist (as Argo CD's CreateNamespace=true),
    labelled as this source's creation; it is never pruned."""
    force_conflicts: bool = True
    """Take fields over from other managers (reported); False reports conflicts instead."""
    adopt: bool = False
    """Take over existing objects that no source (or another source) owns."""
    dry_run: bool = False
    """Server-side dry-run only: change nothing."""
    prune: PrunePolicy = field(default_factory=PrunePolicy)
    crd_timeout_seconds: float = 60.0
    """Bound on waiting for new CRDs to be Established."""
    health_timeout_seconds: float = 300.0
    """Bound on waiting for a sync wave to become healthy before the next one is applied
    (and, with `sync --wait`, for every object); the daemon's is the source's timeout."""
    confined_to: str | None = None
    """The one namespace this source may write to, or None for any: a GitSync that acts
    with the daemon's own rights may touch nothing outside its namespace."""
    concurrency: int = 16
    """API requests in flight at once. Measured against kube-apiserver on loopback, 16 in
    flight carry about 3x the dry-runs and applies per second of one, and more add little."""
    drift_rules: tuple[Rule, ...] = ()
    """The source's drift policy (`gitopsd.drift_policy`), after each object's own rules."""
    health_checks: tuple[HealthCheck, ...] = ()
    """The source's own health rules, each replacing the built-in rule of its kind."""

    @property
    def checks(self) -> dict[GroupKind, HealthCheck]:
        """The source's own health rules by the group and kind they are for."""
        return {check.group_kind: check for check in self.health_checks}

    replace_on_immutable: bool = False
    """Delete and create again an object whose immutable fields git changes (if this source
    provably owns it), as the sync option replace-on-immutable does for one object."""

    def say(self, setting: Setting) -> str:
        """`setting` as the place this source's settings are written in names it."""
        return WORDS[setting][self.tool]
