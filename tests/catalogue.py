"""The reliability catalogue (bad input BI, faults FA, load LD, security SE): each case,
and where gitopsd decided otherwise than the catalogue asks, what and why. A test names the
cases it proves with a marker, `@pytest.mark.case("FA-05")` (on a test, or on one of its
parameters), or with a parameter id that starts with the case's id; a comment, a string or
a docstring counts for nothing. `python -m tests.catalogue` collects the suite as pytest
does and writes the coverage table of docs/reliability.md from those markers, and
tests/unit/test_catalogue.py fails when that table is not what the tests say."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reliability.md"
CASE_ID = re.compile(r"(?:BI|FA|LD|SE)-\d{2}")
NAMED = re.compile(r"(?i)(?<![a-z0-9])(bi|fa|ld|se)-?(\d{2})(?![a-z0-9])")
"""An id in a test's name, which people read as a claim: the test must carry its marker."""
BEGIN, END = "<!-- catalogue: begin (python -m tests.catalogue) -->", "<!-- catalogue: end -->"


@dataclass(frozen=True)
class Case:
    case: str
    decision: str = ""
    """Where gitopsd deliberately departs from the catalogue, what it does instead."""
    measured: str = ""
    """The benchmark module (tests/bench/) that measures a load case: a figure, no assertion."""
    untested: str = ""
    """Why no test proves the case."""


