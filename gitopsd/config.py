"""Settings as frozen dataclasses, each field with its unit and default.

The CLI builds them from flags and the environment; the daemon from its YAML file. A field a
user sets takes its default from its row of `gitopsd.settings_table`, with its key, flag and
help; the others have theirs here. A flag or key left out keeps the default.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from gitopsd import settings_table as table
from gitopsd.drift_policy import Rule
from gitopsd.health.expressions import HealthCheck
from gitopsd.objects import GroupKind
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

    max_object_bytes: int = table.MAX_OBJECT_BYTES.default
    """The API server refuses a request body over 3 MiB, so a larger object could never be
    applied."""
    max_revision_bytes: int = table.MAX_REVISION_BYTES.default
    """Rendered kustomizations included; a file that would pass it is refused before it is
    read."""
    max_documents: int = table.MAX_DOCUMENTS.default
    max_aliases: int = 100
    """YAML alias uses in one file."""
    max_expansion: int = 10
    """Nodes after alias expansion, as a multiple of the nodes written (billion laughs)."""
    max_depth: int = 100
    """Nesting of mappings and sequences."""
    max_fetch_bytes: int = table.MAX_FETCH_BYTES.default
    """The largest file git may write while fetching: the pack it receives (loose objects
    are never kept). A git server that streams without end is cut off here."""
    max_entries: int = table.MAX_ENTRIES.default
    """Counted as git lists them, before any is read (and where its kustomizations reach):
    a pack of a few KiB can hold a tree of millions of paths."""
    max_kustomizations: int = table.MAX_KUSTOMIZATIONS.default
    """Bases, components, resources, recursively: each costs kustomize a read and a build,
    so a chain of them costs time without end."""
    max_listing_bytes: int = table.MAX_LISTING_BYTES.default
    """A chart repository's index.yaml, a registry's page of tags or manifest, each."""
    max_versions: int = table.MAX_VERSIONS.default
    """Each is built in memory, so this bounds a listing of tiny items (4 MiB of `"1",`)."""
    max_watches: int = table.MAX_WATCHES.default
    """Each is a LIST (the CLI) or a watch and a thread (the daemon), and a source's ApplySet
    parent, which its tenant may edit, adds its record's."""


def how_to_raise(limit: str) -> str:
    """Where a limit is set, for the error that names it: "--max-documents, limits.maxDocuments"."""
    [row] = [row for row in table.rows(table.LIMITS) if row.field == limit]
    return f"{row.flag and row.flag.name}, {row.key}"


@dataclass(frozen=True)
class Credentials:
    """Where git credentials come from. Values are read at fetch time and never logged."""

    username: str = table.USERNAME.default
    password_env: str | None = table.PASSWORD_ENV.default
    """None: read none (a GitSync must never borrow the daemon's own credentials)."""
    password_file: Path | None = table.PASSWORD_FILE.default
    ssh_key_file: Path | None = table.SSH_KEY_FILE.default
    known_hosts_file: Path | None = table.KNOWN_HOSTS_FILE.default


@dataclass(frozen=True)
class Verification:
    """The signatures a revision must carry to be used (Flux's `.spec.verify`), checked by
    git's own verify-commit and verify-tag against these keys only. Off without keys."""

    mode: table.VerifyMode = table.VERIFY_MODE.default
    public_keys_file: Path | None = table.PUBLIC_KEYS_FILE.default
    allowed_signers_file: Path | None = table.ALLOWED_SIGNERS_FILE.default

    @property
    def enabled(self) -> bool:
        return self.public_keys_file is not None or self.allowed_signers_file is not None


@dataclass(frozen=True)
class Decryption:
    """The keys SOPS-encrypted files of a revision are decrypted with (Flux's
    `.spec.decryption`, provider sops): age identities and OpenPGP private keys. Without
    them an encrypted file is refused."""

    age_key_file: Path | None = table.AGE_KEY_FILE.default
    pgp_key_file: Path | None = table.PGP_KEY_FILE.default

    @property
    def enabled(self) -> bool:
        return self.age_key_file is not None or self.pgp_key_file is not None


@dataclass(frozen=True)
class VariablesFrom:
    """A ConfigMap or Secret of the source's namespace whose data are variables (Flux's
    postBuild.substituteFrom)."""

    kind: str
    """ConfigMap or Secret."""
    name: str
    optional: bool = False
    """A missing one is skipped; otherwise it fails the reconcile until it exists."""


@dataclass(frozen=True)
class Substitution:
    """Flux's postBuild: variables expanded in every object the revision renders, from
    `values` (substitute, inline) after those of `sources` (substituteFrom, in order; later
    ones win); `strict`: a variable with no value and no default is an error."""

    values: tuple[tuple[str, str], ...] = ()
    sources: tuple[VariablesFrom, ...] = ()
    strict: bool = False

    @property
    def enabled(self) -> bool:
        return bool(self.values or self.sources or self.strict)


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
    ref: str = table.REF.default
    paths: tuple[str, ...] = table.PATHS.default
    include: tuple[str, ...] = table.INCLUDE.default
    exclude: tuple[str, ...] = table.EXCLUDE.default
    allow_insecure: bool = table.ALLOW_INSECURE.default
    credentials: Credentials = field(default_factory=Credentials)
    verify: Verification = field(default_factory=Verification)
    decryption: Decryption = field(default_factory=Decryption)
    substitution: Substitution = field(default_factory=Substitution)
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
    variables = _variables(spec.substitution)
    return TargetIdentity(
        tool, where, paths, namespace, spec.include, spec.exclude, charts, variables
    )


