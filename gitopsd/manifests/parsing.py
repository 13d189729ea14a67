"""From a file's bytes to its documents: strict UTF-8, then hardened YAML or `json`.

Every error names the file and line, and never echoes file content beyond key names, so a
Secret's value can never leak through one.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable
from typing import Any

import yaml
from yaml.reader import ReaderError

from gitopsd.config import Limits
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.manifests.bounds import depth_error
from gitopsd.manifests.yaml_budget import check_events
from gitopsd.manifests.yaml_loader import Documents, construct, shown_key


def decode(data: bytes, rel: str) -> str:
    """Strict UTF-8, optionally after a UTF-8 BOM; NUL bytes mean binary or UTF-16."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise _encoding_error(data, rel, nul, "NUL byte")
    skipped = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[skipped:].decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise _encoding_error(data, rel, skipped + exc.start, "invalid UTF-8") from None


def _encoding_error(data: bytes, rel: str, offset: int, what: str) -> ManifestError:
    line = data.count(b"\n", 0, offset) + 1
    return ManifestError(
        f"{rel}:{line}: {what} at byte offset {offset}; manifests must be UTF-8",
        ManifestReason.ENCODING,
    )


def parse_file(data: bytes, path: str, limits: Limits) -> Documents:
    """A whole file's documents, as `decode` and `parse_documents` read them."""
    return parse_documents(decode(data, path), path, limits)


def parse_documents(text: str, path: str, limits: Limits) -> Documents:
    """(1-based start line, data) of each non-empty document; `path` names it in errors."""
    if path.endswith(".json"):
        return _parse_json(text, path, limits)
    try:
        check_events(text, path, limits)  # cheap, streaming, before any node is built
        return construct(text, path)
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, path, text, limits) from None


LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"
"""The refusal of nesting past 1,000 levels by the libyaml that newer PyYAML wheels carry
(6.0.4 here): its scanner looks ahead through `[[[[…` before a single event reaches the
depth budget."""


def _syntax_error(exc: yaml.YAMLError, path: str, text: str, limits: Limits) -> ManifestError:
    """line:col and libyaml's description; never str(exc), whose snippet quotes the file."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        if LIBYAML_TOO_DEEP in (exc.problem or ""):  # far deeper than our limit, too
            return depth_error(f"{path}:{mark.line + 1}:{mark.column + 1}", limits)
        message = exc.problem or "invalid YAML"
        if exc.context:
            context_line = f" at line {exc.context_mark.line + 1}" if exc.context_mark else ""
            message += f" ({exc.context}{context_line})"
        return ManifestError(
            f"{path}:{mark.line + 1}:{mark.column + 1}: {message}", ManifestReason.SYNTAX
        )
    if isinstance(exc, ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        return ManifestError(f"{path}:{line}: {exc.reason}", ManifestReason.SYNTAX)
    return ManifestError(f"{path}:1: invalid YAML", ManifestReason.SYNTAX)


def _parse_json(text: str, path: str, limits: Limits) -> Documents:
    if not text.strip():
        return []  # like an empty YAML file
    _check_json_depth(text, path, limits)
    try:
        data = json.loads(
            text, object_pairs_hook=_unique_json_keys(path), parse_constant=_no_constant(path)
        )
    except json.JSONDecodeError as exc:
        raise ManifestError(
            f"{path}:{exc.lineno}:{exc.colno}: {exc.msg}", ManifestReason.SYNTAX
        ) from None
    except ValueError:  # an integer of more than 4300 digits
        raise ManifestError(f"{path}:1: a number is too large", ManifestReason.INVALID) from None
    return [] if data is None else [(1, data)]


def _unique_json_keys(path: str) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        mapping: dict[str, Any] = {}
        for key, value in pairs:
            if key in mapping:  # json keeps the last silently
                raise ManifestError(
                    f"{path}:1: duplicate key {shown_key(key)}", ManifestReason.DUPLICATE_KEY
                )
            mapping[key] = value
        return mapping

    return build


def _no_constant(path: str) -> Callable[[str], Any]:
    def refuse(constant: str) -> Any:
        raise ManifestError(f"{path}:1: {constant} is not valid JSON", ManifestReason.SYNTAX)

    return refuse


# Strings are blanked first so brackets inside them do not count; valid JSON strings hold
# no raw newline, so line numbers survive.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def _check_json_depth(text: str, path: str, limits: Limits) -> None:
    """json.loads recurses per level and would raise RecursionError on deep input."""
    blanked = _JSON_STRING.sub('""', text)
    depth = 0
    for match in _JSON_BRACKET.finditer(blanked):
        depth += 1 if match.group() in "[{" else -1
        if depth > limits.max_depth:
            line = blanked.count("\n", 0, match.start()) + 1
            raise depth_error(f"{path}:{line}", limits)
