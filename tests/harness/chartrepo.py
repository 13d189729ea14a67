"""A real Helm chart repository: archives made by `helm package`, an index made by
`helm repo index`, served over HTTP by a loopback server that demands basic auth, the way a
hosted chart repository does."""

from __future__ import annotations

import base64
import secrets
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class ChartRepository:
    """A directory of chart archives and its index, as the server serves them."""

    directory: Path
    url: str = ""
    username: str = "charts"
    password: str = field(default_factory=lambda: "chart-secret-" + secrets.token_hex(8))
    requests: list[str] = field(default_factory=list)
    """The path of every request served, in order."""
    redirects: dict[str, str] = field(default_factory=dict)
    """Request paths answered with a redirect to another URL."""
    anonymous: bool = False
    """Anyone may read it (a public chart repository)."""

    def publish(self, files: Mapping[str, str], version: str) -> Path:
        """Packages the chart in `files` into the repository, and indexes it again."""
        archive = package(files, version, self.directory)
        self.index()
        return archive

    def index(self) -> None:
        helm("repo", "index", str(self.directory))

    def flood_index(self, chart: str, mib: int) -> None:
        """An index.yaml of `mib` MiB listing ever more versions of `chart`, each `{a: b}`:
        a listing that costs what it is parsed into, not what it weighs."""
        line = b"  - {a: b}\n" * 4096
        with (self.directory / "index.yaml").open("wb") as index:
            index.write(f"apiVersion: v1\nentries:\n  {chart}:\n".encode())
            for _ in range(mib * 1024 * 1024 // len(line)):
                index.write(line)

    def put(self, name: str, data: bytes) -> None:
        """A file served as it is (an archive no `helm package` would make)."""
        (self.directory / name).write_bytes(data)


def package(files: Mapping[str, str], version: str, into: Path) -> Path:
    """The chart in `files` (paths under its directory), its version set to `version`,
    packaged by `helm package` into directory `into`."""
    work = into.parent / f"work-{secrets.token_hex(4)}"
    for path, text in files.items():
        target = work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    chart = work / next(iter(files)).split("/")[0]
    helm("package", str(chart), "--version", version, "--destination", str(into))
    shutil.rmtree(work)
    return into / f"{_chart_name(files)}-{version}.tgz"


def _chart_name(files: Mapping[str, str]) -> str:
    chart_file = next(text for path, text in files.items() if path.endswith("/Chart.yaml"))
    return next(
        line.split(":", 1)[1].strip()
        for line in chart_file.splitlines()
        if line.startswith("name:")
    )


def helm(*args: str, env: Mapping[str, str] | None = None) -> None:
    done = subprocess.run(["helm", *args], capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"helm {' '.join(args)} failed: {done.stderr.strip()}")


class _Handler(SimpleHTTPRequestHandler):
    repository: ChartRepository

    def do_GET(self) -> None:
        self.repository.requests.append(self.path)
        credentials = f"{self.repository.username}:{self.repository.password}"
        expected = "Basic " + base64.b64encode(credentials.encode()).decode()
        if self.headers.get("Authorization") != expected and not self.repository.anonymous:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="charts"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if elsewhere := self.repository.redirects.get(self.path):
            self.send_response(302)
            self.send_header("Location", elsewhere)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serving(directory: Path, anonymous: bool = False) -> Iterator[ChartRepository]:
    """A chart repository in `directory`, served on a loopback port until exit."""
    served = directory / "www"
    (served / "charts").mkdir(parents=True)
    repository = ChartRepository(served / "charts", anonymous=anonymous)
    handler = type("Handler", (_Handler,), {"repository": repository})
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(served)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    repository.url = f"http://127.0.0.1:{server.server_address[1]}/charts"
    try:
        yield repository
    finally:
        server.shutdown()
        server.server_close()
