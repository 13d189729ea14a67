"""The daemon's small parts: backoff, the work queue, coalesced runs, webhook signatures and
log lines."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from gitopsd import configfile
from gitopsd.backoff import Backoff
from gitopsd.configfile.clusters import HOME
from gitopsd.daemon import Daemon
from gitopsd.daemon.clock import Clock, Timers
from gitopsd.daemon.control import Control
from gitopsd.daemon.http import signature_valid, signed
from gitopsd.daemon.logs import ContextLog, JsonLines
from gitopsd.daemon.queue import Pool, Retries, WorkQueue
from gitopsd.daemon.registry import Registry
from gitopsd.daemon.reporter import changed_since
from gitopsd.gitsync.status import SourceReport
from gitopsd.health import Health, Status
from gitopsd.objects import ObjectKey
from tests.harness.controlplane import write_kubeconfig
from tests.harness.waiting import wait_for


@pytest.fixture
def timers() -> Iterator[Timers]:
    """Timers on a running clock of their own, stopped after the test."""
    clock = Clock()
    clock.start()
    yield clock.timers("test")
    clock.stop()


def test_backoff_doubles_with_jitter_up_to_its_cap_and_resets() -> None:
    backoff = Backoff(first_seconds=1.0, max_seconds=8.0)

    delays = [backoff.failed() for _ in range(6)]

    for attempt, delay in enumerate(delays):
        ceiling = min(2.0**attempt, 8.0)
        assert ceiling / 2 <= delay <= ceiling
    assert not backoff.ready()
    backoff.reset()
    assert backoff.ready() and backoff.failures == 0


def test_the_queue_hands_out_each_key_once_however_often_it_was_added() -> None:
    queue = WorkQueue()
    web, api = ObjectKey("apps", "Deployment", "n", "web"), ObjectKey("", "Service", "n", "api")

    for key in (web, api, web, web):
        queue.add(key)

    assert len(queue) == 2
    assert queue.take(timeout_seconds=0) == {web, api}
    assert queue.take(timeout_seconds=0) == set()


def test_a_wait_for_keys_queued_ends_once_they_are_and_its_condition_holds() -> None:
    """A key queued before the write it waits for (the settle after a poll) does not end the
    wait: the condition, asked again at each key queued, must hold too."""
    queue = WorkQueue()
    web = ObjectKey("apps", "Deployment", "n", "web")
    queue.add(web)  # queued before the write, by the initial list
    written_back = threading.Event()

    assert not queue.wait_for({web}, 0.05, written_back.is_set)

    def event_of_the_write() -> None:
        written_back.set()
        queue.add(web)

    threading.Timer(0.05, event_of_the_write).start()
    assert queue.wait_for({web}, 30, written_back.is_set)
    assert queue.take(timeout_seconds=0) == {web}


def test_a_key_that_failed_is_handed_on_after_its_backoff_or_now_for_its_namespace(
    timers: Timers,
) -> None:
    again: list[ObjectKey] = []
    retries = Retries(timers, again=again.append)
    fast, waiting, other = (ObjectKey("gitopsd.io", "GitSync", ns, "app") for ns in "abc")

    assert retries.failed(fast) <= 1.0
    wait_for(lambda: again == [fast], "the key, once its first backoff ended")
    for _ in range(10):  # minutes, after ten in a row
        retries.failed(waiting), retries.failed(other)
    retries.now("b")  # a GitSync of namespace b went: b's wait no longer
    wait_for(lambda: again == [fast, waiting], "b's key, at once")
    retries.succeeded(other)
    assert not timers.clock.scheduler.get_job(f"{timers.owner}/{other}")


@pytest.mark.case("SE-20")
def test_se20_requests_during_a_run_fold_into_one_more_run(timers: Timers) -> None:
    started, finish = threading.Semaphore(0), threading.Event()
    runs: list[str] = []

    def work() -> None:
        runs.append("poll")
        started.release()
        finish.wait(10)

    poll = Pool(4, "requests", 60, 16, timers).coalesced(work, "poll of app")
    poll()
    assert started.acquire(timeout=10), "the first run never started"
    for _ in range(200):  # replays while the first run is in flight, threads to spare
        poll()
    assert not started.acquire(timeout=0.2), "a second run began beside the first"

    finish.set()
    assert started.acquire(timeout=10), "the requests made during the run were lost"
    wait_for(lambda: not started.acquire(timeout=0.2), "no third run")
    assert runs == ["poll", "poll"]
    poll()  # a request after the runs ended starts a new one
    assert started.acquire(timeout=10) and len(runs) == 3


def test_a_pool_runs_at_most_its_threads_at_once_however_many_sources_ask(timers: Timers) -> None:
    pool = Pool(2, "bounded", 60, 8, timers)
    finish = threading.Event()
    lock = threading.Lock()
    now, most, done = [0], [0], []

    def work() -> None:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        finish.wait(10)
        with lock:
            now[0] -= 1
            done.append(1)

    for number in range(20):
        pool.coalesced(work, f"poll of source {number}")()
    wait_for(lambda: now[0] == 2, "two polls running")
    finish.set()
    wait_for(lambda: len(done) == 20, "every source polled once")
    assert most[0] == 2
    assert sum(t.name.startswith("bounded-") for t in threading.enumerate()) <= 8


def hanging_until(release: threading.Event, ran: list[str]) -> Callable[[str], Callable[[], None]]:
    """Polls named as they are made, each noting its name in `ran` when it starts and then
    hanging until `release` (as a poll of a git host that never answers)."""

    def hanging(name: str) -> Callable[[], None]:
        def work() -> None:
            ran.append(name)
            release.wait(30)

        return work

    return hanging


def test_a_stalled_poll_frees_its_turn_and_threads_stay_bounded(timers: Timers) -> None:
    pool = Pool(1, "stalls", stalled_seconds=0.2, most=3, timers=timers)
    release = threading.Event()
    ran: list[str] = []
    hanging = hanging_until(release, ran)

    for name in ("hung", "next", "third", "fourth"):
        pool.coalesced(hanging(name), name)()
    wait_for(lambda: ran == ["hung", "next", "third"], "each poll, once the one before stalled")
    assert sum(t.name.startswith("stalls-") for t in threading.enumerate()) == 3
    assert ran == ["hung", "next", "third"]  # three threads in all: the fourth waits

    release.set()
    wait_for(lambda: len(ran) == 4, "the fourth, once a thread is free")


def test_a_tenants_hung_polls_hold_at_most_its_share_of_the_threads(timers: Timers) -> None:
    pool = Pool(
        2, "tenants", stalled_seconds=0.1, most=8, timers=timers
    )  # a tenant's share: 4 threads
    release = threading.Event()
    ran: list[str] = []
    hanging = hanging_until(release, ran)

    for number in range(6):  # a tenant whose GitSyncs all name a host that hangs
        pool.coalesced(hanging(f"hostile-{number}"), f"hostile {number}", "hostile")()
    pool.coalesced(hanging("neighbour"), "neighbour", "neighbour")()
    wait_for(lambda: "neighbour" in ran, "the neighbour's poll, beside the stalled ones")
    assert sorted(ran) == [*(f"hostile-{n}" for n in range(4)), "neighbour"]
    assert sum(t.name.startswith("tenants-") for t in threading.enumerate()) <= 8

    release.set()
    wait_for(lambda: len(ran) == 7, "the tenant's other polls, once its own ended")


def test_ta03_a_tenant_holds_at_most_its_share_of_threads_and_the_others_go_first(
    timers: Timers,
) -> None:
    """tenantQuota.threads: a namespace of many GitSyncs runs one poll at a time here,
    while a neighbour that asks later is served beside it."""
    pool = Pool(4, "shares", stalled_seconds=60, most=16, timers=timers, tenant_threads=1)
    release = threading.Event()
    ran: list[str] = []
    hanging = hanging_until(release, ran)

    for number in range(3):
        pool.coalesced(hanging(f"busy-{number}"), f"busy {number}", "busy")()
    pool.coalesced(hanging("neighbour"), "neighbour", "neighbour")()
    wait_for(lambda: "neighbour" in ran, "the neighbour's poll, beside the busy tenant's one")
    assert ran == ["busy-0", "neighbour"]

    release.set()
    wait_for(lambda: len(ran) == 4, "the busy tenant's other polls, one after the other")


def test_a_run_that_raises_does_not_stop_later_runs(timers: Timers) -> None:
    runs: list[int] = []

    def work() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("a bug")

    poll = Pool(1, "buggy", 60, 4, timers).coalesced(work, "poll of buggy")
    poll()
    wait_for(lambda: len(runs) == 1, "the failed run")
    poll()
    wait_for(lambda: len(runs) == 2, "a run after the failed one")


@pytest.mark.case("SE-20")
@pytest.mark.parametrize(
    ("header", "valid"),
    [
        ("sha256=" + hmac.new(b"key", b"body", hashlib.sha256).hexdigest(), True),
        ("sha256=" + hmac.new(b"other", b"body", hashlib.sha256).hexdigest(), False),
        ("sha1=" + hmac.new(b"key", b"body", hashlib.sha1).hexdigest(), False),
        (hmac.new(b"key", b"body", hashlib.sha256).hexdigest(), False),
        ("sha256=" + hmac.new(b"key", b"body", hashlib.sha256).hexdigest()[:-1], False),
        ("sha256=" + "\u00e9" * 64, False),  # non-ASCII, as a latin-1 header decodes
        ("sha256=\u2603", False),
        ("", False),
        (None, False),
    ],
)
def test_se20_webhook_signatures_follow_github(header: str | None, valid: bool) -> None:
    assert signature_valid(b"key", b"body", header) is valid


def _mac(algorithm: str, key: bytes = b"key") -> str:
    return f"{algorithm}=" + hmac.new(key, b"body", algorithm).hexdigest()


@pytest.mark.case("SE-20")
@pytest.mark.parametrize(
    ("headers", "valid"),
    [
        ({"x-hub-signature-256": _mac("sha256")}, True),
        ({"x-hub-signature-256": _mac("sha256", b"other")}, False),
        ({"x-gitlab-token": "key"}, True),
        ({"x-gitlab-token": "ke"}, False),
        ({"x-gitlab-token": ""}, False),
        ({"x-gitlab-token": "k\u00e9y"}, False),  # latin-1, as the transport decodes
        ({"x-signature": _mac("sha256")}, True),
        ({"x-signature": _mac("sha512")}, True),
        ({"x-signature": _mac("sha1")}, False),  # too weak to accept
        ({"x-signature": _mac("sha512", b"other")}, False),
        ({"x-signature": "md5=abc"}, False),
        ({"x-signature": _mac("sha256")[7:]}, False),  # no algorithm
        ({"x-hub-signature": _mac("sha1")}, False),  # GitHub's old SHA-1 header
        ({}, False),
        # the scheme the first header names decides: a bad signature is not excused
        ({"x-hub-signature-256": "sha256=00", "x-gitlab-token": "key"}, False),
    ],
)
def test_se20_a_webhook_is_signed_as_github_gitlab_or_a_generic_hmac(
    headers: dict[str, str], valid: bool
) -> None:
    assert signed(b"key", b"body", headers) is valid


def test_log_lines_are_json_with_the_call_context_merged_into_the_fixed_one() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonLines())
    logger = logging.getLogger("test.logs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    log = ContextLog(logger, {"source": "app"})

    log.info("configured", extra={"object": "apps/Deployment/n/web", "revision": "abc"})

    line = json.loads(out.getvalue())
    assert line["message"] == "configured" and line["level"] == "info"
    assert (line["source"], line["object"], line["revision"]) == (
        "app",
        "apps/Deployment/n/web",
        "abc",
    )
    assert line["time"].endswith("Z")


class Source:
    """What the registry reads of a worker: its name, config and report."""

    def __init__(self, name: str, report: SourceReport, *depends_on: str) -> None:
        self.name, self.report, self.polls = name, report, 0
        self.config = type("Config", (), {"depends_on": depends_on})()

    def poll_soon(self) -> None:
        self.polls += 1


def healthy(revision: str = "abc") -> SourceReport:
    web = ObjectKey("apps", "Deployment", "n", "web")
    report = SourceReport(finished=1, attempted_revision=revision, applied_revision=revision)
    report.health = {web: Health(Status.CURRENT)}
    return report


def test_a_source_waits_for_each_dependency_not_ready_and_says_why() -> None:
    rolling = healthy()
    rolling.health = {
        ObjectKey("apps", "Deployment", "n", "db"): Health(Status.IN_PROGRESS, "Rollout")
    }
    sources = Registry(elsewhere=lambda name: "it is not running")
    for worker in (Source("certs", healthy()), Source("db", rolling)):
        sources.add(worker)  # type: ignore[arg-type]

    assert sources.waiting_for(["certs"]) == ""
    assert sources.waiting_for(["certs", "db", "queue"]) == (
        "source db: 1 of 1 objects not healthy yet: apps/Deployment/n/db: InProgress: Rollout; "
        "source queue: it is not running"
    )


def test_a_report_polls_only_the_sources_that_wait_for_it() -> None:
    waiting = SourceReport(waiting="source db: not yet")
    app, other = Source("app", waiting, "db"), Source("other", waiting, "certs")
    idle, db = Source("idle", healthy(), "db"), Source("db", healthy())
    heard: list[str] = []
    sources = Registry(elsewhere=lambda name: "it is not running")
    for worker in (app, other, idle, db):
        sources.add(worker)  # type: ignore[arg-type]

    sources.reporting("db", lambda: heard.append("db"))()

    assert heard == ["db"]
    assert (app.polls, other.polls, idle.polls) == (1, 0, 0)


def _entries(*times: str | None) -> dict[str, Any]:
    fields = [{"manager": "m", **({"time": t} if t else {})} for t in times]
    return {"metadata": {"managedFields": fields}}


SEEN = datetime.fromisoformat("2026-11-25T10:00:00.600+00:00").timestamp()


@pytest.mark.parametrize(
    ("body", "changed_at"),
    [
        (_entries("2026-11-25T09:59:50Z", "2026-11-25T10:00:00Z"), SEEN - 0.6),  # this change
        (_entries("2026-11-25T09:59:50Z", None), SEEN),  # a scale: no time of its own
        (_entries("2026-11-25T09:59:50Z"), SEEN),  # older than this event: not its time
        (_entries(), SEEN),
        (_entries("2026-11-25T10:00:05Z"), SEEN),  # a clock ahead of ours
    ],
)
def test_a_change_is_dated_by_its_own_entry_or_else_by_its_event(
    body: dict[str, Any], changed_at: float
) -> None:
    assert changed_since(body, SEEN) == pytest.approx(changed_at)


@dataclass(frozen=True)
class StubConfig:
    cluster_name: str = HOME


@dataclass
class StubWorker:
    """What Control reads of a worker, and the requests it makes."""

    name: str
    report: SourceReport = field(default_factory=SourceReport)
    asked: list[str] = field(default_factory=list)
    leading: threading.Event = field(default_factory=threading.Event)
    config: StubConfig = field(default_factory=lambda: StubConfig())

    def __post_init__(self) -> None:
        self.leading.set()

    def request(self, token: str) -> None:
        self.asked.append(token)


def control_of(*workers: StubWorker) -> Control:
    broken = [("broken", "bad spec")]
    return Control(lambda: list(workers), lambda: broken, clusters={"broken": "east"})  # type: ignore[arg-type]


@dataclass
class StubMaps:
    kept: dict[str, Any]

    def status(self, name: str) -> dict[str, Any]:
        return self.kept


@dataclass
class StubFiles:
    """The configuration's sources of a daemon that has not started them yet."""

    names: tuple[str, ...]
    maps: StubMaps

    def knows(self, name: str) -> bool:
        return name in self.names

    def runs(self, name: str) -> bool:
        return False

    def report_of(self, name: str) -> SourceReport:
        return SourceReport()


