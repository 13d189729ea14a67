"""A source's settings, each defined once: the table the frozen settings (`gitopsd.config`)
take their defaults from, and the command line's flags, a file source's keys, the GitSync
CRD's spec and the docs are made of, pure.

A row is the field it sets (of which dataclass: its `Holder`), its default, its `Kind` (how
a value is read, bounded and shown), its key in a file source (dotted inside a block:
guards.allowEmpty), its flag and the `Group` of flags that holds it, whether a GitSync's
spec has it (at its key), and its help: a sentence, the CRD's description and the flag's
help. tests/unit/test_settings_table.py fails when one of them disagrees with the table.

Not rows, and read by hand where they are used: the settings whose value is structured
(helm, drift, healthCheckExprs, dependsOn), whose default is computed (name, namespace,
inventoryNamespace) or that read a secret (webhookSecretFile).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any, NamedTuple

from gitopsd.quantities import GiB, MiB, format_duration, format_size


class Mode(StrEnum):
    """A source's mode: the words of the MODE row."""

    OBSERVE = "observe"  # drift is measured and exported; nothing is written
    WARN = "warn"  # as observe, plus a Kubernetes Event on each drifted object
    ENFORCE = "enforce"  # new revisions are applied (and pruned, if enabled)


class VerifyMode(StrEnum):
    """What a source's signatures are checked on: the words of Flux's `.spec.verify.mode`."""

    HEAD = "HEAD"  # the commit the ref points to
    TAG = "Tag"  # the annotated tag the ref names (the commit it points to is then used)
    TAG_AND_HEAD = "TagAndHEAD"  # both


class Holder(Enum):
    """The frozen dataclass whose field a row sets."""

    SOURCE_SPEC = "SourceSpec"
    CREDENTIALS = "Credentials"
    VERIFICATION = "Verification"
    DECRYPTION = "Decryption"
    LIMITS = "Limits"
    PRUNE_POLICY = "PrunePolicy"
    SYNC_SETTINGS = "SyncSettings"
    SOURCE_CONFIG = "SourceConfig"


class Kind(Enum):
    """How a value is read, bounded and shown."""

    SWITCH = "switch"  # true or false; the flag sets what the default is not
    DURATION = "duration"  # 90s, 5m, 1h30m or seconds: above 0, at most 7 days
    SECONDS = "seconds"  # a number of seconds (the command line's only)
    PERCENT = "percent"  # above 0 and at most 100
    POSITIVE = "positive"  # a whole number above 0
    SIZE = "size"  # a positive number of bytes, which may end in Ki, Mi or Gi
    COUNT = "count"  # a positive whole number, read as sizes are
    TEXT = "text"  # a non-empty string
    FILE = "file"  # a file's path
    PATHS = "paths"  # paths relative to the repository's root, at least one
    GLOBS = "globs"  # glob patterns
    CHOICE = "choice"  # one of the words of the default's enum


class Group(Enum):
    """The group of flags a row's flag is in, and so the commands that take it."""

    SOURCE = "source"  # every command that reads a source
    LIMITS = "limits"  # likewise
    TARGET = "target"  # build, diff and sync
    CLUSTER = "cluster"  # diff and sync
    SYNC = "sync"  # sync


METAVARS = {
    Kind.DURATION: "DURATION",
    Kind.SECONDS: "SECONDS",
    Kind.PERCENT: "PERCENT",
    Kind.POSITIVE: "N",
    Kind.SIZE: "BYTES",
    Kind.COUNT: "COUNT",
    Kind.PATHS: "PATH",
    Kind.GLOBS: "GLOB",
}
"""What a flag's value is called in its help; a text or a file is called by its flag."""


class Flag(NamedTuple):
    name: str
    group: Group


@dataclass(frozen=True)
class Row:
    holder: Holder
    field: str
    default: Any
    kind: Kind
    help: str
    key: str | None = None
    flag: Flag | None = None
    gitsync: bool = False

    @property
    def dest(self) -> str:
        """The name argparse keeps the flag's value under: --prune-budget, prune_budget."""
        return self.flag.name.removeprefix("--").replace("-", "_") if self.flag else ""

    @property
    def metavar(self) -> str | None:
        return METAVARS.get(self.kind)

    @property
    def usage(self) -> str:
        """The flag as a command line gives it: --prune-budget PERCENT."""
        return " ".join(part for part in (self.flag and self.flag.name, self.metavar) if part)

    @property
    def block(self) -> str:
        """The block of a file source its key is in ("guards"), or "" for the top level."""
        return (self.key or "").rpartition(".")[0]

    @property
    def name(self) -> str:
        """Its key inside its block: allowEmpty."""
        return (self.key or "").rpartition(".")[2]


