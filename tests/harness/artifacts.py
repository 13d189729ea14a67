"""OCI artifacts of manifests in the tests' registry, pushed as their owners push them: as
`flux push artifact` does, by Flux's own client library (flux-push: one gzipped tar layer of
Flux's media type), and by `oras push` (a layer per file or directory, named by its title),
both built from their Go modules by tests/controlplane/provide.sh. A manifest written by
hand (`put_manifest`) makes what no tool would: a layer titled out of the artifact."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness.controlplane import Binaries
from tests.harness.registry import Registry

MANIFEST = "application/vnd.oci.image.manifest.v1+json"


@dataclass(frozen=True)
class Artifacts:
    """Pushes into `registry`, under its host: `oci://HOST:PORT/NAME`."""

    binaries: Binaries
    registry: Registry
    workdir: Path

    @property
    def host(self) -> str:
        return urllib.parse.urlsplit(self.registry.url).netloc

    def url(self, name: str) -> str:
        return f"oci://{self.host}/{name}"

    def flux_push(self, name: str, tag: str, files: Mapping[str, str]) -> str:
        """`files` pushed as `flux push artifact` does, at NAME:TAG; its digest."""
        credentials = f"{self.registry.username}:{self.registry.password}"
        done = self._run(
            str(self.binaries.flux_push),
            *("--url", f"{self.url(name)}:{tag}", "--path", str(self._written(files))),
            *("--source", "https://git.example.com/team/app", "--revision", "main@sha1:0"),
            *("--creds", credentials, "--insecure-registry"),
        )
        return done.strip()

    def oras_push(self, name: str, tag: str, files: Mapping[str, str], *paths: str) -> None:
        """`paths` of `files` pushed by `oras push` (a directory as one layer to unpack)."""
        directory = self._written(files)
        credentials = ["-u", self.registry.username, "--password-stdin"]
        # By the token service's name: oras sends credentials to a realm on loopback only
        # when the registry was reached by that same name (an SSRF guard).
        port = self.host.rpartition(":")[2]
        address = f"localhost:{port}/{name}:{tag}"
        oras = [str(self.binaries.oras), "push", "--plain-http", *credentials, address, *paths]
        self._run(*oras, cwd=directory, stdin=self.registry.password)

    def put_manifest(self, name: str, tag: str, manifest: dict[str, Any]) -> str:
        """`manifest` stored as NAME:TAG by the distribution API, as written; its digest."""
        body = json.dumps(manifest).encode()
        url = f"http://{self.host}/v2/{name}/manifests/{tag}"
        request = urllib.request.Request(url, data=body, method="PUT")
        request.add_header("Content-Type", MANIFEST)
        request.add_header("Authorization", f"Bearer {self._token(name)}")
        with urllib.request.urlopen(request, timeout=30):  # noqa: S310 - loopback
            pass
        return "sha256:" + hashlib.sha256(body).hexdigest()

    def manifest(self, name: str, reference: str) -> dict[str, Any]:
        url = f"http://{self.host}/v2/{name}/manifests/{reference}"
        request = urllib.request.Request(url)
        request.add_header("Accept", MANIFEST)
        request.add_header("Authorization", f"Bearer {self._token(name)}")
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - loopback
            manifest: dict[str, Any] = json.load(answer)
        return manifest

    def _token(self, name: str) -> str:
        """A token for pull and push of `name`, from the registry's token service."""
        challenge = urllib.request.Request(f"http://{self.host}/v2/")
        try:
            urllib.request.urlopen(challenge, timeout=30)  # noqa: S310 - loopback
        except urllib.error.HTTPError as error:
            header = error.headers["WWW-Authenticate"]
        fields = dict(part.split("=", 1) for part in header.removeprefix("Bearer ").split(","))
        realm, service = (fields[key].strip('"') for key in ("realm", "service"))
        query = urllib.parse.urlencode(
            {"service": service, "scope": f"repository:{name}:pull,push"}
        )
        request = urllib.request.Request(f"{realm}?{query}")  # noqa: S310 - loopback
        basic = f"{self.registry.username}:{self.registry.password}".encode()
        request.add_header("Authorization", f"Basic {base64.b64encode(basic).decode()}")
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - loopback
            token: str = json.load(answer)["token"]
        return token

    def _written(self, files: Mapping[str, str]) -> Path:
        directory = Path(tempfile.mkdtemp(dir=self.workdir))
        for name, text in files.items():
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            (directory / name).write_text(text)
        return directory

    def _run(self, *argv: str, cwd: Path | None = None, stdin: str | None = None) -> str:
        home = Path(tempfile.mkdtemp(dir=self.workdir))  # no one's docker config
        environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
        done = subprocess.run(
            argv, cwd=cwd, env=environment, input=stdin, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(argv[:3])}: {done.stderr}")
        return done.stdout
