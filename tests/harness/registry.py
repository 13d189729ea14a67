"""A real OCI registry (distribution, built by tests/controlplane/provide.sh) holding charts
pushed by `helm push`, behind the token flow hosted registries use: the registry answers
401 with a Bearer challenge, and its token service trades basic-auth credentials for a
signed token."""

from __future__ import annotations

import os
import secrets
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

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
        realm = f"http://{service}/token"
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
