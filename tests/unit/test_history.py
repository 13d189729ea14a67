"""A source's sync history, pure: which syncs become entries, its bounds, its times, its
size, and how a GitSync's status keeps the entries of the sources before."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from gitopsd.changes import Action, Outcome
from gitopsd.cli import documents, render
from gitopsd.gitsync import history
from gitopsd.gitsync.status import SourceReport, status_of
from gitopsd.objects import ObjectKey
from tests.harness import contract

A, B = "a" * 40, "b" * 40
T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def config_map(name: str, action: Action) -> Outcome:
    return Outcome(ObjectKey("", "ConfigMap", "shop", name), action, version="v1")


def success(revision: str, at: float, *outcomes: Outcome) -> history.Document:
    return history.entry(revision, at, 1.5, outcomes)


def failure(revision: str, at: float, reason: str = "Syntax") -> history.Document:
    return history.entry(revision, at, 0.25, failure=(reason, "a.yaml:2:1: did not find"))


def test_an_entry_counts_by_action_and_names_the_objects_created_configured_and_pruned() -> None:
    found = success(
        A,
        T0,
        config_map("new", Action.CREATED),
        config_map("same", Action.UNCHANGED),
        config_map("old", Action.PRUNED),
        config_map("changed", Action.CONFIGURED),
        config_map("immutable", Action.REPLACED),
    )

    assert found == {
        "revision": A,
        "startedAt": "2027-01-15T08:00:00Z",
        "durationSeconds": 1.5,
        "outcome": "Succeeded",
        "counts": {"created": 1, "configured": 1, "pruned": 1, "replaced": 1},
        "objects": {
            "created": [
                {
                    "group": "",
                    "version": "v1",
                    "kind": "ConfigMap",
                    "namespace": "shop",
                    "name": "new",
                }
            ],
            "configured": [
                {
                    "group": "",
                    "version": "v1",
                    "kind": "ConfigMap",
                    "namespace": "shop",
                    "name": "changed",
                }
            ],
            "pruned": [
                {
                    "group": "",
                    "version": "v1",
                    "kind": "ConfigMap",
                    "namespace": "shop",
                    "name": "old",
                }
            ],
        },
    }


def test_a_failed_entry_carries_its_reason_and_a_short_message() -> None:
    found = history.entry(A, T0, 0.1234567, failure=("Syntax", "x" * 5000))

    assert (found["outcome"], found["reason"], found["durationSeconds"]) == (
        "Failed",
        "Syntax",
        0.123,
    )
    assert len(found["message"]) == history.MAX_MESSAGE and found["message"].endswith("...")
    assert found["counts"] == {} and found["objects"] == {
        "created": [],
        "configured": [],
        "pruned": [],
    }


def test_the_start_is_rfc_3339_in_utc() -> None:
    stamp = success(A, T0 + 0.9).get("startedAt")

    assert stamp == "2027-01-15T08:00:00Z"
    assert datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() == T0


def test_syncs_that_did_something_are_recorded_newest_first() -> None:
    first = success(A, T0, config_map("a", Action.CREATED))
    second = success(B, T0 + 60)  # a new revision, though it changed nothing
    healed = success(B, T0 + 120, config_map("a", Action.CONFIGURED))
    broken = failure(B, T0 + 180)
    recovered = success(B, T0 + 240)

    found: list[history.Document] = []
    for new in (first, second, healed, broken, recovered):
        found = history.recorded(found, new)

    assert found == [recovered, broken, healed, second, first]


def test_an_idle_source_records_nothing_and_a_repeated_failure_once() -> None:
    start = history.recorded([], success(A, T0, config_map("a", Action.CREATED)))

    idle = history.recorded(start, success(A, T0 + 60))  # a no-op at the newest's revision
    broken = history.recorded(idle, failure(A, T0 + 120))
    again = history.recorded(broken, failure(A, T0 + 180))  # the same revision and reason
    other = history.recorded(again, failure(A, T0 + 240, reason="Unreachable"))

    assert idle is start
    assert again is broken
    assert [e.get("reason") for e in other] == ["Unreachable", "Syntax", None]


def test_the_history_keeps_the_last_ten_syncs_and_each_names_ten_objects_of_an_action() -> None:
    found: list[history.Document] = []
    many = [config_map(f"cm-{i:02}", Action.CREATED) for i in range(25)]
    for i in range(15):
        found = history.recorded(found, success(f"{i:040x}", T0 + i, *many))

    assert len(found) == history.MAX_SYNCS
    assert [e["revision"] for e in found] == [f"{i:040x}" for i in range(14, 4, -1)]
    created = found[0]["objects"]["created"]
    assert [o["name"] for o in created] == [f"cm-{i:02}" for i in range(10)]
    assert found[0]["counts"] == {"created": 25}


def test_the_history_stays_small_whatever_the_syncs_did() -> None:
    """The worst case: ten failed-then-huge syncs, names as long as Kubernetes allows."""
    long = "n" * 253
    outcomes = [
        Outcome(ObjectKey("example.com", "Widget", "x" * 63, f"{long[:-3]}{i:03}"), action, "v1")
        for action in history.NAMED
        for i in range(1000)
    ]
    found: list[history.Document] = []
    for i in range(20):
        found = history.recorded(found, history.entry(f"{i:040x}", T0 + i, 3.0, outcomes))

    size = len(json.dumps(found))
    assert size < 128 * 1024, size  # 10 syncs x 3 actions x 10 objects, at most
    usual = [config_map(f"web-{i}", action) for action in history.NAMED for i in range(20)]
    found = []
    for i in range(20):
        found = history.recorded(found, history.entry(f"{i:040x}", T0 + i, 3.0, usual))
    assert len(json.dumps(found)) < 32 * 1024


def test_a_gitsyncs_status_keeps_the_entries_of_the_sources_before_its_own() -> None:
    before = history.recorded([], success(A, T0, config_map("a", Action.CREATED)))
    previous = status_of(1, SourceReport(history=before), None)
    assert previous["history"] == history.in_status(before)  # counted, not named
    assert "objects" not in previous["history"][0] and "objects" in before[0]

    # a restarted daemon applies the revision again, changing nothing: nothing to tell
    restart = SourceReport(history=[success(A, T0 + 600)])
    assert status_of(1, restart, previous)["history"] == previous["history"]
    # then a new revision: in front of those before
    newer = history.recorded(
        restart.history, success(B, T0 + 700, config_map("a", Action.CONFIGURED))
    )
    found = status_of(1, SourceReport(history=newer), previous)["history"]
    assert [e["revision"] for e in found] == [B, A]
    assert found[1] == history.in_status(before)[0]
    # a source with no history yet (a new spec) keeps the status's
    assert status_of(2, SourceReport(), {"history": found})["history"] == found


def test_a_success_after_a_failure_is_news() -> None:
    broken = history.recorded([], failure(A, T0))

    assert history.failing(broken) and not history.failing([])
    assert len(history.recorded(broken, success(A, T0 + 60))) == 2


def a_history() -> list[history.Document]:
    found = history.recorded([], success(A, T0, config_map("a", Action.CREATED)))
    found = history.recorded(found, success(B, T0 + 60, config_map("a", Action.PRUNED)))
    return history.recorded(found, failure(B, T0 + 120))


def test_the_sync_history_document_is_of_the_contract() -> None:
    source = documents.source_reference("Source", "", "app")

    found = contract.checked(documents.sync_history(source, a_history()), "SyncHistory")

    assert [e["outcome"] for e in found["history"]] == ["Failed", "Succeeded", "Succeeded"]
    assert found["history"][1]["objects"]["pruned"][0]["name"] == "a"


def test_the_schema_refuses_a_failure_without_its_reason() -> None:
    source = documents.source_reference("Source", "", "app")
    [broken] = history.recorded([], failure(A, T0))
    del broken["reason"]

    with pytest.raises(AssertionError, match="reason"):
        contract.checked(documents.sync_history(source, [broken]), "SyncHistory")


def test_the_table_shows_each_sync_with_its_age_counts_and_why_it_failed() -> None:
    table = render.history_table(a_history(), now=T0 + 300).splitlines()

    assert table[0].split() == [
        "REVISION",
        "STARTED",
        "DURATION",
        "OUTCOME",
        "CREATED",
        "CONFIGURED",
        "PRUNED",
        "MESSAGE",
    ]
    assert table[1].split()[:8] == [B[:12], "3m", "0.2s", "Failed", "0", "0", "0", "Syntax:"]
    assert table[2].split() == [B[:12], "4m", "1.5s", "Succeeded", "0", "0", "1"]
    assert table[3].split() == [A[:12], "5m", "1.5s", "Succeeded", "1", "0", "0"]
