"""What gitopsd tells, pure: each provider's request for a notice (its API's words, signed,
no value), the providers' declarations, the outbox's coalescing, bounds, pace and retries,
and what of a source's reconciles is news."""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import replace
from pathlib import Path

import pytest

from gitopsd.changes import Action, Outcome
from gitopsd.configfile.notifications import notifications
from gitopsd.daemon.news import News
from gitopsd.diff import Drift, FieldChange, State
from gitopsd.errors import ConfigError
from gitopsd.health import Health, Status
from gitopsd.notifications import Item, Kind, Notice, Topic, merged
from gitopsd.notifications.alerts import Firing
from gitopsd.notifications.outbox import Outbox, outcome_of
from gitopsd.notifications.outbox import Outcome as Told
from gitopsd.notifications.payloads import request_for
from gitopsd.notifications.providers import Provider, provider_of
from gitopsd.objects import ObjectKey

SHA = "a" * 40
A = ObjectKey("", "ConfigMap", "ns", "a")
B = ObjectKey("", "ConfigMap", "ns", "b")


def notice(kind: Kind = Kind.SYNC_SUCCEEDED, source: str = "app", **fields: object) -> Notice:
    said = {"revision": SHA, "time": 0.0, "summary": "applied: 1 created", **fields}
    return Notice(kind, source, **said)  # type: ignore[arg-type]


def provider(kind: str, address: str = "https://git.example/team/app", **entry: object) -> Provider:
    return provider_of({"type": kind, **entry}, address, "t0ken", "here")


def test_a_webhook_is_a_cloudevent_signed_with_hmac_sha256_of_its_body() -> None:
    request = request_for(provider("webhook", "https://hooks.example/in"), notice(), "")

    assert request is not None
    event = json.loads(request.body)
    signed = hmac.new(b"t0ken", request.body, hashlib.sha256).hexdigest()
    assert request.headers["X-Gitopsd-Signature"] == f"sha256={signed}"
    assert request.headers["Content-Type"] == "application/cloudevents+json"
    assert (event["specversion"], event["type"], event["source"]) == (
        "1.0",
        "io.gitopsd.sync.succeeded",
        "/sources/app",
    )
    assert event["subject"] == SHA and event["time"] == "1970-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("kind", "address", "url", "auth", "states"),
    [
        (
            "github",
            "https://github.com/team/app.git",
            f"https://api.github.com/repos/team/app/statuses/{SHA}",
            ("Authorization", "Bearer t0ken"),
            ("pending", "success", "failure"),
        ),
        (
            "github",
            "https://ghe.example/team/app",
            f"https://ghe.example/api/v3/repos/team/app/statuses/{SHA}",
            ("Authorization", "Bearer t0ken"),
            ("pending", "success", "failure"),
        ),
        (
            "gitlab",
            "https://gitlab.example/group/sub/app",
            f"https://gitlab.example/api/v4/projects/group%2Fsub%2Fapp/statuses/{SHA}",
            ("PRIVATE-TOKEN", "t0ken"),
            ("running", "success", "failed"),
        ),
        (
            "gitea",
            "https://gitea.example/team/app",
            f"https://gitea.example/api/v1/repos/team/app/statuses/{SHA}",
            ("Authorization", "token t0ken"),
            ("pending", "success", "failure"),
        ),
    ],
)
def test_a_commit_status_is_the_hosts_api_with_a_context_per_source(
    kind: str, address: str, url: str, auth: tuple[str, str], states: tuple[str, ...]
) -> None:
    host = provider(kind, address)
    kinds = (Kind.SYNC_STARTED, Kind.SYNC_SUCCEEDED, Kind.SYNC_FAILED)
    requests = [request_for(host, notice(k, "ns/web"), "https://page.example") for k in kinds]

    bodies = [json.loads(r.body) for r in requests if r is not None]
    assert [r.url for r in requests if r] == [url] * 3
    assert all(r.headers[auth[0]] == auth[1] for r in requests if r)
    assert [b["state"] for b in bodies] == list(states)
    context = "name" if kind == "gitlab" else "context"
    assert {b[context] for b in bodies} == {"gitopsd/ns/web"}
    assert {b["target_url"] for b in bodies} == {"https://page.example/sources/ns%2Fweb"}


