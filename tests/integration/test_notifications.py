"""Notifications from a real daemon against the real control plane, to receivers on loopback
that keep each API's documented contract (tests.harness.receivers) and to a real
Alertmanager (Debian's package)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.harness.alertmanager import RESOLVE_SECONDS, Alertmanager, provide_alertmanager
from tests.harness.canary import Canary
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_value
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import create, wait_ready
from tests.harness.kube import Gate
from tests.harness.manifests import config_map_files_with_data, deployment
from tests.harness.operators import operator
from tests.harness.receivers import HMAC_KEY, TOKEN, Call, Receivers, serving_receivers
from tests.harness.waiting import wait_for

REPOSITORY = "team/app"


@pytest.fixture
def receivers() -> Iterator[Receivers]:
    serving = serving_receivers()
    yield serving
    serving.close()


def secret_files(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "token").write_text(TOKEN)
    (tmp_path / "hmac").write_text(HMAC_KEY)
    return {"token": str(tmp_path / "token"), "hmac": str(tmp_path / "hmac")}


def every_provider(receivers: Receivers, files: dict[str, str]) -> list[dict[str, Any]]:
    """The daemon's own providers: one of each kind, on the receivers."""
    repository = f"{receivers.url}/{REPOSITORY}"
    return [
        {"name": "events", "type": "webhook", "address": f"{receivers.url}/webhook"}
        | {"tokenFile": files["hmac"]},
        {"name": "chat", "type": "slack", "address": f"{receivers.url}/slack"},
        {"type": "github", "address": repository, "tokenFile": files["token"]},
        {"type": "gitlab", "address": repository, "tokenFile": files["token"]},
        {"type": "gitea", "address": repository, "tokenFile": files["token"]},
    ]


def states(receivers: Receivers, kind: str, sha: str) -> list[str]:
    return [call.body["state"] for call in receivers.of(kind) if call.sha == sha]


def events(receivers: Receivers, kind: str) -> list[Call]:
    return [call for call in receivers.of("webhook") if call.body["type"] == f"io.gitopsd.{kind}"]


def test_every_provider_hears_a_sync_start_and_end_in_its_own_apis_words(
    daemons: Daemons,
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    receivers: Receivers,
    gate: Gate,
    tmp_path: Path,
    namespace: str,
) -> None:
    """A commit status is pending while the sync runs (its first wave's Deployment is held
    back), then success; the webhook's CloudEvents are signed; the chat hears the outcome."""
    held = deployment("web", wave="0", pods_on=gate.node_selector)
    late = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: late\n"
    late += "  annotations: {gitopsd.io/sync-wave: '1'}\n"  # after web is healthy
    sha = git_repo.commit({**held, "late.yaml": late})
    providers = every_provider(receivers, secret_files(tmp_path))
    page = {"url": "https://gitopsd.example.com"}  # where people read the source's page
    daemon = daemons.start(
        git_server.file_url(git_repo),
        interval="1h",
        top={"notifications": {"providers": providers}, "statusPage": page},
    )

    hosts = ("github", "gitlab", "gitea")
    wait_for(lambda: all(states(receivers, k, sha) for k in hosts), "pending statuses")
    assert states(receivers, "github", sha) == ["pending"]
    assert states(receivers, "gitlab", sha) == ["running"]
    assert states(receivers, "gitea", sha) == ["pending"]
    gate.open()
    wait_for(lambda: all(len(states(receivers, k, sha)) == 2 for k in hosts), "their ends")
    assert states(receivers, "github", sha)[-1] == states(receivers, "gitea", sha)[-1] == "success"
    assert states(receivers, "gitlab", sha)[-1] == "success"
    [github, _] = [call for call in receivers.of("github") if call.sha == sha]
    assert github.repository == REPOSITORY and github.body["context"] == "gitopsd/app"
    assert github.body["target_url"] == "https://gitopsd.example.com/sources/app"
    assert [call.repository for call in receivers.of("gitlab")] == [REPOSITORY] * 2
    assert receivers.of("gitlab")[0].body["name"] == "gitopsd/app"

    [synced] = wait_for(lambda: events(receivers, "sync.succeeded"), "the webhook's event")
    assert synced.body["subject"] == sha and synced.body["source"] == "/sources/app"
    assert synced.body["data"]["counts"] == {"created": 2}
    assert {o["object"] for o in synced.body["data"]["objects"]} == {
        f"apps/Deployment/{namespace}/web (created)",
        f"ConfigMap/{namespace}/late (created)",
    }
    [chat] = wait_for(lambda: receivers.of("slack"), "the chat's message")
    assert f"[sync.succeeded] app at {sha[:12]}: applied: 2 created" in chat.body["text"]
    assert not events(receivers, "sync.started")  # a pending status, not a chat's news
    assert receivers.refused == []
    assert daemon.value("gitopsd_notifications_total", source="app", outcome="sent") >= 7


