"""Every line the daemon writes is JSON: its own records, library warnings, dying threads."""

from __future__ import annotations

import io
import json
import logging
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from gitopsd.daemon import logs


@pytest.fixture
def configured() -> Iterator[io.StringIO]:
    """The daemon's logging into a buffer; the process-wide settings restored after."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, threading.excepthook)
    stream = io.StringIO()
    logs.configure(stream)
    yield stream
    logging.captureWarnings(False)
    root.handlers[:], _, threading.excepthook = saved
    root.setLevel(saved[1])


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_library_warning_is_one_json_line(configured: io.StringIO) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("a library speaks", UserWarning, stacklevel=1)
    [line] = lines(configured)
    assert line["level"] == "warning" and line["logger"] == "py.warnings"
    assert "UserWarning: a library speaks" in line["message"]


def test_a_thread_dying_of_a_bug_is_one_json_line(configured: io.StringIO) -> None:
    def fail() -> None:
        raise RuntimeError("a bug")

    thread = threading.Thread(target=fail, name="worker-1")
    thread.start()
    thread.join()
    [line] = lines(configured)
    assert (line["level"], line["message"]) == ("error", "worker-1 died")
    assert line["error"] == "RuntimeError: a bug"
