"""What gitopsd keeps of a live object it reads: everything but what drift ignores anyway,
except the few status fields health reads.

Drift (`diff.compare`) normalizes live objects before comparing: it drops status, the
server's bookkeeping metadata and kubectl's last-applied annotation. Everything else is
read: the spec and data, labels and annotations (ownership, the prune opt-out), uid and
resourceVersion (ownership, preconditions), and `metadata.managedFields` whole, since
attribution reads it and a takeover writes it back entry by entry. So a projection drops
only what `diff.normalize` drops besides uid, resourceVersion and managedFields, and drift
measured on it is the drift measured on the whole object. Of status it keeps what
`health.assess` reads (`health.essentials`), and with it the generation the status is
compared with, so health assessed on a projection is the health of the whole object.

The managedFields tries are most of what is left: objects rendered from one template have
identical ones. `Projection` shares each distinct trie (compared whole, never assumed
equal) between the objects that have it, which halves the memory of a cache of such
objects (10,000 Deployments, Services and ConfigMaps: 80 MiB of Python objects whole,
38 MiB projected). It shares short strings too: every object decoded from its own watch
event has its own copy of each key and of values such as "ClusterFirst" that all objects of
a kind repeat (10,000 objects from watch events: 45 MiB projected, 25 MiB with strings
shared). Shared parts make projected bodies read-only, as cached bodies are.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from gitopsd import health
from gitopsd.objects import Body

DROPPED_METADATA = ("generation", "creationTimestamp", "selfLink")
"""Server bookkeeping that `diff.normalize` drops and nothing else reads."""
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""A copy of a kubectl client-side apply's manifest (as large as the object), which
`diff.normalize` drops."""
ENTRY_WORDS = ("manager", "operation", "apiVersion", "fieldsType", "subresource", "time")
"""The short strings of a managedFields entry, repeated in every object: kept once each."""
SHARED_TEXT_CHARS = 32
"""Strings up to this long are shared (interned): keys, kinds, images, policies. Longer ones
are mostly an object's own (annotations, certificates, scripts)."""
SHARED_TRIES = 4096
"""Distinct tries remembered for sharing; beyond that the memory starts afresh (objects
keep the tries they share), so objects that each have their own trie cost nothing extra."""


@dataclass
class Projection:
    """Projects live objects, sharing equal managedFields tries between them. Safe to use
    from several threads: a trie it hands out is never changed."""

    tries: dict[int, Body] = field(default_factory=dict)
    whole_status: frozenset[tuple[str, str]] = frozenset()
    """(apiVersion's group, kind) whose status is kept whole: a source's own health rules
    may read any field of it."""

    def of(self, body: Body) -> Body:
        """`body` without what drift ignores, its managedFields tries and short strings
        shared; `body` itself is left as it is."""
        projected = {}
        for key, value in body.items():
            if key == "metadata" and isinstance(value, dict):
                projected[sys.intern(key)] = self._metadata(value)
            elif key != "status":
                projected[sys.intern(key)] = _strings_shared(value)
        status = body.get("status") if self._whole_status(body) else health.essentials(body)
        if status is not None and status != {}:  # an empty status assesses as none does
            projected["status"] = _strings_shared(status)
            generation = (body.get("metadata") or {}).get("generation")
            if generation is not None and isinstance(projected.get("metadata"), dict):
                projected["metadata"]["generation"] = generation  # what status is compared with
        return projected

    def _whole_status(self, body: Body) -> bool:
        if not self.whole_status:
            return False
        group = str(body.get("apiVersion", "")).rpartition("/")[0]
        return (group, str(body.get("kind", ""))) in self.whole_status

    def _metadata(self, metadata: Body) -> Body:
        kept = {}
        for key, value in metadata.items():
            if key == "managedFields" and isinstance(value, list):
                kept[key] = [self._entry(entry) for entry in value]
            elif key not in DROPPED_METADATA:
                kept[sys.intern(key)] = _strings_shared(value)
        annotations = kept.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            rest = {key: value for key, value in annotations.items() if key != LAST_APPLIED}
            if rest:
                kept["annotations"] = rest
            else:
                del kept["annotations"]
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


def _strings_shared(value: Any) -> Any:
    """`value` (JSON data) with its keys and short strings interned: new containers, the
    same content. Data nested too deep to walk is kept as it came."""
    try:
        return _interned(value)
    except RecursionError:
        return value


def _interned(value: Any) -> Any:
    if isinstance(value, dict):
        return {sys.intern(key): _interned(child) for key, child in value.items()}
    if isinstance(value, list):
        return [_interned(child) for child in value]
    if isinstance(value, str) and len(value) <= SHARED_TEXT_CHARS:
        return sys.intern(value)
    return value
