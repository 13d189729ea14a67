"""A real git server: bare repositories served over file:// and over smart HTTP.

Smart HTTP is git's own `git http-backend` (a CGI program) behind a small loopback HTTP
server that demands basic auth, the way a hosted git service does. The benchmark serves its
peers from a process of its own (`python -m tests.harness.gitserver ROOT PORT`).
"""

from __future__ import annotations

import base64
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

from tests.harness.controlplane import free_port, spawn, stop_process
from tests.harness.signing import Signer
from tests.harness.waiting import wait_for

GIT_HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"
TEST_IDENTITY = {
    "GIT_AUTHOR_NAME": "gitopsd tests",
    "GIT_AUTHOR_EMAIL": "tests@gitopsd.invalid",
    "GIT_COMMITTER_NAME": "gitopsd tests",
    "GIT_COMMITTER_EMAIL": "tests@gitopsd.invalid",
}


def tree_listing(entries: Mapping[str, tuple[str, str]]) -> str:
    """`entries` (name -> (mode, object id)) as `git mktree` reads them."""
    kinds = {"040000": "tree", "100644": "blob", "100755": "blob", "120000": "blob"}
    return "".join(f"{mode} {kinds[mode]} {sha}\t{name}\n" for name, (mode, sha) in entries.items())


def git(*args: str, cwd: Path, input: str | None = None, signer: Signer | None = None) -> str:
    """Runs git for a test helper, isolated from the user's and the system's git config;
    with `signer`, its settings given, so that `-S` (or `tag -s`) signs with its key."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        **TEST_IDENTITY,
        **(signer.env() if signer else {}),
    }
    args = (*signer.git_options(), *args) if signer else args
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, input=input, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


@dataclass
class GitRepo:
    """A bare repository on the server plus a working clone that tests commit from."""

    name: str
    bare: Path
    work: Path
    branch: str = "main"

    def commit(
        self,
        files: Mapping[str, str | bytes | None],
        message: str = "update",
        branch: str | None = None,
        executable: Collection[str] = (),
        signer: Signer | None = None,
    ) -> str:
        """Writes (or, for None, deletes) files, commits and pushes; returns the commit sha.
        Files named in `executable` are committed with mode 755; with `signer`, the commit
        is signed with its key."""
        branch = branch or self.branch
        self._checkout(branch)
        removed = [relative for relative, content in files.items() if content is None]
        if removed:
            git("rm", "-r", "-q", "--", *removed, cwd=self.work)
        for relative, content in files.items():
            path = self.work / relative
            if content is None:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
            path.chmod(0o755 if relative in executable else 0o644)
        added = [relative for relative, content in files.items() if content is not None]
        if added:
            git("add", "--", *added, cwd=self.work)
        signing = ["-S"] if signer else []
        git("commit", "-q", *signing, "--allow-empty", "-m", message, cwd=self.work, signer=signer)
        git("push", "-q", "origin", f"HEAD:refs/heads/{branch}", cwd=self.work)
        return self.head(branch)

    def commit_symlink(self, name: str, target: str, message: str = "add a link") -> str:
        """Commits a symbolic link `name` -> `target` (which need not exist)."""
        self._checkout(self.branch)
        link = self.work / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
        git("add", "--", name, cwd=self.work)
        git("commit", "-q", "-m", message, cwd=self.work)
        git("push", "-q", "origin", f"HEAD:refs/heads/{self.branch}", cwd=self.work)
        return self.head()

    def blob(self, content: str) -> str:
        """Stores `content` as a blob of the working clone; its id."""
        return git("hash-object", "-w", "--stdin", cwd=self.work, input=content)

    def blobs(self, contents: Sequence[str]) -> list[str]:
        """Stores each of `contents` as a blob, in one git process; their ids, in order."""
        with tempfile.TemporaryDirectory() as scratch:
            paths = [Path(scratch, str(n)) for n in range(len(contents))]
            for path, content in zip(paths, contents, strict=True):
                path.write_text(content)
            listed = "".join(f"{path}\n" for path in paths)
            return git("hash-object", "-w", "--stdin-paths", cwd=self.work, input=listed).split()

    def tree(self, entries: Mapping[str, tuple[str, str]]) -> str:
        """Stores a tree of `entries` (name -> (mode, object id)) without a work tree; its id."""
        [sha] = self.trees([entries])
        return sha

    def trees(self, trees: Sequence[Mapping[str, tuple[str, str]]]) -> list[str]:
        """Stores each of `trees` as `tree` does, in one git process; their ids, in order."""
        listed = "\n".join(tree_listing(entries) for entries in trees)
        return git("mktree", "--batch", cwd=self.work, input=listed).split()

    def push_tree(self, tree: str, message: str = "a crafted tree") -> str:
        """Pushes a commit of `tree` on top of the branch, never checked out (it may name
        more files than a disk holds): later `commit` calls start from the old tip."""
        parent = self.head()
        sha = git("commit-tree", tree, "-p", parent, "-m", message, cwd=self.work)
        git("push", "-q", "origin", f"{sha}:refs/heads/{self.branch}", cwd=self.work)
        return sha

    def head(self, branch: str | None = None) -> str:
        return git("rev-parse", f"refs/heads/{branch or self.branch}", cwd=self.bare)

    def force_push(self, sha: str, branch: str | None = None) -> None:
        """Moves `branch` on the server to `sha`, rewriting history (`git push --force`)."""
        branch = branch or self.branch
        self._checkout(branch)
        git("reset", "-q", "--hard", sha, cwd=self.work)
        git("push", "-q", "--force", "origin", f"HEAD:refs/heads/{branch}", cwd=self.work)

    def delete_branch(self, branch: str) -> None:
        git("push", "-q", "origin", f":refs/heads/{branch}", cwd=self.work)

    def tag(self, name: str, sha: str) -> None:
        git("tag", "-f", name, sha, cwd=self.work)
        git("push", "-q", "--force", "origin", f"refs/tags/{name}", cwd=self.work)

    def annotated_tag(self, name: str, sha: str, signer: Signer | None = None) -> None:
        """Pushes an annotated tag `name` of `sha`, signed with `signer`'s key if given."""
        signing = ["-s"] if signer else ["-a"]
        git("tag", "-f", *signing, "-m", f"release {name}", name, sha, cwd=self.work, signer=signer)
        git("push", "-q", "--force", "origin", f"refs/tags/{name}", cwd=self.work)

    def _checkout(self, branch: str) -> None:
        """Puts the working clone on `branch` as the server has it (or on a new branch)."""
        git("fetch", "-q", "--prune", "origin", cwd=self.work)
        if git("branch", "-r", "--list", f"origin/{branch}", cwd=self.work):
            git("checkout", "-q", "-B", branch, f"origin/{branch}", cwd=self.work)
        elif git("rev-list", "-n1", "--all", cwd=self.work):
            git("checkout", "-q", "-B", branch, cwd=self.work)
        else:  # nothing committed yet: the branch is unborn
            git("symbolic-ref", "HEAD", f"refs/heads/{branch}", cwd=self.work)


