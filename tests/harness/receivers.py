"""Receivers of notifications on loopback, each speaking the documented contract of the API
gitopsd calls, and refusing what breaks it (so a test of a payload that drifted from the
contract fails):

- a webhook taking CloudEvents 1.0 in structured mode, signed with HMAC-SHA256
  (X-Gitopsd-Signature: sha256=HEX);
- a Slack incoming webhook (a JSON body with `text`; Mattermost and Rocket.Chat take the same);
- GitHub's `POST /repos/{owner}/{repo}/statuses/{sha}` (GitHub Enterprise's /api/v3 prefix),
  Bearer token, state error|failure|pending|success, `context`, a description of at most 140
  characters;
- GitLab's `POST /api/v4/projects/{id}/statuses/{sha}`, PRIVATE-TOKEN, state
  pending|running|success|failed|canceled, `name`;
- Gitea's and Forgejo's `POST /api/v1/repos/{owner}/{repo}/statuses/{sha}`, `token` auth,
  state pending|success|error|failure|warning, `context`.

Each accepted call is kept (`calls`); a receiver may be told to fail its next calls, or to
hang (answer nothing until the test ends).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

TOKEN = "notify-token-5e2a"
HMAC_KEY = "hmac-key-71c4"
SHA = r"(?P<sha>[0-9a-f]{40})"
ROUTES = {
    "github": re.compile(rf"^/api/v3/repos/(?P<repo>[^/]+/[^/]+)/statuses/{SHA}$"),
    "gitlab": re.compile(rf"^/api/v4/projects/(?P<repo>[^/]+)/statuses/{SHA}$"),
    "gitea": re.compile(rf"^/api/v1/repos/(?P<repo>[^/]+/[^/]+)/statuses/{SHA}$"),
}
STATES = {
    "github": {"error", "failure", "pending", "success"},
    "gitlab": {"pending", "running", "success", "failed", "canceled"},
    "gitea": {"pending", "success", "error", "failure", "warning"},
}


@dataclass(frozen=True)
class Call:
    kind: str
    """webhook, slack, github, gitlab or gitea."""
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    repository: str = ""
    sha: str = ""
    query: str = ""
    """The query of the URL called: a test's mark of which provider called."""


@dataclass
class Receivers:
    server: ThreadingHTTPServer
    calls: list[Call] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """Why each call that broke a contract was refused."""
    failing: int = 0
    """Calls still to answer 503 before the receivers accept again."""
    hanging: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def of(self, kind: str) -> list[Call]:
        with self.lock:
            return [call for call in self.calls if call.kind == kind]

    def raw(self) -> bytes:
        with self.lock:
            return b"\n".join(call.raw for call in self.calls)

    def fail_next(self, count: int) -> None:
        with self.lock:
            self.failing = count

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def serving_receivers() -> Receivers:
    """Receivers on a free loopback port, until `close`."""
    receivers: Receivers

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if receivers.hanging.is_set():
                receivers.released.wait(60)
                return
            with receivers.lock:
                failing, receivers.failing = receivers.failing, max(receivers.failing - 1, 0)
            if failing:
                self._answer(503, b"try later")
                return
            try:
                headers = {k.lower(): v for k, v in self.headers.items()}
                path, _, query = self.path.partition("?")  # a query tells senders apart
                call = replace(_checked(path, headers, raw), query=query)
            except ValueError as error:
                with receivers.lock:
                    receivers.refused.append(f"{self.path}: {error}")
                self._answer(422, str(error).encode())
                return
            with receivers.lock:
                receivers.calls.append(call)
            self._answer(201 if call.sha else 200, b"{}")

        def _answer(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receivers = Receivers(server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return receivers


def _checked(path: str, headers: dict[str, str], raw: bytes) -> Call:
    """The call, if it keeps its API's contract; ValueError saying how it does not."""
    if path == "/webhook":
        return _cloud_event(path, headers, raw)
    body = _json(raw, headers, "application/json")
    if path == "/slack":
        if not isinstance(body.get("text"), str) or not body["text"]:
            raise ValueError("a Slack message needs text")
        return Call("slack", path, headers, body, raw)
    for kind, route in ROUTES.items():
        found = route.match(path)
        if found:
            _commit_status(kind, headers, body)
            repository = unquote(found["repo"])
            return Call(kind, path, headers, body, raw, repository, found["sha"])
    raise ValueError(f"no such API: {path}")


def _cloud_event(path: str, headers: dict[str, str], raw: bytes) -> Call:
    event = _json(raw, headers, "application/cloudevents+json")
    signed = headers.get("x-gitopsd-signature", "")
    expected = "sha256=" + hmac.new(HMAC_KEY.encode(), raw, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(signed, expected):
        raise ValueError("the HMAC-SHA256 signature does not match the body")
    for attribute in ("id", "source", "type"):
        if not isinstance(event.get(attribute), str) or not event[attribute]:
            raise ValueError(f"a CloudEvent needs the attribute {attribute}")
    if event.get("specversion") != "1.0" or not event["type"].startswith("io.gitopsd."):
        raise ValueError("not a CloudEvent 1.0 of gitopsd")
    return Call("webhook", path, headers, event, raw)


def _commit_status(kind: str, headers: dict[str, str], body: dict[str, Any]) -> None:
    auth = {
        "github": headers.get("authorization") == f"Bearer {TOKEN}",
        "gitlab": headers.get("private-token") == TOKEN,
        "gitea": headers.get("authorization") == f"token {TOKEN}",
    }
    if not auth[kind]:
        raise ValueError("not authenticated as the API wants")
    if body.get("state") not in STATES[kind]:
        raise ValueError(f"state {body.get('state')!r} is not one of {kind}'s")
    context = body.get("name" if kind == "gitlab" else "context")
    if not isinstance(context, str) or not context:
        raise ValueError("a commit status needs its context")
    if len(str(body.get("description", ""))) > 140:
        raise ValueError("the description is over 140 characters")


def _json(raw: bytes, headers: dict[str, str], content_type: str) -> dict[str, Any]:
    if headers.get("content-type", "").split(";")[0] != content_type:
        raise ValueError(f"Content-Type is not {content_type}")
    try:
        body = json.loads(raw)
    except ValueError:
        raise ValueError("the body is not JSON") from None
    if not isinstance(body, dict):
        raise ValueError("the body is not an object")
    return body
