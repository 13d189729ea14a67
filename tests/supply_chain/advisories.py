"""Known vulnerabilities of the locked dependency set, asked of OSV (the database behind
pip-audit and GitHub's advisories), for `make test`.

`python -m tests.supply_chain.advisories requirements/dev.txt` fails when an advisory
names a pinned version, unless requirements/accepted-advisories.txt lists its id with a
reason. Offline-safe: when the service cannot be reached it says so in one line and
passes (a build without the network must not fail for it, nor look audited).
"""

from __future__ import annotations

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
        results = json.load(answer)["results"]
    if len(results) != len(locked):
        raise ValueError(f"{len(results)} results for {len(locked)} queries")
    return [
        Finding(pin, tuple(sorted(v["id"] for v in result.get("vulns") or [])))
        for pin, result in zip(locked, results, strict=True)
        if result.get("vulns")
    ]


def audit(lock: Path, service: str, accepted_ids: Iterable[str]) -> tuple[int, list[str]]:
    """The exit status and the lines to print."""
    locked = pins(lock.read_text())
    try:
        findings = ask(service, locked)
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError) as error:
        reason = getattr(error, "reason", None) or error
        return 0, [
            f"dependency audit skipped: {service} did not answer ({reason}); "
            f"{len(locked)} pinned packages of {lock} not checked"
        ]
    allowed = set(accepted_ids)
    open_ = [(f.pin, [a for a in f.advisories if a not in allowed]) for f in findings]
    lines = [f"{pin}: {', '.join(ids)}" for pin, ids in open_ if ids]
    if lines:
        hint = "upgrade them (make lock), or list an id that does not apply with its reason in"
        return 1, [*lines, f"dependency audit: {len(lines)} vulnerable pins; {hint} {ACCEPTED}"]
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