def shown(row: Row) -> str:
    """The row's default as people write it (64Mi, 5m, *.yaml, *.json; off), "" for none."""
    value = row.default
    if row.kind is Kind.SWITCH:
        return "on" if value else "off"
    if row.kind is Kind.SIZE:
        return format_size(value)
    if row.kind is Kind.DURATION:
        return format_duration(value)
    if row.kind in (Kind.PATHS, Kind.GLOBS):
        return ", ".join(value)
    if isinstance(value, float):
        return f"{value:g}"
    return "" if value is None else str(value)


SOURCE_SPEC, CREDENTIALS, LIMITS = Holder.SOURCE_SPEC, Holder.CREDENTIALS, Holder.LIMITS
VERIFICATION, DECRYPTION = Holder.VERIFICATION, Holder.DECRYPTION
PRUNE_POLICY, SYNC_SETTINGS = Holder.PRUNE_POLICY, Holder.SYNC_SETTINGS
SOURCE_CONFIG = Holder.SOURCE_CONFIG
SOURCE, SYNC = Group.SOURCE, Group.SYNC

# fmt: off
# Laid out by hand as a table, a row a paragraph: holder, field, default and kind; its key,
# its flag and whether a GitSync's spec has it; its help.
REF = Row(SOURCE_SPEC, "ref", "HEAD", Kind.TEXT, key="ref", flag=Flag("--ref", SOURCE),
    help="Branch, tag or commit sha; HEAD is the remote's default branch. Of an OCI "
    "artifact (oci://): a tag (HEAD: latest), a semver range, or @sha256:DIGEST.")
PATHS = Row(SOURCE_SPEC, "paths", (".",), Kind.PATHS,
    key="paths", flag=Flag("--path", SOURCE), gitsync=True,
    help="Directories or files inside the repository, read recursively.")
INCLUDE = Row(SOURCE_SPEC, "include", ("*.yaml", "*.yml", "*.json"), Kind.GLOBS,
    key="include", flag=Flag("--include", SOURCE), gitsync=True,
    help="Glob patterns a file name must match to be read.")
EXCLUDE = Row(SOURCE_SPEC, "exclude", (), Kind.GLOBS,
    key="exclude", flag=Flag("--exclude", SOURCE), gitsync=True,
    help="Glob patterns (against the path from the root) that skip a file.")
INTERVAL = Row(SOURCE_CONFIG, "interval_seconds", 60.0, Kind.DURATION,
    key="interval", gitsync=True, help="How often git is polled.")
TIMEOUT = Row(SOURCE_CONFIG, "timeout_seconds", 600.0, Kind.DURATION,
    key="timeout", gitsync=True,
    help="Deadline of one reconcile: past it nothing more is written.")
MODE = Row(SOURCE_CONFIG, "mode", Mode.ENFORCE, Kind.CHOICE,
    key="mode", gitsync=True,
    help="observe: measure drift only; warn: also an Event on each drifted object; enforce: "
    "apply each new revision (and prune, if enabled).")
PRUNE = Row(PRUNE_POLICY, "enabled", False, Kind.SWITCH,
    key="prune", flag=Flag("--prune", SYNC), gitsync=True,
    help="Delete what this source applied once it left git.")
SELF_HEAL = Row(SOURCE_CONFIG, "self_heal", True, Kind.SWITCH,
    key="selfHeal", gitsync=True,
    help="In enforce mode, correct drift as soon as a watch reports it.")
ALLOW_EMPTY = Row(PRUNE_POLICY, "allow_empty", False, Kind.SWITCH,
    key="guards.allowEmpty", flag=Flag("--allow-empty", SYNC), gitsync=True,
    help="Prune even when the revision holds no object at all (usually a broken source).")
PRUNE_BUDGET = Row(PRUNE_POLICY, "budget_percent", 25.0, Kind.PERCENT,
    key="guards.pruneBudgetPercent", flag=Flag("--prune-budget", SYNC), gitsync=True,
    help="Most objects one sync may prune, as a share of the owned objects (one is always "
    "allowed).")
