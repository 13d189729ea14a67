"""Fan-outs of requests share the process's threads, and their callers work too."""

from __future__ import annotations

import threading
import time

import pytest

from gitopsd.cluster import run_concurrently


def helping_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("requests-")}


def test_answers_come_in_the_items_order_with_at_most_workers_at_once() -> None:
    running, most, lock = 0, 0, threading.Lock()

    def call(item: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.01)  # holds its slot: what is measured is overlap, not speed
        with lock:
            running -= 1
        return item * 2

    assert run_concurrently(list(range(40)), call, 4) == [n * 2 for n in range(40)]
    assert 1 < most <= 4


def test_many_fan_outs_at_once_share_the_threads_one_of_them_asks_for() -> None:
    before = len(helping_threads())  # earlier fan-outs of this process may have asked more

    def fan_out() -> None:
        run_concurrently([0.002] * 30, time.sleep, 8)

    callers = [threading.Thread(target=fan_out) for _ in range(10)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()

    assert len(helping_threads()) == max(before, 7)  # not 10 x 7


def test_a_fan_out_inside_a_fan_out_finishes_with_every_thread_busy() -> None:
    def inner(item: int) -> int:
        return sum(run_concurrently(list(range(5)), lambda n: n + item, 16))

    assert run_concurrently(list(range(64)), inner, 16) == [10 + 5 * n for n in range(64)]


def test_the_first_failure_in_order_is_raised_once_every_item_ran() -> None:
    ran: list[int] = []

    def call(item: int) -> int:
        ran.append(item)
        if item in (3, 7):
            raise ValueError(f"item {item}")
        return item

    with pytest.raises(ValueError, match="item 3"):
        run_concurrently(list(range(10)), call, 4)
    assert sorted(ran) == list(range(10))
