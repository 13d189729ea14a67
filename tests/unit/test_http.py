"""The daemon's HTTP servers on real loopback sockets: malformed requests get an answer,
slow or many clients cannot take one over, and none takes the probes' listener (SE-19,
SE-20, TA-06)."""

from __future__ import annotations

import hashlib
import hmac
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from gitopsd.daemon import http
from gitopsd.daemon.http import transport
from tests.harness.half_requests import HalfRequests
from tests.harness.waiting import wait_for

SECRET = b"s3cret"
BODY = b'{"ref": "refs/heads/main"}'
GOOD = "sha256=" + hmac.new(SECRET, BODY, hashlib.sha256).hexdigest()


@dataclass
class Server:
    address: tuple[str, int]
    triggered: list[str] = field(default_factory=list)

    def exchange(self, request: bytes) -> bytes:
        """Sends `request` as is; everything the server answers until it closes."""
        with socket.create_connection(self.address, timeout=10) as connection:
            connection.sendall(request)
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
        return answer

    def status(self, request: bytes) -> int:
        answer = self.exchange(request)
        assert answer.startswith(b"HTTP/1."), f"no HTTP answer: {answer!r}"
        return int(answer.split()[1])


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """The webhook listener, serving the webhook `app`."""
    monkeypatch.setattr(transport, "REQUEST_DEADLINE_SECONDS", 3.0)
    started = Server(("127.0.0.1", 0))
    webhooks = {"app": http.Webhook(SECRET, lambda: started.triggered.append("app"))}
    running = http.serve(("127.0.0.1", 0), http.Webhooks(webhooks.get))
    started.address = ("127.0.0.1", running.server_address[1])
    yield started
    running.shutdown()


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """The probe listener."""
    monkeypatch.setattr(transport, "REQUEST_DEADLINE_SECONDS", 3.0)
    running = http.serve(("127.0.0.1", 0), http.Probes(CollectorRegistry(), lambda: True))
    yield Server(("127.0.0.1", running.server_address[1]))
    running.shutdown()


def post(headers: bytes, body: bytes = BODY) -> bytes:
    length = b"Content-Length: %d\r\n" % len(body)
    return b"POST /hooks/app HTTP/1.1\r\nHost: x\r\n" + length + headers + b"\r\n" + body


HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
SIGNED = post(b"X-Hub-Signature-256: " + GOOD.encode() + b"\r\n")


@pytest.mark.case("SE-20")
@pytest.mark.parametrize(
    "signature",
    [
        b"X-Hub-Signature-256: sha256=" + "\u00fc".encode() * 32 + b"\r\n",  # non-ASCII
        b"X-Hub-Signature-256: sha256=\xe9\xe9\r\n",  # not even UTF-8
        b"X-Hub-Signature-256: sha1=" + GOOD.encode()[7:] + b"\r\n",  # wrong prefix
        b"X-Hub-Signature-256: " + GOOD.encode()[:-2] + b"\r\n",  # wrong length
        b"",  # missing
    ],
)
def test_se20_a_malformed_signature_gets_401_and_the_server_keeps_serving(
    server: Server, signature: bytes
) -> None:
    assert server.status(post(signature)) == 401
    assert server.triggered == []
    assert server.status(post(b"X-Hub-Signature-256: " + GOOD.encode() + b"\r\n")) == 202
    assert server.triggered == ["app"]


@pytest.mark.case("SE-20")
@pytest.mark.parametrize("length", [b"", b"\xb2", b"9" * 5000, b"1048577", b"-1"])
def test_se20_a_missing_odd_or_too_large_content_length_gets_413(
    server: Server, length: bytes
) -> None:
    request = b"POST /hooks/app HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + b"\r\n\r\n"
    assert server.status(request) == 413
    assert server.triggered == []


@pytest.mark.case("SE-20")
def test_se20_a_client_still_sending_an_oversized_body_reads_the_413(server: Server) -> None:
    """The answer comes before the body is read; the rest of the body is read and dropped
    so the client, still sending, is not reset (it lost the answer that way under load)."""
    assert server.status(post(b"", body=b"x" * http.MAX_DISCARDED_BYTES)) == 413
    assert server.triggered == []


def server_threads() -> int:
    return sum(thread.name == "http" for thread in threading.enumerate())


