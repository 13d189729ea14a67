"""What `gitopsd sync` says while it runs: a line per phase wherever stderr goes, a bar and
a redrawn waiting line on a terminal, a waiting line every 10 s in a log, nothing with
--quiet. A clock of the test's own stands for time."""

from __future__ import annotations

import io

from gitopsd.changes import Action, Measurement, Outcome
from gitopsd.cli.progress import Progress
from gitopsd.health import Health, Status
from gitopsd.objects import ObjectKey

WEB = ObjectKey("apps", "Deployment", "n", "web")
CFG = ObjectKey("", "ConfigMap", "n", "cfg")
SHA = "0123456789abcdef0123456789abcdef01234567"
ROLLING = {
    CFG: Health(Status.CURRENT),
    WEB: Health(Status.IN_PROGRESS, "Rollout", "available replicas 0/1"),
}


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def a_sync(progress: Progress) -> None:
    """The phases of a sync of two objects in two waves."""
    progress.fetched(0.42)
    progress.read(2)
    progress.revision(SHA)
    progress.measured(Measurement([], set(), compared=2, dry_run=1), lambda key: None)
    progress.planned(2)
    progress.tick(Outcome(CFG, Action.CREATED))
    progress.wave(0, 1)
    progress.tick(Outcome(WEB, Action.CREATED))
    progress.wave(1, 1)


def test_a_log_reads_a_plain_line_per_phase() -> None:
    log = io.StringIO()

    a_sync(Progress(log))

    assert log.getvalue().splitlines() == [
        "fetched 0123456789ab in 0.4 s",
        "rendered 2 manifests",
        "dry-run 1 of 2 objects (1 unchanged since their last dry-run): 0 drifted",
        "applying 2 objects",
        "wave 0 applied (1 objects)",
        "wave 1 applied (1 objects)",
    ]


def test_a_log_hears_of_a_wait_at_once_then_every_ten_seconds_with_the_slowest() -> None:
    log, clock = io.StringIO(), Clock()
    progress = Progress(log, clock=clock)

    for _ in range(12):  # a poll a second, 11 s in all
        progress.waiting(ROLLING)
        clock.now += 1

    assert log.getvalue().splitlines() == [
        "waiting: 1 of 2 Current after 0 s, slowest apps/Deployment/n/web: InProgress: "
        "Rollout: available replicas 0/1",
        "waiting: 1 of 2 Current after 10 s, slowest apps/Deployment/n/web: InProgress: "
        "Rollout: available replicas 0/1",
    ]


def test_a_failed_object_is_named_before_one_in_progress() -> None:
    log = io.StringIO()

    Progress(log).waiting({**ROLLING, CFG: Health(Status.FAILED, "Invalid", "no such key")})

    assert "slowest ConfigMap/n/cfg: Failed: Invalid: no such key" in log.getvalue()


def test_a_terminal_reads_the_phases_then_a_bar_then_the_elapsed_wait_and_is_cleared() -> None:
    terminal, clock = Terminal(), Clock()
    progress = Progress(terminal, clock=clock)
    progress.fetched(0.1)
    progress.revision(SHA)
    progress.planned(2)

    progress.tick(Outcome(CFG, Action.CREATED))
    assert "[###############---------------] 1/2 ConfigMap/n/cfg" in terminal.getvalue()
    clock.now += 3
    progress.waiting(ROLLING)
    clock.now += 4
    progress.waiting(ROLLING)
    progress.done()

    shown = terminal.getvalue()
    assert shown.startswith("fetched 0123456789ab in 0.1 s\nrendered 0 manifests\n")
    assert "\rwaiting: 1 of 2 Current after 4 s, slowest apps/Deployment/n/web" in shown
    assert shown.endswith("\r")  # the line drawn in place is cleared


def test_a_phase_said_after_the_bar_starts_on_a_line_of_its_own() -> None:
    terminal = Terminal()
    progress = Progress(terminal)
    progress.planned(2)
    progress.tick(Outcome(CFG, Action.CREATED))

    progress.wave(0, 1)

    assert terminal.getvalue().endswith("\r" + " " * 100 + "\rwave 0 applied (1 objects)\n")


def test_quiet_says_nothing_on_a_terminal_or_in_a_log() -> None:
    terminal, log = Terminal(), io.StringIO()
    for out in (terminal, log):
        progress = Progress(out, quiet=True)
        a_sync(progress)
        progress.waiting(ROLLING)
        progress.done()

    assert terminal.getvalue() == log.getvalue() == ""


def test_what_was_done_is_kept_for_the_report_of_a_stopped_sync() -> None:
    progress = Progress(io.StringIO(), quiet=True)

    a_sync(progress)

    assert [outcome.key for outcome in progress.outcomes] == [CFG, WEB]
    assert progress.sha == SHA
