"""Reading fields, typed: a value of the wrong type raises `MalformedError`, which `assess`
reports (Unknown). The readers the kind rules share, conditions included.

`str_`, `int_`, `bool_` and `list_` end in an underscore so as not to shadow the builtins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gitopsd.health.vocabulary import Health, Status
from gitopsd.objects import Body


class MalformedError(Exception):
    def __init__(self, where: str, expected: str, value: Any) -> None:
        super().__init__(f"{where} should be {expected}, not {type(value).__name__}")


def get(body: Body, path: str) -> Any:
    """The value at the dotted `path`, None when some part of it is missing."""
    value: Any = body
    keys = path.split(".")
    for depth, key in enumerate(keys):
        if value is None:
            return None
        if not isinstance(value, dict):
            raise MalformedError(".".join(keys[:depth]), "an object", value)
        value = value.get(key)
    return value


def text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedError(where, "a string", value)
    return value


def str_(body: Body, path: str, default: str = "") -> str:
    return text(get(body, path), path) or default


def maybe_int(body: Body, path: str) -> int | None:
    value = get(body, path)
    if value is None:
        return None
    # bool is an int to Python, but `true` is no count.
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedError(path, "an integer", value)
    return value


def int_(body: Body, path: str, default: int) -> int:
    value = maybe_int(body, path)
    return default if value is None else value


def bool_(body: Body, path: str) -> bool:
    value = get(body, path)
    if value is not None and not isinstance(value, bool):
        raise MalformedError(path, "a boolean", value)
    return value is True


def list_(body: Body, path: str) -> list[Any]:
    value = get(body, path)
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedError(path, "a list", value)
    return value


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str  # "True", "False" or "Unknown"
    reason: str
    message: str

    @property
    def true(self) -> bool:
        return self.status == "True"

    def decides(self, status: Status) -> Health:
        """`status`, explained by this condition."""
        fallback = self.type if self.true else f"Not{self.type}"
        return Health(status, self.reason or fallback, self.message)


def conditions_of(body: Body) -> dict[str, Condition]:
    items = list_(body, "status.conditions")
    conditions = (_condition(item, f"status.conditions[{i}]") for i, item in enumerate(items))
    return {condition.type: condition for condition in conditions}


def _condition(item: Any, where: str) -> Condition:
    if not isinstance(item, dict):
        raise MalformedError(where, "an object", item)
    fields = ("type", "status", "reason", "message")
    return Condition(*(text(item.get(field), f"{where}.{field}") for field in fields))


def true_condition(conditions: dict[str, Condition], type_: str) -> Condition | None:
    condition = conditions.get(type_)
    return condition if condition is not None and condition.true else None


def must_be_true(conditions: dict[str, Condition], type_: str) -> Health:
    condition = conditions.get(type_)
    if condition is None:
        return Health(Status.IN_PROGRESS, "Pending", f"no {type_} condition yet")
    return condition.decides(Status.CURRENT if condition.true else Status.IN_PROGRESS)
