"""TA-01: the health rules' evaluator serves namespaces in turn, each within its share of
the evaluator's time (`Turns`), with real threads waiting for it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from gitopsd.sandbox.turns import ADMIN, Closed, Turns
from tests.harness.waiting import wait_for


class Clock:
    """Real time, moved on at will: what an evaluation took is set by the test."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.ahead


def waiting(turns: Turns, count: int) -> Callable[[], bool]:
    return lambda: len(turns._waiting) == count


def start(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def order_served(turns: Turns, holder: str, asking: list[str]) -> list[str]:
    """The namespaces in the order they are served, each of `asking` waiting (in that
    order) while `holder` has the evaluator."""
    served: list[str] = []

    def evaluate(namespace: str) -> Callable[[], None]:
        def run() -> None:
            with turns.turn(namespace):
                served.append(namespace)

        return run

    with turns.turn(holder):
        threads = []
        for count, namespace in enumerate(asking, 1):
            threads.append(start(evaluate(namespace)))
            wait_for(waiting(turns, count), f"{count} waiting for the evaluator", 10)
    for thread in threads:
        thread.join(10)
    return served


def test_ta01_a_free_evaluator_goes_to_the_namespace_served_least_recently() -> None:
    """A namespace whose reconcile asks rule after rule does not keep the evaluator: the
    other namespace's one rule runs next, ahead of the three asked before it."""
    served = order_served(Turns(60), "attacker", ["attacker", "attacker", "attacker", "victim"])
    assert served == ["victim", "attacker", "attacker", "attacker"]


def test_ta01_a_namespace_past_its_share_waits_until_it_is_earned_back_and_no_other_does() -> None:
    clock = Clock()
    turns = Turns(6, clock)  # 0.1 s earned back a second
    with turns.turn("attacker"):
        clock.ahead += 7  # one rule took 7 s of the 6 it had
    assert round(turns.left("attacker"), 3) == -1
    served = threading.Event()

    def evaluate_again() -> None:
        with turns.turn("attacker"):
            served.set()

    waiter = start(evaluate_again)
    wait_for(waiting(turns, 1), "the attacker waiting for its share", 10)
    with turns.turn("victim"):  # the evaluator is free, and the victim has its share
        pass
    assert not served.is_set() and waiting(turns, 1)()

    clock.ahead += 10.1  # 1.01 s earned back: above zero again
    with turns.turn(ADMIN):  # wakes the waiters, as any evaluation's end does
        pass
    waiter.join(10)
    assert served.is_set()


def test_the_admins_rules_take_turns_but_spend_no_share() -> None:
    clock = Clock()
    turns = Turns(1, clock)
    for _ in range(3):
        with turns.turn(ADMIN):
            clock.ahead += 30
    assert turns.left(ADMIN) == float("inf")
    assert turns.left("tenant") == 1


def test_a_share_is_whole_again_after_a_minute_unused() -> None:
    clock = Clock()
    turns = Turns(10, clock)
    with turns.turn("tenant"):
        clock.ahead += 4
    assert round(turns.left("tenant"), 3) == 6
    clock.ahead += 60
    assert turns.left("tenant") == 10  # never more than the share
    with turns.turn("other"):
        pass
    assert "tenant" not in turns._spent  # nothing kept of a namespace with its share whole


def test_a_stopping_daemon_ends_the_waits_for_a_turn() -> None:
    """A share may take a minute to come back, longer than the shutdown's grace period."""
    clock = Clock()
    turns = Turns(6, clock)
    with turns.turn("attacker"):
        clock.ahead += 60  # ten minutes before it may go again
    ended: list[BaseException] = []

    def evaluate_again() -> None:
        try:
            with turns.turn("attacker"):
                pass
        except Closed as error:
            ended.append(error)

    waiter = start(evaluate_again)
    wait_for(waiting(turns, 1), "the attacker waiting for its share", 10)
    turns.close()
    waiter.join(10)
    assert len(ended) == 1 and waiting(turns, 0)()
    with pytest.raises(Closed), turns.turn("victim"):
        pass


def test_ta01_namespaces_of_many_waiters_alternate() -> None:
    """A namespace whose health waits ask rules concurrently (sync waves, hooks) has many
    waiters at once: each turn it is given puts it behind the others again."""
    served = order_served(Turns(60), "holder", ["a", "a", "a", "b", "b", "b"])
    assert served == ["a", "b", "a", "b", "a", "b"]
