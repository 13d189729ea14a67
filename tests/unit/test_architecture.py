"""docs/ARCHITECTURE.md is the map of the house: it names every module, and every module keeps
under the size a room may have. And tests share helpers through tests/harness only: no test
module imports another, so neither a reader nor an xdist worker loads one to run the next."""

from __future__ import annotations

import ast
import re
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gitopsd"
MAP = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
MAX_LINES = 400
TESTS = ROOT / "tests"
TEST_PACKAGES = ("tests.integration", "tests.unit")


def modules() -> list[str]:
    """Each module's path in the package, as the map writes it (`cli/parser.py`)."""
    found = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py"))
    return [path for path in found if path not in ("__init__.py", "__main__.py")]


def section(title: str) -> str:
    match = re.search(rf"^## {title}\n(.*?)(?=^## |\Z)", MAP, re.MULTILINE | re.DOTALL)
    assert match, f"docs/ARCHITECTURE.md has no section {title!r}"
    return match.group(1)


def rooms() -> list[tuple[str, str]]:
    """The module table: each row's first cell and the whole row."""
    rows = [line for line in section("The rooms").splitlines() if line.startswith("| `")]
    return [(row.split("|")[1], row) for row in rows]


def named(module: str) -> bool:
    """The map names `module`: by its path, or, in its package's row, by its name."""
    package, _, leaf = module.rpartition("/")
    name = leaf.removesuffix(".py")
    for first, row in rooms():
        if f"`{module}`" in first:
            return True
        if package and f"`{package}/`" in first and (name == "__init__" or f"`{name}`" in row):
            return True
    return False


@pytest.mark.parametrize("module", modules())
def test_the_map_names_every_module(module: str) -> None:
    assert named(module), f"docs/ARCHITECTURE.md, 'The rooms', names no {module}"


@pytest.mark.parametrize("module", modules())
def test_no_room_is_over_its_size(module: str) -> None:
    lines = len((PACKAGE / module).read_text().splitlines())
    assert lines <= MAX_LINES, f"gitopsd/{module}: {lines} lines, over {MAX_LINES}: split it"


def test_the_map_lists_the_pure_core_the_contract_keeps() -> None:
    """The prose names each module the import contract holds to no I/O, and only those."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [pure] = [c for c in contracts["contracts"] if c["name"].startswith("The pure core")]
    kept = {module.removeprefix("gitopsd.") for module in pure["source_modules"]}
    bullet = re.search(r"\*\*The pure core does no I/O\*\*:(.*?)import no", MAP, re.DOTALL)
    assert bullet, "docs/ARCHITECTURE.md no longer says what the pure core is"
    assert set(re.findall(r"`(\w+)`", bullet.group(1))) == kept


def test_the_maps_story_is_reconcile_once_as_written() -> None:
    """The story docs/ARCHITECTURE.md shows is the body of `reconcile_once`, docstring aside:
    a step added to the code and not to the map fails here."""
    source = (PACKAGE / "reconcile" / "__init__.py").read_text()
    [function] = [
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef) and node.name == "reconcile_once"
    ]
    first, last = function.body[1], function.body[-1]  # [0] is the docstring
    lines = source.splitlines()[first.lineno - 1 : last.end_lineno]
    shown = re.search(r"^In code, the story .*?\n\n```python\n(.*?)```", MAP, re.M | re.S)
    assert shown, "docs/ARCHITECTURE.md no longer shows the story in code"
    assert shown.group(1) == textwrap.dedent("\n".join(lines)) + "\n"


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, relative imports resolved against its package."""
    package = path.relative_to(ROOT).parent.parts
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def borrowed_test_modules(path: Path) -> set[str]:
    return {
        module
        for module in imported_modules(path)
        for package in TEST_PACKAGES
        if module == package or module.startswith(f"{package}.")
    }


def borrowers() -> dict[str, set[str]]:
    """Each module under tests/ that imports a test module, with what it imports."""
    found = {
        str(path.relative_to(ROOT)): borrowed_test_modules(path) for path in TESTS.rglob("*.py")
    }
    return {path: modules for path, modules in found.items() if modules}


def test_no_test_module_imports_another() -> None:
    """What tests share is in tests/harness, named after what it holds."""
    borrowing = {path: sorted(modules) for path, modules in borrowers().items()}
    assert borrowing == {}, "move what they import into tests/harness"
