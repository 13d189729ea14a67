"""The fetch ledger's freshness: what a request to reconcile now, or a webhook's push,
makes stale (pure: the ledger keeps times and revisions, it runs no git)."""

from __future__ import annotations

import time
from pathlib import Path

from gitopsd.source import FetchLedger
from gitopsd.source.revision import Revision
from gitopsd.source.sharing import _Fetched

KEY = (Path("/cache/repository"), "main")
HOUR = 3600.0


def revision(sha: str) -> Revision:
    return Revision(sha, 0.0, "https://git.example/r.git")


def test_a_fetch_is_fresh_until_the_ref_is_forgotten() -> None:
    ledger = FetchLedger()
    ledger.record(KEY, _Fetched(revision("a"), time.monotonic()), by=None)  # type: ignore[arg-type]
    assert ledger.recent(KEY, time.monotonic() - HOUR) == revision("a")

    ledger.forget(KEY)

    assert ledger.recent(KEY, time.monotonic() - HOUR) is None


def test_a_fetch_in_flight_when_the_ref_is_forgotten_is_not_fresh_after_it() -> None:
    """It began before the push a webhook announced (or the commit a `gitopsd reconcile`
    was asked after): recorded once it ends, its commit must not answer the next poll."""
    ledger = FetchLedger()
    began = time.monotonic()
    ledger.forget(KEY)  # while that fetch runs
    ledger.record(KEY, _Fetched(revision("before-the-push"), began), by=None)  # type: ignore[arg-type]

    assert ledger.recent(KEY, time.monotonic() - HOUR) is None
    after = time.monotonic()
    ledger.record(KEY, _Fetched(revision("with-the-push"), after), by=None)  # type: ignore[arg-type]
    assert ledger.recent(KEY, time.monotonic() - HOUR) == revision("with-the-push")
