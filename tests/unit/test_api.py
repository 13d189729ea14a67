"""How `Api` treats what comes back: retries, the fence before every attempt, and transport
failures turned into our errors. A tiny scripted transport stands in for the connection
pool (the `Transport` seam); the same faults through a real proxy are in
tests/integration/test_faults.py."""

from __future__ import annotations

import email.utils
import gc
import json
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
import urllib3

from gitopsd.cluster import Cluster
from gitopsd.cluster.api import LARGE_ANSWER_BYTES, Api, ApiError, CollectorPause, Unserved
from gitopsd.errors import ClusterError, ClusterReason
from gitopsd.gitsync import RESOURCE as GITSYNCS
from tests.harness.scripted_api import Answer, Raw, Transport, throttled

SERVER = "the API server at https://127.0.0.1:6443 (context test, user alice)"
PAGE_NOT_FOUND = Answer(404, b"404 page not found\n", {"Content-Type": "text/plain"})
"""What kube-apiserver answers at a path it serves nothing at (a CRD not installed), and
what many other HTTP servers answer to anything."""
NOTHING_FOUND = Answer(
    404,
    b'{"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404, "details": {},'
    b' "message": "the server could not find the requested resource"}',
)
"""What it answers for a resource its API group does not have."""
VERSION = Answer(200, b'{"major": "1", "minor": "34", "gitVersion": "v1.34.4"}')


@pytest.mark.case("FA-09")
def test_fa09_a_throttled_request_is_retried_until_it_succeeds() -> None:
    transport = Transport([throttled(), throttled(), Answer(200, b'{"ok": true}')])

    assert Api(transport).request("GET", "/api/v1/namespaces") == {"ok": True}
    assert len(transport.sent) == 3


@pytest.mark.case("FA-09")
def test_fa09_retry_after_is_waited_out_up_to_a_bound_and_otherwise_backed_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[float] = []
    monkeypatch.setattr("gitopsd.cluster.api.time.sleep", waits.append)
    later = [Answer(429, b"{}", {"Retry-After": seconds}) for seconds in ("3", "3600")]
    transport = Transport([*later, Answer(503), Answer(200)])

    Api(transport).request("PATCH", "/api/v1/namespaces/n/configmaps/a")

    assert waits[:2] == [3.0, 30.0]  # as the server asks, but never half an hour
    assert 0.4 <= waits[2] <= 0.8  # no Retry-After: a short backoff with jitter
    assert len(transport.sent) == 4


@pytest.mark.case("FA-09")
def test_fa09_retry_after_may_be_an_http_date(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr("gitopsd.cluster.api.time.sleep", waits.append)
    soon = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=12), usegmt=True)
    dates = [soon, "Sun, 06 Nov 1994 08:49:37 GMT", "tomorrow"]  # soon, past, unreadable
    transport = Transport([*(Answer(503, b"{}", {"Retry-After": d}) for d in dates), Answer(200)])

    Api(transport).request("GET", "/api/v1/namespaces")

    assert 10 <= waits[0] <= 12
    assert waits[1] == 0.0
    assert 0.4 <= waits[2] <= 0.8  # as without one: backoff with jitter (third attempt)