ALLOW_MASS_PRUNE = Row(PRUNE_POLICY, "allow_mass_prune", False, Kind.SWITCH,
    key="guards.allowMassPrune", flag=Flag("--allow-mass-prune", SYNC), gitsync=True,
    help="Prune past the budget.")
PRUNE_PROTECTED = Row(PRUNE_POLICY, "prune_protected", False, Kind.SWITCH,
    key="guards.pruneProtected", flag=Flag("--prune-protected", SYNC), gitsync=True,
    help="Also prune Namespaces, CRDs, PersistentVolumes and PersistentVolumeClaims.")
REPLACE_ON_IMMUTABLE = Row(SYNC_SETTINGS, "replace_on_immutable", False, Kind.SWITCH,
    key="replaceOnImmutable", flag=Flag("--replace-on-immutable", SYNC), gitsync=True,
    help="Delete and create again an object whose fields that cannot change once set git "
    "changes (a Job's template), if this source provably owns it; without it, such an object "
    "is refused alone and the rest applied (per object: the annotation "
    "gitopsd.io/sync-options: replace-on-immutable).")
ADOPT = Row(SYNC_SETTINGS, "adopt", False, Kind.SWITCH,
    key="adopt", flag=Flag("--adopt", SYNC), gitsync=True,
    help="Take over existing objects of its revision that no source, or another gitopsd "
    "source, owns (such as those a `gitopsd sync` of the same repository recorded).")
CREATE_NAMESPACE = Row(SYNC_SETTINGS, "create_namespace", False, Kind.SWITCH,
    key="createNamespace", flag=Flag("--create-namespace", Group.TARGET), gitsync=True,
    help="Create the namespace it applies into when it does not exist, as Argo CD's "
    "CreateNamespace=true; it is never pruned.")
ALLOW_INSECURE = Row(SOURCE_SPEC, "allow_insecure", False, Kind.SWITCH,
    key="allowInsecure", flag=Flag("--allow-insecure-source", SOURCE),
    help="Permit file:// and plain http:// URLs (local use and tests).")
USERNAME = Row(CREDENTIALS, "username", "git", Kind.TEXT,
    key="credentials.username", flag=Flag("--username", SOURCE),
    help="User name for https URLs.")
PASSWORD_ENV = Row(CREDENTIALS, "password_env", "GITOPSD_GIT_PASSWORD", Kind.TEXT,
    key="credentials.passwordEnv",
    help="Environment variable holding the https password or token.")
PASSWORD_FILE = Row(CREDENTIALS, "password_file", None, Kind.FILE,
    key="credentials.passwordFile", flag=Flag("--password-file", SOURCE),
    help="File holding the https password or token (else the environment variable's, "
    "$GITOPSD_GIT_PASSWORD by default).")
SSH_KEY_FILE = Row(CREDENTIALS, "ssh_key_file", None, Kind.FILE,
    key="credentials.sshKeyFile", flag=Flag("--ssh-key", SOURCE),
    help="Private key file for ssh URLs.")
KNOWN_HOSTS_FILE = Row(CREDENTIALS, "known_hosts_file", None, Kind.FILE,
    key="credentials.knownHostsFile", flag=Flag("--known-hosts", SOURCE),
    help="Pinned host keys for ssh URLs (required for ssh: no trust on first use).")
VERIFY_MODE = Row(VERIFICATION, "mode", VerifyMode.HEAD, Kind.CHOICE,
    key="verify.mode", flag=Flag("--verify-mode", SOURCE), gitsync=True,
    help="With keys to verify against: HEAD checks the signature of the commit the ref "
    "points to, Tag that of the annotated tag it names, TagAndHEAD both; a revision that "
    "fails is never used.")
PUBLIC_KEYS_FILE = Row(VERIFICATION, "public_keys_file", None, Kind.FILE,
    key="verify.publicKeysFile", flag=Flag("--verify-public-keys", SOURCE),
    help="Public keys (OpenPGP, armored or binary) a revision's signature must be made "
    "with: setting it (or the allowed signers) turns verification on.")
ALLOWED_SIGNERS_FILE = Row(VERIFICATION, "allowed_signers_file", None, Kind.FILE,
    key="verify.allowedSignersFile", flag=Flag("--verify-allowed-signers", SOURCE),
    help="SSH allowed signers (ssh-keygen's format) a revision's signature must be made "
    "by: setting it (or the public keys) turns verification on.")
