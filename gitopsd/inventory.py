"""Ownership: the ApplySet convention (KEP-3659) plus this source's own record.

Each source has a parent ConfigMap `gitopsd-<source name>` carrying
`applyset.kubernetes.io/id` and the group-kinds and namespaces its members live in; every
member carries the label `applyset.kubernetes.io/part-of: <id>`, so `kubectl get -l` lists
them. A label is not proof, though: anyone who may patch an object can copy it. So the
parent also holds the record of what this source applied, each object with (a prefix of)
the uid it had, and only an object that carries the label *and* is recorded with its
current uid is this source's to prune. A relabelled or recreated object never is.

The record is zlib-compressed JSON in the parent's binaryData, grouped by group, kind and
namespace: 50,000 objects with realistic names take about 0.7 MB, inside the ConfigMap
limit of 1 MiB. Beside it, while both fit, the parent keeps an in-sync stamp per recorded
object (reconcile.measure says what a stamp vouches for): what lets a later run skip the
dry-run of an object that nothing changed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from gitopsd.objects import (
    APPLYSET_GROUP_KINDS_ANNOTATION,
    APPLYSET_ID_LABEL,
    APPLYSET_PART_OF_LABEL,
    APPLYSET_TOOLING_ANNOTATION,
    Body,
    ObjectKey,
)
from gitopsd.synchooks import HOOK_OF_LABEL

ADDITIONAL_NAMESPACES_ANNOTATION = "applyset.kubernetes.io/additional-namespaces"
CREATED_BY_LABEL = "gitopsd.io/created-by"
"""On a namespace a source created for itself (createNamespace): that source's ApplySet id.
It is no member of the set, so it is never pruned."""
TOOLING = "gitopsd/v1"
PARENT_PREFIX = "gitopsd-"
"""The one naming rule, for the CLI and the daemon alike: source X has parent gitopsd-X."""
RECORD_KEY = "inventory"
"""The parent's binaryData key holding the record."""
RECORD_FORMAT = "gitopsd.io/inventory-v1"
STAMPS_KEY = "in-sync"
"""The parent's binaryData key holding the stamps: STAMP_BYTES per recorded object, in the
record's key order, zeros where an object has none."""
STAMP_BYTES = 8
MAX_PARENT_BYTES = 900 * 1024
"""Most bytes of record and stamps together: stamps that would not fit under the ConfigMap
limit (1 MiB, with room for the metadata) are left out."""
MAX_RECORD_BYTES = 64 * 1024 * 1024
"""Most bytes a record may inflate to: a tampered parent cannot exhaust memory."""
UID_PREFIX = 8
"""Hex digits of a uid kept per object: uids are random, so 32 bits tell a recreated object
from the one applied (a 1 in 4 billion chance of mistaking them), at 4 bytes an object."""

Record = dict[ObjectKey, str]
"""What this source applied: each object and the prefix of the uid it had."""


@dataclass(frozen=True)
class ApplySet:
    """The parent of one source's objects: a ConfigMap `name` in `namespace`."""

    name: str
    namespace: str

    @classmethod
    def of_source(cls, source_name: str, namespace: str) -> ApplySet:
        return cls(PARENT_PREFIX + source_name, namespace)

    @cached_property
    def id(self) -> str:
        """base64url(sha256(name.namespace.kind.group)), as KEP-3659 prescribes against spoofing;
        computed once (every member and every live object is checked against it)."""
        digest = hashlib.sha256(f"{self.name}.{self.namespace}.ConfigMap.".encode()).digest()
        return f"applyset-{base64.urlsafe_b64encode(digest).decode().rstrip('=')}-v1"

    @property
    def key(self) -> ObjectKey:
        return ObjectKey("", "ConfigMap", self.namespace, self.name)

    def parent(
        self,
        record: Mapping[ObjectKey, str],
        stamps: bytes = b"",
        annotations: Mapping[str, str] | None = None,
    ) -> Body:
        """The parent object to apply: the record, where its members live (so the LISTs
        that find them stay narrow), the stamps (see encode_stamps) if they fit, and
        `annotations` of the caller's (the target's identity)."""
        group_kinds = {key.group_kind for key in record}
        others = sorted({key.namespace for key in record} - {self.namespace, ""})
        encoded = encode_record(record)
        data = {RECORD_KEY: base64.b64encode(encoded).decode()}
        if stamps and len(encoded) + len(stamps) <= MAX_PARENT_BYTES:
            data[STAMPS_KEY] = base64.b64encode(stamps).decode()
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {APPLYSET_ID_LABEL: self.id},
                "annotations": {
                    **(annotations or {}),
                    APPLYSET_TOOLING_ANNOTATION: TOOLING,
                    APPLYSET_GROUP_KINDS_ANNOTATION: ",".join(sorted(map(str, set(group_kinds)))),
                    ADDITIONAL_NAMESPACES_ANNOTATION: ",".join(others),
                },
            },
            "binaryData": data,
        }

    def foreign(self, parent: Body | None) -> str | None:
        """Why a live parent is not this source's to write and trust, or None if it is."""
        if parent is None:
            return None
        metadata = parent.get("metadata") or {}
        tooling = (metadata.get("annotations") or {}).get(APPLYSET_TOOLING_ANNOTATION)
        if tooling != TOOLING:
            return f"its tooling is {tooling!r}, not {TOOLING!r}"
        if (metadata.get("labels") or {}).get(APPLYSET_ID_LABEL) != self.id:
            return f"its label {APPLYSET_ID_LABEL} is not this source's id {self.id}"
        try:
            recorded(parent)
        except ValueError as error:
            return f"its record cannot be read: {error}"
        return None

    def member(self, body: Body) -> Body:
        """`body` labelled as a member of this set: a new object, sharing all but the maps
        on the path to the label with `body` (neither is edited after)."""
        metadata = body.get("metadata") or {}
        labels = {**(metadata.get("labels") or {}), APPLYSET_PART_OF_LABEL: self.id}
        return {**body, "metadata": {**metadata, "labels": labels}}

    def owns(self, live: Body) -> bool:
        labels = (live.get("metadata") or {}).get("labels") or {}
        return labels.get(APPLYSET_PART_OF_LABEL) == self.id

    def hook(self, body: Body) -> Body:
        """`body` labelled as a hook of this set's source: no member of the set."""
        metadata = body.get("metadata") or {}
        labels = {**(metadata.get("labels") or {}), HOOK_OF_LABEL: self.id}
        labels.pop(APPLYSET_PART_OF_LABEL, None)  # a manifest's own claim is refused on read
        return {**body, "metadata": {**metadata, "labels": labels}}

    def owns_hook(self, live: Body) -> bool:
        labels = (live.get("metadata") or {}).get("labels") or {}
        return labels.get(HOOK_OF_LABEL) == self.id

    @property
    def source_name(self) -> str:
        return self.name.removeprefix(PARENT_PREFIX)

    @property
    def selector(self) -> str:
        return f"{APPLYSET_PART_OF_LABEL}={self.id}"


