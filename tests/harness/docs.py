"""The documentation's tested blocks, and its links. A tested block is a fenced block in
README.md or docs/*.md whose line before is `<!-- readme-test: NAME -->`.
tests/integration/test_readme.py runs each one as written; tests/unit/test_docs.py checks
that every marker is well formed, unique and used, and that every link between the pages
leads to a file and heading that are there. Pure: it reads files and nothing else."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Lenient on purpose: a marker with a typo in its spacing is still found, and then fails
# the checks instead of being skipped.
MARKER = re.compile(r"^<!--\s*readme-test:\s*(?P<name>\S*?)\s*-->[ \t]*$", re.MULTILINE)
FENCE = re.compile(r"```(?P<language>[\w-]*)\n(?P<text>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{1,6} (?P<title>.+)$", re.MULTILINE)
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
URL = re.compile(r"^[a-z]+:")


@dataclass(frozen=True)
class Marked:
    """One `<!-- readme-test: NAME -->` marker and the fenced block right after it."""

    where: str  # file:line of the marker, the file relative to the repository
    name: str
    language: str | None  # None: no fenced block starts on the next line
    text: str  # the block's lines, each ending with a newline ("" without a block)


def documents(root: Path = ROOT) -> list[Path]:
    """README.md, CONTRIBUTING.md and every page under docs/: the files whose blocks may be
    tested and whose links must resolve."""
    top = [path for path in (root / "README.md", root / "CONTRIBUTING.md") if path.is_file()]
    return [*top, *sorted((root / "docs").glob("*.md"))]


def marked_blocks(root: Path = ROOT) -> list[Marked]:
    """Every marker of the documents, in order, each with the block that follows it."""
    found = []
    for path in documents(root):
        text = path.read_text()
        for marker in MARKER.finditer(text):
            line = text.count("\n", 0, marker.start()) + 1
            fence = FENCE.match(text, marker.end() + 1)
            language, body = (fence["language"], fence["text"]) if fence else (None, "")
            where = f"{path.relative_to(root)}:{line}"
            found.append(Marked(where, marker["name"], language, body))
    return found


def doc_text(name: str, language: str, root: Path = ROOT) -> str:
    """The text of the block marked `<!-- readme-test: NAME -->`, in README.md or one page
    of docs/: it must be there exactly once, and fenced as `language`."""
    found = [block for block in marked_blocks(root) if block.name == name]
    places = ", ".join(block.where for block in found)
    if not found:
        raise AssertionError(f"no block marked readme-test: {name} in README.md or docs/*.md")
    if len(found) > 1:
        raise AssertionError(f"readme-test: {name} marks {len(found)} blocks: {places}")
    [block] = found
    if block.language != language:
        raise AssertionError(
            f"{places}: readme-test: {name} marks no {language} block (found {block.language})"
        )
    return block.text


def doc_block(name: str) -> list[str]:
    """The command lines of the sh block marked `<!-- readme-test: NAME -->`."""
    return [line for line in doc_text(name, "sh").splitlines() if line.strip()]


def broken_links(root: Path = ROOT) -> list[str]:
    """Each relative link of the documents (outside code blocks) to a file that is not there,
    or to a heading its page does not have, as `page: target`."""
    broken = []
    for path in documents(root):
        targets = [link["target"] for link in LINK.finditer(_prose(path.read_text()))]
        for target in (target for target in targets if not URL.match(target)):
            file, _, anchor = target.partition("#")
            linked = path.parent / file if file else path
            if not linked.exists() or (anchor and anchor not in anchors(linked)):
                broken.append(f"{path.relative_to(root)}: {target}")
    return broken


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces
    as hyphens (the numbered anchors of a repeated heading are not among them)."""
    if page.suffix != ".md":
        return set()
    titles = HEADING.findall(_prose(page.read_text()))
    return {re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-") for title in titles}


def _prose(text: str) -> str:
    """`text` without its fenced blocks, whose `#` lines are comments, not headings."""
    return FENCE.sub("", text)
