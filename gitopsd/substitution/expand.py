"""Flux's post-build variable substitution in a text, pure: `${VAR}` and the bash string
functions Flux's envsubst knows, `$$` for a `$`.

Only `${` opens a substitution: `$VAR` stays as written (a script's variables survive), and
`$$` is one `$` (so `$${VAR}` is the text `${VAR}`). Inside the braces: `${VAR}`, a default
(`${VAR:-word}` if unset or empty, `${VAR-word}` if unset; `=` the same, as no variable is
assigned here), a length (`${#VAR}`), case (`^`, `^^`, `,`, `,,`), a substring
(`${VAR:OFFSET}`, `${VAR:OFFSET:LENGTH}`), a pattern removed (`#`, `##`, `%`, `%%`) or
replaced (`/`, `//`, `/#`, `/%`), patterns being shell globs. A default may hold another
substitution. Strict: a variable with no value and no default is an error.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

NAME = re.compile(r"[A-Za-z0-9_]+")
DEFAULTS = (":=", ":-", "=", "-")
REMOVALS = ("##", "#", "%%", "%")
REPLACEMENTS = ("//", "/#", "/%", "/")
CASES = ("^^", "^", ",,", ",")
MAX_PATTERNED = 4096
"""The longest value a string function works on: matching a glob at every place of a value
costs its length squared."""
NUMBER = re.compile(r"\s*-?\d+")


class SubstitutionError(ValueError):
    """A text that cannot be expanded: a bad substitution, or (strict) a variable with no
    value. `offset` is where in the text."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


@dataclass
class _Scanner:
    text: str
    values: Mapping[str, str]
    strict: bool
    at: int = 0
    names: set[str] = field(default_factory=set)
    """The variables named so far."""

    def expand(self, closing: str = "") -> str:
        """Text up to `closing` (or the end), each substitution expanded."""
        out: list[str] = []
        while self.at < len(self.text):
            char = self.text[self.at]
            if closing and char in closing:
                break
            if self.text.startswith("$$", self.at):
                out.append("$")
                self.at += 2
            elif self.text.startswith("${", self.at):
                out.append(self._braced())
            else:
                out.append(char)
                self.at += 1
        return "".join(out)

    def _braced(self) -> str:
        start = self.at
        self.at += 2
        if self._take("#"):
            name = self._name(start)
            self._close(start)
            return str(len(self._value(name, start)))
        name = self._name(start)
        value = self.values.get(name)
        for operator in DEFAULTS:
            if self._take(operator):
                word = self.expand("}")
                self._close(start)
                empty_counts = operator.startswith(":")
                return word if value is None or (empty_counts and not value) else value
        if self._take("}"):
            return self._value(name, start)
        text = self._value(name, start)
        if len(text) > MAX_PATTERNED:
            raise SubstitutionError(
                f"variable {name} is over {MAX_PATTERNED} characters: too long for a string "
                "function",
                start,
            )
        return self._function(text, start)

    def _function(self, value: str, start: int) -> str:
        for operator in CASES:
            if self._take(operator):
                self._close(start)
                return _case(value, operator)
        for operator in REMOVALS:
            if self._take(operator):
                pattern = self.expand("}")
                self._close(start)
                return _removed(value, operator, pattern)
        for operator in REPLACEMENTS:
            if self._take(operator):
                pattern = self.expand("/}")
                replacement = self.expand("}") if self._take("/") else ""
                self._close(start)
                return _replaced(value, operator, pattern, replacement)
        if self._take(":"):
            offset = self._number(start)
            length = self._number(start) if self._take(":") else None
            self._close(start)
            return _substring(value, offset, length)
        raise SubstitutionError("bad substitution", start)

    def _value(self, name: str, start: int) -> str:
        value = self.values.get(name)
        if value is not None:
            return value
        if self.strict:
            raise SubstitutionError(f"variable {name} has no value", start)
        return ""

    def _name(self, start: int) -> str:
        found = NAME.match(self.text, self.at)
        if found is None:
            raise SubstitutionError("bad substitution: no variable name after ${", start)
        self.at = found.end()
        self.names.add(found.group(0))
        return found.group(0)

    def _number(self, start: int) -> int:
        found = NUMBER.match(self.text, self.at)
        if found is None:
            raise SubstitutionError("bad substitution: an offset or length is a number", start)
        self.at = found.end()
        return int(found.group(0))

    def _take(self, token: str) -> bool:
        if self.text.startswith(token, self.at):
            self.at += len(token)
            return True
        return False

    def _close(self, start: int) -> None:
        if not self._take("}"):
            raise SubstitutionError("bad substitution: missing closing brace", start)


def expand(text: str, values: Mapping[str, str], strict: bool = False) -> str:
    """`text` with every substitution expanded from `values`; a variable with no value
    expands to "" unless `strict` (SubstitutionError)."""
    return _Scanner(text, values, strict).expand()


def used(text: str) -> set[str]:
    """The variables `text` names, defaults' included (whether they are needed or not)."""
    scanner = _Scanner(text, {}, strict=False)
    scanner.expand()
    return scanner.names


def _case(value: str, operator: str) -> str:
    changes: dict[str, Callable[[str], str]] = {
        "^^": str.upper,
        "^": lambda v: v[:1].upper() + v[1:],
        ",,": str.lower,
        ",": lambda v: v[:1].lower() + v[1:],
    }
    return changes[operator](value)


def _removed(value: str, operator: str, pattern: str) -> str:
    """A prefix (#) or suffix (%) that matches the glob, the shortest or (doubled) longest."""
    ends = range(len(value) + 1)
    if operator.startswith("#"):
        cuts = [n for n in ends if fnmatch.fnmatchcase(value[:n], pattern)]
        return value[(max(cuts) if operator == "##" else min(cuts)) :] if cuts else value
    cuts = [n for n in ends if fnmatch.fnmatchcase(value[n:], pattern)]
    return value[: (min(cuts) if operator == "%%" else max(cuts))] if cuts else value


def _replaced(value: str, operator: str, pattern: str, replacement: str) -> str:
    """The first (/) or every (//) match of the glob, or one at the start (/#) or end (/%),
    replaced; bash's matches are the longest at each place."""
    if operator == "/#":
        return _at_start(value, pattern, replacement)
    if operator == "/%":
        return _at_end(value, pattern, replacement)
    out, at = [], 0
    while at < len(value):
        length = _longest_match(value, at, pattern)
        if not length:  # no match here, or only an empty one
            out.append(value[at])
            at += 1
            continue
        out.append(replacement)
        at += length
        if operator == "/":
            return "".join(out) + value[at:]
    return "".join(out)


def _longest_match(value: str, at: int, pattern: str) -> int | None:
    for end in range(len(value), at - 1, -1):
        if fnmatch.fnmatchcase(value[at:end], pattern):
            return end - at
    return None


def _at_start(value: str, pattern: str, replacement: str) -> str:
    length = _longest_match(value, 0, pattern)
    return value if length is None else replacement + value[length:]


def _at_end(value: str, pattern: str, replacement: str) -> str:
    for start in range(len(value) + 1):
        if fnmatch.fnmatchcase(value[start:], pattern):
            return value[:start] + replacement
    return value


def _substring(value: str, offset: int, length: int | None) -> str:
    start = max(len(value) + offset, 0) if offset < 0 else min(offset, len(value))
    if length is None:
        return value[start:]
    end = len(value) + length if length < 0 else start + length
    return value[start : max(end, start)]
