"""A revision's listing as `git ls-tree -r -t -l -z` writes it, and what it covers."""

from __future__ import annotations

import stat

from gitopsd.source.listing import Entry, children, covers
from gitopsd.source.listing import _parsed as parsed

BLOB = "587be6b4c3f93f93c489c0111bba5596147a26cb"


def test_records_become_entries_with_their_mode_id_and_size() -> None:
    assert parsed(f"100644 blob {BLOB}      42\tapp/a b.yaml".encode()) == (
        "app/a b.yaml",
        Entry(0o100644, BLOB, 42),
    )
    path, entry = parsed(f"040000 tree {BLOB}       -\tapp".encode())
    assert path == "app" and entry is not None and stat.S_ISDIR(entry.mode)
    assert parsed(f"120000 blob {BLOB}       4\tapp/link".encode())[1] == Entry(0o120000, BLOB, 4)
    assert parsed(f"160000 commit {BLOB}       -\tsub".encode()) == ("sub", None)


def test_a_listing_covers_its_paths_and_all_below_them_only() -> None:
    assert covers(["app"], "app") and covers(["app"], "app/x/y.yaml")
    assert not covers(["app"], "apps") and not covers(["app/x"], "app")
    assert covers(["."], "anything/at/all")


def test_children_are_named_per_directory_sorted() -> None:
    directory = Entry(stat.S_IFDIR | 0o755, BLOB, 0)
    file = Entry(0o100644, BLOB, 1)
    entries = {"app": directory, "app/b.yaml": file, "app/a.yaml": file, "app/sub": directory}
    assert children(entries) == {".": ["app"], "app": ["a.yaml", "b.yaml", "sub"], "app/sub": []}
