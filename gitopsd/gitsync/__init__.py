"""Operator mode's vocabulary: the GitSync custom resource, pure.

`schema` is the one source of its CRD (config/crd is generated from it, and a test fails
when the two disagree), `spec` reads a GitSync into the source the reconcile story runs,
and `status` says what its status and Events are, from what the source's worker saw.
"""

from __future__ import annotations

from gitopsd.objects import Resource

GROUP = "gitopsd.io"
VERSION = "v1alpha1"
KIND = "GitSync"
PLURAL = "gitsyncs"
RESOURCE = Resource(GROUP, VERSION, KIND, PLURAL, namespaced=True)
FINALIZER = "gitopsd.io/finalizer"
"""Held while the GitSync exists, so that its deletion can prune what it applied."""
DELETE_POLICY_ANNOTATION = "gitopsd.io/delete-policy"
"""`prune` on a GitSync: deleting it deletes what it applied (behind the prune guards)."""
CREDENTIALS_FOR_ANNOTATION = "gitopsd.io/git-credentials-for"
"""On a Secret: the repository URLs (comma-separated; one ending in `/` is a prefix) that a
GitSync acting with the daemon's own rights may use it for. A Secret without it is never
read for such a GitSync: its creator may have no right to the Secret."""
RECONCILE_REQUESTED_ANNOTATION = "gitopsd.io/reconcile-requested-at"
"""On a GitSync: set to anything new (a time, as `kubectl annotate --overwrite` or
`gitopsd reconcile --gitsync` write it) to have it polled at once; its status then echoes
the value in lastHandledReconcileAt (Flux's requestedAt convention)."""
