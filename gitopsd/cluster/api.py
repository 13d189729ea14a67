"""Raw HTTP to the API server: JSON in, plain dicts out, our errors on failure.

The official client provides configuration, authentication and its connection pool (see
`transport`); the requests bypass its typed models, which cost 30-50x more to decode than
plain JSON. Every transport failure (refused, reset or cut connection, truncated body, an
answer that is not JSON) becomes a `ClusterError` with reason `unreachable`: nothing else
escapes.
"""

from __future__ import annotations

import contextlib
import datetime
import email.utils
import gc
import http.client
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import urllib3

from gitopsd.backoff import jittered
from gitopsd.cluster.answers import (
    Answer,
    immutable_fields,
    names_an_object,
    speaks_kubernetes,
    status_message,
    status_of,
)
from gitopsd.cluster.pacing import Pace
from gitopsd.cluster.transport import Transport
from gitopsd.errors import ClusterError, ClusterReason

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
NOT_APPLIED_STATUSES = frozenset({429})
"""The answers after which a POST is sent again: the server's flow control turned it away.
A 5xx may come after the server created the object (a gateway that timed out), so a create
is never retried after one: its caller finds out what happened (a hook by its run label)."""
MAX_RETRY_AFTER_SECONDS = 30.0
"""The longest Retry-After honoured: a request is worth that much waiting, not more."""
CONNECT_TIMEOUT_SECONDS = 5.0  # for the connection; then Api.timeout_seconds for the answer
REASON_BY_STATUS: dict[int, ClusterReason] = {
    400: ClusterReason.INVALID,
    401: ClusterReason.FORBIDDEN,
    403: ClusterReason.FORBIDDEN,
    404: ClusterReason.NOT_FOUND,
    409: ClusterReason.CONFLICT,
    410: ClusterReason.GONE,
    413: ClusterReason.TOO_LARGE,
    422: ClusterReason.INVALID,
    429: ClusterReason.THROTTLED,
    504: ClusterReason.TIMEOUT,
}
JSON = "application/json"
TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)
Fence = Callable[[], None]
"""Raises when this process may not write now; checked before every attempt of a write."""
LARGE_ANSWER_BYTES = 256 * 1024
"""Answers this large (pages of a LIST) are decoded with the cyclic GC paused."""


