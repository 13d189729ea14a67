"""Drift policy, pure: rules that decide, field by field, what gitopsd does with drift.

A rule matches objects (group, kind, and globs of namespace and name), fields (paths, each
covering the field's subtree) and the manager that owns a drifted field now (globs), and
says what becomes of such a field: `ignore` it (not drift, never healed, not exported),
`accept` it (reported as accepted, never healed: an autoscaler's replicas), `heal` it (what
enforce mode does by default) or `alert` on it (drift exported and evented, never healed).
An object's own rules (its `gitopsd.io/drift-policy` annotation) come before its source's;
the first rule that matches decides, and a field no rule matches is healed.

The same reader takes a rule from the configuration file, a GitSync's spec, a flag and an
annotation, so a rule means one thing wherever it is written.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import yaml

from gitopsd.errors import ConfigError
from gitopsd.objects import Body, ObjectKey

ANNOTATION = "gitopsd.io/drift-policy"
"""An object's own rules: a YAML list of rules without a target."""
MAX_RULES = 100
MAX_OBJECT_RULES = 16
MAX_ANNOTATION_BYTES = 4096
MAX_ANNOTATION_DEPTH = 3
"""A list of rules, each a mapping whose target is a mapping and whose paths are a list."""
MAX_PATTERNS = 32
"""Paths or managers one rule may name."""
RULE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
RULE_KEYS = {"name", "action", "target", "paths", "managers"}
TARGET_KEYS = {"group", "kind", "namespace", "name"}


class Decision(StrEnum):
    IGNORE = "ignore"
    ACCEPT = "accept"
    HEAL = "heal"
    ALERT = "alert"

    @property
    def held(self) -> bool:
        """Never written back: the field is sent as it is live."""
        return self != Decision.HEAL


@dataclass(frozen=True, slots=True)
class Item:
    """A list element in a field's place: its index, and its name if it has one."""

    index: int
    name: str | None = None


Segment = str | Item
Locator = tuple[Segment, ...]
"""A field's place in an object: map keys, and list elements."""


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a rule's path: a key, an index, a named element, or anything (`*`)."""

    key: str | None = None
    index: int | None = None
    element: str | None = None
    """A list element with this `name`."""

    def matches(self, segment: Segment) -> bool:
        if (self.key, self.index, self.element) == (None, None, None):
            return True
        if isinstance(segment, Item):
            return segment.index == self.index or (
                self.element is not None and segment.name == self.element
            )
        return segment == self.key


ANY = Step()


@dataclass(frozen=True)
class Rule:
    action: Decision
    label: str
    """Who decided, in output and metrics: the rule's name, or where it is written."""
    group: str | None = None
    kind: str | None = None
    namespace: str = "*"
    name: str = "*"
    paths: tuple[tuple[Step, ...], ...] = ()
    """Empty: every field."""
    managers: tuple[str, ...] = ()
    """Globs of the manager owning the field now; empty: any."""

    def covers(self, key: ObjectKey) -> bool:
        return (
            self.group in (None, key.group)
            and self.kind in (None, key.kind)
            and fnmatch.fnmatchcase(key.namespace, self.namespace)
            and fnmatch.fnmatchcase(key.name, self.name)
        )

    def decides(self, place: Locator, manager: str) -> bool:
        by_path = not self.paths or any(_within(place, path) for path in self.paths)
        by_manager = not self.managers or any(
            fnmatch.fnmatchcase(manager, glob) for glob in self.managers
        )
        return by_path and by_manager


def _within(place: Locator, path: tuple[Step, ...]) -> bool:
    """The field at `place` is the path's field or inside it."""
    return len(place) >= len(path) and all(
        step.matches(segment) for step, segment in zip(path, place, strict=False)
    )


def deciding(rules: Sequence[Rule], key: ObjectKey, place: Locator, manager: str) -> Rule | None:
    """The first rule that covers the object and decides the field, if any."""
    return next((r for r in rules if r.covers(key) and r.decides(place, manager)), None)


# Reading rules: from a list of mappings, wherever they are written.


def read_rules(
    value: Any, where: str, field: str = "drift", targeted: bool = True
) -> tuple[Rule, ...]:
    """Rules from the list of mappings at `field` of a source (an unnamed rule is labelled
    `field[index]`); `targeted`: they may name their objects (a source's rules), else they
    are an object's own. Raises ConfigError naming the rule and field."""
    most = MAX_RULES if targeted else MAX_OBJECT_RULES
    if not isinstance(value, list) or len(value) > most:
        raise ConfigError(f"{where}: {field}: expected a list of at most {most} rules")
    rules = tuple(
        _rule(item, f"{where}: {field}[{index}]", f"{field}[{index}]", targeted)
        for index, item in enumerate(value)
    )
    names = [rule.label for rule in rules]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"{where}: {field}: rule names must differ: {', '.join(repeated)}")
    return rules


