"""The request a provider is sent for a notice, in its own API's words, pure: CloudEvents
for a webhook (signed with HMAC-SHA256), a chat line for Slack and its kin, an alert for
Alertmanager, a commit status for GitHub, GitLab and Gitea."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from gitopsd.notifications import Kind, Notice, Topic, cut
from gitopsd.notifications.providers import Provider, Type

SIGNATURE_HEADER = "X-Gitopsd-Signature"
"""sha256=HEX, the HMAC-SHA256 of the body under the provider's token (as GitHub's
X-Hub-Signature-256)."""
JSON = "application/json"
COMMIT = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64})$")
STATUS_DESCRIPTION = 140
"""GitHub refuses a longer description."""
ALERTS = {Topic.SYNC: "GitopsdSyncFailed", Topic.FAILURE: "GitopsdSyncFailed"}
ALERTS |= {Topic.DRIFT: "GitopsdDrift", Topic.HEALTH: "GitopsdDegraded"}
"""The alert each topic fires and resolves: a sync's success resolves its failure."""
SEVERITIES = {Topic.SYNC: "critical", Topic.FAILURE: "critical"}
SEVERITIES |= {Topic.DRIFT: "warning", Topic.HEALTH: "warning"}
"""An alert's labels are its identity: its resolution carries the same severity."""


@dataclass(frozen=True)
class Request:
    url: str
    body: bytes
    headers: dict[str, str]


def request_for(provider: Provider, notice: Notice, page: str) -> Request | None:
    """What `provider` is sent for `notice` (`page`: the status page's URL, or ""); None
    where its kind has nothing to show for it (`shows`)."""
    return _BUILDERS[provider.type](provider, notice, page) if shows(provider, notice) else None


def shows(provider: Provider, notice: Notice) -> bool:
    """Whether `provider`'s kind can show `notice`: a commit status shows only a sync of a
    git commit (not a chart's version, nor drift)."""
    if not provider.type.commit_status:
        return True
    return bool(COMMIT.match(notice.revision)) and notice.kind.topic in (Topic.SYNC, Topic.FAILURE)


def page_of(page: str, source: str) -> str:
    """The source's page on the status page: its path is its `source` label."""
    return f"{page.rstrip('/')}/sources/{quote(source, safe='')}" if page else ""


def details(notice: Notice) -> list[str]:
    lines = [item.line() for item in notice.items]
    if notice.more:
        lines.append(f"and {notice.more} more")
    return lines


def _webhook(provider: Provider, notice: Notice, page: str) -> Request:
    data: dict[str, Any] = {
        "source": notice.source,
        "revision": notice.revision,
        "summary": notice.summary,
        "objects": [_item(item) for item in notice.items],
        "more": notice.more,
    }
    data |= {"counts": notice.counts} if notice.counts else {}
    data |= {"reason": notice.reason} if notice.reason else {}
    data |= {"statusPage": page_of(page, notice.source)} if page else {}
    event = {
        "specversion": "1.0",
        "id": _id(notice),
        "source": f"/sources/{quote(notice.source, safe='')}",
        "type": f"io.gitopsd.{notice.kind}",
        "subject": notice.revision,
        "time": _timestamp(notice.time),
        "datacontenttype": JSON,
        "data": data,
    }
    body = _json(event)
    signature = hmac.new(provider.token.encode(), body, hashlib.sha256).hexdigest()
    headers = {"Content-Type": "application/cloudevents+json"}
    return Request(provider.address, body, headers | {SIGNATURE_HEADER: f"sha256={signature}"})


def _slack(provider: Provider, notice: Notice, page: str) -> Request:
    head = f"[{notice.kind}] {notice.source} at {_short(notice.revision)}: {notice.summary}"
    link = page_of(page, notice.source)
    lines = [head, *(f"- {line}" for line in details(notice)), *([link] if link else [])]
    body = _json({"text": "\n".join(lines), "username": "gitopsd"})
    return Request(provider.address, body, {"Content-Type": JSON})


