"""The harness's reading of the API server's audit log fails, loudly, when the log may not
hold the whole window read: a claim of "no write" must never pass because the write was
rotated out of the file. Files written in tmp_path as the API server's rotation leaves
them (audit.log, and audit-TIMESTAMP.log beside it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.harness.audit import RotatedLog, events

BEGAN = 1_000.0
"""When the API server started writing the log, in each test."""


def event(received: float) -> str:
    stamp = f"1970-01-01T00:{int(received) // 60:02d}:{int(received) % 60:02d}Z"
    return json.dumps({"stage": "ResponseComplete", "requestReceivedTimestamp": stamp}) + "\n"


def written(path: Path, *received: float, mtime: float | None = None) -> Path:
    path.write_text("".join(event(stamp) for stamp in received))
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def test_a_log_never_rotated_is_read_whole(tmp_path: Path) -> None:
    log = written(tmp_path / "audit.log", BEGAN, 1_500.0, 2_000.0)

    assert len(events(log, since=1_200.0, began=BEGAN)) == 3


def test_a_rotation_before_the_window_is_no_loss(tmp_path: Path) -> None:
    written(tmp_path / "audit-1970-01-01T00-20-00.000.log", BEGAN, 1_100.0, mtime=1_100.0)
    log = written(tmp_path / "audit.log", 1_150.0, 1_500.0)

    assert len(events(log, since=1_200.0, began=BEGAN)) == 2


def test_a_file_rotated_within_the_window_fails_the_read(tmp_path: Path) -> None:
    """The whole log asked for (`since` 0, the harness's default): only the rotated file
    tells that events are missing."""
    rotated = written(tmp_path / "audit-1970-01-01T00-25-00.000.log", BEGAN, mtime=1_300.0)
    log = written(tmp_path / "audit.log", 1_300.0, 1_500.0)

    with pytest.raises(RotatedLog, match=rf"rotated .* into {rotated.name}"):
        events(log, since=0.0, began=BEGAN)


def test_a_log_that_begins_after_the_window_did_fails_the_read(tmp_path: Path) -> None:
    """The rotated file is gone (removed, or never named as the server names it): the log's
    first event, later than the window's start, still tells."""
    log = written(tmp_path / "audit.log", 1_300.0, 1_500.0)

    with pytest.raises(RotatedLog, match=r"begins at .* rotated"):
        events(log, since=1_200.0, began=BEGAN)


def test_a_window_that_starts_before_the_server_did_needs_no_earlier_event(
    tmp_path: Path,
) -> None:
    log = written(tmp_path / "audit.log", 1_300.0, 1_500.0)

    assert len(events(log, since=500.0, began=1_250.0)) == 2


def test_the_policy_file_beside_the_log_is_no_rotated_log(tmp_path: Path) -> None:
    written(tmp_path / "audit-policy.json", mtime=1_300.0)
    log = written(tmp_path / "audit.log", BEGAN, 1_500.0)

    assert len(events(log, since=1_200.0, began=BEGAN)) == 2