def test_a_request_retried_in_vain_says_which_request_and_how_often(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("gitopsd.cluster.api.time.sleep", lambda _: None)
    timeout = b'{"message": "Timeout: request did not complete within the allotted timeout"}'
    transport = Transport([Answer(504, timeout) for _ in range(5)])

    with pytest.raises(ApiError) as failed:
        Api(transport).request("GET", "/api/v1/namespaces/n/configmaps/parent")

    assert str(failed.value) == (
        "Timeout: request did not complete within the allotted timeout "
        "(GET /api/v1/namespaces/n/configmaps/parent: HTTP 504, 5 tries)"
    )
    assert failed.value.status == 504 and failed.value.reason == ClusterReason.TIMEOUT


def test_a_bare_status_is_not_said_twice() -> None:
    transport = Transport([Answer(503, b"")])

    with pytest.raises(ApiError) as failed:
        Api(transport, max_attempts=1).request("DELETE", "/api/v1/namespaces/n/configmaps/a")

    assert str(failed.value) == "HTTP 503 (DELETE /api/v1/namespaces/n/configmaps/a: 1 try)"


def test_a_refusal_is_not_retried_and_keeps_the_servers_words() -> None:
    transport = Transport([Answer(422, b'{"message": "configmaps \\"a\\" is invalid"}')])

    with pytest.raises(ApiError, match=r'^configmaps "a" is invalid$'):
        Api(transport).request("PATCH", "/api/v1/namespaces/n/configmaps/a")
    assert len(transport.sent) == 1


def test_a_404_that_names_an_object_is_that_object_missing() -> None:
    said = b'{"kind": "Status", "message": "configmaps \\"a\\" not found", "reason": "NotFound",'
    said += b' "details": {"name": "a", "kind": "configmaps"}, "code": 404}'
    transport = Transport([Answer(404, said)])

    with pytest.raises(ApiError) as failed:
        Api(transport, server=SERVER).request("GET", "/api/v1/namespaces/n/configmaps/a")

    assert str(failed.value) == 'configmaps "a" not found'
    assert not isinstance(failed.value, Unserved) and failed.value.status == 404
    assert transport.sent == ["GET /api/v1/namespaces/n/configmaps/a"]  # nothing else asked


@pytest.mark.parametrize("answer", [PAGE_NOT_FOUND, NOTHING_FOUND], ids=["page", "status"])
def test_a_404_about_the_path_says_which_server_serves_no_such_resource(answer: Answer) -> None:
    transport = Transport([answer, VERSION])
    path = GITSYNCS.path("n")

    with pytest.raises(Unserved) as failed:
        Api(transport, server=SERVER).request("GET", path)

    assert str(failed.value) == (
        f"{SERVER} does not serve GET {path} (HTTP 404): no such resource type; its CRD or "
        "API group is not installed"
    )
    assert failed.value.reason == ClusterReason.NOT_FOUND
    assert transport.sent == [f"GET {path}", "GET /version"]


@pytest.mark.parametrize("version", [PAGE_NOT_FOUND, Answer(200, b'{"ok": true}')])
def test_a_server_whose_version_is_no_kubernetes_version_is_called_no_api_server(
    version: Answer,
) -> None:
    transport = Transport([PAGE_NOT_FOUND, version])

    with pytest.raises(ClusterError) as failed:
        Api(transport, server=SERVER).request("GET", "/api")

    assert str(failed.value) == (
        f"{SERVER} is not a Kubernetes API server: it answers GET /api with HTTP 404 and GET "
        f"/version with no Kubernetes version (HTTP {version.status}); check the server "
        "address in the kubeconfig"
    )
    assert not isinstance(failed.value, ApiError)  # no caller takes it for an object gone
    assert failed.value.reason == ClusterReason.UNREACHABLE


def test_a_get_finds_no_object_of_a_type_not_served_but_fails_on_no_api_server() -> None:
    transport = Transport([PAGE_NOT_FOUND, VERSION, PAGE_NOT_FOUND, PAGE_NOT_FOUND])
    cluster = Cluster(Api(transport, server=SERVER), discovery=cast(Any, None))

    assert cluster.get(GITSYNCS, "n", "web") is None
    with pytest.raises(ClusterError, match="is not a Kubernetes API server"):
        cluster.get(GITSYNCS, "n", "web")


def test_a_watch_of_a_type_not_served_says_so() -> None:
    transport = Transport([PAGE_NOT_FOUND, VERSION])

    with pytest.raises(Unserved, match=r"does not serve WATCH /apis/gitopsd\.io/"):
        Api(transport, server=SERVER).stream(GITSYNCS.path(""), [("watch", "true")])


@pytest.mark.case("FA-23")
def test_fa23_the_fence_is_checked_before_every_attempt_not_only_the_first() -> None:
    transport = Transport([throttled(), throttled(), Answer(200)])
    leading = [True]

    def fence() -> None:
        if not leading[0]:
            raise ClusterError("write refused: lost the lease", ClusterReason.FENCED)
        leading[0] = False  # the lease runs out while the first answer says "retry later"

    with pytest.raises(ClusterError) as refused:
        Api(transport).request("PATCH", "/api/v1/namespaces/n/configmaps/a", fence=fence)

    assert refused.value.reason == "fenced"
    assert transport.sent == ["PATCH /api/v1/namespaces/n/configmaps/a"]  # no retry went out


@pytest.mark.case("FA-10")
@pytest.mark.parametrize(
    ("step", "says"),
    [
        (urllib3.exceptions.ProtocolError("Connection refused"), "Connection refused"),
        (ConnectionResetError(104, "Connection reset by peer"), "reset by peer"),
        (Answer(200, b'{"items": [', cut=True), "IncompleteRead"),
        (Answer(200, b"<html><body>Sign in</body></html>", {"Content-Type": "text/html"}), "JSON"),
        (Answer(200, b'{"items": ['), "not JSON"),
        (Answer(503, b"<html>busy</html>", cut=True), "IncompleteRead"),
    ],
    ids=["refused", "reset", "cut-body", "html-200", "truncated-json", "cut-error-body"],
)
def test_fa10_a_transport_failure_becomes_one_line_cluster_error(
    step: Answer | Exception, says: str
) -> None:
    api = Api(Transport([step]), max_attempts=1, server=SERVER)

    with pytest.raises(ClusterError) as failed:
        api.request("GET", "/api/v1/namespaces")

    assert failed.value.reason == "unreachable"
    assert says in str(failed.value) and "\n" not in str(failed.value)
    assert str(failed.value).startswith("GET /api/v1/namespaces: ")
    assert SERVER in str(failed.value)  # whichever server answered, or did not


def test_reachable_turns_false_on_a_transport_failure_and_true_on_the_next_answer() -> None:
    api = Api(Transport([ConnectionRefusedError(111, "refused"), Answer(403)]), max_attempts=1)

    with pytest.raises(ClusterError):
        api.request("GET", "/api/v1/namespaces")
    assert not api.reachable

    with pytest.raises(ApiError):
        api.request("GET", "/api/v1/namespaces")
    assert api.reachable


@pytest.mark.case("FA-10")
@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (Raw([b'{"type": "ADDED", "object": {}}\n'], broken=True), "IncompleteRead"),
        (Raw([b'{"type": "ADDED", "object": {}}\n{"type": "MOD'], broken=False), "inside an"),
        (Raw([b"<html>proxy error</html>\n"]), "not JSON"),
        (Raw([b"[1, 2]\n"]), "not a JSON object"),
    ],
    ids=["cut", "truncated-event", "html", "not-an-object"],
)
def test_fa10_a_broken_watch_stream_ends_in_a_cluster_error(raw: Raw, says: str) -> None:
    api = Api(Transport([Answer(200, raw=raw)]))

    with pytest.raises(ClusterError) as failed:
        list(api.stream("/api/v1/configmaps", [("watch", "true")]))

    assert failed.value.reason == "unreachable" and says in str(failed.value)