class CollectorPause:
    """Pauses the cyclic garbage collector while any thread decodes a large answer. A page
    of 500 objects makes some 50,000 containers, and every 700 of them start a collection,
    which from time to time scans every object the cache holds; JSON holds no cycles, so
    nothing waits to be collected meanwhile. Filling a cache of 10,000 objects measured
    92-112 us per object with the collector on, 54-81 us with it paused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decoding = 0
        self._resume = False

    def __enter__(self) -> None:
        with self._lock:
            if self._decoding == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._decoding += 1

    def __exit__(self, *_: object) -> None:
        with self._lock:
            self._decoding -= 1
            if self._decoding == 0 and self._resume:
                gc.enable()


COLLECTOR_PAUSE = CollectorPause()
"""One for the process, as the collector is."""


@dataclass
class Counters:
    """API requests by verb and status code (a retried request counts each answer), safe to
    count from the apply threads while a scrape reads them; and whether the last was
    answered. One per connection to a server, shared by its clients (impersonating, paced)."""

    _requests: dict[tuple[str, int], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    reachable: bool = True
    """False since a request failed in transport, until the next answer arrives."""

    def count(self, method: str, status: int) -> None:
        with self._lock:
            self._requests[(method, status)] = self._requests.get((method, status), 0) + 1

    def snapshot(self) -> dict[tuple[str, int], int]:
        with self._lock:
            return dict(self._requests)


class ApiError(ClusterError):
    """A request the API server answered with an error status; `immutable`: the fields it
    refused to change because they cannot change once set (a Job's template, a
    Deployment's selector); `changeable`: those of their fields it said may change (a
    StatefulSet's spec: "for fields other than 'replicas', 'template', …")."""

    def __init__(
        self,
        status: int,
        message: str,
        immutable: tuple[str, ...] = (),
        changeable: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message, REASON_BY_STATUS.get(status, ClusterReason.SERVER))
        self.status = status
        self.immutable = immutable
        self.changeable = changeable


class Unserved(ApiError):
    """A 404 from an API server that serves no such resource type (its CRD or API group is
    not installed): no object of it exists, and a caller that knows what installs it says
    so."""

    def __init__(self, message: str) -> None:
        super().__init__(404, message)


@dataclass
class Api:
    """Sends requests over `transport`; retries 429/5xx with backoff (a POST only 429)."""

    transport: Transport
    timeout_seconds: float = 30.0
    max_attempts: int = 5
    counters: Counters = field(default_factory=Counters)
    server: str = "the API server"
    """Whom errors name: its address, and the kubeconfig's context and user where known."""
    pace: Pace | None = None
    """A tenant's share of the server: each attempt waits for its turn (None: no wait)."""

    @property
    def reachable(self) -> bool:
        """Whether its server answered the last request any of its clients sent."""
        return self.counters.reachable

    def request(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = JSON,
        accept: str = JSON,
        fence: Fence | None = None,
    ) -> Any:
        """Sends one request (retrying transient failures) and returns the decoded JSON body.
        `fence` runs before every attempt: a retry after a long Retry-After must not write
        for a process that lost its lease meanwhile."""
        for attempt in range(1, self.max_attempts + 1):
            if self.pace is not None:
                self.pace.take()
            if fence is not None:
                fence()
            answer = self._exchange(method, path, query, body, content_type, accept)
            self.counters.count(method, answer.status)
            if answer.status < 300:
                return _decoded(f"{method} {path}", answer.data or b"null", answer, self.server)
            error = self._error(method, path, answer)
            retryable = NOT_APPLIED_STATUSES if method == "POST" else RETRYABLE_STATUSES
            if error.status not in retryable:
                raise error
            if attempt == self.max_attempts:
                raise _gave_up(method, path, error, attempt)
            time.sleep(_retry_delay(attempt, answer.headers.get("Retry-After")))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def stream(self, path: str, query: Sequence[tuple[str, str]]) -> Iterator[dict[str, Any]]:
        """Opens a watch (raising if that fails) and returns its events as dicts, which end
        when the server closes the stream."""
        response = self._open(path, query)
        self.counters.count("WATCH", response.status)
        if response.status >= 300:
            try:
                answer = Answer(response.status, response.headers, response.read())
            except TRANSPORT_ERRORS as error:
                raise self._unreachable("WATCH", path, error) from None
            finally:
                response.release_conn()
            raise self._error("WATCH", path, answer)
        kind = response.headers.get("Content-Type") or "no content type"
        if not kind.startswith("application/json"):  # a proxy's page, not a watch
            response.release_conn()
            self.counters.reachable = False
            raise ClusterError(
                f"WATCH {path}: the answer is not a stream of JSON events ({kind}, "
                f"HTTP {response.status})",
                ClusterReason.UNREACHABLE,
            )
        return self._events(path, response)

    def _events(self, path: str, raw: Any) -> Iterator[dict[str, Any]]:
        buffer = b""
        try:
            for chunk in raw.stream(64 * 1024, decode_content=True):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                yield from (_event(path, line, raw, self.server) for line in lines if line.strip())
        except TRANSPORT_ERRORS as error:
            raise self._unreachable("WATCH", path, error) from None
        finally:
            raw.release_conn()
        if buffer.strip():
            raise ClusterError(
                f"WATCH {path}: the stream ended inside an event", ClusterReason.UNREACHABLE
            )

    def _error(self, method: str, path: str, answer: Answer) -> ApiError:
        status = status_of(answer)
        if status == 401:  # the server's own message is a bare "Unauthorized"
            return ApiError(
                401,
                f"{self.server} refused the credentials (401 Unauthorized): the token or "
                "client certificate is wrong or has expired; log in again or fix the kubeconfig",
            )
        if status == 404 and not names_an_object(answer):
            return self._unserved(method, path)
        immutable, changeable = immutable_fields(answer)
        return ApiError(status, status_message(answer), immutable, changeable)

    def _unserved(self, method: str, path: str) -> Unserved:
        """A 404 about the path, not an object: an API server serves no such resource type.
        Unless the server is no API server at all (asked at GET /version): that is raised,
        and as no ApiError, so that no caller takes it for an object that is gone."""
        answer = self._exchange("GET", "/version", (), None, JSON, JSON)
        self.counters.count("GET", answer.status)
        if not speaks_kubernetes(answer):
            raise ClusterError(
                f"{self.server} is not a Kubernetes API server: it answers {method} {path} "
                f"with HTTP 404 and GET /version with no Kubernetes version (HTTP "
                f"{answer.status}); check the server address in the kubeconfig",
                ClusterReason.UNREACHABLE,
            )
        return Unserved(
            f"{self.server} does not serve {method} {path} (HTTP 404): no such resource "
            "type; its CRD or API group is not installed"
        )

    def _unreachable(self, method: str, path: str, error: BaseException) -> ClusterError:
        self.counters.reachable = False
        return ClusterError(
            f"{method} {path}: cannot reach {self.server}: {_cause(error)}",
            ClusterReason.UNREACHABLE,
        )

    def _exchange(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]],
        body: Any,
        content_type: str,
        accept: str,
    ) -> Answer:
        """One attempt, its answer read whole: a cut or truncated body fails here."""
        payload = None if body is None else json.dumps(body).encode()  # JSON is YAML too
        headers = {"Accept": accept, "Content-Type": content_type}
        timeout = (CONNECT_TIMEOUT_SECONDS, self.timeout_seconds)
        try:
            response = self.transport.send(method, _target(path, query), payload, headers, timeout)
            try:
                answer = Answer(response.status, response.headers, response.read())
            finally:
                response.release_conn()
        except TRANSPORT_ERRORS as error:
            raise self._unreachable(method, path, error) from None
        self.counters.reachable = True
        return answer

    def _open(self, path: str, query: Sequence[tuple[str, str]]) -> Any:
        """Opens a watch: its response, the body to be streamed."""
        headers = {"Accept": JSON, "Content-Type": JSON}
        # a watch ends itself after its timeoutSeconds (300); a silent one longer is a hang
        timeout = (CONNECT_TIMEOUT_SECONDS, 330.0)
        try:
            response = self.transport.send("GET", _target(path, query), None, headers, timeout)
        except TRANSPORT_ERRORS as error:
            raise self._unreachable("WATCH", path, error) from None
        self.counters.reachable = True
        return response


