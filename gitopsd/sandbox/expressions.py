"""The box the daemon's health rules run in: a worker process (`cel_worker`) with a memory
bound of its own, asked one expression at a time, and a deadline on each answer.

The CEL runtime has an iteration budget but no cost limit, and what one step builds is
unbounded: a hostile rule of 333 characters asks for 4 GiB in a fraction of a second, and
the kernel's OOM killer answers for the whole pod before any allocation fails. In the worker the
allocation fails at the bound instead (measured: the rule stops at 128 MiB in 0.1 s) and
the worker lives; an expression that does not answer by the deadline has the worker killed
and started again. Either way the expression is remembered as over its bound and not
evaluated again while it is unchanged, so a tenant's rule costs the others one evaluation,
not one per object and poll. The worker serves one expression at a time: its bound is then
all it can take from the pod. Whose expression it serves next, and how much of its time one
namespace may take, `Turns` decides.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gitopsd
from gitopsd.health.expressions import BoundExceeded
from gitopsd.quantities import format_size
from gitopsd.sandbox.turns import Closed, Turns
from gitopsd.sandbox_bounds import SANDBOX_SETTINGS, SandboxBounds

START_SECONDS = 30.0
"""How long the worker may take to start (86 ms on an idle machine): past it the rule
cannot be evaluated this time, which decides nothing about the rule."""
REMEMBERED = 1024
"""Expressions over a bound kept (each at most 1 KiB): as many as the compiled ones."""
_REPLY_BYTES = 64 * 1024


class ExpressionBox:
    """Evaluates expressions in the worker, under `bounds`, one namespace's at a time as
    `turns` decide; `evaluate` is an Evaluate."""

    def __init__(self, bounds: SandboxBounds, turns: Turns) -> None:
        self.bounds, self.turns = bounds, turns
        self.worker: subprocess.Popen[bytes] | None = None
        self.over: dict[str, str] = {}
        """Expressions stopped at a bound, with the message that said which."""

    def evaluate(self, namespace: str, text: str, variables: Mapping[str, Any]) -> tuple[bool, str]:
        self._refuse_if_over(text)  # without a turn: a refusal costs the evaluator nothing
        try:
            with self.turns.turn(namespace):
                self._refuse_if_over(text)  # found over its bound while this one waited
                return self._asked(text, variables)
        except Closed:
            return False, "not evaluated: the daemon is stopping"

    def _refuse_if_over(self, text: str) -> None:
        over = self.over.get(text)
        if over is not None:
            raise BoundExceeded(f"{over} (not evaluated again until it changes)")

    def _asked(self, text: str, variables: Mapping[str, Any]) -> tuple[bool, str]:
        try:
            return self._ask(text, variables)
        except BoundExceeded as error:
            self._remember(text, str(error))
            self._restarted()
            raise

    def _restarted(self) -> None:
        """A worker in place of one a bound stopped, started in the turn of the rule that
        stopped it: its start is charged to that rule's namespace, not to the next one."""
        if self.worker is None:
            try:
                self._started()
            except (OSError, ValueError, TimeoutError):
                self._stop()  # the next rule starts one

    def _ask(self, text: str, variables: Mapping[str, Any]) -> tuple[bool, str]:
        try:
            worker = self.worker or self._started()
        except (OSError, ValueError, TimeoutError) as error:
            self._stop()
            return False, f"the evaluator of health rules did not start: {error}"
        request = json.dumps({"expression": text, "variables": variables}) + "\n"
        try:
            _write(worker, request.encode())
            reply = self._reply(worker)
        except (OSError, ValueError):  # the worker died: only a bound kills it
            self._stop()
            raise BoundExceeded(f"stopped the evaluator, {self._memory_bound()}") from None
        if "over" in reply:
            raise BoundExceeded(f"needs more memory than {self._memory_bound()}")
        return bool(reply["holds"]), str(reply["why"])

    def _reply(self, worker: subprocess.Popen[bytes]) -> dict[str, Any]:
        """The worker's answer, or BoundExceeded once the deadline passes (the worker is
        killed: it may be spinning still)."""
        try:
            return _line_of(worker, self.bounds.expression_seconds)
        except TimeoutError:
            self._stop()
            raise BoundExceeded(
                f"took longer than {self.bounds.expression_seconds:g} s, the time bound "
                f"of health rules ({SANDBOX_SETTINGS['expression_seconds']})"
            ) from None

    def _started(self) -> subprocess.Popen[bytes]:
        """The worker, from this installation of gitopsd, with an environment of nothing
        else (no tenant input reaches it but through its requests)."""
        package_root = str(Path(gitopsd.__file__).resolve().parents[1])
        self.worker = subprocess.Popen(  # by absolute path, list arguments, no shell
            [sys.executable, "-s", "-m", "gitopsd.sandbox.cel_worker", self._memory()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={"PYTHONPATH": package_root},
            cwd="/",
        )
        _line_of(self.worker, START_SECONDS)  # {"ready": true}
        return self.worker

    def _stop(self) -> None:
        if self.worker is not None:
            self.worker.kill()
            self.worker.wait()
            for stream in (self.worker.stdin, self.worker.stdout):
                if stream is not None:
                    stream.close()
            self.worker = None

    def _remember(self, text: str, message: str) -> None:
        if len(self.over) >= REMEMBERED:
            self.over.pop(next(iter(self.over)))
        self.over[text] = message

    def _memory(self) -> str:
        return str(self.bounds.expression_memory_bytes)

    def _memory_bound(self) -> str:
        setting = SANDBOX_SETTINGS["expression_memory_bytes"]
        size = format_size(self.bounds.expression_memory_bytes)
        return f"{size}, the memory bound of health rules ({setting})"


def _line_of(worker: subprocess.Popen[bytes], seconds: float) -> dict[str, Any]:
    """The worker's next line, as JSON; TimeoutError when none comes within `seconds`,
    OSError when it closes its output."""
    assert worker.stdout is not None  # noqa: S101 - started with stdout=PIPE
    deadline = time.monotonic() + seconds
    received = b""
    while not received.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([worker.stdout], [], [], left)[0]:
            raise TimeoutError(f"no answer within {seconds:g} s")
        chunk = os.read(worker.stdout.fileno(), _REPLY_BYTES)
        if not chunk:
            raise OSError("the evaluator closed its output")
        received += chunk
    found: dict[str, Any] = json.loads(received)
    return found


def _write(worker: subprocess.Popen[bytes], request: bytes) -> None:
    assert worker.stdin is not None  # noqa: S101 - started with stdin=PIPE
    worker.stdin.write(request)
    worker.stdin.flush()
