"""Stand-ins for the controllers the test cluster lacks (it runs no controller manager):
each writes an object's status through the status subresource with kubectl, as the owning
controller would, once the object exists. The bodies are what kube-controller-manager
writes; the API server checks them (a finished Job needs its start and completion times
and the SuccessCriteriaMet or FailureTarget condition first)."""

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


def condition(kind: str, status: str, reason: str, message: str) -> Status:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": NOW,
    }


AVAILABLE = "Deployment has minimum availability."
UNAVAILABLE = "Deployment does not have minimum availability."
PROGRESSED = 'ReplicaSet "web-5d9c" has successfully progressed.'
TIMED_OUT = 'ReplicaSet "web-5d9c" has timed out progressing.'


def generation(found: Status) -> int:
    return int(found["metadata"]["generation"])


def rolled_out(found: Status) -> Status:
    """A Deployment rolled out: every replica it wants updated, ready and available."""
    replicas = found["spec"].get("replicas", 1)
    return {
        "observedGeneration": generation(found),
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "conditions": [
            condition(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
            ),
            condition(
                "Progressing",
                "True",
                "NewReplicaSetAvailable",
                'ReplicaSet "web-5d9c" has successfully progressed.',
            ),
        ],
    }


def past_deadline(found: Status) -> Status:
    """A Deployment whose new pods never became ready within its progress deadline."""
    replicas = found["spec"].get("replicas", 1)
    return {
        "observedGeneration": generation(found),
        "replicas": replicas,
        "updatedReplicas": replicas,
        "unavailableReplicas": replicas,
        "conditions": [
            condition(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            ),
            condition(
                "Progressing",
                "False",
                "ProgressDeadlineExceeded",
                'ReplicaSet "web-5d9c" has timed out progressing.',
            ),
        ],
    }


def job_complete(found: Status) -> Status:
    done = "Reached expected number of succeeded pods"
    return {
        "startTime": NOW,
        "completionTime": NOW,
        "succeeded": 1,
        "conditions": [
            condition("SuccessCriteriaMet", "True", "CompletionsReached", done),
            condition("Complete", "True", "CompletionsReached", done),
        ],
    }


def job_failed(found: Status) -> Status:
    limit = "Job has reached the specified backoff limit"
    return {
        "startTime": NOW,
        "failed": 1,
        "conditions": [
            condition("FailureTarget", "True", "BackoffLimitExceeded", limit),
            condition("Failed", "True", "BackoffLimitExceeded", limit),
        ],
    }


def ready(state: str, reason: str, message: str) -> Callable[[Status], Status]:
    """A custom resource's controller reporting its Ready condition."""
    return lambda found: {
        "observedGeneration": generation(found),
        "conditions": [condition("Ready", state, reason, message)],
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