def test_a_failed_sync_is_told_once_with_its_reason_and_its_commit_fails(
    daemons: Daemons,
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    receivers: Receivers,
    tmp_path: Path,
) -> None:
    git_repo.commit(config_map_files_with_data("a"))
    providers = every_provider(receivers, secret_files(tmp_path))
    daemon = daemons.start(
        git_server.file_url(git_repo),
        interval="1h",
        top={"notifications": {"providers": providers}},
    )
    wait_for(lambda: receivers.of("slack"), "the first sync's message")
    broken = git_repo.commit({"a.yaml": "kind: [unclosed\n"})
    at = ["--daemon", daemon.control_url]
    gitopsd("reconcile", "app", *at)
    gitopsd("reconcile", "app", *at)  # the same failure again: nothing new to tell

    [failed] = wait_for(lambda: events(receivers, "sync.failed"), "the failure's event")
    wait_for(lambda: states(receivers, "github", broken) == ["failure"], "a failed status")
    assert states(receivers, "gitlab", broken) == ["failed"]
    assert states(receivers, "gitea", broken) == ["failure"]
    assert failed.body["data"]["reason"] == "manifests/syntax"
    assert "a.yaml:2:1" in failed.body["data"]["summary"]
    chat = [call.body["text"] for call in receivers.of("slack")]
    assert len(chat) == 2 and chat[1].startswith(f"[sync.failed] app at {broken[:12]}")
    assert len(events(receivers, "sync.failed")) == 1


def test_drift_is_told_with_its_fields_and_managers_and_never_a_secret_value(
    daemons: Daemons,
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    receivers: Receivers,
    canary: Canary,
    tmp_path: Path,
    namespace: str,
) -> None:
    """Detected (the field, the manager: kubectl-patch) and healed (selfHeal); the Secret's
    value in git and the one a person wrote live reach no receiver, in any form."""
    live = Canary.fresh()
    secret = (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n"
        f"stringData:\n  token: {json.dumps(canary.value)}\n"
    )
    git_repo.commit({"secret.yaml": secret, **config_map_files_with_data("a")})
    providers = every_provider(receivers, secret_files(tmp_path))
    daemon = daemons.start(
        git_server.file_url(git_repo),
        interval="1h",
        top={"notifications": {"providers": providers}},
    )
    wait_for(lambda: events(receivers, "sync.succeeded"), "the first sync")
    gitopsd.kubectl("patch", "configmap/a", "-n", namespace, "-p", '{"data":{"k":"edited"}}')
    patch = json.dumps({"data": {"token": live.base64}})
    gitopsd.kubectl("patch", "secret/creds", "-n", namespace, "-p", patch)

    def drifted(kind: str) -> dict[str, Any]:
        fields = {
            item["object"]: item.get("fields")
            for call in events(receivers, kind)
            for item in call.body["data"]["objects"]
        }
        return fields if len(fields) == 2 else {}

    healed = wait_for(lambda: drifted("drift.healed"), "both drifts healed")
    detected = drifted("drift.detected")  # unless the heal's news superseded it, unsent
    for told in [healed] + ([detected] if detected else []):
        assert told[f"ConfigMap/{namespace}/a"] == [{"path": "data.k", "manager": "kubectl-patch"}]
        assert told[f"Secret/{namespace}/creds"] == [
            {"path": "data.token", "manager": "kubectl-patch"}
        ]
    chat = "\n".join(call.body["text"] for call in receivers.of("slack"))
    assert f"ConfigMap/{namespace}/a: data.k (by kubectl-patch)" in chat
    assert "edited" not in receivers.raw().decode()
    for value in (canary, live):
        value.assert_absent(receivers.raw().decode(), "the notifications")
        value.assert_absent(daemon.logs(), "the daemon's log")


