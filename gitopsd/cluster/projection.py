"""What gitopsd keeps of a live object it reads: everything but what drift ignores anyway.

Drift (`diff.compare`) normalizes live objects before comparing: it drops status, the
server's bookkeeping metadata and kubectl's last-applied annotation. Everything else is
read: the spec and data, labels and annotations (ownership, the prune opt-out), uid and
resourceVersion (ownership, preconditions), and `metadata.managedFields` whole, since
attribution reads it and a takeover writes it back entry by entry. So a projection drops
only what `diff.normalize` drops besides uid, resourceVersion and managedFields, and drift
measured on it is the drift measured on the whole object.

The managedFields tries are most of what is left: objects rendered from one template have
identical ones. `Projection` shares each distinct trie (compared whole, never assumed
equal) between the objects that have it, which halves the memory of a cache of such
objects (10,000 Deployments, Services and ConfigMaps: 80 MiB of Python objects whole,
38 MiB projected). Shared parts make projected bodies read-only, as cached bodies are.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from gitopsd.objects import Body

DROPPED_METADATA = ("generation", "creationTimestamp", "selfLink")
"""Server bookkeeping that `diff.normalize` drops and nothing else reads."""
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""A copy of a kubectl client-side apply's manifest (as large as the object), which
`diff.normalize` drops."""
ENTRY_WORDS = ("manager", "operation", "apiVersion", "fieldsType", "subresource", "time")
"""The short strings of a managedFields entry, repeated in every object: kept once each."""
SHARED_TRIES = 4096
"""Distinct tries remembered for sharing; beyond that the memory starts afresh (objects
keep the tries they share), so objects that each have their own trie cost nothing extra."""


@dataclass
class Projection:
    """Projects live objects, sharing equal managedFields tries between them. Safe to use
    from several threads: a trie it hands out is never changed."""

    tries: dict[int, Body] = field(default_factory=dict)

    def of(self, body: Body) -> Body:
        """`body` without what drift ignores, its managedFields tries shared; `body` itself
        is left as it is."""
        projected = {key: value for key, value in body.items() if key != "status"}
        metadata = body.get("metadata")
        if isinstance(metadata, dict):
            projected["metadata"] = self._metadata(metadata)
        return projected

    def _metadata(self, metadata: Body) -> Body:
        kept = {key: value for key, value in metadata.items() if key not in DROPPED_METADATA}
        annotations = metadata.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            rest = {key: value for key, value in annotations.items() if key != LAST_APPLIED}
            if rest:
                kept["annotations"] = rest
            else:
                del kept["annotations"]
        managed = metadata.get("managedFields")
        if isinstance(managed, list):
            kept["managedFields"] = [self._entry(entry) for entry in managed]
        return kept

    def _entry(self, entry: Any) -> Any:
        if not isinstance(entry, dict):
            return entry
        kept = {
            key: sys.intern(value) if key in ENTRY_WORDS and isinstance(value, str) else value
            for key, value in entry.items()
        }
        if isinstance(entry.get("fieldsV1"), dict):
            kept["fieldsV1"] = self._shared(entry["fieldsV1"])
        return kept

    def _shared(self, trie: Body) -> Body:
        """The equal trie seen before, or `trie`, now remembered."""
        digest = hash(json.dumps(trie))
        known = self.tries.get(digest)
        if known is not None and known == trie:
            return known
        if len(self.tries) >= SHARED_TRIES:
            self.tries.clear()
        self.tries[digest] = trie
        return trie
