"""Leadership by the local monotonic clock, and the fence every write passes. Pure: no API
request is made (a scripted transport with no answers records any attempt)."""

from __future__ import annotations

import time
from typing import Any, cast

import pytest

from gitopsd.cluster import Cluster, Resource
from gitopsd.cluster.api import Api
from gitopsd.cluster.lease import LeaderElector
from gitopsd.errors import ClusterError
from tests.harness.clock import Clock
from tests.harness.scripted_api import Transport

CONFIG_MAPS = Resource("", "v1", "ConfigMap", "configmaps", namespaced=True)
BODY = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "n"}}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(time, "monotonic", clock)
    return clock


def elector() -> LeaderElector:
    no_cluster = cast(Cluster, None)
    return LeaderElector(no_cluster, "ns", "gitopsd", "me", 15.0, 10.0, 2.0)


def test_a_holder_leads_only_within_the_renew_deadline_of_its_last_renewal(clock: Clock) -> None:
    candidate = elector()
    assert not candidate.is_leader()  # never renewed

    candidate._renewed_at = clock.now
    clock.now += 9.9
    assert candidate.is_leader()
    clock.now += 0.2  # 10.1 s since the renewal: stopped or partitioned that long, it knows
    assert not candidate.is_leader()


def test_another_holder_expires_only_after_its_record_stood_still_a_lease_duration(
    clock: Clock,
) -> None:
    candidate = elector()
    held = {"holderIdentity": "other", "renewTime": "t1", "leaseDurationSeconds": 15}

    assert not candidate._expired(held)
    clock.now += 14
    assert not candidate._expired(held)
    renewed = {**held, "renewTime": "t2"}  # the holder renews: the wait starts over
    assert not candidate._expired(renewed)
    clock.now += 14
    assert not candidate._expired(renewed)
    clock.now += 2
    assert candidate._expired(renewed)


def test_the_record_timestamps_are_never_compared_with_our_clock(clock: Clock) -> None:
    """A renewTime from a skewed clock years in the past does not make the lease expired."""
    candidate = elector()
    stale_looking = {"holderIdentity": "other", "renewTime": "2001-01-01T00:00:00.000000Z"}

    assert not candidate._expired({**stale_looking, "leaseDurationSeconds": 15})


@pytest.mark.parametrize(
    "write",
    [
        lambda c: c.apply(CONFIG_MAPS, BODY, dry_run=False, force=True),
        lambda c: c.patch(CONFIG_MAPS, "n", "a", []),
        lambda c: c.delete(CONFIG_MAPS, "n", "a", "uid", "1"),
        lambda c: c.event(BODY, "Drift", "message"),
    ],
)
def test_a_fenced_cluster_sends_no_write(write: Any) -> None:
    transport = Transport([])
    api = Api(transport)
    fenced = Cluster(api=api, discovery=cast(Any, None), may_write=lambda: False)

    with pytest.raises(ClusterError) as raised:
        write(fenced)

    assert raised.value.reason == "fenced" and transport.sent == []
