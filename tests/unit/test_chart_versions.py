"""Which version of a chart a range picks, from what a chart repository's index lists."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from gitopsd.config import ChartSettings, Limits, SourceSpec
from gitopsd.errors import ConfigError, SourceError
from gitopsd.source import check_chart_source, fetch_chart
from gitopsd.source.chart_index import chart_entries, pick
from gitopsd.source.registry import Registry
from gitopsd.versions import parse_range, parse_version

OFFERED = [
    "0.0.3",
    "0.0.4",
    "0.1.0",
    "0.2.5",
    "1.0.0",
    "1.2.0",
    "1.2.3",
    "1.2.9",
    "1.3.0-rc.1",
    "1.3.0",
    "1.10.0",
    "2.0.0-alpha",
    "2.0.0",
    "2.1.0",
]
DIGEST = "a" * 64


@pytest.mark.parametrize(
    ("wanted", "allowed"),
    [
        ("*", "0.0.3 0.0.4 0.1.0 0.2.5 1.0.0 1.2.0 1.2.3 1.2.9 1.3.0 1.10.0 2.0.0 2.1.0"),
        ("", "0.0.3 0.0.4 0.1.0 0.2.5 1.0.0 1.2.0 1.2.3 1.2.9 1.3.0 1.10.0 2.0.0 2.1.0"),
        ("^1.2", "1.2.0 1.2.3 1.2.9 1.3.0 1.10.0"),
        ("^0.1", "0.1.0"),
        ("^0.0.3", "0.0.3"),
        ("~1.2.3", "1.2.3 1.2.9"),
        ("~> 1.2", "1.2.0 1.2.3 1.2.9"),
        ("1.2.x", "1.2.0 1.2.3 1.2.9"),
        ("1.2", "1.2.0 1.2.3 1.2.9"),
        ("v1.2.3", "1.2.3"),
        ("=1.2.3", "1.2.3"),
        (">= 1.2, < 2", "1.2.0 1.2.3 1.2.9 1.3.0 1.10.0"),
        ("1.2 - 1.3", "1.2.0 1.2.3 1.2.9 1.3.0"),
        (">1.2", "1.3.0 1.10.0 2.0.0 2.1.0"),
        ("<=1.2", "0.0.3 0.0.4 0.1.0 0.2.5 1.0.0 1.2.0 1.2.3 1.2.9"),
        ("<1.0.0", "0.0.3 0.0.4 0.1.0 0.2.5"),
        ("!=1.2 >=1", "1.0.0 1.3.0 1.10.0 2.0.0 2.1.0"),
        ("1.2.3 || 2.x", "1.2.3 2.0.0 2.1.0"),
        # a pre-release only where the group names one
        (">=1.3.0-0 <1.4", "1.3.0-rc.1 1.3.0"),
        ("2.0.0-alpha", "2.0.0-alpha"),
    ],
)
def test_a_range_allows_what_helm_would(wanted: str, allowed: str) -> None:
    versions = [parse_version(text) for text in OFFERED]

    chosen = parse_range(wanted)

    assert [str(v) for v in versions if v and chosen.allows(v)] == allowed.split()


def test_the_highest_allowed_version_wins_by_semver_precedence() -> None:
    versions = [
        v for text in ("1.9.0", "1.10.0", "1.10.0-rc.2", "1.2.0") if (v := parse_version(text))
    ]

    assert str(parse_range("1.x").highest(versions)) == "1.10.0"
    assert str(parse_range(">=1.10.0-0").highest(versions[:1] + versions[2:])) == "1.10.0-rc.2"
    assert parse_range("3.x").highest(versions) is None


@pytest.mark.parametrize("wanted", ["abc", "1.2.3.4", ">>1", "1 - ", "^", "1.2.3-", "x" * 300])
def test_what_is_not_a_range_is_refused(wanted: str) -> None:
    with pytest.raises(ConfigError, match=r"version range|longer than"):
        parse_range(wanted)


def chart_source(version: str = "*", url: str = "https://charts.example/stable") -> SourceSpec:
    return SourceSpec(url=url, helm=ChartSettings(chart="web", version=version))


def entry(version: str, **fields: object) -> dict[str, object]:
    return {"version": version, "urls": [f"web-{version}.tgz"], "digest": DIGEST, **fields}


def test_the_index_entry_of_the_highest_allowed_version_is_picked() -> None:
    index = {
        "entries": {
            "web": [
                entry("1.0.0", created="2026-11-26T11:13:53.073036507Z"),
                entry("1.1.0", urls=["https://charts.example/stable/sub/web-1.1.0.tgz"]),
                entry("1.2.0", digest="not-a-digest"),  # skipped: it could not be checked
                entry("1.3.0", urls=[]),
                {"version": "not-a-version", "urls": ["x.tgz"], "digest": DIGEST},
            ],
            "other": [entry("9.0.0")],
        }
    }

    picked = pick(yaml.safe_dump(index).encode(), chart_source("1.x"))

    assert (picked.text, picked.url) == ("1.1.0", "https://charts.example/stable/sub/web-1.1.0.tgz")
    oldest = pick(yaml.safe_dump(index).encode(), chart_source("1.0"))
    assert oldest.url == "https://charts.example/stable/web-1.0.0.tgz"
    assert oldest.created == datetime(2026, 11, 26, 11, 13, 53, tzinfo=UTC).timestamp()


def test_only_the_charts_entries_are_read_from_the_index() -> None:
    hostile = (
        "apiVersion: v1\n"
        "other: &big [[[[[[[[[[[[[[[[[[[[[[[[x]]]]]]]]]]]]]]]]]]]]]]]]\n"
        "entries:\n"
        "  ? [complex, key]\n  : ignored\n"
        "  other: [*big, *big, *big]\n"
        "  web:\n"
        "  - {version: '1.0', urls: [web-1.0.tgz], digest: " + DIGEST + ", "
        "created: '2026-13-45T00:00:00Z', deep: " + "[" * 100 + "]" * 100 + "}\n"
        "  - *big\n"
    ).encode()

    picked = pick(hostile, chart_source("1.x"))

    assert (picked.text, picked.created) == ("1.0", None)  # a month 13 is no time
    assert chart_entries(hostile, "other") == [None, None, None]  # aliases are nothing


def test_an_index_that_is_no_yaml_is_named() -> None:
    with pytest.raises(SourceError, match=r"index\.yaml line 2: not YAML"):
        pick(b"entries: [\n", chart_source())


@pytest.mark.parametrize(
    ("index", "message"),
    [
        ({"entries": {"other": [entry("1.0.0")]}}, "has no chart 'web'"),
        ({}, "has no chart 'web'"),
        ({"entries": {"web": [entry("2.0.0")]}}, "no version of 'web' matches '1.x'"),
    ],
)
def test_a_chart_or_version_the_index_lacks_is_named(
    index: dict[str, object], message: str
) -> None:
    with pytest.raises(SourceError, match=message):
        pick(yaml.safe_dump(index).encode(), chart_source("1.x"))


@pytest.mark.case("SE-12")
@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (chart_source(url="ssh://git@example.com/charts"), "a chart repository's URL is https://"),
        (chart_source(url="http://charts.example"), "http:// is refused unless"),
        (chart_source(url="https://user:token@charts.example"), "not in the URL"),
        (chart_source(version="one"), "version range 'one'"),
        (chart_source(url="oci://registry.example:-1/charts"), "not a valid port"),
        (chart_source(url="oci://user:token@registry.example/charts"), "not in the URL"),
        (chart_source(url="ftp://charts.example"), "scheme ftp:// is refused"),
    ],
)
def test_se12_a_chart_source_gitopsd_would_not_fetch_from_is_refused(
    spec: SourceSpec, message: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=message):
        check_chart_source(spec)
    with pytest.raises(ConfigError, match=message):  # fetching checks it first, too
        fetch_chart(spec, tmp_path)


def test_a_registry_path_names_the_chart_under_it() -> None:
    registry = Registry(chart_source(url="oci://registry.example:5000/team/charts/"))
    insecure = Registry(replace(chart_source(url="oci://[::1]/charts"), allow_insecure=True))

    check_chart_source(chart_source(url="oci://registry.example:5000/team/charts"))
    assert (registry.base, registry.name) == ("https://registry.example:5000", "team/charts/web")
    assert (insecure.base, insecure.name) == ("http://[::1]", "charts/web")


def test_a_chart_source_has_no_ref() -> None:
    spec = SourceSpec(url="https://charts.example", ref="main", helm=ChartSettings(chart="web"))

    with pytest.raises(ConfigError, match="a chart source has no ref"):
        check_chart_source(spec)


def test_ta02_an_index_listing_more_versions_of_the_chart_than_the_limit_is_refused() -> None:
    """TA-02: only the chart's entries count, and only up to the limit they are built."""
    index = {"entries": {"web": [entry(f"1.0.{n}") for n in range(11)], "other": []}}
    spec = replace(chart_source(), limits=Limits(max_versions=10))

    with pytest.raises(SourceError, match=r"more than 10 versions of 'web' \(.*maxVersions\)"):
        pick(yaml.safe_dump(index).encode(), spec)
    assert pick(yaml.safe_dump(index).encode(), chart_source()).text == "1.0.10"
