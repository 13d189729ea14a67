"""What one source read of a commit serves the next, within a bound in bytes."""

from __future__ import annotations

from pathlib import Path

from gitopsd.source import Entry
from gitopsd.source.reads import ENTRY_BYTES, RecentReads

REPO = Path("/cache/repositories/one")


def test_contents_are_kept_by_repository_and_blob_id() -> None:
    reads = RecentReads(max_bytes=1000)
    reads.keep_contents(REPO, {"a1": b"x" * 10, "b2": b"y" * 20})

    assert reads.contents(REPO, ["a1", "c3", "b2"]) == {"a1": b"x" * 10, "b2": b"y" * 20}
    assert reads.contents(Path("/cache/repositories/other"), ["a1"]) == {}


def test_the_least_recently_used_go_first_once_past_the_bound() -> None:
    reads = RecentReads(max_bytes=160)
    reads.keep_contents(REPO, {"first": b"f" * 40, "second": b"s" * 40, "third": b"t" * 40})
    reads.contents(REPO, ["first"])  # used again: now the most recent

    reads.keep_contents(REPO, {"fourth": b"4" * 40, "fifth": b"5" * 40})

    kept = reads.contents(REPO, ["first", "second", "third", "fourth", "fifth"])
    assert set(kept) == {"first", "third", "fourth", "fifth"}


def test_a_read_larger_than_a_quarter_of_the_bound_is_not_kept() -> None:
    reads = RecentReads(max_bytes=400)
    reads.keep_contents(REPO, {"small": b"s" * 100, "large": b"l" * 101})

    assert set(reads.contents(REPO, ["small", "large"])) == {"small"}


def test_a_listing_is_kept_by_commit_paths_and_limit_and_handed_out_as_a_copy() -> None:
    reads = RecentReads(max_bytes=100 * ENTRY_BYTES)
    found = {"a.yaml": Entry(0o100644, "b1", 3)}
    reads.keep_listing(REPO, "c0ffee", (".",), 10, found)

    copy = reads.listing(REPO, "c0ffee", (".",), 10)
    assert copy == found
    assert copy is not None
    copy["b.yaml"] = Entry(0o100644, "b2", 4)
    assert reads.listing(REPO, "c0ffee", (".",), 10) == found
    assert reads.listing(REPO, "c0ffee", (".",), 9) is None  # another limit: listed again
    assert reads.listing(REPO, "c0ffee", ("apps",), 10) is None
    assert reads.listing(REPO, "decade", (".",), 10) is None