def test_alertmanager_holds_a_failed_sync_as_an_alert_until_a_sync_resolves_it(
    daemons: Daemons,
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    tmp_path: Path,
) -> None:
    """The alert is sent again every second while the sync fails, so Alertmanager (which
    resolves an alert it hears nothing of for RESOLVE_SECONDS) holds it past that."""
    alertmanager = Alertmanager(provide_alertmanager(), tmp_path / "alertmanager").start()
    try:
        git_repo.commit(config_map_files_with_data("a"))
        provider = {"type": "alertmanager", "address": alertmanager.url}
        told = {"providers": [provider], "resendInterval": "1s"}
        daemon = daemons.start(
            git_server.file_url(git_repo), interval="1h", top={"notifications": told}
        )
        at = ["--daemon", daemon.control_url]
        first = {"source": "app", "result": "success"}
        daemon.wait_value(
            "gitopsd_reconcile_total", lambda v: v >= 1, "a first sync", 30.0, **first
        )
        broken = git_repo.commit({"a.yaml": "kind: [unclosed\n"})
        gitopsd("reconcile", "app", *at)

        [alert] = wait_for(alertmanager.alerts, "the failed sync's alert in Alertmanager")
        assert alert["labels"] == {
            "alertname": "GitopsdSyncFailed",
            "source": "app",
            "severity": "critical",
        }
        assert alert["annotations"]["revision"] == broken
        assert "a.yaml:2:1" in alert["annotations"]["summary"]
        held = _moment(alert["startsAt"]) + 2 * RESOLVE_SECONDS

        def still_firing() -> bool:
            found = alertmanager.alerts()
            return bool(found) and _moment(found[0]["endsAt"]) > held

        wait_for(still_firing, "the alert still firing twice its resolve_timeout on")
        git_repo.commit(config_map_files_with_data("a", value="fixed"))
        assert gitopsd("reconcile", "app", *at).code == 0

        wait_for(lambda: alertmanager.alerts() == [], "the alert resolved by the next sync")
        assert daemon.value("gitopsd_notifications_total", source="app", outcome="sent") >= 4
    finally:
        alertmanager.stop()


def _moment(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_a_receiver_that_hangs_or_fails_never_holds_a_sync_and_is_counted(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    receivers: Receivers,
    namespace: str,
) -> None:
    """A hanging receiver: syncs go on, each message given up on is counted failed. A
    receiver that answers 503 twice: the third attempt, after a backoff, is sent."""
    git_repo.commit(config_map_files_with_data("a"))
    hanging = {"name": "hangs", "type": "slack", "address": f"{receivers.url}/slack"}
    receivers.hanging.set()
    daemon = daemons.start(
        git_server.file_url(git_repo),
        interval="1h",
        top={"notifications": {"providers": [hanging], "attempts": 1}},
    )
    at = ["--daemon", daemon.control_url]
    core: Any = client.CoreV1Api(admin_api)
    # ConfigMap a, not any: the namespace's kube-root-ca.crt is there from the start
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "v", "the first sync")
    git_repo.commit(config_map_files_with_data("a", "b"))
    assert gitopsd("reconcile", "app", *at).code == 0  # not held by the receiver
    assert core.read_namespaced_config_map("b", namespace).data == {"k": "v"}
    counted = {"source": "app", "provider": "hangs", "outcome": "failed"}
    daemon.wait_value("gitopsd_notifications_total", lambda v: v >= 1, "given up", 30.0, **counted)
    assert "notification sync.succeeded to provider hangs (slack) failed" in daemon.logs()
    assert receivers.url.split("//")[1] not in daemon.logs()  # its address: a credential

    daemon.stop()
    receivers.hanging.clear()
    receivers.released.set()
    receivers.fail_next(2)
    git_repo.commit(config_map_files_with_data("a", "b", "c"))
    retried = {"name": "retried", "type": "slack", "address": f"{receivers.url}/slack"}
    again = daemons.start(
        git_server.file_url(git_repo),
        name="again",
        interval="1h",
        top={"notifications": {"providers": [retried], "attempts": 3}},
    )
    wait_for(lambda: receivers.of("slack"), "the message sent at its third attempt")
    assert again.value("gitopsd_notifications_total", source="app", outcome="sent") == 1
    assert again.value("gitopsd_notifications_total", source="app", outcome="failed") == 0