@dataclass
class GitServer:
    """Serves every bare repository under `root`; `start()` opens the smart-HTTP listener."""

    root: Path
    username: str = "gitopsd"
    password: str = field(default_factory=lambda: secrets.token_hex(12))
    port: int = 0
    open: threading.Event = field(default_factory=threading.Event)
    trickling: threading.Event = field(default_factory=threading.Event)
    """While set, every answer's body is sent a byte at a time, `pause_seconds` apart: a
    server that holds a fetch for as long as its client waits."""
    pause_seconds: float = 2.0
    trickled: int = 0
    """Answers it has trickled (or trickles now)."""
    stopped: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None
    _process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.open.set()
        handler = type("Handler", (_GitHttpHandler,), {"git_server": self})
        self._server = _Listener(("127.0.0.1", self.port), handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def start_apart(self, log_file: Path) -> None:
        """Serves as `start` does, from a process of its own: a peer's fetches then wait for
        no lock of the harness that measures it (`holding` and `trickling` do not reach it)."""
        self.port = free_port()
        credentials = {"GIT_SERVER_USERNAME": self.username, "GIT_SERVER_PASSWORD": self.password}
        argv = [sys.executable, "-m", "tests.harness.gitserver", str(self.root), str(self.port)]
        self._process = spawn(argv, log_file, credentials)
        wait_for(self._answers, f"the git server apart (its log: {log_file})", 30)

    def _answers(self) -> bool:
        if self._process is not None and self._process.poll() is not None:
            raise RuntimeError(f"the git server exited {self._process.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True  # it answered: 401, as it does without credentials
        except OSError:
            return False

    def stop(self) -> None:
        self.stopped.set()
        if self._server:
            self._server.shutdown()
            self._server.server_close()
        if self._process:
            stop_process(self._process)

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Smart-HTTP requests wait until the block ends: a fetch stays in flight meanwhile."""
        self.open.clear()
        try:
            yield
        finally:
            self.open.set()

    def create_repo(self, name: str) -> GitRepo:
        bare = self.root / f"{name}.git"
        git("init", "-q", "--bare", "-b", "main", str(bare), cwd=self.root)
        git("config", "http.receivepack", "true", cwd=bare)
        work = self.root / "work" / name
        work.mkdir(parents=True)
        git("init", "-q", "-b", "main", cwd=work)
        git("remote", "add", "origin", bare.as_uri(), cwd=work)
        return GitRepo(name=name, bare=bare, work=work)

    def file_url(self, repo: GitRepo) -> str:
        return repo.bare.as_uri()

    def http_url(self, repo: GitRepo) -> str:
        return f"http://127.0.0.1:{self.port}/{repo.bare.name}"

    def authorized(self, header: str | None) -> bool:
        expected = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        return secrets.compare_digest(header or "", f"Basic {expected}")


class _Listener(ThreadingHTTPServer):
    request_queue_size = 128
    """A burst of fetches (a fleet's sources at once) waits its turn: past the default 5, the
    kernel drops a connection's first packet, and the client retries a second or more later."""


class _GitHttpHandler(BaseHTTPRequestHandler):
    git_server: GitServer

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the tests read git's answers, not the access log."""

    def _serve(self) -> None:
        self.git_server.open.wait(60)
        if not self.git_server.authorized(self.headers.get("Authorization")):
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="gitopsd-test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        answer = subprocess.run(
            [GIT_HTTP_BACKEND],
            input=self._request_body(),
            env=self._cgi_environment(),
            capture_output=True,
            check=False,
        )
        self._relay(answer.stdout)

    def _cgi_environment(self) -> dict[str, str]:
        path, _, query = self.path.partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.git_server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": unquote(path),
            "QUERY_STRING": query,
            "REMOTE_USER": self.git_server.username,
            "REMOTE_ADDR": self.client_address[0],
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
        }
        for header in ("Git-Protocol", "Content-Encoding"):
            if value := self.headers.get(header):
                env["HTTP_" + header.upper().replace("-", "_")] = value
        return env

    def _request_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._read_chunked()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _read_chunked(self) -> bytes:
        chunks = []
        while size := int(self.rfile.readline().split(b";")[0].strip(), 16):
            chunks.append(self.rfile.read(size))
            self.rfile.readline()
        self.rfile.readline()
        return b"".join(chunks)

    def _relay(self, cgi_output: bytes) -> None:
        head, _, payload = cgi_output.partition(b"\r\n\r\n")
        headers = [line.split(b":", 1) for line in head.split(b"\r\n") if b":" in line]
        status = next((int(v.split()[0]) for k, v in headers if k.lower() == b"status"), 200)
        self.send_response(status)
        for key, value in headers:
            if key.lower() != b"status":
                self.send_header(key.decode(), value.strip().decode())
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.git_server.trickling.is_set():
            self._trickle(payload)
        else:
            self.wfile.write(payload)

    def _trickle(self, payload: bytes) -> None:
        server = self.git_server
        server.trickled += 1
        try:
            for at in range(len(payload)):
                if not server.trickling.is_set():
                    self.wfile.write(payload[at:])
                    return
                self.wfile.write(payload[at : at + 1])
                self.wfile.flush()
                if server.stopped.wait(server.pause_seconds):
                    return
        except OSError:
            return  # the client went


def main() -> None:
    """Serves ROOT on loopback PORT until terminated, with the credentials in
    GIT_SERVER_USERNAME and GIT_SERVER_PASSWORD."""
    root, port = Path(sys.argv[1]), int(sys.argv[2])
    username, password = os.environ["GIT_SERVER_USERNAME"], os.environ["GIT_SERVER_PASSWORD"]
    GitServer(root, username, password, port=port).start()
    signal.pause()  # SIGTERM ends it


if __name__ == "__main__":
    main()
