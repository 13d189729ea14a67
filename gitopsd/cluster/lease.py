"""Leader election on a coordination.k8s.io/v1 Lease, with fencing.

The holder renews every retry period. It counts as leader only while its last successful
renewal is younger than the renew deadline, measured on the monotonic clock, so a process
that was stopped or partitioned knows it lost the lease before its next write. A candidate
takes the lease over only when its record has not changed for the lease duration, as seen
on its own monotonic clock: the timestamps in the record come from another machine's clock
and are never compared with ours (client-go does the same).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gitopsd.cluster import Cluster
from gitopsd.cluster.api import ApiError
from gitopsd.errors import ClusterError
from gitopsd.objects import Body
from gitopsd.resources import LEASES

log = logging.getLogger("gitopsd.lease")
MICRO = "%Y-%m-%dT%H:%M:%S.%fZ"


def now_micro() -> str:
    """The time now as a Lease's MicroTime."""
    return datetime.now(UTC).strftime(MICRO)


@dataclass
class LeaderElector:
    cluster: Cluster
    namespace: str
    name: str
    identity: str
    lease_seconds: float
    renew_deadline_seconds: float
    retry_seconds: float
    on_change: Callable[[bool], None] = lambda leading: None
    stopping: threading.Event = field(default_factory=threading.Event)
    _renewed_at: float | None = None  # monotonic start of the last successful renewal
    _known: threading.Event = field(default_factory=threading.Event)
    _leading: bool = False
    _observed: tuple[object, ...] = ()  # the other holder's record as last seen
    _observed_at: float = 0.0  # monotonic time that record was first seen

    def is_leader(self) -> bool:
        renewed = self._renewed_at
        return renewed is not None and time.monotonic() - renewed < self.renew_deadline_seconds

    @property
    def state_known(self) -> bool:
        """True once the first attempt told us whether we lead or stand by."""
        return self._known.is_set()

    def start(self) -> None:
        threading.Thread(target=self._run, name="leader-election", daemon=True).start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            attempt_started = time.monotonic()
            try:
                if self._try_acquire_or_renew():
                    self._renewed_at = attempt_started
            except ClusterError as error:
                log.warning("lease %s/%s: %s", self.namespace, self.name, error)
            self._known.set()
            self._notice_change()
            self.stopping.wait(self.retry_seconds)

    def _notice_change(self) -> None:
        leading = self.is_leader()
        if leading != self._leading:
            self._leading = leading
            log.info("leadership %s", "acquired" if leading else "lost")
            self.on_change(leading)

    def _try_acquire_or_renew(self) -> bool:
        lease = self.cluster.get(LEASES, self.namespace, self.name)
        if lease is None:
            return self._create()
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        if holder not in (None, "", self.identity) and not self._expired(spec):
            return False
        return self._update(lease, taking_over=holder != self.identity)

    def _expired(self, spec: dict[str, object]) -> bool:
        """True once another holder's record stood still for its whole lease duration."""
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        now = time.monotonic()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        duration = spec.get("leaseDurationSeconds")
        seconds = duration if isinstance(duration, int) and duration > 0 else self.lease_seconds
        return now > self._observed_at + seconds

    def _create(self) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": self._spec(acquired=True, transitions=0),
        }
        return self._write("POST", LEASES.path(self.namespace), body)

    def _update(self, lease: Body, taking_over: bool) -> bool:
        spec = lease.get("spec") or {}
        transitions = int(spec.get("leaseTransitions") or 0) + (1 if taking_over else 0)
        new_spec = self._spec(acquired=taking_over, transitions=transitions)
        if not taking_over:
            new_spec["acquireTime"] = spec.get("acquireTime", new_spec["renewTime"])
        body = {**lease, "spec": new_spec}  # carries resourceVersion: a lost race is a 409
        return self._write("PUT", LEASES.path(self.namespace, self.name), body)

    def _spec(self, acquired: bool, transitions: int) -> dict[str, object]:
        now = now_micro()
        spec: dict[str, object] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_seconds),
            "renewTime": now,
            "leaseTransitions": transitions,
        }
        if acquired:
            spec["acquireTime"] = now
        return spec

    def _write(self, method: str, path: str, body: Body) -> bool:
        try:
            self.cluster.api.request(method, path, (), body)
        except ApiError as error:
            if error.status == 409:
                return False  # someone else wrote first
            raise
        return True

    def release(self) -> None:
        """Gives the lease up at shutdown, so a standby takes over at once."""
        self.stopping.set()
        if not self.is_leader():
            return
        self._renewed_at = None
        lease = self.cluster.get(LEASES, self.namespace, self.name)
        if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
            spec = {**lease["spec"], "holderIdentity": "", "leaseDurationSeconds": 1}
            self._write("PUT", LEASES.path(self.namespace, self.name), {**lease, "spec": spec})
