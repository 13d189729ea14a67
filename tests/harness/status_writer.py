"""A stand-in for the controller of a custom resource no real controller serves: it writes
the object's status through the status subresource with kubectl, as that controller would.
Everything built in has its real controller in the test cluster (tests.harness.controllers);
this is only for kinds a test invents."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.harness.waiting import wait_for

NOW = "2026-11-25T08:00:00Z"
Status = dict[str, Any]


def ready(state: str, reason: str, message: str) -> Callable[[Status], Status]:
    """A custom resource's controller reporting its Ready condition."""
    return lambda found: {
        "observedGeneration": int(found["metadata"]["generation"]),
        "conditions": [
            {
                "type": "Ready",
                "status": state,
                "reason": reason,
                "message": message,
                "lastTransitionTime": NOW,
            }
        ],
    }


@dataclass(frozen=True)
class StatusWriter:
    """Writes status in one namespace with `kubectl` (the CLI harness's)."""

    kubectl: Callable[..., str]
    namespace: str

    def write(self, resource: str, name: str, status: Callable[[Status], Status]) -> None:
        """Once `resource/name` exists, writes the status `status(the object)` makes."""
        patch = json.dumps({"status": status(self.found(resource, name))})
        self.kubectl(
            "patch", resource, name, "-n", self.namespace,
            "--subresource=status", "--type=merge", "-p", patch,
        )  # fmt: skip

    def found(self, resource: str, name: str) -> Status:
        """The object, once it exists."""
        return wait_for(lambda: self._get(resource, name), f"{resource}/{name}", 120)

    def _get(self, resource: str, name: str) -> Status | None:
        found = self.kubectl(
            "get", resource, "-n", self.namespace, "--ignore-not-found", "-o", "json", name
        )
        return dict(json.loads(found)) if found.strip() else None


@contextmanager
def meanwhile(work: Callable[[], None]) -> Iterator[None]:
    """Runs `work` in a thread while the block runs (gitopsd's CLI needs the main thread for
    its signals); a failure of `work` fails the test once the block is done."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as error:
            failures.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield
    thread.join(timeout=150)
    if failures:
        raise failures[0]
