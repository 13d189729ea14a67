"""Known vulnerabilities of the locked dependency set, asked of OSV (the database behind
pip-audit and GitHub's advisories), for `make test`.

`python -m tests.supply_chain.advisories requirements/dev.txt` fails when an advisory
names a pinned version, unless requirements/accepted-advisories.txt lists its id with a
reason, and when the service answers with anything but a batch answer for every pin (an
error status, a proxy's page, a truncated or malformed body): an audit that could not be
read is no audit. Offline-safe: when the service cannot be reached at all it says, in
one line, that the audit did not run, and passes (a build without the network must not
fail for it, nor look audited).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

SERVICE = "https://api.osv.dev/v1/querybatch"
TIMEOUT_SECONDS = 20
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)
ACCEPTED = Path(__file__).resolve().parents[2] / "requirements" / "accepted-advisories.txt"
VULNERABLE, UNREADABLE = 1, 2
"""The audit's exit statuses: an advisory names a pin; the service's answer was no audit."""


@dataclass(frozen=True)
class Pin:
    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class Finding:
    pin: Pin
    advisories: tuple[str, ...]


def pins(lock: str) -> list[Pin]:
    """The exact versions a pip-compile lock names."""
    return [Pin(name, version) for name, version in PIN.findall(lock)]


def accepted(text: str) -> set[str]:
    """Advisory ids each given with a reason (`ID  why it does not apply`)."""
    ids = set()
    for line in text.splitlines():
        words = line.split("#", 1)[0].split(maxsplit=1)
        if words and len(words) < 2:
            raise ValueError(f"accepted advisory {words[0]} needs a reason beside it")
        if words:
            ids.add(words[0])
    return ids


class Malformed(ValueError):
    """An answer that is not OSV's batch answer for the pins asked."""


def ask(service: str, locked: Sequence[Pin]) -> list[Finding]:
    """The pins OSV knows advisories for (one batch request)."""
    queries = [
        {"package": {"name": pin.name, "ecosystem": "PyPI"}, "version": pin.version}
        for pin in locked
    ]
    request = urllib.request.Request(  # noqa: S310 (https, or a test's own http server)
        service,
        data=json.dumps({"queries": queries}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as answer:  # noqa: S310
        return findings(answer.read(), locked)


def findings(body: bytes, locked: Sequence[Pin]) -> list[Finding]:
    """The pins a batch answer names advisories for; Malformed unless it holds one result
    per pin, each with a list of advisories that have ids (or none)."""
    try:
        results = json.loads(body)["results"]
    except (ValueError, KeyError, TypeError) as error:
        raise Malformed(f"not a batch answer: {type(error).__name__} {error}") from None
    if not isinstance(results, list) or len(results) != len(locked):
        count = len(results) if isinstance(results, list) else "no list of"
        raise Malformed(f"{count} results for {len(locked)} queries")
    found = []
    for pin, result in zip(locked, results, strict=True):
        advisories = result.get("vulns") or [] if isinstance(result, dict) else None
        if not isinstance(advisories, list) or not all(_has_id(a) for a in advisories):
            raise Malformed(f"the result for {pin} is no list of advisories with ids")
        if advisories:
            found.append(Finding(pin, tuple(sorted(a["id"] for a in advisories))))
    return found


def _has_id(advisory: object) -> bool:
    return isinstance(advisory, dict) and isinstance(advisory.get("id"), str)


def audit(lock: Path, service: str, accepted_ids: Iterable[str]) -> tuple[int, list[str]]:
    """The exit status and the lines to print."""
    locked = pins(lock.read_text())
    unchecked = f"{len(locked)} pinned packages of {lock} not checked"
    try:
        found = ask(service, locked)
    except urllib.error.HTTPError as error:  # an answer: before URLError, which it is
        return UNREADABLE, [
            f"dependency audit failed: {service} answered {error.code}; {unchecked}"
        ]
    except (Malformed, http.client.IncompleteRead) as error:
        why = f"{type(error).__name__}: {error}"
        return UNREADABLE, [f"dependency audit failed: {service} answered, but {why}; {unchecked}"]
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", None) or error
        return 0, [f"dependency audit DID NOT RUN: {service} unreachable ({reason}); {unchecked}"]
    allowed = set(accepted_ids)
    open_ = [(f.pin, [a for a in f.advisories if a not in allowed]) for f in found]
    lines = [f"{pin}: {', '.join(ids)}" for pin, ids in open_ if ids]
    if lines:
        hint = "upgrade them (make lock), or list an id that does not apply with its reason in"
        return VULNERABLE, [
            *lines,
            f"dependency audit: {len(lines)} vulnerable pins; {hint} {ACCEPTED}",
        ]
    return 0, [f"dependency audit: no known vulnerability in {len(locked)} pins of {lock}"]


def main(argv: Sequence[str]) -> int:
    service = os.environ.get("GITOPSD_ADVISORY_SERVICE", SERVICE)
    accepted_ids = accepted(ACCEPTED.read_text()) if ACCEPTED.exists() else set()
    status = 0
    for lock in argv:
        code, lines = audit(Path(lock), service, accepted_ids)
        print(*lines, sep="\n")
        status = max(status, code)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
