"""Rows of BENCHMARKS.md: what a cluster's churn cost the daemon, judged per 30 s, and where
a fleet's step spent the CPU that kept it from its floor."""

from __future__ import annotations

import math
import os

import pytest

from tests.bench.daemon import DaemonFigures
from tests.bench.floor import CLIENT, Calibration, Window, machine_use, per_request
from tests.bench.report import current_rows, rollout_rows


def rolled_out(cpu_seconds: float, dry_runs: int) -> DaemonFigures:
    figures = DaemonFigures(cold_start_seconds=40.0, cold_start_requests=20_000)
    figures.rollout_seconds, figures.deployments = 60.0, 2_500
    figures.rollout_cpu_seconds, figures.rollout_requests = cpu_seconds, 25 + dry_runs
    figures.rollout_dry_runs = dry_runs
    figures.rollout_events = {"unkept": 0, "ignored": 30_000, "health": 9_000, "owned": 1_000}
    return figures


def test_the_rollout_window_shows_events_by_outcome_and_cpu_per_event_and_per_30_s() -> None:
    rows = {row[0]: row[1:] for row in rollout_rows([rolled_out(1.6, 0)])}
    step = "rollout of all 2,500 Deployments, 60 s"

    assert rows[f"{step}: watch events"][0] == (
        "40,000 (unkept 0, ignored 30,000, health 9,000, owned 1,000)"
    )
    assert rows[f"{step}: requests"] == ("25 (0 dry-runs)", "no dry-run", "met")
    assert rows[f"{step}: CPU"] == ("1.60 s", "< 1 s per 30 s", "met")  # 0.8 s per 30 s
    assert rows[f"{step}: CPU per watch event"][0] == "40 µs"


def test_more_than_a_second_per_30_s_or_any_dry_run_misses() -> None:
    rows = {row[0]: row[1:] for row in rollout_rows([rolled_out(2.0, 3)])}
    step = "rollout of all 2,500 Deployments, 60 s"

    assert rows[f"{step}: CPU"][2] == rows[f"{step}: requests"][2] == "**missed**"


def test_a_run_without_the_window_shows_no_row() -> None:
    assert rollout_rows([DaemonFigures(cold_start_seconds=1.0, cold_start_requests=10)]) == []


def test_the_time_until_rolled_out_shows_where_controllers_rolled_the_set_out() -> None:
    waited = DaemonFigures(cold_start_seconds=40.0, cold_start_requests=10, current_seconds=95.5)
    never = DaemonFigures(cold_start_seconds=40.0, cold_start_requests=10)
    never.current_seconds = math.inf
    bare = DaemonFigures(cold_start_seconds=40.0, cold_start_requests=10)

    assert current_rows([waited])[0][:2] == (
        "start -> every object Current (rolled out)",
        "95.50 s",
    )
    assert current_rows([never])[0][1] == "not within 600 s"
    assert current_rows([bare]) == []


def test_a_fleet_step_shows_its_cpu_per_request_beside_the_calibrated_and_the_machine_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    calibration = Calibration(2000, {"kube-apiserver": 0.0009, "etcd": 0.0002, CLIENT: 0.0005})
    cpu = {"gitopsd": 12.0, "kube-apiserver": 20.0, "etcd": 3.0}
    created = Window(seconds=20.0, cpu=cpu, requests=10_000, machine=38.0)

    assert per_request(created, calibration) == (
        "gitopsd 1.20 ms (0.50), kube-apiserver 2.00 ms (0.90), etcd 0.30 ms (0.20)"
    )
    assert machine_use(created) == (
        "95 % of 2 cores: 38.0 s CPU, 35.0 s of it gitopsd, kube-apiserver, etcd"
    )
