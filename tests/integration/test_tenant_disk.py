"""TA-04: the disk a tenant's charts and git repositories take is given back and bounded.
A chart's dependencies share one budget per revision; the chart and git caches are pruned
when no source uses an entry, and by size; a deleted GitSync frees what only it used."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gitopsd.errors import ExitCode
from tests.harness.chartrepo import ChartRepository, serving
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_named
from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import GROUP, PLURAL, VERSION, condition, create, get, wait_ready
from tests.harness.kube import create_namespace
from tests.harness.manifests import config_map_with_value
from tests.harness.operators import operator
from tests.harness.waiting import wait_for

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


def versioned_chart(mib: int) -> dict[str, str]:
    """A chart of `mib` MiB (a few KiB packed) whose ConfigMap names its version."""
    return {
        **heavy_chart("heavy", mib),
        "heavy/templates/cm.yaml": (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: heavy\n"
            "data:\n  version: {{ .Chart.Version | quote }}\n"
        ),
    }


def chart_bytes(daemon: DaemonProcess) -> int:
    """The bytes of every chart unpacked under the daemon's cache."""
    cache = Path(daemon.config["cacheDir"])
    return sum(path.stat().st_size for path in cache.glob("**/charts/**/*") if path.is_file())


def applied_version(api: Any, namespace: str) -> str:
    found = config_map_named(api, namespace, "heavy")
    return str(found.data["version"]) if found else ""


def test_ta04_the_chart_cache_keeps_what_sources_hold_and_gives_back_a_deleted_gitsyncs(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
    public_charts: ChartRepository,
) -> None:
    """TA-04: a chart repository that publishes a new 4 MiB version at every poll costs the
    cache one version, not one per poll; deleting the GitSync frees it, while another
    GitSync of the namespace (the same cache root) goes on."""
    git_repo.commit({"app/c.yaml": config_map_with_value("c")})
    daemon = operator(daemons, namespace)
    create(admin_api, namespace, "other", {"repository": {"url": git_server.file_url(git_repo)}})
    helm = {"chart": "heavy", "releaseName": "heavy"}
    public_charts.publish(versioned_chart(4), "1.0.0")
    create(admin_api, namespace, "heavy", {"repository": {"url": public_charts.url}, "helm": helm})

    for patch in range(1, 9):
        public_charts.publish(versioned_chart(4), f"1.0.{patch}")
        wait_for(
            lambda: applied_version(admin_api, namespace) == f"1.0.{patch}",  # noqa: B023
            f"version 1.0.{patch} applied",
            deadline_seconds=60,
        )
        assert chart_bytes(daemon) < 2 * 4 * MIB, f"after 1.0.{patch}"

    objects: Any = client.CustomObjectsApi(admin_api)
    objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "heavy")
    wait_for(lambda: get(admin_api, namespace, "heavy") is None, "the GitSync gone")
    wait_for(lambda: chart_bytes(daemon) == 0, "its chart given back")
    wait_ready(admin_api, namespace, "other", "True", "Succeeded")


def test_ta04_a_namespace_over_its_chart_cache_bound_is_refused_and_others_are_not(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    public_charts: ChartRepository,
) -> None:
    """TA-04: with 6 MiB per namespace, an 8 MiB chart fails its GitSync naming the bound
    (QuotaExceeded) and leaves nothing on disk; another namespace's 4 MiB chart syncs."""
    attacker = create_namespace(admin_api, "attacker")
    settings = {"enabled": True, "namespaces": [namespace, attacker], "allowInsecure": True}
    bounds = {"maxBytesPerNamespace": "6Mi"}
    daemon = daemons.start_with([], "operator", gitSyncs=settings, chartCache=bounds).start()
    public_charts.publish(versioned_chart(8), "2.0.0")
    public_charts.publish(versioned_chart(4), "1.0.0")
    repository = {"url": public_charts.url}
    big = {"chart": "heavy", "version": "2.x", "releaseName": "heavy"}
    create(admin_api, attacker, "heavy", {"repository": repository, "helm": big})
    small = {"chart": "heavy", "version": "1.x", "releaseName": "heavy"}
    create(admin_api, namespace, "heavy", {"repository": repository, "helm": small})

    refused = wait_ready(admin_api, attacker, "heavy", "False", "QuotaExceeded")
    message = condition(refused, "Ready")["message"]
    assert "over its bound of 6Mi (chartCache.maxBytesPerNamespace)" in message, message
    wait_ready(admin_api, namespace, "heavy", "True", "Succeeded")
    assert applied_version(admin_api, namespace) == "1.0.0"
    assert chart_bytes(daemon) < 8 * MIB  # the one chart held; the refused one given back


