"""TA-04: the disk a tenant's charts take is given back and bounded. A chart's dependencies
share one budget per revision; the chart cache is pruned when no source uses an entry,
and by size; a deleted GitSync frees what only it used."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gitopsd.errors import ExitCode
from tests.harness.chartrepo import ChartRepository, serving
from tests.harness.cli import Gitopsd
from tests.harness.gitserver import GitRepo

MIB = 1024 * 1024


@pytest.fixture
def public_charts(tmp_path: Path) -> Iterator[ChartRepository]:
    with serving(tmp_path / "public-charts", anonymous=True) as repository:
        yield repository


def heavy_chart(name: str, mib: int) -> dict[str, str]:
    """A chart of `mib` MiB that compresses to a few KiB (a template of one comment)."""
    return {
        f"{name}/Chart.yaml": f"apiVersion: v2\nname: {name}\nversion: 0.1.0\n",
        f"{name}/templates/padding.yaml": "{{/* " + "x" * (mib * MIB) + " */}}\n",
    }


def depending_on(charts: ChartRepository, names: list[str]) -> dict[str, str]:
    """A chart in git that depends on each of `names` in `charts`, none vendored."""
    entries = "".join(
        f"- name: {name}\n  version: '*'\n  repository: {charts.url}\n" for name in names
    )
    chart = f"apiVersion: v2\nname: shop\nversion: 1.0.0\ndependencies:\n{entries}"
    return {"shop/Chart.yaml": chart}


def test_ta04_a_charts_dependencies_share_one_budget_for_their_revision(
    gitopsd: Gitopsd, git_repo: GitRepo, public_charts: ChartRepository, tmp_path: Path
) -> None:
    """TA-04: 20 dependencies of 4 MiB each are each within the 64 MiB per revision, and
    together over it: refused, naming the dependency and the bound."""
    names = [f"heavy{n}" for n in range(20)]
    for name in names:
        public_charts.publish(heavy_chart(name, 4), "1.0.0")
    git_repo.commit(depending_on(public_charts, names))
    cache = tmp_path / "cache"

    for attempt in ("first", "with the charts in the cache"):
        refused = gitopsd(
            *("validate", str(git_repo.work), "--path", "shop"),
            *("--cache-dir", str(cache), "--allow-insecure-source"),
        )

        assert refused.code == ExitCode.INVALID, f"{attempt}: {refused.text}"
        assert "shop/Chart.yaml: dependency heavy15: heavy15-1.0.0.tgz: unpacks to more" in (
            refused.err
        ), attempt
        assert "(--max-revision-bytes, limits.maxRevisionBytes)" in refused.err
    downloaded = [path for path in public_charts.requests if path.endswith(".tgz")]
    # the 16th is over the budget (and, never unpacked, fetched again); the rest never asked for
    assert len(downloaded) == 16 + 1
