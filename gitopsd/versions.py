"""Chart versions (semantic versions) and the ranges that pick one, as helm reads them.

A range is what helm's own `--version` takes (Masterminds semver, the npm dialect): groups
joined by `||`, each a list of comparisons joined by `,` or spaces; `^1.2` (same major),
`~1.2.3` (same minor), `1.2.x` / `1.2` / `*` (wildcards), `1.2 - 1.4` (inclusive), and
`=`, `!=`, `>`, `>=`, `<`, `<=` with a version whose missing parts are wildcards. A
pre-release is picked only by a group that names a pre-release itself, so `*` never moves
a source onto a release candidate. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gitopsd.errors import ConfigError

_VERSION = re.compile(
    r"^v?(?P<major>0|[1-9]\d*)(?:\.(?P<minor>0|[1-9]\d*))?(?:\.(?P<patch>0|[1-9]\d*))?"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)
_PARTIAL = re.compile(
    r"^v?(?P<parts>(?:\d+|[xX*])(?:\.(?:\d+|[xX*])){0,2})"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z.-]+)?$"
)
_COMPARISON = re.compile(r"^(?P<op>!=|>=|=>|<=|=<|~>|[=<>~^])?\s*(?P<version>\S+)$")
MAX_RANGE_LENGTH = 256


@dataclass(frozen=True, order=False)
class Version:
    """A semantic version; build metadata is dropped (it never orders versions)."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        return text + ("-" + ".".join(str(part) for part in self.pre) if self.pre else "")

    def key(self) -> tuple[int, int, int, int, tuple[tuple[int, int | str], ...]]:
        """Semver precedence: a release after its pre-releases; numeric identifiers before
        alphanumeric ones, numbers by value."""
        identifiers = tuple((0, p) if isinstance(p, int) else (1, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, identifiers)


def parse_version(text: str) -> Version | None:
    """The version `text` spells ("1.2" is 1.2.0, a leading "v" is allowed), else None."""
    match = _VERSION.match(text.strip())
    if match is None:
        return None
    major, minor, patch = (int(match.group(name) or 0) for name in ("major", "minor", "patch"))
    return Version(major, minor, patch, _identifiers(match.group("pre")))


def _identifiers(pre: str | None) -> tuple[int | str, ...]:
    if not pre:
        return ()
    return tuple(int(part) if part.isdigit() else part for part in pre.split("."))


Test = Callable[[Version], bool]


@dataclass(frozen=True)
class Range:
    """A version range: `highest` picks from what a chart repository offers."""

    text: str
    groups: tuple[tuple[Test, ...], ...]

    def allows(self, version: Version) -> bool:
        return any(all(test(version) for test in group) for group in self.groups)

    def highest(self, versions: Iterable[Version]) -> Version | None:
        allowed = [version for version in versions if self.allows(version)]
        return max(allowed, key=Version.key) if allowed else None


def parse_range(text: str) -> Range:
    """The range `text` spells; ConfigError naming the part that is not one."""
    if len(text) > MAX_RANGE_LENGTH:
        raise ConfigError(f"version range is longer than {MAX_RANGE_LENGTH} characters")
    groups = tuple(_group(group.strip(), text) for group in text.split("||"))
    return Range(text, groups)


def _group(group: str, whole: str) -> tuple[Test, ...]:
    hyphen = re.fullmatch(r"(\S+)\s+-\s+(\S+)", group)
    if hyphen:
        low, high = (_partial(part, whole) for part in hyphen.groups())
        comparisons = [(">=", low), ("<=", high)]
    else:
        comparisons = [_parsed(word, whole) for word in _words(group)]
    names_pre_release = any(version.pre for _, version in comparisons)
    tests = [test for op, version in comparisons for test in _comparison(op, version)]
    return tuple(tests if names_pre_release else [_release, *tests])


def _words(group: str) -> list[str]:
    """The comparisons of a group, an operator joined to its version: ">= 1.2, <2"."""
    words = re.sub(r"(!=|>=|=>|<=|=<|~>|[=<>~^])\s+", r"\1", group).replace(",", " ").split()
    return words or ["*"]


def _parsed(word: str, whole: str) -> tuple[str, _Partial]:
    match = _COMPARISON.match(word)
    if match is None:
        raise _not_a_range(whole, word)
    return match.group("op") or "=", _partial(match.group("version"), whole)


@dataclass(frozen=True)
class _Partial:
    """A version in a comparison: its given numbers (a wildcard ends them) and pre-release."""

    numbers: tuple[int, ...]
    pre: tuple[int | str, ...]

    def exact(self) -> bool:
        return len(self.numbers) == 3

    def low(self) -> Version:
        major, minor, patch = (*self.numbers, 0, 0, 0)[:3]
        return Version(major, minor, patch, self.pre)

    def end(self) -> Version:
        """The first version past the span the given numbers leave open."""
        return self.next(len(self.numbers) - 1)

    def next(self, at: int) -> Version:
        """The lowest version (its first pre-release) after every one that shares the
        first `at` + 1 numbers."""
        bumped = [*self.numbers[:at], self.numbers[at] + 1, 0, 0][:3]
        return Version(bumped[0], bumped[1], bumped[2], (0,))


def _partial(text: str, whole: str) -> _Partial:
    match = _PARTIAL.match(text)
    if match is None:
        raise _not_a_range(whole, text)
    numbers: list[int] = []
    for part in match.group("parts").split("."):
        if not part.isdigit():
            break
        numbers.append(int(part))
    return _Partial(tuple(numbers), _identifiers(match.group("pre")) if len(numbers) == 3 else ())


def _comparison(op: str, version: _Partial) -> list[Test]:
    """The comparison as tests on whole versions: a partial version's missing numbers are
    a span (`<=1.2` is `<1.3.0-0`); no number at all (`*`) allows every version."""
    if not version.numbers:
        return []
    return _OPERATORS[_ALIASES.get(op, op)](version)


def _equal(version: _Partial) -> list[Test]:
    if version.exact():
        return [_same(version.low())]
    return [_at_least(version.low()), _below(version.end())]


def _not_equal(version: _Partial) -> list[Test]:
    span = _equal(version)
    return [lambda v: not all(test(v) for test in span)]


def _greater(version: _Partial) -> list[Test]:
    return [_above(version.low()) if version.exact() else _at_least(version.end())]


def _at_most_version(version: _Partial) -> list[Test]:
    return [_at_most(version.low()) if version.exact() else _below(version.end())]


def _tilde(version: _Partial) -> list[Test]:
    """`~1.2.3`: the same minor version; `~1`: the same major one."""
    return [_at_least(version.low()), _below(version.next(min(len(version.numbers) - 1, 1)))]


def _caret(version: _Partial) -> list[Test]:
    """`^1.2.3`: the same major version; `^0.2.3`: the same minor one; `^0.0.3`: only it."""
    return [_at_least(version.low()), _below(version.next(_caret_at(version.numbers)))]


_ALIASES = {"=>": ">=", "=<": "<=", "~>": "~"}
_OPERATORS: dict[str, Callable[[_Partial], list[Test]]] = {
    "=": _equal,
    "!=": _not_equal,
    ">": _greater,
    ">=": lambda version: [_at_least(version.low())],
    "<": lambda version: [_below(version.low())],
    "<=": _at_most_version,
    "~": _tilde,
    "^": _caret,
}


def _caret_at(numbers: tuple[int, ...]) -> int:
    """`^` keeps the first nonzero number given (or the last given) fixed."""
    for at, number in enumerate(numbers):
        if number != 0:
            return at
    return len(numbers) - 1


def _release(version: Version) -> bool:
    return not version.pre


def _at_least(low: Version) -> Test:
    return lambda v: v.key() >= low.key()


def _above(low: Version) -> Test:
    return lambda v: v.key() > low.key()


def _below(high: Version) -> Test:
    return lambda v: v.key() < high.key()


def _at_most(high: Version) -> Test:
    return lambda v: v.key() <= high.key()


def _same(exact: Version) -> Test:
    return lambda v: v.key() == exact.key()


def _not_a_range(whole: str, part: str) -> ConfigError:
    shown = whole.replace("\0", "\\0")[:80]
    return ConfigError(f"version range {shown!r}: {part[:40]!r} is not a version or comparison")