def test_a_gitsyncs_own_provider_is_its_tenants_and_cannot_reach_loopback(
    daemons: Daemons,
    admin_api: Any,
    gitsync_crd: str,
    git_server: GitServer,
    git_repo: GitRepo,
    receivers: Receivers,
    namespace: str,
) -> None:
    """Declared in its spec with a Secret of its namespace; heard where the daemon allows
    insecure GitSyncs (tests: loopback), fenced where it does not: the message is counted
    failed and never reaches the loopback receiver."""
    core: Any = client.CoreV1Api(admin_api)
    address = base64.b64encode(f"{receivers.url}/slack".encode()).decode()
    secret = {"metadata": {"name": "chat"}, "data": {"address": address}}
    core.create_namespaced_secret(namespace, secret)
    git_repo.commit(config_map_files_with_data("a"))
    notify = [{"type": "slack", "name": "team", "secretRef": {"name": "chat"}}]
    spec = {"repository": {"url": git_server.file_url(git_repo)}, "interval": "1h"}
    daemon = operator(daemons, namespace)
    create(admin_api, namespace, "web", {**spec, "notifications": notify})
    wait_ready(admin_api, namespace, "web", "True", "Succeeded")

    [told] = wait_for(lambda: receivers.of("slack"), "the tenant's chat message")
    assert told.body["text"].startswith(f"[sync.succeeded] {namespace}/web at ")
    daemon.stop()

    fenced = daemons.start_with(
        [], "fenced", gitSyncs={"enabled": True, "namespaces": [namespace]}
    ).start()
    unreachable = {"url": "https://127.0.0.1:1/team/app.git"}  # refused, and told so
    create(admin_api, namespace, "api", {"repository": unreachable, "notifications": notify})
    counted = {"source": f"{namespace}/api", "provider": "team", "outcome": "failed"}
    fenced.wait_value("gitopsd_notifications_total", lambda v: v >= 1, "fenced", 30.0, **counted)
    assert "resolves to loopback, link-local or the cluster's networks" in fenced.logs()
    assert [call.body["text"] for call in receivers.of("slack")] == [told.body["text"]]


def test_only_the_replica_that_writes_tells_and_a_new_leader_takes_over_telling(
    daemons: Daemons,
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    receivers: Receivers,
    namespace: str,
) -> None:
    """Two replicas, each with a provider that marks its calls: the standby reads the same
    revisions and drift, and tells nothing; once it leads, it tells."""
    first = git_repo.commit(config_map_files_with_data("a"))
    url = git_server.file_url(git_repo)
    election = {"enabled": True, "namespace": namespace, "name": "gitopsd"}
    election |= {"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "1s"}

    def replica(name: str) -> dict[str, Any]:
        chat = {"name": "chat", "type": "slack", "address": f"{receivers.url}/slack?{name}"}
        return {"leaderElection": election, "notifications": {"providers": [chat]}}

    leader = daemons.start(url, "first", top=replica("first"))  # polls every second
    leader.wait_value("gitopsd_leader", lambda v: v == 1, "the first replica to lead")
    standby = daemons.start(url, "second", top=replica("second"))
    standby.wait_value("gitopsd_reconcile_total", bool, "a standby's read", result="standby")
    second = git_repo.commit({"a.yaml": "kind: [unclosed\n"})  # both fail to read it
    counted = {"source": "app", "stage": "manifests", "reason": "syntax"}
    standby.wait_value("gitopsd_errors_total", bool, "the standby's failure", 30.0, **counted)

    def told(by: str) -> list[str]:
        return [call.body["text"] for call in receivers.of("slack") if call.query == by]

    wait_for(lambda: len(told("first")) == 2, "the leader's sync and failure")
    assert [text.split(":")[0] for text in told("first")] == [
        f"[sync.succeeded] app at {first[:12]}",
        f"[sync.failed] app at {second[:12]}",
    ]
    assert told("second") == []
    leader.stop()
    standby.wait_value("gitopsd_leader", lambda v: v == 1, "the standby to take over")
    third = git_repo.commit(config_map_files_with_data("a", value="x"))
    wait_for(lambda: told("second"), "the new leader's news")
    assert told("second")[-1].startswith(f"[sync.succeeded] app at {third[:12]}")