def probe_timeout_seconds() -> float:
    """The liveness probe's timeoutSeconds, as the shipped Deployment says."""
    deployment = yaml.safe_load(DEPLOYMENT.read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return float(container["livenessProbe"]["timeoutSeconds"])


DEPLOYMENT = Path(__file__).resolve().parents[2] / "config" / "manager" / "deployment.yaml"


@pytest.mark.case("SE-19")
def test_se19_probes_are_answered_at_once_while_half_requests_hold_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Eight connections sending half a request line, reopened at every cut-off, starved 54
    of 57 probes of a thread-per-request server; here every probe, timed as the kubelet
    times it, is answered 200, through several cut-offs."""
    monkeypatch.setattr(transport, "REQUEST_DEADLINE_SECONDS", 1.0)
    running = http.serve(("127.0.0.1", 0), http.Probes(CollectorRegistry(), lambda: True))
    address = ("127.0.0.1", running.server_address[1])
    attack = HalfRequests(address, 8)
    timeout = probe_timeout_seconds()
    answers: list[int] = []
    try:
        while attack.reopened < 24:  # each connection cut off and opened again, three times
            with socket.create_connection(address, timeout=timeout) as probe:
                probe.sendall(HEALTHZ)
                answers.append(int(probe.recv(65536).split()[1]))
    finally:
        attack.close()
        running.shutdown()

    assert set(answers) == {200}, answers
    assert server_threads() == 0


@pytest.mark.case("SE-19")
def test_se19_one_address_cannot_take_every_connection(server: Server) -> None:
    """Past MAX_PER_CLIENT from one address the rest is answered 503 at once; another
    address (a git host's) is still served, and the server keeps one thread however many
    connections it holds."""
    greedy = HalfRequests(server.address, http.MAX_PER_CLIENT, source="127.0.0.2")
    try:
        with socket.create_connection(
            server.address, timeout=5, source_address=("127.0.0.2", 0)
        ) as one_more:
            one_more.sendall(SIGNED)
            assert one_more.recv(65536).startswith(b"HTTP/1.0 503")
        assert server.status(SIGNED) == 202  # from 127.0.0.1
        assert server_threads() == 1
    finally:
        greedy.close()


@pytest.mark.case("SE-19")
def test_se19_slow_clients_are_cut_off_at_the_deadline(probes: Server) -> None:
    """A client that sends one more byte every 0.2 s, for ever, is cut off all the same."""
    with socket.create_connection(probes.address, timeout=10) as slow:
        slow.sendall(b"GET /healthz HTTP/1.1\r\nX-Slow: ")

        def cut_off() -> bool:
            try:
                slow.sendall(b"a")
                return slow.recv(1, socket.MSG_DONTWAIT) == b""
            except BlockingIOError:
                return False
            except OSError:
                return True

        wait_for(cut_off, "the slow client to be cut off", 20)
    assert probes.status(HEALTHZ) == 200


def test_ta06_a_head_that_trickles_in_is_answered_408_at_the_head_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A half-sent request gives its slot back at the head deadline, long before the
    request's own deadline: the answer is 408, on every listener alike."""
    monkeypatch.setattr(transport, "HEAD_DEADLINE_SECONDS", 1.0)
    monkeypatch.setattr(transport, "REQUEST_DEADLINE_SECONDS", 600.0)
    nothing: dict[str, http.Webhook] = {}
    running = http.serve(("127.0.0.1", 0), http.Webhooks(nothing.get))
    try:
        with socket.create_connection(("127.0.0.1", running.server_address[1])) as slow:
            slow.sendall(b"POST /hooks/app HTTP/1.1\r\nX-Slow: ")
            slow.settimeout(0.2)

            def answered() -> bytes | None:
                try:
                    return slow.recv(65536) or None
                except TimeoutError:
                    slow.sendall(b"a")  # one more byte of the head, and so on
                    return None

            answer = wait_for(answered, "the head deadline to answer", 20)
    finally:
        running.shutdown()
    assert answer.startswith(b"HTTP/1.0 408 "), answer


def test_ta06_each_listener_serves_only_its_own(server: Server, probes: Server) -> None:
    """The webhooks' listener answers no probe and no scrape, the probes' no webhook."""
    assert server.status(HEALTHZ) == 404
    assert server.status(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n") == 404
    assert probes.status(SIGNED) == 404
    assert probes.status(HEALTHZ) == 200


@dataclass
class FakeControl:
    """The control API's calls, recorded (gitopsd.daemon.control runs real workers)."""

    asked: list[str] = field(default_factory=list)

    def sources(self) -> list[dict[str, object]]:
        return [{"name": "app", "ready": "True"}]

    def reconcile(self, name: str) -> tuple[int, dict[str, object]]:
        self.asked.append(name)
        if name in ("app", "team/web"):
            return 202, {"token": "1"}
        return 404, {"error": f"no source {name} runs here"}

    def objects(self, name: str) -> tuple[int, dict[str, object]]:
        self.asked.append(f"objects of {name}")
        return 200, {"revision": "", "objects": []}

    def history(self, name: str) -> tuple[int, dict[str, object]]:
        self.asked.append(f"history of {name}")
        return 200, {"history": []}

    def suspend(self, name: str, suspended: bool) -> tuple[int, dict[str, object]]:
        self.asked.append(f"{'suspend' if suspended else 'resume'} {name}")
        return 200, {"suspended": suspended}


def control_server(listen: str) -> tuple[http.Server, FakeControl]:
    control = FakeControl()
    return http.serve_control((listen, 0), control), control


def control_request(method: str, path: str, host: str = "127.0.0.1:9091", **headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "X-Gitopsd-Control: 1"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_the_control_api_lists_sources_and_asks_for_a_reconcile() -> None:
    running, control = control_server("127.0.0.1")
    served = Server(("127.0.0.1", running.server_address[1]))
    try:
        listed = served.exchange(control_request("GET", "/api/v1/sources"))
        asked = served.exchange(control_request("POST", "/api/v1/sources/team%2Fweb/reconcile"))
        unknown = served.exchange(control_request("POST", "/api/v1/sources/nope/reconcile"))
        objects = served.exchange(control_request("GET", "/api/v1/sources/team%2Fweb/objects"))
        history = served.exchange(control_request("GET", "/api/v1/sources/app/history"))
        suspended = served.exchange(control_request("POST", "/api/v1/sources/app/suspend"))
        resumed = served.status(control_request("POST", "/api/v1/sources/app/resume"))
        wrong_method = served.status(control_request("GET", "/api/v1/sources/app/reconcile"))
        metrics = served.status(control_request("GET", "/metrics"))
    finally:
        running.shutdown()
    assert listed.split(b"\r\n\r\n", 1)[1] == b'[{"name": "app", "ready": "True"}]\n'
    assert asked.startswith(b"HTTP/1.0 202 ") and asked.endswith(b'{"token": "1"}\n')
    assert unknown.startswith(b"HTTP/1.0 404 ") and b"no source nope runs here" in unknown
    assert objects.endswith(b'{"revision": "", "objects": []}\n')
    assert history.startswith(b"HTTP/1.0 200 ") and history.endswith(b'{"history": []}\n')
    assert (wrong_method, metrics) == (404, 404)  # the control API, and only as documented
    assert suspended.endswith(b'{"suspended": true}\n') and resumed == 200
    expected = ["team/web", "nope", "objects of team/web", "history of app", "suspend app"]
    assert control.asked == [*expected, "resume app"]


@pytest.mark.parametrize(
    "request_bytes",
    [
        # a form a web page posted: no control header
        b"POST /api/v1/sources/app/reconcile HTTP/1.1\r\nHost: 127.0.0.1:9091\r\n\r\n",
        # a page on a DNS name rebound to 127.0.0.1: its own name as Host
        control_request("POST", "/api/v1/sources/app/reconcile", host="evil.example:9091"),
        control_request("GET", "/api/v1/sources", host="evil.example:9091"),
    ],
    ids=["no-header", "rebound-name-post", "rebound-name-get"],
)
def test_the_control_api_refuses_what_a_web_page_could_send(request_bytes: bytes) -> None:
    running, control = control_server("127.0.0.1")
    try:
        answer = Server(("127.0.0.1", running.server_address[1])).exchange(request_bytes)
    finally:
        running.shutdown()
    assert answer.startswith(b"HTTP/1.0 403 ") and b"loopback clients only" in answer
    assert control.asked == []


def test_the_main_listener_serves_no_control_api(server: Server) -> None:
    assert server.status(control_request("GET", "/api/v1/sources")) == 404
    assert server.status(control_request("POST", "/api/v1/sources/app/reconcile")) == 404


def non_loopback_address() -> str | None:
    """This machine's address on its default route, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.254", 9))
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if address.startswith("127.") else address


def test_the_control_api_answers_loopback_clients_only() -> None:
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    running, control = control_server("0.0.0.0")  # noqa: S104 - to be reached from outside
    try:
        outside = Server((address, running.server_address[1]))
        refused = outside.exchange(control_request("POST", "/api/v1/sources/app/reconcile"))
        listed = outside.status(control_request("GET", "/api/v1/sources"))
    finally:
        running.shutdown()
    assert refused.startswith(b"HTTP/1.0 403 ") and b"loopback clients only" in refused
    assert listed == 403
    assert control.asked == []


def test_a_call_for_another_replicas_gitsync_is_handed_on_with_its_signature_headers_only() -> None:
    handed: list[tuple[bytes, dict[str, str]]] = []
    forward = http.Forward(lambda body, headers: handed.append((body, headers)))
    endpoints = http.Webhooks(lambda path: forward)
    headers = {"x-hub-signature-256": GOOD, "authorization": "Bearer x", "cookie": "c=1"}

    answer = endpoints.answer(transport.Request("POST", "/hooks/gitsyncs/a/b", headers), BODY)

    assert answer[0] == 202 and handed == [(BODY, {"x-hub-signature-256": GOOD})]
    forwarded = {**headers, "x-gitopsd-forwarded": "1"}
    again = endpoints.answer(transport.Request("POST", "/hooks/gitsyncs/a/b", forwarded), BODY)
    assert again[0] == 404 and len(handed) == 1  # a forwarded call goes no further


def test_a_server_shut_down_frees_its_port() -> None:
    running = http.serve(("127.0.0.1", 0), http.Probes(CollectorRegistry(), lambda: True))
    port = running.server_address[1]
    running.shutdown()

    again = socket.socket()
    try:
        again.bind(("127.0.0.1", port))  # refused (address in use) while the listener is open
        again.listen()
    finally:
        again.close()