def _alertmanager(provider: Provider, notice: Notice, page: str) -> Request:
    """An alert that fires on bad news and is resolved by its cure (a sync's success
    resolves its failure): Alertmanager keeps it until then, or its resolve_timeout."""
    alert: dict[str, Any] = {
        "labels": {
            "alertname": ALERTS[notice.kind.topic],
            "source": notice.source,
            "severity": SEVERITIES[notice.kind.topic],
        },
        "annotations": {
            "summary": notice.summary,
            "description": cut("\n".join(details(notice))),
            "revision": notice.revision,
        },
        "startsAt": _timestamp(notice.time),
    }
    if not notice.kind.bad:
        alert["endsAt"] = _timestamp(notice.time)
    if page:
        alert["generatorURL"] = page_of(page, notice.source)
    headers = {"Content-Type": JSON} | _bearer(provider.token)
    return Request(f"{provider.address}/api/v2/alerts", _json([alert]), headers)


def _commit_status(provider: Provider, notice: Notice, page: str) -> Request:
    state = _STATES[provider.type][notice.kind]
    context, target = f"gitopsd/{notice.source}", page_of(page, notice.source)
    description = cut(notice.summary, STATUS_DESCRIPTION)
    parts = urlsplit(provider.address)
    host = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.strip("/").removesuffix(".git")
    fields: dict[str, Any] = {"state": state, "description": description}
    fields |= {"target_url": target} if target else {}
    if provider.type == Type.GITLAB:
        url = f"{host}/api/v4/projects/{quote(path, safe='')}/statuses/{notice.revision}"
        return Request(url, _json(fields | {"name": context}), _gitlab(provider.token))
    if provider.type == Type.GITEA:
        url = f"{host}/api/v1/repos/{path}/statuses/{notice.revision}"
        headers = {"Content-Type": JSON, "Authorization": f"token {provider.token}"}
        return Request(url, _json(fields | {"context": context}), headers)
    api = "https://api.github.com" if parts.hostname == "github.com" else f"{host}/api/v3"
    headers = {"Content-Type": JSON, "Accept": "application/vnd.github+json"}
    headers |= _bearer(provider.token) | {"X-GitHub-Api-Version": "2022-11-28"}
    body = _json(fields | {"context": context})
    return Request(f"{api}/repos/{path}/statuses/{notice.revision}", body, headers)


_STATES = {
    Type.GITHUB: {Kind.SYNC_STARTED: "pending", Kind.SYNC_SUCCEEDED: "success"},
    Type.GITLAB: {Kind.SYNC_STARTED: "running", Kind.SYNC_SUCCEEDED: "success"},
    Type.GITEA: {Kind.SYNC_STARTED: "pending", Kind.SYNC_SUCCEEDED: "success"},
}
_STATES[Type.GITHUB][Kind.SYNC_FAILED] = "failure"
_STATES[Type.GITLAB][Kind.SYNC_FAILED] = "failed"
_STATES[Type.GITEA][Kind.SYNC_FAILED] = "failure"

_BUILDERS: dict[Type, Callable[[Provider, Notice, str], Request]] = {
    Type.WEBHOOK: _webhook,
    Type.SLACK: _slack,
    Type.ALERTMANAGER: _alertmanager,
    Type.GITHUB: _commit_status,
    Type.GITLAB: _commit_status,
    Type.GITEA: _commit_status,
}


def _gitlab(token: str) -> dict[str, str]:
    return {"Content-Type": JSON, "PRIVATE-TOKEN": token}


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _item(item: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"object": item.object}
    if item.fields:
        found["fields"] = [{"path": path, "manager": who} for path, who in item.fields]
    if item.health:
        found["health"] = item.health
    return found


def _id(notice: Notice) -> str:
    said = f"{notice.source}\0{notice.kind}\0{notice.revision}\0{notice.time!r}"
    return hashlib.sha256(said.encode()).hexdigest()[:32]


def _short(revision: str) -> str:
    return revision[:12] if COMMIT.match(revision) else revision


def _timestamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _json(document: object) -> bytes:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