CASES: dict[str, Case] = {
    "BI-01": Case("malformed YAML in one file of many: nothing applied"),
    "BI-02": Case("duplicate mapping keys, refused with both lines"),
    "BI-03": Case("the same object twice in a revision, both files named"),
    "BI-04": Case("a kind or apiVersion the cluster does not serve"),
    "BI-05": Case("custom resources whose CRD comes in the same commit"),
    "BI-06": Case("custom resources whose CRD is missing: retried, not pruned"),
    "BI-07": Case("huge inputs (files, totals, document counts) refused before parsing"),
    "BI-08": Case("alias bombs refused by an expansion budget"),
    "BI-09": Case("deep nesting refused without a crash"),
    "BI-10": Case("binary files and NUL bytes"),
    "BI-11": Case("encodings other than UTF-8"),
    "BI-12": Case("symlinks out of the checkout, loops and chains"),
    "BI-13": Case("include cycles and symlink loops (kustomize bases, directory links)"),
    "BI-14": Case("invalid names and values, refused by the server's dry-run"),
    "BI-15": Case("unknown fields, refused by strict field validation"),
    "BI-16": Case("odd multi-document streams (empty, null, `List`)"),
    "BI-17": Case("language-specific YAML tags: nothing executes"),
    "BI-18": Case("a Secret's data not base64: the key named, never the value"),
    "BI-19": Case("manifests that spoof the ownership labels"),
    "BI-20": Case("invalid daemon configuration values: refused at load, one bad source set aside"),
    "BI-21": Case("catastrophic user expressions (ignore rules, health rules): bounded evaluation"),
    "BI-22": Case("YAML 1.1 coercions, and the server's refusal of a coerced type with its field"),
    "FA-01": Case(
        "the API server down when the daemon starts (alive, not ready, backing off, then "
        "converging), and restarted under it"
    ),
    "FA-02": Case(
        "the API server killed mid-apply with prune on: nothing pruned, no ghost in the "
        "record, the next sync converges"
    ),
    "FA-03": Case(
        "the API server hung (SIGSTOP) mid-apply: requests time out, nothing more is sent, "
        "nothing pruned; watches cut or answered with garbage"
    ),
    "FA-04": Case("a slow API server: a reconcile stops at its timeout"),
    "FA-05": Case("etcd stopped under a running API server: writes fail, nothing pruned"),
    "FA-06": Case("etcd out of space: writes refused, nothing pruned, no retry storm"),
    "FA-07": Case(
        "a server-side apply conflict with another field manager",
        (
            "conflicts are forced by default, as Argo CD and Flux do: git's fields are taken "
            "over and each loss reported; --no-force-conflicts reports the conflict instead"
        ),
    ),
    "FA-08": Case(
        "a resourceVersion conflict on the ApplySet parent",
        (
            "no retry on a resourceVersion conflict: the parent is written by server-side "
            "apply under its uid, so another's write meanwhile is no conflict"
        ),
    ),
    "FA-09": Case("throttling: Retry-After honoured (each try waits what was asked), bounded"),
    "FA-10": Case("transport failures and 5xx: retried, then one clear error"),
    "FA-11": Case("admission refuses one object's dry-run: nothing applied, nothing pruned"),
    "FA-12": Case(
        "admission refuses a delete: it stays recorded, the rest is pruned and said, retried "
        "next sync"
    ),
    "FA-13": Case(
        "a CRD deleted while its objects are recorded",
        (
            "the objects of a deleted CRD stay recorded and their prune is refused "
            "(discovery_incomplete), not dropped from the record: nothing proves them gone"
        ),
    ),
    "FA-14": Case("discovery partly broken: that group never pruned"),
    "FA-15": Case("git unreachable: nothing applied, nothing pruned, self-heal goes on"),
    "FA-16": Case("a hostile git server: endless answers, huge packs"),
    "FA-17": Case("force-pushes: amended, rewound, replaced histories"),
    "FA-18": Case(
        "an empty source, a deleted path or branch, a force-push to an empty tree: nothing pruned"
    ),
    "FA-19": Case("a corrupt local clone: discarded, never rendered from"),
    "FA-20": Case(
        "the daemon SIGKILLed mid-apply: nothing pruned then; on restart it converges, every "
        "object it created recorded"
    ),
    "FA-21": Case(
        "SIGTERM mid-apply: in-flight writes finish, what was applied is recorded, no prune"
    ),
    "FA-22": Case("the disk under cacheDir full: no render from partial files, nothing applied"),
    "FA-23": Case("a leader that lost its lease writes nothing (fencing)"),
    "FA-24": Case(
        "a validating webhook with failurePolicy Fail that nothing serves: nothing applied or"
        " pruned, exit 4 naming the object, recovers once it is gone"
    ),
    "FA-25": Case("an external edit between diff and apply"),
    "FA-26": Case("a health check that times out: no rollback, no prune of the object"),
    "FA-27": Case("a target namespace being deleted"),
    "LD-01": Case(
        "10,000 objects, first sync: duration, requests per object, peak RSS (make bench "
        "spreads them over ten namespaces)",
        measured="oneshot",
    ),
    "LD-02": Case("a no-op resync: no mutating request", measured="oneshot"),
    "LD-03": Case(
        "1,000 namespaces of 10 objects, one namespace denied",
        (
            "failures are not isolated by namespace: the Namespaces go first, then one "
            "namespace's refused objects stop the revision before any object is written, each "
            "named (a revision is applied whole or not at all, as a Flux Kustomization is)"
        ),
    ),
    "LD-04": Case("pruning 5,000 objects in one commit: the mass-prune guard"),
    "LD-05": Case(
        "objects at the size limits",
        (
            "an object over 3 MiB is refused when read, naming its file and line, before any "
            "request (not sent for the API server's 413)"
        ),
    ),
    "LD-06": Case("a commit every second: syncs coalesce, the final state is HEAD"),
    "LD-07": Case(
        "a day's soak with random faults",
        untested=(
            "a day does not fit in CI; each fault is injected by a test of its own at the "
            "moment it hurts most (FA-01 to FA-27), and make bench runs 10,000 objects"
        ),
    ),
    "SE-01": Case("Secret values masked in diff output"),
    "SE-02": Case("secrets redacted from errors, in every form"),
    "SE-03": Case("secrets and series in metrics (a deleted GitSync's go with it)"),
    "SE-04": Case("no secret in Events, status or the ApplySet parent"),
    "SE-05": Case("no credentials in logs or messages; a tenant cannot exfiltrate a Secret"),
    "SE-06": Case("no credential in a child's command line or environment"),
    "SE-07": Case("server-side dry-run results masked before any output"),
    "SE-08": Case("least privilege of the shipped RBAC"),
    "SE-09": Case("tenant confinement"),
    "SE-10": Case("the Deployment's pod hardening"),
    "SE-11": Case("path escapes in configuration, names and trees"),
    "SE-12": Case(
        "URL policy and SSRF: schemes, remote bases, chart repositories' archive URLs and redirects"
    ),
    "SE-13": Case("SSH host keys verified, never trusted on first use"),
    "SE-14": Case("commit and tag signature verification (OpenPGP, SSH), failing closed"),
    "SE-15": Case("no command injection, no exec plugins"),
    "SE-16": Case("ownership: foreign, copied or tampered claims never deleted"),
    "SE-17": Case(
        "protected objects never pruned (system namespaces, definitions, volumes, opted out)"
    ),
    "SE-18": Case(
        "SOPS-encrypted files decrypted with the source's keys or refused, never applied as "
        "is; a decrypted value never shown"
    ),
    "SE-19": Case("the metrics and health endpoints' exposure"),
    "SE-20": Case(
        "the webhook receiver: size, signatures (GitHub, GitLab, generic HMAC), malformed payloads"
    ),
    "SE-21": Case("supply chain: safe YAML loading, a locked and audited dependency set"),
}


