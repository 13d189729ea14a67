"""The error tree. Every failure gitopsd reports is one of these::

    GitopsdError
    ├── ConfigError        settings, flags or a source definition are invalid
    ├── ManifestError      a file or an object of the revision is invalid
    ├── SourceError        fetching the revision failed (network, auth, ref, cache)
    └── ClusterError       the API server failed or refused a request
        └── ApplyError     one or more objects failed to dry-run, apply or delete

Whether to retry is not the class's to say but the reason's: a ConfigError waits for a
person, a ManifestError for a new revision (an unknown kind is retried: its CRD may come),
a SourceError or ClusterError is retried after a backoff unless its reason says otherwise
(credentials, a host key and rights wait for a person; an immutable field, for a new
revision).

Each class carries its `stage` and a `reason` from a closed enum of its own: the labels of
gitopsd_errors_total, never parsed back out of a message. Each reason decides the error's
`remedy` (what the daemon does about it, and whether a GitSync is Stalled) and its
`exit_code` (what a command exits with): the tables below each class, asked by the worker,
the GitSync status and the command line alike.

A message never carries a Secret value or a credential: callers mask before raising.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum, StrEnum
from typing import ClassVar, Literal


class Stage(StrEnum):
    """Where a failure happened (the `stage` label of gitopsd_errors_total)."""

    CONFIG = "config"
    MANIFESTS = "manifests"
    SOURCE = "source"
    CLUSTER = "cluster"


class Remedy(StrEnum):
    """What cures a failure."""

    NEW_REVISION = "new_revision"
    """Bad input: the same revision fails again, so it is not retried; a new one is read."""
    BACK_OFF = "back_off"
    """The world misbehaved: the same revision is retried after a backoff."""
    PERSON = "person"
    """Retried after a backoff, but only a person can cure it (rights, keys, a spec): a
    GitSync says Stalled."""


class ExitCode(IntEnum):
    """The documented exit codes of the commands (docs/cli.md: Exit codes)."""

    OK = 0
    DRIFT = 1
    INVALID = 2
    SOURCE_FAILED = 3
    CLUSTER_FAILED = 4
    PRUNE_BLOCKED = 5
    UNHEALTHY = 6


class ConfigReason(StrEnum):
    INVALID = "invalid"
    QUOTA_EXCEEDED = "quota_exceeded"
    """A tenant (a namespace) is over its share of the daemon (tenantQuota): its GitSyncs,
    or the objects their revisions hold. Retried: another of its GitSyncs may go."""


class ManifestReason(StrEnum):
    INVALID = "invalid"
    SYNTAX = "syntax"
    ENCODING = "encoding"
    DUPLICATE_KEY = "duplicate_key"
    DUPLICATE_OBJECT = "duplicate_object"
    FORBIDDEN_TAG = "forbidden_tag"
    ALIAS_LIMIT = "alias_limit"
    DEPTH_LIMIT = "depth_limit"
    SIZE_LIMIT = "size_limit"
    OWNER_LABEL = "owner_label"
    PATH_ESCAPE = "path_escape"
    SYMLINK = "symlink"
    REMOTE = "remote"
    """A kustomization refers to a remote base: gitopsd fetches nothing but the source."""
    OUT_OF_NAMESPACE = "out_of_namespace"
    """The object lies outside the one namespace the source may write to."""
    UNKNOWN_KIND = "unknown_kind"
    """The cluster serves no such kind (yet): a CRD installed later cures it."""
    DECRYPTION_FAILED = "decryption_failed"
    """A SOPS-encrypted file does not decrypt with the source's keys, or a value decrypted
    would be shown (it reaches more than a Secret's data)."""


class SourceReason(StrEnum):
    UNREACHABLE = "unreachable"
    AUTH = "auth"
    HOSTKEY = "hostkey"
    REF_MISSING = "ref_missing"
    TIMEOUT = "timeout"
    TOO_LARGE = "too_large"
    NOSPACE = "nospace"
    CORRUPT = "corrupt"
    QUOTA_EXCEEDED = "quota_exceeded"
    """Over a bound the admin sets on what a tenant (or all) may hold: the chart cache."""
    VERIFICATION_FAILED = "verification_failed"
    """The revision is not signed as the source's `verify` asks: it is never used."""


class ClusterReason(StrEnum):
    SERVER = "server"
    UNREACHABLE = "unreachable"
    INVALID = "invalid"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    GONE = "gone"
    TOO_LARGE = "too_large"
    THROTTLED = "throttled"
    TIMEOUT = "timeout"
    FENCED = "fenced"
    """Not sent: this process may not write now (stopping, or no longer the leader)."""
    UNHEALTHY = "unhealthy"
    """Objects applied did not become healthy (Failed, or not Current in time): the waves
    after theirs were not applied."""
    IMMUTABLE = "immutable"
    """Objects whose fields that cannot change once set git changes were not applied (the
    rest of the revision was): a new revision, or the sync option replace-on-immutable."""


Reason = ConfigReason | ManifestReason | SourceReason | ClusterReason


class GitopsdError(Exception):
    """Base of every error gitopsd raises on purpose."""

    stage: ClassVar[Stage]
    reason: Reason
    usual_remedy: ClassVar[Remedy] = Remedy.BACK_OFF
    remedies: ClassVar[Mapping[Reason, Remedy]] = {}
    """The reasons of this class whose remedy is not the usual one."""
    usual_exit_code: ClassVar[ExitCode] = ExitCode.CLUSTER_FAILED
    exit_codes: ClassVar[Mapping[Reason, ExitCode]] = {}
    """The reasons of this class whose exit code is not the usual one."""

    @property
    def remedy(self) -> Remedy:
        return self.remedies.get(self.reason, self.usual_remedy)

    @property
    def exit_code(self) -> ExitCode:
        return self.exit_codes.get(self.reason, self.usual_exit_code)


class ConfigError(GitopsdError):
    """Settings, command-line flags or a source definition are invalid."""

    stage = Stage.CONFIG
    usual_remedy = Remedy.PERSON  # a new spec is a new source; a flag, a new command
    usual_exit_code = ExitCode.INVALID

    def __init__(self, message: str, reason: ConfigReason = ConfigReason.INVALID) -> None:
        super().__init__(message)
        self.reason: ConfigReason = reason


class ManifestError(GitopsdError):
    """A manifest is invalid: the same revision would fail again."""

    stage = Stage.MANIFESTS
    usual_remedy = Remedy.NEW_REVISION
    usual_exit_code = ExitCode.INVALID
    remedies: ClassVar[Mapping[Reason, Remedy]] = {
        ManifestReason.UNKNOWN_KIND: Remedy.BACK_OFF,  # a CRD installed later
        ManifestReason.DECRYPTION_FAILED: Remedy.PERSON,  # the keys, or the file
    }

    def __init__(self, message: str, reason: ManifestReason = ManifestReason.INVALID) -> None:
        super().__init__(message)
        self.reason: ManifestReason = reason


class SourceError(GitopsdError):
    """Fetching or reading the revision failed."""

    stage = Stage.SOURCE
    remedies: ClassVar[Mapping[Reason, Remedy]] = {
        SourceReason.AUTH: Remedy.PERSON,
        SourceReason.HOSTKEY: Remedy.PERSON,
        SourceReason.VERIFICATION_FAILED: Remedy.PERSON,  # a signed commit, or the keys
    }
    usual_exit_code = ExitCode.SOURCE_FAILED

    def __init__(self, message: str, reason: SourceReason = SourceReason.UNREACHABLE) -> None:
        super().__init__(message)
        self.reason: SourceReason = reason


class ClusterError(GitopsdError):
    """The API server failed or refused a request."""

    stage = Stage.CLUSTER
    remedies: ClassVar[Mapping[Reason, Remedy]] = {
        ClusterReason.FORBIDDEN: Remedy.PERSON,
        ClusterReason.IMMUTABLE: Remedy.NEW_REVISION,
    }
    exit_codes: ClassVar[Mapping[Reason, ExitCode]] = {
        ClusterReason.INVALID: ExitCode.INVALID,  # the server refusing a manifest is bad input
        ClusterReason.IMMUTABLE: ExitCode.INVALID,
        ClusterReason.UNHEALTHY: ExitCode.UNHEALTHY,
    }

    def __init__(self, message: str, reason: ClusterReason = ClusterReason.SERVER) -> None:
        super().__init__(message)
        self.reason: ClusterReason = reason


class ApplyError(ClusterError):
    """Objects failed to dry-run, apply or delete; `failures` holds one message per object
    and `action` says which: "apply" (dry-run included) or "prune"."""

    def __init__(
        self,
        failures: list[str],
        reason: ClusterReason = ClusterReason.INVALID,
        action: Literal["apply", "prune"] = "apply",
    ) -> None:
        super().__init__("\n".join(failures), reason)
        self.failures = failures
        self.action = action
