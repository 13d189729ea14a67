"""Requests in parallel, on a bounded pool of threads: the API server answers many small
requests at once far sooner than one after another."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def run_concurrently(items: list[T], call: Callable[[T], R], workers: int) -> list[R]:
    if len(items) <= 1:
        return [call(item) for item in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(call, items))
