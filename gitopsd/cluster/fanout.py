"""Requests in parallel: the API server answers many small requests at once far sooner than
one after another.

The threads that help are the process's, shared by every fan-out, and the caller works
through its own items too. So a daemon running many syncs at once has as many helping
threads as one sync asks for (`workers` - 1), not that many per sync: its threads stay
bounded by its configuration, none is started or joined per call, and a fan-out never
waits for a free thread (nor blocks one inside another), since its caller always works.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def run_concurrently(items: list[T], call: Callable[[T], R], workers: int) -> list[R]:
    """`call` of each item, in the items' order, with at most `workers` at once; the first
    item's (in order) exception is raised once every item ran, as ThreadPoolExecutor.map's."""
    if len(items) <= 1 or workers <= 1:
        return [call(item) for item in items]
    batch = _Batch(items, call)
    _HELPERS.help(batch, min(workers, len(items)) - 1)
    batch.work()
    return batch.outcome()


class _Batch(Generic[T, R]):
    """One fan-out's items, taken one at a time by whichever thread is free."""

    def __init__(self, items: list[T], call: Callable[[T], R]) -> None:
        self.items, self.call = items, call
        self.results: list[R | None] = [None] * len(items)
        self.failures: dict[int, BaseException] = {}
        self.taken = 0
        self.unfinished = len(items)
        self.lock = threading.Lock()
        self.finished = threading.Event()

    def work(self) -> None:
        """Runs items until none is left to take."""
        while (index := self._take()) is not None:
            try:
                self.results[index] = self.call(self.items[index])
            except BaseException as error:  # raised in the caller's thread, by `outcome`
                self.failures[index] = error
            with self.lock:
                self.unfinished -= 1
                if not self.unfinished:
                    self.finished.set()

    def outcome(self) -> list[R]:
        self.finished.wait()
        if self.failures:
            raise self.failures[min(self.failures)]
        return self.results  # type: ignore[return-value]  # every item ran: no None left

    def _take(self) -> int | None:
        with self.lock:
            if self.taken == len(self.items):
                return None
            self.taken += 1
            return self.taken - 1


class _Helpers:
    """The process's helping threads: as many as the largest fan-out asked for, started
    when first needed, each taking the batches that ask for help in turn."""

    def __init__(self) -> None:
        self.asked: queue.SimpleQueue[_Batch[object, object]] = queue.SimpleQueue()
        self.threads = 0
        self.lock = threading.Lock()

    def help(self, batch: _Batch[T, R], helpers: int) -> None:
        with self.lock:
            while self.threads < helpers:
                self.threads += 1
                name = f"requests-{self.threads}"
                threading.Thread(target=self._serve, name=name, daemon=True).start()
        for _ in range(helpers):
            self.asked.put(batch)  # type: ignore[arg-type]  # work() needs no types

    def _serve(self) -> None:
        while True:
            self.asked.get().work()  # a batch already done is left at once


_HELPERS = _Helpers()
