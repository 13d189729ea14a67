"""Structured logs: JSON lines for machines, a readable line on a terminal.

Records carry the source, revision and object key when known. Messages are built from
errors that were scrubbed of Secret values and credentials where they were raised. Python
warnings (libraries') are logged too, so every line is JSON.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Mapping, MutableMapping
from typing import Any, TextIO

CONTEXT = ("source", "revision", "object", "objects", "stage", "reason", "mode")


class ContextLog(logging.LoggerAdapter[logging.Logger]):
    """Adds fixed context (e.g. the source) to every record, merged with a call's own
    `extra` (the standard adapter drops the call's until Python 3.13)."""

    def __init__(self, logger: logging.Logger, context: Mapping[str, object]) -> None:
        super().__init__(logger, context)

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line |= {name: getattr(record, name) for name in CONTEXT if hasattr(record, name)}
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info).splitlines()[-1]
        return json.dumps(line, default=str)


class Readable(logging.Formatter):
    """One line a person reads; the level in colour when `color` (a terminal, no NO_COLOR)."""

    def __init__(self, color: bool = False) -> None:
        super().__init__()
        self.color = color

    def format(self, record: logging.LogRecord) -> str:
        context = " ".join(f"{n}={getattr(record, n)}" for n in CONTEXT if hasattr(record, n))
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        level = f"{record.levelname:<7}"
        if self.color and record.levelno in LEVEL_COLORS:
            level = f"{LEVEL_COLORS[record.levelno]}{level}{RESET}"
        return f"{stamp} {level} {record.getMessage()}  {context}".rstrip()


LEVEL_COLORS = {logging.WARNING: "\033[33m", logging.ERROR: "\033[31m", logging.DEBUG: "\033[2m"}
RESET = "\033[0m"


def configure(stream: TextIO, level: int = logging.INFO, form: str | None = None) -> None:
    """Logs to `stream`: `form` json or text; None: text on a terminal, else JSON lines."""
    terminal = stream.isatty()
    text = form == "text" or (form is None and terminal)
    color = terminal and "NO_COLOR" not in os.environ
    handler = logging.StreamHandler(stream)
    handler.setFormatter(Readable(color) if text else JsonLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.captureWarnings(True)  # else the warnings module prints plain text to stderr
    threading.excepthook = _log_thread_death  # and so would a thread dying of a bug
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.ERROR)


def _log_thread_death(death: threading.ExceptHookArgs) -> None:
    if death.exc_type is SystemExit:
        return
    name = death.thread.name if death.thread else "a thread"
    exc_info = (death.exc_type, death.exc_value or death.exc_type(), death.exc_traceback)
    logging.getLogger("gitopsd").error("%s died", name, exc_info=exc_info)


def log_every_threads_stack(*_: object) -> None:
    """SIGUSR1's handler: how a hung daemon says where, one JSON line per thread. Python
    runs it in the main thread between bytecodes, where other threads' frames are plain
    objects to read; faulthandler's dump walks them from inside the signal while they run,
    and once stalled the daemon in the middle of it."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        stack = "".join(traceback.format_stack(frame))
        logging.getLogger("gitopsd").warning("stack of thread %s:\n%s", names.get(ident), stack)
