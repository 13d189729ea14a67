"""Operator mode's generators, pure: the GitSyncSet custom resource, which sets GitSyncs.

A GitSyncSet's generators (a list, a repository's directories, the declared clusters, and
their cross product) give elements, each a set of variables; its template, expanded with
each element's variables, is one GitSync. `schema` is the one source of its CRD (a test
keeps config/crd/gitsyncsets.yaml equal to it), `spec` reads a set, `generators` gives its
elements, `template` makes each one's GitSync, `deletion` decides what a pass writes and
deletes (behind the deletion guards), and `status` says it in the set's status.
"""

from __future__ import annotations

from gitopsd.gitsync import GROUP, VERSION
from gitopsd.objects import Resource

KIND = "GitSyncSet"
PLURAL = "gitsyncsets"
RESOURCE = Resource(GROUP, VERSION, KIND, PLURAL, namespaced=True)
SET_LABEL = "gitopsd.io/gitsyncset"
"""On a generated GitSync: the name of the set that generated it (its owner reference,
with the set's uid, is what proves it the set's)."""
MAX_ELEMENTS = 1000
"""The most elements (so GitSyncs) one set may generate."""
MAX_DIRECTORIES = 10_000
"""The most directories of a revision a git generator scans."""
MAX_TEMPLATE_BYTES = 32 * 1024
"""The largest template (as JSON)."""
MAX_GENERATED_BYTES = 16 * 1024 * 1024
"""The most all of a set's generated GitSyncs may add up to (as JSON): a template's
variables may repeat a long value many times."""
