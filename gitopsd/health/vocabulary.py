"""The words an assessment answers in: a kstatus `Status`, and a `Health`, a status with why.

What each status means, and Argo CD's word for it, is in the package docstring.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

MAX_MESSAGE_CHARS = 300


class Status(StrEnum):
    CURRENT = "Current"
    IN_PROGRESS = "InProgress"
    FAILED = "Failed"
    TERMINATING = "Terminating"
    NOT_FOUND = "NotFound"
    UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class Health:
    """A status with why: `reason` a short CamelCase word, `message` for people."""

    status: Status
    reason: str = ""
    message: str = ""

    def __post_init__(self) -> None:
        # Controllers quote whole API errors in messages; the start says enough.
        if len(self.message) > MAX_MESSAGE_CHARS:
            object.__setattr__(self, "message", self.message[: MAX_MESSAGE_CHARS - 1] + "…")

    @property
    def healthy(self) -> bool:
        return self.status is Status.CURRENT

    def __str__(self) -> str:
        return ": ".join(part for part in (self.status, self.reason, self.message) if part)
