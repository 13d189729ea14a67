"""The dependency audit of `make test`, against a local HTTP server that answers as OSV's
batch API does (the real service is not reachable from every build)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.supply_chain.advisories import Pin, accepted, audit, pins

LOCK = """\
#    make lock
pyyaml==6.0.4 \\
    --hash=sha256:00
    # via gitopsd (pyproject.toml)
urllib3==2.8.0 \\
    --hash=sha256:11
"""


class Osv(BaseHTTPRequestHandler):
    """Knows one advisory, for urllib3 2.8.0; keeps what it was asked. Given `instead`, it
    answers that: a status, a body, and how many bytes the body claims to have."""

    asked: ClassVar[list[Any]] = []
    instead: ClassVar[tuple[int, bytes, int] | None] = None

    def do_POST(self) -> None:
        queries = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["queries"]
        Osv.asked.append(queries)
        results = [
            {"vulns": [{"id": "GHSA-test-0001", "modified": "2026-11-01T00:00:00Z"}]}
            if (q["package"]["name"], q["version"]) == ("urllib3", "2.8.0")
            else {}
            for q in queries
        ]
        body = json.dumps({"results": results}).encode()
        status, body, length = Osv.instead or (200, body, len(body))
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def service() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Osv)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Osv.asked, Osv.instead = [], None
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/querybatch"
    server.shutdown()
    server.server_close()


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    path = tmp_path / "dev.txt"
    path.write_text(LOCK)
    return path


def test_the_pins_of_a_lock_are_read() -> None:
    assert pins(LOCK) == [Pin("pyyaml", "6.0.4"), Pin("urllib3", "2.8.0")]


@pytest.mark.case("SE-21")
def test_a_pinned_version_with_an_advisory_fails_the_audit(service: str, lock: Path) -> None:
    code, lines = audit(lock, service, set())

    assert code == 1
    assert lines[0] == "urllib3==2.8.0: GHSA-test-0001"
    assert "1 vulnerable pins" in lines[-1]
    [queries] = Osv.asked
    assert queries == [
        {"package": {"name": "pyyaml", "ecosystem": "PyPI"}, "version": "6.0.4"},
        {"package": {"name": "urllib3", "ecosystem": "PyPI"}, "version": "2.8.0"},
    ]


def test_an_advisory_accepted_with_a_reason_passes(service: str, lock: Path) -> None:
    ids = accepted("GHSA-test-0001  only the proxy code path, which gitopsd never uses\n")

    assert audit(lock, service, ids) == (
        0,
        [f"dependency audit: no known vulnerability in 2 pins of {lock}"],
    )


@pytest.mark.case("SE-21")
def test_an_accepted_advisory_needs_a_reason() -> None:
    with pytest.raises(ValueError, match="GHSA-x needs a reason"):
        accepted("# the ids gitopsd accepts\nGHSA-x\n")


def whole(body: bytes, status: int = 200) -> tuple[int, bytes, int]:
    return status, body, len(body)


NOT_AN_AUDIT = {
    "an error status": (whole(b'{"code": 13}', 503), "answered 503"),
    "a proxy's page": (whole(b"<html>Sign in</html>"), "JSONDecodeError"),
    "no results": (whole(b'{"next_page_token": "x"}'), "KeyError"),
    "results not a list": (whole(b'{"results": {}}'), "no list of results for 2 queries"),
    "a result short": (whole(b'{"results": [{}]}'), "1 results for 2 queries"),
    "a result not a mapping": (whole(b'{"results": [[], {}]}'), "pyyaml==6.0.4 is no list"),
    "advisories without ids": (
        whole(b'{"results": [{}, {"vulns": [{"summary": "bad"}]}]}'),
        "urllib3==2.8.0 is no list of advisories with ids",
    ),
    "a truncated body": ((200, b'{"results": [{}', 100), "IncompleteRead"),
}


@pytest.mark.case("SE-21")
@pytest.mark.parametrize("case", NOT_AN_AUDIT, ids=list(NOT_AN_AUDIT))
def test_an_answer_that_is_no_audit_fails_it(service: str, lock: Path, case: str) -> None:
    """The service answered, so it was reached: an answer that cannot be read as an audit
    of every pin fails, never passes as if it were one (or as if offline)."""
    Osv.instead, says = NOT_AN_AUDIT[case]

    code, lines = audit(lock, service, set())

    assert code == 2
    [line] = lines
    assert line.startswith(f"dependency audit failed: {service} answered")
    assert says in line
    assert line.endswith(f"2 pinned packages of {lock} not checked")


@pytest.mark.case("SE-21")
def test_an_unreachable_service_says_in_one_line_that_the_audit_did_not_run(lock: Path) -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), Osv) as closed:
        nowhere = f"http://127.0.0.1:{closed.server_address[1]}/v1/querybatch"
    code, lines = audit(lock, nowhere, set())

    assert code == 0
    [line] = lines
    assert line.startswith(f"dependency audit DID NOT RUN: {nowhere} unreachable (")
    assert line.endswith(f"2 pinned packages of {lock} not checked")
