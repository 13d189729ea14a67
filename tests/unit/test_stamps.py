"""In-sync stamps: what the parent keeps of the drift memo, and what they vouch for."""

from __future__ import annotations

import base64

from gitopsd.changes import Target
from gitopsd.inventory import (
    MAX_PARENT_BYTES,
    STAMP_BYTES,
    ApplySet,
    encode_record,
    encode_stamps,
    stamps_of,
    stored_stamps,
)
from gitopsd.managed_fields import owned_version
from gitopsd.objects import Body, ObjectKey, Origin
from gitopsd.reconcile.measure import IN_SYNC, DriftMemo, Measured, stamp

APPLYSET = ApplySet("web", "gitops")


def key(name: str) -> ObjectKey:
    return ObjectKey("", "ConfigMap", "gitops", name)


def target(name: str, value: str = "v") -> Target:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": value}}
    return Target(key(name), body, Origin(f"{name}.yaml", 1), None)


def live(version: str, value: str = "v", annotated: bool = False) -> Body:
    """The ConfigMap as gitopsd applied it (its data is gitopsd's), maybe annotated since by
    another manager."""
    ours = {"manager": "gitopsd", "operation": "Apply", "fieldsV1": {"f:data": {"f:k": {}}}}
    metadata: Body = {"resourceVersion": version, "managedFields": [ours]}
    if annotated:
        metadata["annotations"] = {"example.com/seen": "yes"}
        theirs: Body = {"f:metadata": {"f:annotations": {"f:example.com/seen": {}}}}
        metadata["managedFields"].append({"manager": "auditor", "fieldsV1": theirs})
    return {"metadata": metadata, "data": {"k": value}}


def test_stamps_travel_in_the_parent_aligned_with_its_record() -> None:
    record = {key(name): "0a1b2c3d" for name in ("c", "a", "b")}
    stamps = {key("a"): b"A" * STAMP_BYTES, key("c"): b"C" * STAMP_BYTES}

    parent = APPLYSET.parent(record, encode_stamps(record, stamps))

    assert stamps_of(parent, record) == {**stamps, key("b"): bytes(STAMP_BYTES)}
    assert stamps_of(parent, {**record, key("d"): "4e5f6a7b"}) == {}  # another record's


def test_a_parent_without_readable_stamps_has_none() -> None:
    record = {key("a"): "0a1b2c3d"}
    assert "in-sync" not in APPLYSET.parent(record, encode_stamps(record, {}))["binaryData"]
    one_stamp_and_more = "!" + base64.b64encode(b"S" * STAMP_BYTES).decode()
    for stored in ("not base64!", 7, one_stamp_and_more):
        parent = {"binaryData": {"in-sync": stored}}
        assert (stored_stamps(parent), stamps_of(parent, record)) == (b"", {})
    short = {"binaryData": {"in-sync": base64.b64encode(b"short").decode()}}
    assert stamps_of(short, record) == {}  # not one stamp per recorded object


def test_stamps_are_kept_while_record_and_stamps_fit_the_parents_bytes() -> None:
    record = {key("a"): "0a1b2c3d"}
    room = MAX_PARENT_BYTES - len(encode_record(record))

    filled = APPLYSET.parent(record, b"S" * room)["binaryData"]
    over = APPLYSET.parent(record, b"S" * (room + 1))["binaryData"]

    assert base64.b64decode(filled["in-sync"]) == b"S" * room
    assert "in-sync" not in over


def test_stamps_that_would_not_fit_beside_the_record_are_left_out() -> None:
    # record entries are random, so they barely compress: the record alone nears the limit
    many = {key(f"object-{n}"): f"{n * 2654435761 % 2**32:08x}" for n in range(60_000)}
    stamps = encode_stamps(many, {k: b"S" * STAMP_BYTES for k in many})

    data = APPLYSET.parent(many, stamps)["binaryData"]

    assert "in-sync" not in data
    assert len(base64.b64decode(data["inventory"])) + len(stamps) > MAX_PARENT_BYTES


def test_a_stamp_vouches_for_one_git_body_and_what_gitopsd_owns_of_the_live_object() -> None:
    written = DriftMemo()
    written.remember(target("same"), live("7"), IN_SYNC)
    written.remember(target("edited"), live("7"), IN_SYNC)
    written.remember(target("changed"), live("7"), IN_SYNC)
    written.remember(target("drifted"), live("7"), Measured(None, owned_as_declared=False))
    stamps = written.stamps()
    assert set(stamps) == {key("same"), key("edited"), key("changed")}  # not what differs

    written.remember(target("annotated"), live("7"), IN_SYNC)
    stamps[key("annotated")] = written.stamps()[key("annotated")]

    memo = DriftMemo()
    targets = {t.key: t for t in (target("same"), target("edited"), target("changed", "new"))}
    targets[key("drifted")], targets[key("annotated")] = target("drifted"), target("annotated")
    bodies = {key("same"): live("7"), key("edited"): live("8", "edited"), key("changed"): live("7")}
    bodies[key("annotated")] = live("9", annotated=True)  # another manager's field: still
    memo.adopt(stamps, targets, {**bodies, key("drifted"): live("7")})

    assert set(memo.seen) == {key("same"), key("annotated")}
    assert memo.fresh(targets[key("same")], live("7"))
    assert stamps[key("same")] == stamp(targets[key("same")].fingerprint, owned_version(live("7")))


def test_in_sync_holds_while_what_gitopsd_owns_does_and_drift_only_while_nothing_moved() -> None:
    """Drift names live values other managers may own: measured again once the object
    moved at all (here its resourceVersion: the CLI's memo)."""
    memo = DriftMemo()
    memo.remember(target("a"), live("7"), IN_SYNC)
    memo.remember(target("b"), live("7"), Measured(None, owned_as_declared=False))
    annotated = live("8", annotated=True)

    assert memo.fresh(target("a"), annotated) and not memo.fresh(target("b"), annotated)
    assert memo.fresh(target("b"), live("7")) and not memo.fresh(target("a"), live("9", "x"))


def test_an_object_found_fresh_at_a_resource_version_is_fresh_there_without_its_versions() -> None:
    """A drift check asks every object whether it is fresh: one found fresh at a
    resourceVersion answers again from that, without its owned version computed. An entry
    remembered anew, or a body at another resourceVersion, is asked in full."""
    computed: list[str] = []

    def versions(key: ObjectKey, body: Body) -> str:
        computed.append(body["metadata"]["resourceVersion"])
        return f"{owned_version(body)}@{body['metadata']['resourceVersion']}"

    memo = DriftMemo(version_of=versions)
    memo.remember(target("a"), live("7"), IN_SYNC)
    computed.clear()

    assert memo.fresh(target("a"), live("7")) and memo.fresh(target("a"), live("7"))
    assert computed == ["7"]
    assert memo.fresh(target("a"), live("8", annotated=True))  # another manager's field
    assert not memo.fresh(target("a"), live("9", "edited"))
    assert computed == ["7", "8", "9"]
    memo.remember(target("a"), live("9", "edited"), Measured(None, owned_as_declared=False))
    assert not memo.fresh(target("a"), live("7"))  # a new entry: found fresh at 7 no more
    assert not memo.fresh(target("a", "new"), live("9", "edited"))  # git moved