def _rule(item: Any, where: str, label: str, targeted: bool) -> Rule:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: expected a mapping")
    allowed = RULE_KEYS if targeted else RULE_KEYS - {"target"}
    unknown = sorted(set(map(str, item)) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    target = _target(item.get("target", {}), f"{where}: target")
    return Rule(
        action=_action(item.get("action"), where),
        label=_name(item.get("name"), where) or label,
        group=target.get("group"),
        kind=target.get("kind"),
        namespace=target.get("namespace", "*"),
        name=target.get("name", "*"),
        paths=tuple(parse_path(p, f"{where}: paths") for p in _texts(item, "paths", where)),
        managers=_texts(item, "managers", where),
    )


def _action(value: Any, where: str) -> Decision:
    try:
        return Decision(value)
    except ValueError:
        choices = ", ".join(decision.value for decision in Decision)
        raise ConfigError(f"{where}: action: expected one of {choices}, got {value!r}") from None


def _name(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or not RULE_NAME.match(value):
        raise ConfigError(f"{where}: name: use lower-case letters, digits and '-' (at most 63)")
    return value


def _target(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping")
    unknown = sorted(set(map(str, value)) - TARGET_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    for field, text in value.items():
        empty_allowed = field == "group"  # "" is the core group
        if not isinstance(text, str) or not (text or empty_allowed) or len(text) > 253:
            raise ConfigError(f"{where}: {field}: expected a string of at most 253 characters")
    return value


def _texts(item: dict[str, Any], field: str, where: str) -> tuple[str, ...]:
    value = item.get(field, [])
    valid = isinstance(value, list) and len(value) <= MAX_PATTERNS
    if not valid or not all(isinstance(v, str) and 0 < len(v) <= 1024 for v in value):
        raise ConfigError(
            f"{where}: {field}: expected a list of at most {MAX_PATTERNS} non-empty strings"
        )
    return tuple(value)


STEP = re.compile(
    r"""\.?(?P<key>[^.\[\]"]+)|\[(?:(?P<index>\d+)|(?P<any>\*)|name=(?P<element>[^\]]+)
    |(?P<quoted>"(?:[^"\\]|\\.)*"))\]""",
    re.VERBOSE,
)


def parse_path(text: str, where: str) -> tuple[Step, ...]:
    """A field path as `gitopsd diff` prints it (spec.template.spec.containers[name=app].image,
    [0] an index, [*] or * any element or key, ["a.b/c"] a key with dots), or a JSON pointer
    (/metadata/annotations/a.b~1c, as Argo CD's and Flux's rules write them)."""
    steps = _pointer(text) if text.startswith("/") else _dotted(text)
    if steps is None:
        raise ConfigError(
            f"{where}: {text!r} is not a field path (like spec.replicas, "
            "spec.template.spec.containers[name=app].image, or /spec/replicas)"
        )
    return steps


def _pointer(text: str) -> tuple[Step, ...] | None:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in text[1:].split("/")]
    if not all(parts):
        return None
    return tuple(
        ANY if p == "*" else Step(key=p, index=int(p) if p.isdigit() else None) for p in parts
    )


def _dotted(text: str) -> tuple[Step, ...] | None:
    steps: list[Step] = []
    position = 0
    while position < len(text):
        found = STEP.match(text, position)
        if found is None or (found.group("key") is not None and position and text[position] != "."):
            return None
        steps.append(_step(found))
        position = found.end()
    return tuple(steps) or None


def _step(found: re.Match[str]) -> Step:
    if found.group("key") is not None:
        return ANY if found.group("key") == "*" else Step(key=found.group("key"))
    if found.group("index") is not None:
        return Step(index=int(found.group("index")))
    if found.group("element") is not None:
        return Step(element=found.group("element"))
    if found.group("quoted") is not None:
        return Step(key=str(json.loads(found.group("quoted"))))
    return ANY


# An object's own rules, from its annotation.


def object_rules(body: Body) -> tuple[Rule, ...]:
    """The rules of an object's `gitopsd.io/drift-policy` annotation (none without one).
    Raises ConfigError saying what is wrong, for its manifest's file and line."""
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ANNOTATION)
    if text is None:
        return ()
    if not isinstance(text, str):
        raise ConfigError(f"{ANNOTATION}: expected YAML text, not {type(text).__name__}")
    return _annotation_rules(text)


@functools.lru_cache(maxsize=256)
def _annotation_rules(text: str) -> tuple[Rule, ...]:
    if len(text.encode()) > MAX_ANNOTATION_BYTES:
        raise ConfigError(f"{ANNOTATION}: expected YAML of at most {MAX_ANNOTATION_BYTES} bytes")
    try:
        _check_depth(text)
        value = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{ANNOTATION}: not YAML: {error}") from None
    rules = value if isinstance(value, list) else [value]
    return read_rules(rules, "annotations", ANNOTATION, targeted=False)


def _check_depth(text: str) -> None:
    """Refuses YAML nested deeper than rules are, read as parse events before anything is
    composed: PyYAML's composer recurses once per level, and 4 KiB of brackets would
    exhaust the interpreter's stack."""
    depth = 0
    for event in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_ANNOTATION_DEPTH:
                raise ConfigError(f"{ANNOTATION}: nested deeper than {MAX_ANNOTATION_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