def git_repositories(daemon: DaemonProcess) -> set[str]:
    """The names of the git repositories cached for the daemon's GitSyncs."""
    cache = Path(daemon.config["cacheDir"]) / "gitsyncs" / "repositories"
    return {path.name for path in cache.glob("*/*.git")}


def cached_name(url: str) -> str:
    return f"{hashlib.sha256(url.encode()).hexdigest()[:16]}.git"


def test_ta04_a_deleted_gitsyncs_git_repository_is_removed_and_anothers_is_kept(
    admin_api: Any, namespace: str, gitsync_crd: str, daemons: Daemons, git_server: GitServer
) -> None:
    """TA-04: two GitSyncs of one namespace (no credentials: one cache directory) read two
    repositories; deleting one removes its repository from the cache, while the other
    keeps its own and goes on."""
    daemon = operator(daemons, namespace)
    urls = {}
    for name in ("gone", "kept"):
        repo = git_server.create_repo(f"{name}-{namespace}")
        repo.commit({"app/c.yaml": config_map_with_value(f"c-{name}")})
        urls[name] = git_server.file_url(repo)
        create(admin_api, namespace, name, {"repository": {"url": urls[name]}})
        wait_ready(admin_api, namespace, name, "True", "Succeeded")
    assert git_repositories(daemon) == {cached_name(urls["gone"]), cached_name(urls["kept"])}

    objects: Any = client.CustomObjectsApi(admin_api)
    objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "gone")
    wait_for(lambda: get(admin_api, namespace, "gone") is None, "the GitSync gone")
    wait_for(
        lambda: git_repositories(daemon) == {cached_name(urls["kept"])},
        "its repository removed, the other's kept",
    )
    wait_ready(admin_api, namespace, "kept", "True", "Succeeded")


def test_ta04_a_namespace_over_its_git_cache_bound_is_refused_and_others_are_not(
    admin_api: Any, namespace: str, gitsync_crd: str, daemons: Daemons, git_server: GitServer
) -> None:
    """TA-04: with 1 MiB of git cache per namespace, a repository of 2 MiB (random, so its
    pack is as large) fails its GitSync naming the bound (QuotaExceeded) and is not kept;
    another namespace's small repository syncs."""
    attacker = create_namespace(admin_api, "attacker")
    settings = {"enabled": True, "namespaces": [namespace, attacker], "allowInsecure": True}
    bounds = {"maxBytesPerNamespace": "1Mi"}
    daemon = daemons.start_with([], "operator", gitSyncs=settings, gitCache=bounds).start()
    heavy = git_server.create_repo(f"heavy-{attacker}")
    heavy.commit({"app/c.yaml": config_map_with_value("c"), "app/noise.bin": os.urandom(2 * MIB)})
    light = git_server.create_repo(f"light-{namespace}")
    light.commit({"app/c.yaml": config_map_with_value("c")})
    create(admin_api, attacker, "heavy", {"repository": {"url": git_server.file_url(heavy)}})
    create(admin_api, namespace, "light", {"repository": {"url": git_server.file_url(light)}})

    refused = wait_ready(admin_api, attacker, "heavy", "False", "QuotaExceeded")
    message = condition(refused, "Ready")["message"]
    assert "over its bound of 1Mi (gitCache.maxBytesPerNamespace)" in message, message
    assert repr(attacker) in message, message
    wait_ready(admin_api, namespace, "light", "True", "Succeeded")
    cache = Path(daemon.config["cacheDir"])
    cached = cache.glob("gitsyncs/repositories/**/*")
    assert sum(path.stat().st_size for path in cached if path.is_file()) < 2 * MIB  # not kept