def test_a_commit_status_is_only_of_a_commit_and_only_of_a_sync() -> None:
    host = provider("github")

    assert request_for(host, notice(revision="1.2.0@sha256:" + "b" * 64), "") is None
    assert request_for(host, notice(Kind.DRIFT_DETECTED), "") is None
    long = request_for(host, notice(summary="x" * 500), "")
    assert long is not None and len(json.loads(long.body)["description"]) == 140


def test_an_alert_fires_on_bad_news_and_its_cure_resolves_the_same_alert() -> None:
    manager = provider("alertmanager", "https://am.example")
    fired = request_for(manager, notice(Kind.SYNC_FAILED, summary="broken"), "")
    cured = request_for(manager, notice(Kind.SYNC_SUCCEEDED, time=60.0), "")

    assert fired is not None and cured is not None
    [firing], [resolved] = json.loads(fired.body), json.loads(cured.body)
    assert fired.url == "https://am.example/api/v2/alerts"
    assert firing["labels"] == resolved["labels"]  # one alert: its labels are its identity
    assert firing["labels"]["alertname"] == "GitopsdSyncFailed"
    assert "endsAt" not in firing and resolved["endsAt"] == "1970-01-01T00:01:00Z"


def test_a_chat_line_names_the_source_revision_and_each_object() -> None:
    items = (Item("ConfigMap/ns/a", (("data.k", "kubectl-edit"),)),)
    chat = request_for(provider("slack", "https://hooks.example/T/B/X"), notice(items=items), "")

    assert chat is not None
    text = json.loads(chat.body)["text"]
    assert text.splitlines() == [
        f"[sync.succeeded] app at {SHA[:12]}: applied: 1 created",
        "- ConfigMap/ns/a: data.k (by kubectl-edit)",
    ]


@pytest.mark.parametrize(
    ("entry", "address", "token", "said"),
    [
        ({"type": "teams"}, "https://x.example/", "", "type: 'teams' is none of webhook"),
        ({"type": "webhook"}, "https://x.example/", "", "a webhook provider needs a token"),
        ({"type": "slack"}, "ftp://x.example/", "", "not an http:// or https:// URL"),
        ({"type": "slack"}, "https://u:p@x.example/", "", "credentials belong in the token"),
        ({"type": "gitlab"}, "https://gitlab.example/app", "t", "its repository's URL"),
        ({"type": "slack", "events": ["push"]}, "https://x.example/", "", "'push' is none of"),
        ({"type": "slack", "name": "Chat"}, "https://x.example/", "", "not a lowercase DNS"),
    ],
)
def test_a_provider_that_cannot_work_is_refused_without_its_secrets(
    entry: dict[str, object], address: str, token: str, said: str
) -> None:
    with pytest.raises(ConfigError, match="here: ") as refused:
        provider_of(entry, address, token, "here")

    assert said in str(refused.value) and "u:p" not in str(refused.value)


def test_what_a_provider_hears_by_default_and_when_it_names_its_sources() -> None:
    chat, status = provider("slack"), provider("github")
    only = provider("slack", events=["failure"], sources=["team-*", "app"])

    assert chat.topics == frozenset(Topic) and status.topics == {Topic.SYNC, Topic.FAILURE}
    assert not chat.hears(notice(Kind.SYNC_STARTED)) and status.hears(notice(Kind.SYNC_STARTED))
    assert not chat.hears(notice(routine=True)) and status.hears(notice(routine=True))
    assert only.hears(notice(Kind.SYNC_FAILED, "team-a")) and not only.hears(notice())
    assert not only.hears(notice(Kind.SYNC_FAILED, "other"))