def test_a_starting_daemon_answers_for_its_configured_sources_as_kept() -> None:
    kept = [{"revision": "a" * 40, "startedAt": "2026-12-05T00:00:00Z", "counts": {}}]
    files = StubFiles(("app",), StubMaps({"history": kept}))
    control = Control(list, list, files)  # type: ignore[arg-type]

    status, answer = control.reconcile("app")
    assert status == 409 and "does not run here yet: the daemon is starting" in answer["error"]
    assert control.history("app") == (200, {"history": kept})
    assert control.history("nope")[0] == 404


def test_control_asks_the_writing_replicas_file_source_and_names_what_it_refuses() -> None:
    app, web = StubWorker("app"), StubWorker("team/web")

    status, answer = control_of(app, web).reconcile("app")
    assert status == 202 and app.asked == [answer["token"]]
    assert control_of(app).reconcile("nope") == (404, {"error": "no source nope runs here"})
    status, answer = control_of(web).reconcile("team/web")
    assert status == 409 and "gitopsd reconcile web --gitsync -n team" in answer["error"]
    app.leading.clear()  # a standby, or another replica's share
    status, answer = control_of(app).reconcile("app")
    assert status == 409 and "does not write for" in answer["error"] and app.asked == [app.asked[0]]


def test_control_lists_running_sources_and_those_set_aside_with_their_clusters() -> None:
    lines = control_of(StubWorker("app"), StubWorker("web", config=StubConfig("west"))).sources()

    assert [(line["name"], line["ready"], line["reason"], line["cluster"]) for line in lines] == [
        ("app", "Unknown", "Progressing", "in-cluster"),
        ("broken", "False", "InvalidSpec", "east"),
        ("web", "Unknown", "Progressing", "west"),
    ]
    assert lines[1]["message"] == "bad spec" and lines[1]["failed"] is True


