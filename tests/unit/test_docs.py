"""The documentation's tested blocks stay tested: every `<!-- readme-test: NAME -->` marker in
README.md and docs/*.md marks a fenced block, no name marks two, and each name is run by
tests/integration/test_readme.py, so a block moved between pages can never silently stop
being tested. And a page moved or a heading renamed leaves no link behind that leads
nowhere."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from tests.harness.docs import ROOT, Marked, broken_links, doc_text, marked_blocks

RUNNER = ROOT / "tests" / "integration" / "test_readme.py"
NAMES_RUN = re.compile(r"""\b(?:doc_text|doc_block|run_block)\((?:gitopsd,\s*)?["']([^"']+)["']""")


def test_the_documents_hold_tested_blocks() -> None:
    assert any(block.where.startswith("README.md:") for block in marked_blocks())
    assert len(marked_blocks()) >= 6


@pytest.mark.parametrize("block", marked_blocks(), ids=lambda block: block.where)
def test_every_marker_marks_a_fenced_block(block: Marked) -> None:
    assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", block.name), f"{block.where}: bad name"
    assert block.language, f"{block.where}: readme-test: {block.name} is not followed by a fence"
    assert block.text.strip(), f"{block.where}: readme-test: {block.name} marks an empty block"


def test_no_name_marks_two_blocks() -> None:
    counts = Counter(block.name for block in marked_blocks())
    twice = {
        name: [block.where for block in marked_blocks() if block.name == name]
        for name, count in counts.items()
        if count > 1
    }
    assert not twice


def test_every_marked_block_is_run_by_the_integration_test() -> None:
    runner = RUNNER.read_text()
    unused = [
        block.where + ": " + block.name
        for block in marked_blocks()
        if f'"{block.name}"' not in runner and f"'{block.name}'" not in runner
    ]
    assert not unused, f"marked but never run by {RUNNER.name}"


def test_every_block_the_integration_test_runs_is_marked() -> None:
    names = set(NAMES_RUN.findall(RUNNER.read_text()))
    assert names >= {"cli", "daemon", "control", "overlay"}
    assert names <= {block.name for block in marked_blocks()}


def test_a_block_is_found_in_the_readme_or_a_page_under_docs(tmp_path: Path) -> None:
    page(tmp_path, "README.md", "# r\n\n<!-- readme-test: a -->\n```sh\necho a\n```\n")
    page(tmp_path, "docs/b.md", "# b\n\n<!-- readme-test: b -->\n```yaml\nb: 1\n\nc: 2\n```\n")

    assert doc_text("a", "sh", tmp_path) == "echo a\n"
    assert doc_text("b", "yaml", tmp_path) == "b: 1\n\nc: 2\n"
    with pytest.raises(AssertionError, match=r"docs/b.md:3: readme-test: b marks no sh block"):
        doc_text("b", "sh", tmp_path)


def test_a_name_found_twice_or_nowhere_fails_clearly(tmp_path: Path) -> None:
    twice = "<!-- readme-test: a -->\n```sh\necho a\n```\n"
    page(tmp_path, "README.md", twice)
    page(tmp_path, "docs/b.md", "x\n" + twice)

    with pytest.raises(AssertionError, match=r"a marks 2 blocks: README.md:1, docs/b.md:2"):
        doc_text("a", "sh", tmp_path)
    with pytest.raises(AssertionError, match="no block marked readme-test: c"):
        doc_text("c", "sh", tmp_path)


def test_a_marker_without_its_fence_is_found_without_a_block(tmp_path: Path) -> None:
    page(tmp_path, "README.md", "<!-- readme-test: a -->\n\n```sh\necho a\n```\n")
    page(tmp_path, "docs/b.md", "<!--readme-test:b-->\ntext\n")

    found = [(b.name, b.language) for b in marked_blocks(tmp_path)]

    assert found == [("a", None), ("b", None)]


def test_every_link_between_the_documents_leads_to_a_page_and_heading_that_are_there() -> None:
    assert broken_links() == []


def test_a_link_to_a_missing_page_or_heading_is_broken(tmp_path: Path) -> None:
    page(tmp_path, "README.md", "# Read me\n[a](docs/a.md#exit-codes) [b](#read-me) [c](c.md)\n")
    page(tmp_path, "CONTRIBUTING.md", "[d](https://example.com/d.md) [e](docs/a.md#not-here)\n")
    a = "# A\n## Exit codes\n```sh\n# not a heading\n```\n[f](../README.md#not-a-heading)\n"
    page(tmp_path, "docs/a.md", a)

    assert broken_links(tmp_path) == [
        "README.md: c.md",
        "CONTRIBUTING.md: docs/a.md#not-here",
        "docs/a.md: ../README.md#not-a-heading",
    ]


def page(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


FIGURES = "<!-- figures: rows of BENCHMARKS.md -->"


def test_the_readme_states_measured_figures_only_as_benchmarks_md_has_them() -> None:
    """The README's figures are rows of BENCHMARKS.md, as the last `make bench` wrote them:
    each row of a table after the marker is a line of that file, word for word."""
    readme = (ROOT / "README.md").read_text()
    tables = [part.lstrip("\n").split("\n\n", 1)[0] for part in readme.split(FIGURES)[1:]]
    assert tables, "README.md no longer marks the figures it quotes"
    measured = set((ROOT / "BENCHMARKS.md").read_text().splitlines())
    for table in tables:
        rows = table.splitlines()
        assert len(rows) >= 3 and all(row.startswith("|") for row in rows), table
        assert [row for row in rows if row not in measured] == []
