"""Structured logs: JSON lines for machines, a readable line on a terminal.

Records carry the source, revision and object key when known. Messages are built from
errors that were scrubbed of Secret values and credentials where they were raised. Python
warnings (libraries') are logged too, so every line is JSON.
"""

from __future__ import annotations

import json
import logging
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
    def format(self, record: logging.LogRecord) -> str:
        context = " ".join(f"{n}={getattr(record, n)}" for n in CONTEXT if hasattr(record, n))
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        return f"{stamp} {record.levelname:<7} {record.getMessage()}  {context}".rstrip()


def configure(stream: TextIO, level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(stream)
    handler.setFormatter(Readable() if stream.isatty() else JsonLines())
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