def test_the_daemons_providers_are_read_from_its_configuration(tmp_path: Path) -> None:
    url = tmp_path / "url"
    url.write_text("https://hooks.example/T/B/secret\n")
    block = {"attempts": 3, "providers": [{"type": "slack", "addressFile": str(url)}]}
    read = notifications(block, "f.yaml: notifications")

    assert read.attempts == 3 and read.providers[0].address == "https://hooks.example/T/B/secret"
    with pytest.raises(ConfigError, match=r"providers\[0\]: give address or addressFile"):
        notifications({"providers": [{"type": "slack"}]}, "f.yaml: notifications")
    twice = {"providers": [{"type": "slack", "address": "https://x.example"}] * 2}
    with pytest.raises(ConfigError, match="two providers are named slack"):
        notifications(twice, "f.yaml: notifications")


def test_a_newer_notice_replaces_a_waiting_one_and_drift_of_two_objects_is_merged() -> None:
    box, chat = Outbox(), provider("slack")
    failed = box.put(chat, notice(Kind.SYNC_FAILED), 0.0)
    replaced = box.put(chat, notice(Kind.SYNC_SUCCEEDED), 0.0)
    box.put(chat, notice(Kind.DRIFT_DETECTED, items=(Item("a"),)), 0.0)
    box.put(chat, notice(Kind.DRIFT_DETECTED, items=(Item("b"),)), 0.0)

    assert failed == [] and [outcome_of(m, notice()) for m in replaced] == [Told.SUPERSEDED]
    assert len(box) == 2
    first = box.take(0.0)
    assert first is not None and first.notice.kind == Kind.SYNC_SUCCEEDED
    assert box.take(0.0) is None  # its source's next waits for the one in flight
    box.sent(first)
    second = box.take(0.0)
    assert second is not None and [i.object for i in second.notice.items] == ["b", "a"]


def test_merging_keeps_kinds_apart_and_bounds_what_it_names() -> None:
    many = tuple(Item(f"o{n}") for n in range(30))
    detected = notice(Kind.DRIFT_DETECTED, items=many[:20], more=0)
    later = notice(Kind.DRIFT_DETECTED, items=many[20:])

    both = merged(detected, later)
    assert len(both.items) == 20 and both.more == 10
    assert merged(detected, notice(Kind.DRIFT_HEALED)).kind == Kind.DRIFT_HEALED


def test_a_full_queue_drops_its_oldest_and_the_total_drops_the_fullest_tenants() -> None:
    one = notice().size
    box = Outbox(per_provider=2, total_bytes=4 * one)
    chat = provider("slack")
    flood = [replace(provider("slack", name=f"p{n}"), tenant="greedy") for n in range(3)]
    dropped = [m for n in range(3) for m in box.put(chat, notice(), 0.0)]  # one key: merged
    dropped += [m for n in range(3) for m in box.put(chat, notice(source=f"s{n}"), 0.0)]
    assert [m.notice.source for m in dropped] == ["app", "app", "app", "s0"]
    assert [outcome_of(m, notice(source="x")) for m in dropped[3:]] == [Told.DROPPED]

    flooded = [m for p in flood for m in box.put(p, notice(), 0.0)]

    assert [m.provider.tenant for m in flooded] == ["greedy"]  # its own, not the admin's
    assert len(box) == 4


def test_a_provider_is_paced_after_its_burst_and_the_others_take_their_turn() -> None:
    box = Outbox(rate=1.0, burst=2)
    chat, other = provider("slack"), provider("slack", name="other")
    for n in range(4):
        box.put(chat, notice(source=f"s{n}"), 0.0)
    box.put(other, notice(), 0.0)

    taken = [box.take(0.0) for _ in range(4)]
    sent = [(m.provider.name, m.notice.source) for m in taken if m]
    assert sent == [("slack", "s0"), ("other", "app"), ("slack", "s1")]
    assert box.wait(0.0) == pytest.approx(1.0)
    assert box.take(1.0) is not None


def test_tenants_take_turns_however_many_providers_one_declares() -> None:
    box = Outbox()
    many = [replace(provider("slack", name=f"p{n}"), tenant="many") for n in range(5)]
    for declared in many:
        box.put(declared, notice(source="many/app"), 0.0)
    box.put(replace(provider("slack"), tenant="few"), notice(source="few/app"), 0.0)

    taken = [box.take(0.0) for _ in range(3)]
    assert [m.provider.tenant for m in taken if m] == ["many", "few", "many"]


