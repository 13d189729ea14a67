"""The error tree. Every failure gitopsd reports is one of these::

    GitopsdError
    ├── TerminalError          bad input: retrying cannot help; wait for a new revision
    │   ├── ConfigError        settings, flags or a source definition are invalid
    │   └── ManifestError      a file or an object of the revision is invalid
    └── TransientError         the world misbehaved: back off and retry the same revision
        ├── SourceError        fetching the revision failed (network, auth, ref, cache)
        └── ClusterError       the API server failed or refused a request
            └── ApplyError     one or more objects failed to dry-run, apply or delete

Each class carries its `stage` and a `reason` from a closed enum of its own: the labels of
gitopsd_errors_total, never parsed back out of a message.

A message never carries a Secret value or a credential: callers mask before raising.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal


class Stage(StrEnum):
    """Where a failure happened (the `stage` label of gitopsd_errors_total)."""

    CONFIG = "config"
    MANIFESTS = "manifests"
    SOURCE = "source"
    CLUSTER = "cluster"


class ConfigReason(StrEnum):
    INVALID = "invalid"


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


class SourceReason(StrEnum):
    UNREACHABLE = "unreachable"
    AUTH = "auth"
    HOSTKEY = "hostkey"
    REF_MISSING = "ref_missing"
    TIMEOUT = "timeout"
    TOO_LARGE = "too_large"
    NOSPACE = "nospace"
    CORRUPT = "corrupt"


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


Reason = ConfigReason | ManifestReason | SourceReason | ClusterReason


class GitopsdError(Exception):
    """Base of every error gitopsd raises on purpose."""

    stage: ClassVar[Stage]
    reason: Reason


class TerminalError(GitopsdError):
    """Input is invalid; the same revision will fail again, so do not retry it."""


class ConfigError(TerminalError):
    """Settings, command-line flags or a source definition are invalid."""

    stage = Stage.CONFIG
    reason = ConfigReason.INVALID


class ManifestError(TerminalError):
    """A manifest is invalid."""

    stage = Stage.MANIFESTS

    def __init__(self, message: str, reason: ManifestReason = ManifestReason.INVALID) -> None:
        super().__init__(message)
        self.reason: ManifestReason = reason


class TransientError(GitopsdError):
    """Something outside gitopsd failed; retrying later may succeed."""


class SourceError(TransientError):
    """Fetching or reading the revision failed."""

    stage = Stage.SOURCE

    def __init__(self, message: str, reason: SourceReason = SourceReason.UNREACHABLE) -> None:
        super().__init__(message)
        self.reason: SourceReason = reason


class ClusterError(TransientError):
    """The API server failed or refused a request."""

    stage = Stage.CLUSTER

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
