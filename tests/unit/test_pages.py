"""The status page's HTML (gitopsd.pages): every string escaped, every value and list
bounded, Secret values never shown, and each source's link its metrics' `source` label."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from typing import Any

import pytest

from gitopsd import diff, pages
from gitopsd.diff import Drift, FieldChange, State
from gitopsd.objects import ObjectKey
from gitopsd.pages import SourceDetail, SourceLine, overview, source_page
from gitopsd.pages.overview import MAX_SOURCES
from gitopsd.pages.source import MAX_FIELDS, MAX_OBJECTS

HOSTILE = '<script>alert("x")</script>\'&' + "A" * 10_000


class Elements(HTMLParser):
    """The elements a browser's parser would make of a page, and the page's text."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str | None]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += attrs

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def drifted(name: str, *changes: FieldChange, kind: str = "ConfigMap") -> Drift:
    return Drift(ObjectKey("", kind, "ns", name), State.MODIFIED, changes)


def change(path: str, live: Any = "live", desired: Any = "git", manager: str = "m") -> FieldChange:
    return FieldChange(path, live, desired, manager)


def page_of(*drifts: Drift, history: list[dict[str, Any]] | None = None) -> str:
    return source_page(SourceDetail(SourceLine("app"), drifts, history or []), 10)


def test_the_overview_links_each_source_by_its_metrics_label_quoted() -> None:
    web = SourceLine("team/web", cluster="secret/east", revision="a" * 40, ready="True")
    lines = [web, SourceLine("app"), SourceLine("team/old", cluster="")]

    page = overview(lines, 10)

    links = [value for name, value in Elements(page).attributes if name == "href"]
    assert links == ["sources/app", "sources/team%2Fold", "sources/team%2Fweb"]  # sorted, relative
    assert "aaaaaaaaaaaa<" in page and "a" * 13 not in page
    assert '<meta http-equiv="refresh" content="10">' in page
    assert "<td>secret/east</td>" in page and "<td>in-cluster</td>" in page
    assert "<td>unknown</td>" in page  # as its own page says, when it cannot tell


def test_a_hostile_value_is_escaped_and_cut_wherever_it_is_shown() -> None:
    line = SourceLine("app", revision=HOSTILE, outcome=HOSTILE, message=HOSTILE)
    field = change(f"metadata.annotations.{HOSTILE}", HOSTILE, HOSTILE, HOSTILE)
    detail = SourceDetail(line, [drifted(HOSTILE, field)], [{"message": HOSTILE}])

    for page in (overview([line], 10), source_page(detail, 10)):
        parsed = Elements(page)
        assert "script" not in parsed.tags
        assert "<script>" not in page and '"x"' not in page
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#x27;&amp;" in page
        assert "A" * (pages.MAX_TEXT + 1) not in page
        assert f"… ({len(HOSTILE)} characters)" in "".join(parsed.text)


def test_a_drifted_field_shows_its_live_and_git_values_and_who_changed_it() -> None:
    page = page_of(
        drifted("a", change("data.k", "edited", "v", "kubectl-patch")),
        drifted("b", change("spec.replicas", 1, None, "kubectl-scale")),
    )

    text = "".join(Elements(page).text)
    assert "data.keditedvkubectl-patchheal" in text
    assert "spec.replicas1(absent)kubectl-scaleheal" in text
    assert "Drift: 2 objects" in text


def test_objects_and_fields_are_bounded_and_the_rest_counted() -> None:
    fields = [change(f"data.k{n:03}") for n in range(MAX_FIELDS + 3)]
    drifts = [drifted(f"c{n:03}", *fields) for n in range(MAX_OBJECTS + 7)]

    page = page_of(*drifts)

    assert page.count("<h3>") == MAX_OBJECTS
    assert "and 7 more objects" in page
    assert page.count("and 3 more fields") == MAX_OBJECTS
    assert f"data.k{MAX_FIELDS - 1:03}" in page and f"data.k{MAX_FIELDS:03}" not in page


def test_the_overview_is_bounded_too() -> None:
    lines = [SourceLine(f"s{n:05}") for n in range(MAX_SOURCES + 2)]

    page = overview(lines, 10)

    assert page.count("<tr>") == MAX_SOURCES + 1  # the header's row
    assert "and 2 more sources" in page


def test_a_secrets_values_never_reach_the_page() -> None:
    """diff masks a Secret's values in every Drift it makes (gitopsd.masking): the page
    shows what it is given, and so no value."""
    canary = "canary-" + "7" * 12
    encoded = base64.b64encode(canary.encode()).decode()
    key = ObjectKey("", "Secret", "ns", "s")
    live = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {}}
    live["data"] = {"token": encoded, "other": encoded}
    wanted = {**live, "data": {"token": base64.b64encode(b"git").decode(), "other": encoded}}
    measured = diff.compare(key, wanted, live, wanted)
    assert measured is not None

    page = page_of(measured, diff.extraneous(key, live), diff.missing(key, live))

    assert canary not in page and encoded not in page
    assert "*** (changed)" in page


@pytest.mark.parametrize(("cluster", "shown"), [("east", "east"), ("", "unknown")])
def test_a_sources_page_says_the_cluster_it_syncs_into(cluster: str, shown: str) -> None:
    page = source_page(SourceDetail(SourceLine("app", cluster=cluster)), 10)

    assert f"<tr><td>Cluster</td><td>{shown}</td></tr>" in page


def test_the_history_shows_each_sync_newest_first_with_its_changes() -> None:
    history: list[dict[str, Any]] = [
        {"revision": "b" * 40, "outcome": "Failed", "reason": "Syntax", "message": "a.yaml:2"},
        {"revision": "a" * 40, "outcome": "Succeeded", "counts": {"created": 2}},
    ]

    text = "".join(Elements(page_of(history=history)).text)

    assert re.search(r"b{12}Failed.*Syntax: a\.yaml:2.*a{12}Succeeded.*2 created", text)


@pytest.mark.parametrize("page", [overview([], 10), page_of()])
def test_the_page_loads_nothing_but_its_own_style(page: str) -> None:
    parsed = Elements(page)
    assert set(parsed.tags) <= {"html", "head", "meta", "title", "style", "body"} | {
        "h1",
        "h2",
        "h3",
        "p",
        "a",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "code",
        "span",
    }
    assert not [name for name, _ in parsed.attributes if name.startswith("on") or name == "style"]
    assert "style-src 'sha256-" in pages.CONTENT_SECURITY_POLICY
