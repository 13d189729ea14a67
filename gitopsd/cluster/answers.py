"""What an API server's answer says, read from its status and body: the status as gitopsd
takes it, the server's message, the fields an Invalid answer refuses as immutable, whether
a 404 is about an object or about the path, and whether an answer is a Kubernetes API
server's at all. Pure: an answer in, a fact out; `api` sends the requests."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Answer:
    """A response read whole."""

    status: int
    headers: Any
    data: bytes


def status_of(answer: Answer) -> int:
    """The status, except that server-side apply answers 500 for a manifest that does not fit
    the schema (a bad request, so never worth retrying)."""
    if answer.status == 500 and b"failed to create typed patch object" in answer.data:
        return 422
    return answer.status


def status_message(answer: Answer) -> str:
    try:
        status = json.loads(answer.data or b"{}")
    except ValueError:
        return f"HTTP {answer.status}"
    message = status.get("message") if isinstance(status, dict) else None
    return str(message or f"HTTP {answer.status}")


def names_an_object(answer: Answer) -> bool:
    """Whether a 404 is about an object: the API server's Status then names it in its
    details (`gitsyncs.gitopsd.io "web" not found`). A path it serves nothing at gets a
    page ("404 page not found"), or a Status that names nothing ("the server could not find
    the requested resource"); any other HTTP server's 404 names nothing either."""
    try:
        status = json.loads(answer.data or b"{}")
    except ValueError:
        return False
    details = status.get("details") if isinstance(status, dict) else None
    return isinstance(details, dict) and bool(details.get("name"))


def speaks_kubernetes(answer: Answer) -> bool:
    """Whether an answer to GET /version is an API server's: its version, or a Status (a
    user who may not read it is refused as the API server refuses)."""
    try:
        body = json.loads(answer.data or b"{}")
    except ValueError:
        return False
    return isinstance(body, dict) and ("gitVersion" in body or body.get("kind") == "Status")


IMMUTABLE_WORDS = ("field is immutable", "may not change once set", "are forbidden")
"""How the API server's validation says a field cannot change (`updates to statefulset spec
for fields other than ... are forbidden`)."""


CHANGEABLE = re.compile(r"for fields other than (.*) are forbidden")


def immutable_fields(answer: Answer) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The fields an Invalid answer refuses as immutable, from its causes, and the fields
    under them it names as ones that may change."""
    if answer.status != 422:
        return (), ()
    try:
        status = json.loads(answer.data or b"{}")
        causes = [
            (str(cause.get("field", "")), str(cause.get("message", "")))
            for cause in status["details"]["causes"]
        ]
    except (ValueError, KeyError, TypeError, AttributeError):
        return (), ()
    refused = [(f, m) for f, m in causes if any(words in m for words in IMMUTABLE_WORDS)]
    said = " ".join(m for _, m in refused)
    changeable = CHANGEABLE.search(said)
    names = tuple(re.findall(r"'([^']+)'", changeable[1])) if changeable else ()
    return tuple(field for field, _ in refused), names
