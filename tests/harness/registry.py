"""A real OCI registry (distribution, built by tests/controlplane/provide.sh) holding charts
pushed by `helm push`, behind the token flow hosted registries use: the registry answers
401 with a Bearer challenge, and its token service trades basic-auth credentials for a
signed token."""

from __future__ import annotations

import os
import secrets
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.harness.chartrepo import helm, package
from tests.harness.controlplane import Binaries, free_port, spawn
from tests.harness.waiting import wait_for


@dataclass(frozen=True)
class Registry:
    """The registry's charts under `url` (oci://HOST:PORT/charts), and who may pull."""

    url: str
    username: str
    password: str
    workdir: Path

    def publish(self, files: Mapping[str, str], version: str) -> None:
        """Packages the chart in `files` at `version` and pushes it with `helm push`."""
        archive = package(files, version, self.workdir / "packages")
        home = self.workdir / "helm"
        environment = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_REGISTRY_CONFIG": str(home / "registry.json"),
        }
        credentials = ["--username", self.username, "--password", self.password]
        helm("push", str(archive), self.url, "--plain-http", *credentials, env=environment)


@contextmanager
def serving_registry(
    binaries: Binaries, workdir: Path, anonymous: bool = False
) -> Iterator[Registry]:
    """A registry and its token service on loopback ports until exit; `anonymous`: anyone
    may pull (a public registry), only its user push."""
    workdir.mkdir(parents=True)
    (workdir / "packages").mkdir()
    password = "registry-secret-" + secrets.token_hex(8)
    jwks, service = workdir / "jwks.json", f"127.0.0.1:{free_port()}"
    options = ["-addr", service, "-jwks", str(jwks), "-user", "charts"]
    tokens = spawn(
        [str(binaries.registry_tokens), *options, *(["-anonymous"] if anonymous else [])],
        workdir / "tokens.log",
        {"TOKENS_PASSWORD": password},
    )
    try:
        # By name: clients built on go-containerregistry (Flux's, oras) refuse a realm on
        # another port of a loopback IP literal (an SSRF guard), not one named localhost.
        realm = f"http://localhost:{service.rpartition(':')[2]}/token"
        wait_for(lambda: _answers(realm), "the token service answers", deadline_seconds=30)
        port = free_port()
        config = workdir / "config.yml"
        config.write_text(_config(workdir / "storage", port, realm, jwks))
        registry = spawn([str(binaries.registry), "serve", str(config)], workdir / "registry.log")
        try:
            registry_root = f"http://127.0.0.1:{port}/v2/"
            wait_for(lambda: _answers(registry_root), "the registry", deadline_seconds=30)
            yield Registry(f"oci://127.0.0.1:{port}/charts", "charts", password, workdir)
        finally:
            registry.kill()
            registry.wait()
    finally:
        tokens.kill()
        tokens.wait()


def _config(storage: Path, port: int, realm: str, jwks: Path) -> str:
    return f"""version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {storage}
http:
  addr: 127.0.0.1:{port}
  secret: {secrets.token_hex(16)}
auth:
  token:
    realm: {realm}
    service: gitopsd-tests-registry
    issuer: gitopsd-tests
    jwks: {jwks}
"""


def _answers(url: str) -> bool:
    """Whether the server of `url` is up: it answers, whatever its status (a challenge)."""
    try:
        urllib.request.urlopen(url, timeout=2)  # noqa: S310 - a loopback http:// URL
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


@dataclass
class FloodingRegistry:
    """A registry (anonymous) whose every page of tags is `page_mib` MiB of `"1",` and
    links to a next page, up to `pages`: a listing that costs what it is parsed into."""

    url: str
    requests: list[str]


@contextmanager
def serving_flooding_registry(page_mib: int, pages: int = 50) -> Iterator[FloodingRegistry]:
    """A registry on a loopback port, streaming its pages of tags, until exit."""
    served = FloodingRegistry("", [])
    fields = {"registry": served, "page_mib": page_mib, "pages": pages}
    with _serving(type("Handler", (_Flooding,), fields)) as port:
        served.url = f"oci://127.0.0.1:{port}/charts"
        yield served


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """`handler` answering on a loopback port (yielded), until exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


class _Flooding(BaseHTTPRequestHandler):
    registry: FloodingRegistry
    page_mib: int
    pages: int

    def do_GET(self) -> None:
        self.registry.requests.append(self.path)
        path, _, query = self.path.partition("?")
        if not path.endswith("/tags/list"):
            self.send_error(404)
            return
        page = int(query.removeprefix("page=") or 0)
        items = self.page_mib * 1024 * 1024 // 4
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(items * 4 + 10))
        if page + 1 < self.pages:
            self.send_header("Link", f'<{path}?page={page + 1}>; rel="next"')
        self.end_headers()
        try:
            self.wfile.write(b'{"tags":[')
            chunks, rest = divmod(items - 1, 64 * 1024)
            for _ in range(chunks):
                self.wfile.write(b'"1",' * (64 * 1024))
            self.wfile.write(b'"1",' * rest + b'"1"]}')
        except OSError:
            pass  # the client stopped reading: as it should

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class LyingRegistry:
    """A registry (anonymous) that serves what its `paths` map to: a manifest or a blob
    whose bytes need not be what its digest says."""

    url: str
    paths: dict[str, bytes]


@contextmanager
def serving_lying_registry() -> Iterator[LyingRegistry]:
    """A registry on a loopback port, answering from its paths, until exit."""
    served = LyingRegistry("", {})
    with _serving(type("Handler", (_Lying,), {"registry": served})) as port:
        served.url = f"oci://127.0.0.1:{port}"
        yield served


class _Lying(BaseHTTPRequestHandler):
    registry: LyingRegistry

    def do_GET(self) -> None:
        body = self.registry.paths.get(self.path.partition("?")[0])
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass
