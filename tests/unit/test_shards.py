"""Sharding's membership and per-key fence, on the local monotonic clock (faked). The
replicas' Leases live in an in-memory store that keeps resourceVersions, conflicts and
label selectors as the API server does; that the API server does so is checked by
tests/integration/test_sharding.py."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import parse_qs

import pytest

from gitopsd.cluster import Cluster
from gitopsd.cluster.api import Api
from gitopsd.cluster.shards import GROUP_LABEL, Membership
from tests.harness.clock import Clock
from tests.harness.scripted_api import Answer

KEYS = [f"team-{n}" for n in range(60)]
LEASE, DEADLINE, RETRY = 15.0, 10.0, 2.0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(time, "monotonic", clock)
    return clock


@dataclass
class Leases:
    """The Leases of one namespace, stored as the API server stores them."""

    stored: dict[str, dict[str, Any]] = field(default_factory=dict)
    version: int = 0

    def send(self, method: str, target: str, payload: bytes | None, *_: Any) -> Answer:
        path, _sep, query = target.partition("?")
        name = path.split("/leases")[1].strip("/")
        body = json.loads(payload) if payload else {}
        if method == "GET" and not name:
            return self._answer(200, {"items": self._selected(query), "metadata": {}})
        named = name or body.get("metadata", {}).get("name", "")
        found = self.stored.get(named)
        if method == "GET":
            return self._answer(200, found) if found else self._not_found(named)
        if method == "POST":
            return self._answer(409, {}) if found else self._store(body)
        if found is None:
            return self._not_found(named)
        preconditions = body.get("preconditions") or {}
        wanted = (body.get("metadata") or {}).get("resourceVersion") or preconditions.get(
            "resourceVersion"
        )
        uid = preconditions.get("uid", found["metadata"]["uid"])
        if (wanted, uid) != (found["metadata"]["resourceVersion"], found["metadata"]["uid"]):
            return self._answer(409, {})
        if method == "DELETE":
            del self.stored[name]
            return self._answer(200, {})
        return self._store(body)

    def _selected(self, query: str) -> list[dict[str, Any]]:
        wanted = parse_qs(query)["labelSelector"][0].split(",")
        items = []
        for lease in self.stored.values():
            labels = lease["metadata"].get("labels") or {}
            if all(_selects(term, labels) for term in wanted):
                items.append(lease)
        return items

    def _store(self, body: dict[str, Any]) -> Answer:
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        kept = self.stored.get(body["metadata"]["name"], {}).get("metadata", {}).get("uid")
        body["metadata"]["uid"] = kept or f"uid-{self.version}"  # an update keeps it
        self.stored[body["metadata"]["name"]] = body
        return self._answer(201, body)

    def _not_found(self, name: str) -> Answer:
        """As the API server says it: a Status naming the object."""
        return self._answer(404, {"kind": "Status", "details": {"name": name, "kind": "leases"}})

    def _answer(self, status: int, body: Any) -> Answer:
        return Answer(status, json.dumps({"message": "scripted", **body}).encode())


def _selects(term: str, labels: dict[str, str]) -> bool:
    if term.startswith("!"):
        return term[1:] not in labels
    key, _, value = term.partition("=")
    return labels.get(key) == value


@dataclass
class Partial:
    """One replica's way to the store, whose lists fail until `lists_fail_until` (a
    replica that renews its Lease but cannot read the others')."""

    store: Leases
    lists_fail_until: float = 0.0

    def send(self, method: str, target: str, *rest: Any) -> Answer:
        listing = method == "GET" and target.split("?")[0].endswith("/leases")
        if listing and time.monotonic() < self.lists_fail_until:
            return Answer(403, b'{"message": "scripted: lists refused"}')
        return self.store.send(method, target, *rest)


def member(store: Leases, name: str, shard: str | None = None) -> Membership:
    cluster = Cluster(api=Api(Partial(store)), discovery=cast(Any, None))
    return Membership(cluster, "ns", "gitopsd", shard, name, name, LEASE, DEADLINE, RETRY)


def writers(members: list[Membership], key: str) -> list[str]:
    return [m.member for m in members if m.may_write(key)]


def test_a_lone_replica_writes_for_every_key_once_a_list_after_its_arrival_shows_it_alone(
    clock: Clock,
) -> None:
    alone = member(Leases(), "a")

    alone.round()  # its Lease written, then listed: nobody else

    assert alone.members == ("a",)
    assert all(alone.may_write(key) for key in KEYS)


def test_keys_spread_and_a_new_member_takes_only_its_share_after_a_renew_deadline(
    clock: Clock,
) -> None:
    store = Leases()
    a, b = member(store, "a"), member(store, "b")
    a.round()
    clock.now += 1
    b.round()
    a.round()

    shares = Counter(a.owner(key) for key in KEYS)
    assert shares["a"] > 15 and shares["b"] > 15  # each holds a fair share
    assert [b.owner(key) for key in KEYS] == [a.owner(key) for key in KEYS]
    gained = [key for key in KEYS if b.owns(key)]
    assert not any(b.may_write(key) for key in gained)  # a's older list may still give them a
    assert not any(a.may_write(key) for key in gained)  # a let go at once

    clock.now += DEADLINE
    b.round()
    assert all(b.may_write(key) for key in gained)


def test_a_member_that_stops_renewing_is_fenced_first_and_its_share_moves_without_a_wait(
    clock: Clock,
) -> None:
    store = Leases()
    a, b = member(store, "a"), member(store, "b")
    for _ in range(2):
        a.round()
        b.round()
        clock.now += DEADLINE  # past b's hold
    a.round()
    b.round()
    of_a = [key for key in KEYS if a.owns(key)]
    assert all(a.may_write(key) for key in of_a)

    # a stops (SIGKILL, a hang): by its own clock it writes nothing after the renew
    # deadline; b sees its record stand still for a lease duration, then takes its share.
    for _ in range(int(LEASE / RETRY) + 1):
        clock.now += RETRY
        b.round()
    assert not any(a.may_write(key) for key in KEYS)
    assert b.members == ("b",) and all(b.may_write(key) for key in of_a)


def test_a_released_lease_hands_the_share_over_at_the_next_list_and_expired_ones_are_deleted(
    clock: Clock,
) -> None:
    store = Leases()
    a, b = member(store, "a"), member(store, "b")
    a.round()
    b.round()
    clock.now += DEADLINE
    a.round()
    b.round()

    a.release()
    b.round()
    assert b.members == ("b",) and all(b.may_write(key) for key in KEYS)

    clock.now += LEASE
    b.round()
    assert list(store.stored) == ["b"]  # a's Lease, released a lease duration ago, is gone


def test_replicas_of_another_shard_are_not_members(clock: Clock) -> None:
    store = Leases()
    main, sharded = member(store, "main"), member(store, "x", shard="x")
    main.round()
    sharded.round()
    main.round()

    assert main.members == ("main",) and sharded.members == ("x",)
    assert store.stored["x"]["metadata"]["labels"][GROUP_LABEL] == "gitopsd"


@pytest.mark.parametrize("seed", range(12))
def test_no_key_is_ever_writable_by_two_replicas_whatever_the_timing(
    clock: Clock, seed: int
) -> None:
    """Replicas that run their rounds late, stop for a while (a hang) and come back, can
    renew but not list for a while, die or restart, checked every tenth of a second: at
    most one may write for each key, and each key mostly has one."""
    chance = random.Random(seed)  # noqa: S311 - a replayable schedule, not a secret
    store = Leases()
    names = [f"r{n}" for n in range(4)]
    members = {name: member(store, name) for name in names}
    next_round = {name: chance.uniform(0, RETRY) for name in names}
    start, written = clock.now, 0
    while clock.now < start + 300:
        clock.now = round(clock.now + 0.1, 1)
        for name in names:
            if clock.now - start < next_round[name]:
                continue
            fate = chance.random()
            if fate < 0.01:  # killed, and started again as a new process (same pod name)
                members[name] = member(store, name)
                next_round[name] += chance.uniform(0, 3 * LEASE)
            elif fate < 0.03:  # hangs, then goes on with its old state
                next_round[name] += chance.uniform(DEADLINE, 2 * LEASE)
            elif fate < 0.05:
                way = cast(Partial, members[name].cluster.api.transport)
                way.lists_fail_until = clock.now + chance.uniform(DEADLINE, 2 * LEASE)
            else:
                members[name].round()
                next_round[name] += RETRY + chance.uniform(0, 1.5)
        for key in KEYS[:12]:
            count = len(writers(list(members.values()), key))
            assert count <= 1, (clock.now - start, key)
            written += count
    assert written > 0.5 * 12 * 3000