def _variables(substitution: Substitution) -> str:
    """A postBuild as canonical JSON, for the target's identity ("" without one)."""
    if not substitution.enabled:
        return ""
    named = [f"{source.kind}/{source.name}" for source in substitution.sources]
    found = {"substitute": dict(substitution.values), "substituteFrom": named}
    return json.dumps(found | {"strict": substitution.strict}, sort_keys=True)


def unsigned_kind(spec: SourceSpec) -> str | None:
    """What `spec` reads that carries no signature to verify (a local directory, a chart of
    a chart repository, an OCI artifact); None for a git revision."""
    if is_local(spec.url):
        return "a local directory"
    if spec.helm.chart is not None:
        return "a chart of a chart repository"
    return "an OCI artifact" if is_artifact(spec) else None


def is_artifact(spec: SourceSpec) -> bool:
    """An OCI artifact of manifests: an oci:// URL that names no chart."""
    return spec.helm.chart is None and spec.url.lower().startswith("oci://")


def is_local(url: str) -> bool:
    """A directory read in place, without git: no scheme, and not git's user@host:path."""
    return "://" not in url and not re.match(r"^[\w.-]+@[\w.-]+:", url)


SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


@dataclass(frozen=True)
class PrunePolicy:
    """The guards every prune passes; each refusal names its rule."""

    enabled: bool = table.PRUNE.default
    allow_empty: bool = table.ALLOW_EMPTY.default
    allow_mass_prune: bool = table.ALLOW_MASS_PRUNE.default
    budget_percent: float = table.PRUNE_BUDGET.default
    prune_protected: bool = table.PRUNE_PROTECTED.default
    protected_namespaces: frozenset[str] = SYSTEM_NAMESPACES
    """Namespaces never pruned, opt-in or not."""


class Setting(StrEnum):
    """A setting a remedy names, in the words of the place it is read (`SyncSettings.say`):
    its row of the settings table, whose flag argparse keeps under this name."""

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


COMPUTED_WORDS = {
    Setting.NAME: {Tool.CLI: "--name", Tool.DAEMON: "name", Tool.GITSYNC: "metadata.name"},
    Setting.INVENTORY_NAMESPACE: {
        Tool.CLI: "--inventory-namespace",
        Tool.DAEMON: "inventoryNamespace",
        Tool.GITSYNC: "the GitSync's namespace",
    },
}
"""The settings whose default is computed, so no row of the table: as each place names them."""


def words(setting: Setting, tool: Tool) -> str:
    """`setting` as the command line, a file source or a GitSync names it."""
    if setting in COMPUTED_WORDS:
        return COMPUTED_WORDS[setting][tool]
    [row] = [row for row in table.TABLE if row.dest == setting]
    if tool is Tool.GITSYNC:
        return f"spec.{row.key}"
    if tool is Tool.DAEMON:
        return f"{row.key}: true" if row.kind is table.Kind.SWITCH else str(row.key)
    return row.usage


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
    create_namespace: bool = table.CREATE_NAMESPACE.default
    """Labelled as this source's creation."""
    force_conflicts: bool = table.FORCE_CONFLICTS.default
    adopt: bool = table.ADOPT.default
    dry_run: bool = table.DRY_RUN.default
    prune: PrunePolicy = field(default_factory=PrunePolicy)
    crd_timeout_seconds: float = table.CRD_TIMEOUT.default
    health_timeout_seconds: float = table.HEALTH_TIMEOUT.default
    """The daemon's is the source's timeout."""
    confined_to: str | None = None
    """The one namespace this source may write to, or None for any: a GitSync that acts
    with the daemon's own rights may touch nothing outside its namespace."""
    concurrency: int = table.CONCURRENCY.default
    """Measured against kube-apiserver on loopback, 16 in flight carry about 3x the dry-runs
    and applies per second of one, and more add little."""
    drift_rules: tuple[Rule, ...] = ()
    """The source's drift policy (`gitopsd.drift_policy`), after each object's own rules."""
    health_checks: tuple[HealthCheck, ...] = ()
    """The source's own health rules, each replacing the built-in rule of its kind."""

    @property
    def checks(self) -> dict[GroupKind, HealthCheck]:
        """The source's own health rules by the group and kind they are for."""
        return {check.group_kind: check for check in self.health_checks}

    replace_on_immutable: bool = table.REPLACE_ON_IMMUTABLE.default

    def say(self, setting: Setting) -> str:
        """`setting` as the place this source's settings are written in names it."""
        return words(setting, self.tool)