AGE_KEY_FILE = Row(DECRYPTION, "age_key_file", None, Kind.FILE,
    key="decryption.ageKeyFile", flag=Flag("--sops-age-key-file", SOURCE),
    help="age identities (age-keygen's format) that SOPS-encrypted files of a revision are "
    "decrypted with; the command line reads $SOPS_AGE_KEY_FILE when it is not given.")
PGP_KEY_FILE = Row(DECRYPTION, "pgp_key_file", None, Kind.FILE,
    key="decryption.pgpKeyFile", flag=Flag("--sops-pgp-key-file", SOURCE),
    help="OpenPGP private keys (armored, without a passphrase) that SOPS-encrypted files of a "
    "revision are decrypted with.")
FORCE_CONFLICTS = Row(SYNC_SETTINGS, "force_conflicts", True, Kind.SWITCH,
    key="forceConflicts", flag=Flag("--no-force-conflicts", SYNC),
    help="Take over the fields other managers own (reported); off, report them as conflicts.")
CONCURRENCY = Row(SYNC_SETTINGS, "concurrency", 16, Kind.POSITIVE,
    key="concurrency", flag=Flag("--concurrency", Group.CLUSTER),
    help="API requests in flight at once.")
DRY_RUN = Row(SYNC_SETTINGS, "dry_run", False, Kind.SWITCH,
    flag=Flag("--dry-run", SYNC),
    help="Server-side dry-run: change nothing.")
CRD_TIMEOUT = Row(SYNC_SETTINGS, "crd_timeout_seconds", 60.0, Kind.SECONDS,
    flag=Flag("--crd-timeout", SYNC),
    help="Bound on waiting for new CRDs to be Established.")
HEALTH_TIMEOUT = Row(SYNC_SETTINGS, "health_timeout_seconds", 300.0, Kind.DURATION,
    flag=Flag("--timeout", SYNC),
    help="Bound on --wait and on each sync wave's wait for health, such as 90s, 5m or 1h.")
MAX_OBJECT_BYTES = Row(LIMITS, "max_object_bytes", 3 * MiB, Kind.SIZE,
    key="limits.maxObjectBytes", flag=Flag("--max-object-bytes", Group.LIMITS),
    help="Largest object, as its YAML document or JSON file.")
MAX_REVISION_BYTES = Row(LIMITS, "max_revision_bytes", 64 * MiB, Kind.SIZE,
    key="limits.maxRevisionBytes", flag=Flag("--max-revision-bytes", Group.LIMITS),
    help="All manifest files together.")
MAX_DOCUMENTS = Row(LIMITS, "max_documents", 50_000, Kind.COUNT,
    key="limits.maxDocuments", flag=Flag("--max-documents", Group.LIMITS),
    help="YAML documents in all files together.")
MAX_FETCH_BYTES = Row(LIMITS, "max_fetch_bytes", 2 * GiB, Kind.SIZE,
    key="limits.maxFetchBytes", flag=Flag("--max-fetch-bytes", Group.LIMITS),
    help="Largest pack git may receive.")
MAX_ENTRIES = Row(LIMITS, "max_entries", 100_000, Kind.COUNT,
    key="limits.maxEntries", flag=Flag("--max-entries", Group.LIMITS),
    help="Files and directories listed under the paths.")
MAX_KUSTOMIZATIONS = Row(LIMITS, "max_kustomizations", 200, Kind.COUNT,
    key="limits.maxKustomizations", flag=Flag("--max-kustomizations", Group.LIMITS),
    help="Kustomizations one render may reach.")
MAX_LISTING_BYTES = Row(LIMITS, "max_listing_bytes", 16 * MiB, Kind.SIZE,
    key="limits.maxListingBytes", flag=Flag("--max-listing-bytes", Group.LIMITS),
    help="A chart listing.")
MAX_VERSIONS = Row(LIMITS, "max_versions", 10_000, Kind.COUNT,
    key="limits.maxVersions", flag=Flag("--max-versions", Group.LIMITS),
    help="Versions a chart listing names.")
MAX_WATCHES = Row(LIMITS, "max_watches", 500, Kind.COUNT,
    key="limits.maxWatches", flag=Flag("--max-watches", Group.LIMITS),
    help="Kinds x namespaces a source lists and watches.")
# fmt: on

TABLE = tuple(value for value in list(globals().values()) if isinstance(value, Row))
"""Every row above, in the order written: the order of the GitSync CRD's spec and of each
group of flags. Writing a row is all it takes to list it."""


def rows(holder: Holder) -> tuple[Row, ...]:
    return tuple(row for row in TABLE if row.holder is holder)