def test_a_failed_send_is_retried_after_a_backoff_until_its_attempts_are_spent() -> None:
    box = Outbox(attempts=2, first_retry_seconds=10.0)
    chat = provider("slack")
    box.put(chat, notice(), 0.0)
    first = box.take(0.0)
    assert first is not None and box.failed(first, 0.0, retry=True)
    assert box.take(1.0) is None and 4.0 <= (box.wait(1.0) or 0) <= 9.0  # 5-10 s, jittered
    second = box.take(11.0)
    assert second is first and not box.failed(second, 11.0, retry=True)
    box.put(chat, notice(), 20.0)
    third = box.take(20.0)
    assert third is not None and not box.failed(third, 20.0, retry=False)  # refused: no retry
    assert len(box) == 0


def test_a_providers_waiting_messages_go_with_it() -> None:
    box, chat = Outbox(), provider("slack")
    box.put(chat, notice(), 0.0)

    assert [m.notice for m in box.forget({"/slack"})] == [notice()] and len(box) == 0
    assert box.take(0.0) is None and box.wait(0.0) is None


def drift(key: ObjectKey, path: str = "data.k") -> Drift:
    return Drift(key, State.MODIFIED, (FieldChange(path, "live", "git", "kubectl-edit"),))


def test_news_is_told_once_and_names_fields_and_managers_never_values() -> None:
    told: list[Notice] = []
    news = News("app", told.append)
    news.measured(SHA, [drift(A)])
    news.measured(SHA, [drift(A), drift(B)])  # only b is new
    news.failed(SHA, "manifests/syntax", "a.yaml:2:1: bad")
    news.failed(SHA, "manifests/syntax", "a.yaml:2:1: bad")  # the same failure again
    news.applied(SHA, [Outcome(A, Action.CONFIGURED), Outcome(B, Action.UNCHANGED)])
    news.applied(SHA, [Outcome(A, Action.UNCHANGED)])  # nothing changed: routine
    news.assessed(SHA, {A: Health(Status.FAILED, "Crash", "restarting")})
    news.assessed(SHA, {A: Health(Status.FAILED, "Crash", "restarting")})
    news.assessed(SHA, {A: Health(Status.CURRENT)})

    assert [(n.kind, n.routine) for n in told] == [
        (Kind.DRIFT_DETECTED, False),
        (Kind.DRIFT_DETECTED, False),
        (Kind.SYNC_FAILED, False),
        (Kind.SYNC_SUCCEEDED, False),  # cures the failure: news even without a change
        (Kind.SYNC_SUCCEEDED, True),
        (Kind.HEALTH_DEGRADED, False),
        (Kind.HEALTH_RECOVERED, False),
    ]
    assert told[1].items == (Item(str(B), (("data.k", "kubectl-edit"),), "modified"),)
    assert told[2].reason == "manifests/syntax" and told[3].counts == {"configured": 1}
    assert "live" not in repr(told) and "git" not in repr([n.items for n in told])


def test_a_firing_alert_is_sent_again_until_its_cure_and_only_by_the_writer() -> None:
    manager, chat = provider("alertmanager", "https://am.example"), provider("slack")
    firing, writing = Firing(), [True]
    failed = notice(Kind.SYNC_FAILED, summary="broken")
    firing.told(manager, failed, lambda: writing[0])
    firing.told(manager, notice(Kind.SYNC_FAILED, summary="later"), lambda: True)  # kept first
    firing.told(chat, failed, lambda: True)  # a chat is told once
    firing.told(manager, notice(Kind.DRIFT_DETECTED, "other"), lambda: True)

    assert [n.summary for _, n in firing.again()] == ["broken", "applied: 1 created"]
    writing[0] = False  # another replica writes for the source now: it sends them
    assert [n.source for _, n in firing.again()] == ["other"]
    writing[0] = True
    firing.told(manager, notice(Kind.SYNC_SUCCEEDED), lambda: True)  # the cure
    assert [n.source for _, n in firing.again()] == ["other"]
    firing.forget(source="other")
    assert firing.again() == []
    firing.told(manager, failed, lambda: True)
    firing.forget({"/alertmanager"})
    assert firing.again() == []
