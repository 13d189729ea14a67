"""Typed field readers of the configuration file: each error names the field and what was
expected."""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from gitopsd.errors import ConfigError
from gitopsd.names import namespace_problem, shown
from gitopsd.quantities import parse_duration, parse_size
from gitopsd.settings_table import Kind

MAX_DURATION_SECONDS = 7 * 24 * 3600.0
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "[::1]", "localhost")


def mapping(value: Any, where: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping")
    unknown = sorted(set(map(str, value)) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    return value


def string(raw: dict[str, Any], key: str, where: str, default: str | None) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: {key}: expected a non-empty string")
    return value


def strings(raw: dict[str, Any], key: str, where: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """A list of non-empty strings; empty only where the default is (e.g. exclude)."""
    value = raw.get(key, list(default))
    valid = isinstance(value, list) and all(isinstance(v, str) and v for v in value)
    if not valid or (default and not value):
        wanted = "a non-empty list" if default else "a list"
        raise ConfigError(f"{where}: {key}: expected {wanted} of non-empty strings")
    return tuple(value)


def namespace(raw: dict[str, Any], key: str, where: str, default: str) -> str:
    value = string(raw, key, where, default)
    problem = namespace_problem(value)
    if problem:
        raise ConfigError(f"{where}: {key}: {shown(value)} {problem}")
    return value


def namespaces(
    raw: dict[str, Any], key: str, where: str, default: tuple[str, ...], every: str = ""
) -> tuple[str, ...]:
    """A list of namespaces, `every` standing for all of them where given ("*")."""
    listed = strings(raw, key, where, default)
    for name in listed:
        problem = None if every and name == every else namespace_problem(name)
        if problem:
            raise ConfigError(f"{where}: {key}: {shown(name)} {problem}")
    return listed


def size(raw: dict[str, Any], key: str, where: str, default: int) -> int:
    """A positive whole number; a string may carry a binary suffix (64Mi)."""
    value = raw.get(key, default)
    number = parse_size(value) if isinstance(value, str) else value
    if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
        raise ConfigError(
            f"{where}: {key}: expected a positive whole number (sizes may end in Ki, Mi "
            f"or Gi, like 64Mi), got {value!r}"
        )
    return number


def host_port(raw: dict[str, Any], key: str, where: str, default: str | None) -> str:
    """A listener's address, host:port."""
    listen = string(raw, key, where, default)
    if not re.match(r"^[\w.\-\[\]:]*:\d{1,5}$", listen):
        raise ConfigError(f"{where}: {key}: expected host:port, got {listen!r}")
    return listen


def address_of(listen: str) -> tuple[str, int]:
    """host:port as a socket takes it (no host: loopback)."""
    host, _, port = listen.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def on_loopback(listen: str) -> bool:
    return listen.rpartition(":")[0] in LOOPBACK_HOSTS


def boolean(raw: dict[str, Any], key: str, where: str, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {key}: expected true or false")
    return value


def count(raw: dict[str, Any], key: str, where: str, default: int) -> int:
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 100_000:
        raise ConfigError(f"{where}: {key}: expected a whole number from 0 to 100000")
    return value


def positive(raw: dict[str, Any], key: str, where: str, default: int) -> int:
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{where}: {key}: expected a positive whole number, got {value!r}")
    return value


def percent(raw: dict[str, Any], key: str, where: str, default: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 100:
        raise ConfigError(f"{where}: {key}: expected a number above 0 and at most 100")
    return float(value)


def path(raw: dict[str, Any], key: str, where: str, default: Path | None = None) -> Path | None:
    return Path(string(raw, key, where, None)) if key in raw else default


Choice = TypeVar("Choice", bound=StrEnum)


def choice(raw: dict[str, Any], key: str, where: str, default: Choice) -> Choice:
    """One of the words of the default's enum."""
    text = string(raw, key, where, default)
    words = [str(word) for word in type(default)]
    if text not in words:
        expected = f"{', '.join(words[:-1])} or {words[-1]}"
        raise ConfigError(f"{where}: {key}: expected {expected}, got {text!r}")
    return type(default)(text)


def secret(raw: dict[str, Any], key: str, where: str) -> bytes | None:
    """The contents of the file `key` names, without surrounding whitespace; never echoed."""
    file = path(raw, key, where)
    if file is None:
        return None
    try:
        contents = file.read_bytes().strip()
    except OSError as error:
        raise ConfigError(f"{where}: {key}: cannot read {file}: {error.strerror}") from None
    if not contents:
        raise ConfigError(f"{where}: {key}: {file} is empty")
    return contents


def seconds(raw: dict[str, Any], key: str, where: str, default: float) -> float:
    """A duration such as 30s, 5m or 1h30m (or a number of seconds)."""
    value = raw.get(key, default)
    seconds = parse_duration(value) if isinstance(value, str) else value
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        seconds = -1.0  # not a duration at all
    if not 0 < seconds <= MAX_DURATION_SECONDS:
        raise ConfigError(
            f"{where}: {key}: expected a duration above 0 and at most 7 days "
            f"(like 30s, 5m, 1h), got {value!r}"
        )
    return float(seconds)


READERS: dict[Kind, Callable[[dict[str, Any], str, str, Any], Any]] = {
    Kind.SWITCH: boolean,
    Kind.DURATION: seconds,
    Kind.PERCENT: percent,
    Kind.POSITIVE: positive,
    Kind.SIZE: size,
    Kind.COUNT: size,
    Kind.TEXT: string,
    Kind.FILE: path,
    Kind.PATHS: strings,
    Kind.GLOBS: strings,
    Kind.CHOICE: choice,
}
"""The reader of each kind of the settings table's rows: (mapping, key, where, default)."""