def test_a_timer_runs_however_late_and_goes_with_its_owner() -> None:
    clock = Clock()
    clock.start()
    try:
        ran = threading.Event()
        timers = clock.timers("app")
        timers.later("retry", ran.set, 0.0)
        [job] = clock.scheduler.get_jobs()
        assert job.misfire_grace_time is None  # a busy clock must not drop it
        wait_for(ran.is_set, "the retry to run")

        timers.later("retry", ran.set, 3600.0)
        timers.later("check", ran.set, 3600.0)
        timers.later("check", ran.set, 3600.0)  # moved, not added
        timers.every("poll", ran.set, 3600.0, jitter=1.0)
        successor = clock.timers("app")
        successor.later("retry", ran.set, 3600.0)
        assert len(clock.scheduler.get_jobs()) == 4
        timers.cancel("check")
        assert len(clock.scheduler.get_jobs()) == 3
        timers.remove()
        assert [job.id for job in clock.scheduler.get_jobs()] == ["app#2/retry"]  # its own
    finally:
        clock.stop()


@pytest.mark.case("FA-01")
def test_a_daemon_is_not_ready_before_its_sources_are_scheduled(tmp_path: Path) -> None:
    """Its endpoints serve before the sources start: until they are scheduled there is no
    worker whose readiness could be asked, and `all([])` must not answer for them (FA-01
    asked /readyz in that window on a loaded machine, and was told ready)."""
    kubeconfig, ca = tmp_path / "kubeconfig", tmp_path / "ca.crt"
    ca.touch()  # read only once a request is sent: none is
    write_kubeconfig(kubeconfig, "https://127.0.0.1:9", ca, "u", "t")
    config = tmp_path / "gitopsd.yaml"
    source = {"name": "app", "repository": str(tmp_path), "namespace": "app"}
    config.write_text(json.dumps({"kubeconfig": str(kubeconfig), "sources": [source]}))

    daemon = Daemon(configfile.load(config))

    assert not daemon.ready()