def recorded(parent: Body | None) -> Record:
    """The record a live parent holds; empty without one. Raises ValueError if malformed."""
    encoded = ((parent or {}).get("binaryData") or {}).get(RECORD_KEY)
    if not encoded:
        return {}
    try:
        return decode_record(base64.b64decode(encoded, validate=True))
    except ValueError as error:  # also JSON's and base64's errors
        raise ValueError(str(error)[:200]) from None
    except (zlib.error, TypeError):  # not zlib data; members of the wrong shape
        raise ValueError("it is not a record gitopsd wrote") from None


def uid_prefix(live: Body) -> str:
    return str((live.get("metadata") or {}).get("uid", "")).replace("-", "")[:UID_PREFIX]


def encode_record(record: Mapping[ObjectKey, str]) -> bytes:
    """Compact JSON, grouped by group, kind and namespace, then compressed."""
    groups: dict[tuple[str, str, str], list[list[str]]] = {}
    for key in sorted(record):
        groups.setdefault((key.group, key.kind, key.namespace), []).append([key.name, record[key]])
    objects = [[*scope, members] for scope, members in groups.items()]
    text = json.dumps({"format": RECORD_FORMAT, "objects": objects}, separators=(",", ":"))
    return zlib.compress(text.encode(), 9)


def decode_record(data: bytes) -> Record:
    inflater = zlib.decompressobj()
    text = inflater.decompress(data, MAX_RECORD_BYTES)
    if inflater.unconsumed_tail:
        raise ValueError(f"it inflates to more than {MAX_RECORD_BYTES} bytes")
    document = json.loads(text)
    if not isinstance(document, dict) or document.get("format") != RECORD_FORMAT:
        raise ValueError(f"it is not in the format {RECORD_FORMAT}")
    record: Record = {}
    for group, kind, namespace, members in document.get("objects") or []:
        for name, uid in members:
            record[ObjectKey(str(group), str(kind), str(namespace), str(name))] = str(uid)
    return record


def encode_stamps(record: Mapping[ObjectKey, str], stamps: Mapping[ObjectKey, bytes]) -> bytes:
    """The stamps of the recorded objects, aligned with the record's sorted keys; empty when
    no object has one."""
    if not any(key in stamps for key in record):
        return b""
    none = bytes(STAMP_BYTES)
    return b"".join(stamps.get(key, none) for key in sorted(record))


def stamps_of(parent: Body | None, record: Record) -> dict[ObjectKey, bytes]:
    """The stamps a live parent holds for its record; none when they do not fit the record
    (written by an older gitopsd, or tampered with): a missing stamp only costs a dry-run."""
    raw = stored_stamps(parent)
    if len(raw) != STAMP_BYTES * len(record):
        return {}
    keys = sorted(record)
    return {key: raw[i * STAMP_BYTES : (i + 1) * STAMP_BYTES] for i, key in enumerate(keys)}


def stored_stamps(parent: Body | None) -> bytes:
    """The stamps' bytes as a live parent holds them; empty if it holds none readable."""
    encoded = ((parent or {}).get("binaryData") or {}).get(STAMPS_KEY)
    try:
        return base64.b64decode(encoded, validate=True) if isinstance(encoded, str) else b""
    except ValueError:
        return b""


def gitopsd_parent(body: Body, applyset_id: str) -> ApplySet | None:
    """The gitopsd ApplySet whose parent `body` is, if it is the parent of `applyset_id`:
    the id is a hash of the parent's name and namespace, so no other object can pass."""
    metadata = body.get("metadata") or {}
    name, namespace = str(metadata.get("name", "")), str(metadata.get("namespace", ""))
    tooling = str((metadata.get("annotations") or {}).get(APPLYSET_TOOLING_ANNOTATION, ""))
    applyset = ApplySet(name, namespace)
    gitopsd = tooling.startswith("gitopsd/") and name.startswith(PARENT_PREFIX)
    return applyset if gitopsd and applyset.id == applyset_id else None
