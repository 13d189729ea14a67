"""TA-04: the record of unpacked charts gives back what no source holds, and keeps
everything when the daemon stops (a restart must not fetch every chart again)."""

from __future__ import annotations

from pathlib import Path

from gitopsd.source.chart_cache import CHARTS, ChartCache


def unpacked(root: Path, name: str) -> Path:
    path = root / CHARTS / name
    path.mkdir(parents=True)
    (path / "Chart.yaml").write_text("name: x\n")
    return path


def test_ta04_a_chart_no_source_holds_is_removed(tmp_path: Path) -> None:
    cache = ChartCache(1 << 20, 1 << 20, [tmp_path])
    user = cache.user("team")
    chart = unpacked(tmp_path, "chart")
    cache.take(user, "chart", chart)
    user.leave()
    assert not chart.exists()


def test_ta04_the_charts_stay_when_the_daemon_stops(tmp_path: Path) -> None:
    cache = ChartCache(1 << 20, 1 << 20, [tmp_path])
    user = cache.user("team")
    chart = unpacked(tmp_path, "chart")
    cache.take(user, "chart", chart)
    cache.keep()
    user.leave()
    assert chart.is_dir()
