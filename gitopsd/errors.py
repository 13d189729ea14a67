"""The error tree. Every failure gitopsd reports is one of these::

    GitopsdError
    ├── TerminalError          bad input: retrying cannot help; wait for a new revision
    │   ├── ConfigError        settings, flags or a source definition are invalid
    │   └── ManifestError      a file or an object of the revision is invalid
    └── TransientError         the world misbehaved: back off and retry the same revision
        ├── SourceError        fetching the revision failed (network, auth, ref, cache)
        └── ClusterError       the API server failed or refused a request
            └── ApplyError     one or more objects failed to dry-run, apply or delete

A message never carries a Secret value or a credential: callers mask before raising.
"""

from __future__ import annotations


class GitopsdError(Exception):
    """Base of every error gitopsd raises on purpose."""


class TerminalError(GitopsdError):
    """Input is invalid; the same revision will fail again, so do not retry it."""


class ConfigError(TerminalError):
    """Settings, command-line flags or a source definition are invalid."""


class ManifestError(TerminalError):
    """A manifest is invalid. `reason` is a closed label for metrics (e.g. ``duplicate_key``)."""

    def __init__(self, message: str, reason: str = "invalid") -> None:
        super().__init__(message)
        self.reason = reason


class TransientError(GitopsdError):
    """Something outside gitopsd failed; retrying later may succeed."""


class SourceError(TransientError):
    """Fetching or reading the revision failed. `reason` is a closed label for metrics."""

    def __init__(self, message: str, reason: str = "unreachable") -> None:
        super().__init__(message)
        self.reason = reason


class ClusterError(TransientError):
    """The API server failed or refused a request. `reason` is a closed label for metrics."""

    def __init__(self, message: str, reason: str = "server") -> None:
        super().__init__(message)
        self.reason = reason


class ApplyError(ClusterError):
    """Objects failed to dry-run, apply or delete; `failures` holds one message per object
    and `action` says which: "apply" (dry-run included) or "prune"."""

    def __init__(self, failures: list[str], reason: str = "invalid", action: str = "apply") -> None:
        super().__init__("\n".join(failures), reason)
        self.failures = failures
        self.action = action