LEADING_IDS = re.compile(r"(?:(?:BI|FA|LD|SE)-\d{2}[ ,]*)+")


@dataclass(frozen=True)
class Proofs:
    """What the collected tests claim."""

    files: dict[str, list[str]]
    """Each case a test is marked with, and the test files (under tests/) of those tests."""
    unmarked: list[str]
    """Tests whose name cites a case their markers do not: the name claims what nothing counts."""
    malformed: list[str]
    """Marker arguments that are no case id at all."""


def collect(paths: Iterable[Path] = (ROOT / "tests",)) -> Proofs:
    """The tests under `paths` as pytest collects them, in a child so that collecting
    imports nothing into the caller, and what they are marked to prove."""
    with tempfile.TemporaryDirectory() as scratch:
        found = Path(scratch) / "proofs.json"
        child = subprocess.run(
            [
                *(sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "tests.catalogue"),
                *("--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml")),
                f"--catalogue-to={found}",
                *map(str, paths),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if child.returncode != 0 or not found.exists():
            said = f"{child.stdout}{child.stderr}"[-4000:]
            raise RuntimeError(f"collecting the tests failed:\n{said}")
        claims = json.loads(found.read_text())
    files: dict[str, set[str]] = {}
    for claim in claims:
        for case_id in claim["cases"]:
            files.setdefault(case_id, set()).add(claim["file"])
    return Proofs(
        files={case_id: sorted(names) for case_id, names in files.items()},
        unmarked=[claim["test"] for claim in claims if claim["unmarked"]],
        malformed=[bad for claim in claims for bad in claim["malformed"]],
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--catalogue-to", help="write the cases each collected test proves here")


def pytest_collection_finish(session: pytest.Session) -> None:
    target = session.config.getoption("catalogue_to")
    if target:
        Path(target).write_text(json.dumps([claim(item) for item in session.items]))


def claim(item: pytest.Item) -> dict[str, object]:
    """The cases one collected test is marked with (or whose parameter id starts with)."""
    marked = [str(arg) for mark in item.iter_markers("case") for arg in mark.args]
    callspec = getattr(item, "callspec", None)
    leading = LEADING_IDS.match(callspec.id) if callspec else None
    cases = sorted({*marked, *(CASE_ID.findall(leading.group()) if leading else ())})
    cases = [case_id for case_id in cases if CASE_ID.fullmatch(case_id)]
    named = {
        f"{kind.upper()}-{number}"
        for kind, number in NAMED.findall(getattr(item, "originalname", item.name))
    }
    path = item.path.resolve()
    tests = ROOT / "tests"
    return {
        "test": item.nodeid,
        "file": str(path.relative_to(tests)) if path.is_relative_to(tests) else path.name,
        "cases": cases,
        "unmarked": bool(named - set(cases)),
        "malformed": [arg for arg in marked if not CASE_ID.fullmatch(arg)],
    }


def status(case: Case, files: list[str]) -> str:
    if files:
        return f"decided otherwise: {case.decision}" if case.decision else "covered"
    if case.measured:
        return "measured by make bench, not asserted by a test"
    if case.untested:
        return f"not tested: {case.untested}"
    return "not covered yet"


def table(proofs: Proofs) -> str:
    """The coverage table: every case, the tests marked to prove it, its status."""
    rows = ["| id | the case | tests | status |", "|---|---|---|---|"]
    for case_id, case in CASES.items():
        files = proofs.files.get(case_id, [])
        named = [*files, *([f"bench/{case.measured}.py"] if case.measured else [])]
        rows.append(f"| {case_id} | {case.case} | {', '.join(named)} | {status(case, files)} |")
    proven = [case_id for case_id in CASES if case_id in proofs.files]
    measured = [case_id for case_id in CASES if case_id not in proven and CASES[case_id].measured]
    untested = [case_id for case_id in CASES if case_id not in proven and case_id not in measured]
    summary = (
        f"{len(proven)} of {len(CASES)} cases are proven by tests marked with them; make "
        f"bench measures {len(measured)} more; {len(untested)} not tested, each says why."
    )
    return "\n".join([*rows, "", summary])


def with_table(page: str, proofs: Proofs) -> str:
    """`page` with the generated table between its markers."""
    start, end = page.index(BEGIN) + len(BEGIN), page.index(END)
    return f"{page[:start]}\n{table(proofs)}\n{page[end:]}"


if __name__ == "__main__":
    PAGE.write_text(with_table(PAGE.read_text(), collect()))
    sys.exit(0)