def _gave_up(method: str, path: str, error: ApiError, attempts: int) -> ApiError:
    """The last answer of a request retried in vain, followed by the request it answered:
    a server's timeout or overload message ("Timeout: request did not complete within the
    allotted timeout") names no object, and callers that name one put it first."""
    tries = "1 try" if attempts == 1 else f"{attempts} tries"
    status = "" if str(error) == f"HTTP {error.status}" else f"HTTP {error.status}, "
    said = f"{error} ({method} {path}: {status}{tries})"
    return ApiError(error.status, said, error.immutable, error.changeable)


def _target(path: str, query: Sequence[tuple[str, str]]) -> str:
    return f"{path}?{urlencode(query)}" if query else path


def _retry_delay(attempt: int, retry_after: str | None) -> float:
    """Honours Retry-After, in seconds or as an HTTP date (RFC 9110; bounded); otherwise
    exponential backoff with jitter."""
    asked = _seconds_asked(retry_after or "")
    if asked is not None:
        return min(asked, MAX_RETRY_AFTER_SECONDS)
    return jittered(0.2, 5.0, attempt - 1)


def _seconds_asked(retry_after: str) -> float | None:
    """The wait a Retry-After asks for; None when it says nothing readable."""
    if retry_after.isascii() and retry_after.isdigit():
        return float(retry_after)
    try:
        until = email.utils.parsedate_to_datetime(retry_after)
    except (TypeError, ValueError):
        return None
    if until.tzinfo is None:  # "-0000": a time in UTC, as HTTP dates are
        until = until.replace(tzinfo=datetime.UTC)
    return max((until - datetime.datetime.now(datetime.UTC)).total_seconds(), 0.0)


def _decoded(request: str, data: bytes, response: Any, server: str) -> Any:
    """The JSON body; anything else (an HTML page from a proxy, a cut-off body) means the
    API server was not really reached, and says which server answered."""
    large = len(data) >= LARGE_ANSWER_BYTES
    try:
        with COLLECTOR_PAUSE if large else contextlib.nullcontext():
            return json.loads(data)
    except ValueError:
        kind = response.headers.get("Content-Type") or "no content type"
        raise ClusterError(
            f"{request}: the answer of {server} is not JSON ({kind}, {len(data)} bytes, "
            f"HTTP {response.status})",
            ClusterReason.UNREACHABLE,
        ) from None


def _event(path: str, line: bytes, response: Any, server: str) -> dict[str, Any]:
    event = _decoded(f"WATCH {path}", line, response, server)
    if not isinstance(event, dict):
        raise ClusterError(
            f"WATCH {path}: an event is not a JSON object", ClusterReason.UNREACHABLE
        )
    return event


def _cause(error: BaseException) -> str:
    """The innermost cause of a transport failure (urllib3 wraps `[Errno 111] Connection
    refused` in two exceptions and a pool's repr)."""
    for _ in range(8):
        inner = getattr(error, "reason", None)
        inner = inner if isinstance(inner, BaseException) else error.__cause__ or error.__context__
        if inner is None:
            break
        error = inner
    if isinstance(error, OSError) and error.strerror and not isinstance(error, ssl.SSLError):
        return error.strerror
    return _first_line(error)


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