def test_a_watch_that_cannot_open_fails_when_opened_not_when_read() -> None:
    api = Api(Transport([ConnectionRefusedError(111, "refused")]))

    with pytest.raises(ClusterError):
        api.stream("/api/v1/configmaps", [("watch", "true")])
    assert not api.reachable


def test_a_large_answer_is_decoded_with_the_collector_paused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    collecting: list[bool] = []
    decode = json.loads

    def loads(data: bytes) -> object:
        collecting.append(gc.isenabled())
        return decode(data)

    monkeypatch.setattr("gitopsd.cluster.api.json.loads", loads)
    items = [{"metadata": {"name": f"o{number}"}} for number in range(LARGE_ANSWER_BYTES // 20)]
    page = json.dumps({"items": items}).encode()
    api = Api(Transport([Answer(200, b'{"items": []}'), Answer(200, page)]))

    assert api.request("GET", "/api/v1/configmaps?limit=1") == {"items": []}
    assert api.request("GET", "/api/v1/configmaps")["items"] == items
    assert collecting == [True, False] and gc.isenabled()


def test_the_collector_resumes_when_the_last_decode_ends_and_only_if_it_ran_before() -> None:
    pause = CollectorPause()
    with pause:
        with pause:  # another thread's decode
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()

    gc.disable()
    try:
        with pause:
            pass
        assert not gc.isenabled()  # whoever turned it off turns it on again
    finally:
        gc.enable()
