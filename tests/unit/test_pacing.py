"""A tenant's share of the API server (TA-03): its requests leave at a steady pace, a burst
at once and then `per_second`, every attempt of a retried request counted; the daemon's
own (the configuration's sources) are not paced."""

from __future__ import annotations

import pytest

from gitopsd.cluster.api import Api
from gitopsd.cluster.pacing import Pace
from gitopsd.configfile import TenantQuota
from gitopsd.daemon.quotas import Holdings
from tests.harness.scripted_api import Answer, Transport, throttled


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr("gitopsd.cluster.pacing.time.monotonic", clock)
    return clock


def test_ta03_a_burst_goes_at_once_then_each_request_waits_its_turn(clock: Clock) -> None:
    pace = Pace(per_second=10, burst=3)

    assert [pace.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert [round(pace.reserve(), 3) for _ in range(3)] == [0.1, 0.2, 0.3]  # in turn
    clock.now += 10  # idle: the bucket fills again, to its burst and no further
    assert [pace.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert round(pace.reserve(), 3) == 0.1


def test_ta03_every_attempt_of_a_retried_request_takes_its_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    turns: list[str] = []
    pace = Pace(per_second=1, burst=1)
    monkeypatch.setattr(pace, "take", lambda: turns.append("turn"))
    transport = Transport([throttled(), Answer(200)])

    Api(transport, pace=pace).request("PATCH", "/api/v1/namespaces/n/configmaps/a")

    assert turns == ["turn", "turn"] and len(transport.sent) == 2


def test_ta03_a_namespaces_gitsyncs_share_one_pace_and_the_admins_sources_have_none() -> None:
    holdings = Holdings(TenantQuota(requests_per_second=7, request_burst=11))

    team = holdings.pace("team")

    assert team is holdings.pace("team") and team is not holdings.pace("other")
    assert team is not None and (team.per_second, team.burst) == (7, 11)
    assert holdings.pace("") is None
