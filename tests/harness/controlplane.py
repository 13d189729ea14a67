"""A real control plane on free loopback ports: etcd and kube-apiserver with TLS, RBAC,
service-account keys and an audit log, and (unless asked not to) kube-controller-manager,
kube-scheduler and kwok's simulated nodes (tests.harness.controllers).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness import controllers
from tests.harness.controllers import ControllerBinaries, as_arguments

PROVIDE_SCRIPT = Path(__file__).resolve().parent.parent / "controlplane" / "provide.sh"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/16"  # a /24 runs out of Service IPs at 254
START_DEADLINE_SECONDS = 120.0
STOP_GRACE_SECONDS = 15.0
STORAGE_CLASSES = "/apis/storage.k8s.io/v1/storageclasses"
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
AUDITED_USER, AUDITED_GROUP = "audited", "gitopsd:audited"
"""An admin whose every request is logged, reads included: "nothing reached the server"."""
PEER_USERS = ("flux-source-controller", "flux-kustomize-controller")
"""Admins audited as AUDITED_USER is, each under a name of its own: the peers the benchmark
runs beside gitopsd, whose requests it counts apart from gitopsd's."""
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    # Who wrote what, and when: write requests only, without bodies (they may hold Secrets);
    # every request of the audited user. Not the namespace controller's sweep of each
    # deleted namespace (a DELETE of every collection, most of the log otherwise). A Job's
    # status writes with the Job they made: which one completed it (the controller writes
    # its status again after that).
    "rules": [
        {
            "level": "None",
            "users": [controllers.USERS["kube-controller-manager"]],
            "verbs": ["deletecollection"],
        },
        {
            "level": "RequestResponse",
            "resources": [{"group": "batch", "resources": ["jobs/status"]}],
            "verbs": ["update", "patch"],
        },
        {"level": "Request", "verbs": ["delete"]},  # DeleteOptions: the preconditions
        {"level": "Metadata", "userGroups": [AUDITED_GROUP]},
        {"level": "Metadata", "verbs": list(WRITE_VERBS)},
        {"level": "None"},
    ],
}


@dataclass(frozen=True)
class Binaries:
    kube_apiserver: Path
    etcd: Path
    kubectl: Path
    helm: Path
    controllers: ControllerBinaries
    registry: Path
    """An OCI registry (distribution), for charts pushed with `helm push`."""
    registry_tokens: Path
    """The registry's token service (the Bearer flow of hosted registries)."""
    sops: Path
    """sops, which decrypts SOPS-encrypted files for gitopsd and encrypts the tests'."""
    age_keygen: Path
    """age-keygen, which makes the tests' age identities."""
    flux_push: Path
    """Pushes OCI artifacts with Flux's client library, as `flux push artifact` does."""
    oras: Path
    """The oras command line, which stores OCI artifacts in ORAS's own layout."""


def provided(script: Path, *arguments: str) -> dict[str, Path]:
    """Runs a provide script (which installs or builds once) and reads its NAME=path lines."""
    argv = [str(script), *arguments]
    answer = subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True).stdout
    pairs = (line.split("=", 1) for line in answer.splitlines() if "=" in line)
    return {name: Path(path) for name, path in pairs}


def spawn(
    argv: list[str], log_file: Path, environment: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A child writing stdout and stderr to `log_file`, which dies with the test process;
    `environment` is added to this process's."""
    with log_file.open("wb") as log:
        return subprocess.Popen(
            argv,
            env={**os.environ, **(environment or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,  # children start from the main thread only
        )


def provide_binaries() -> Binaries:
    """The control plane's binaries, built once and then taken from the cache."""
    paths = provided(PROVIDE_SCRIPT)
    return Binaries(
        kube_apiserver=paths["TEST_ASSET_KUBE_APISERVER"],
        etcd=paths["TEST_ASSET_ETCD"],
        kubectl=paths["TEST_ASSET_KUBECTL"],
        helm=paths["TEST_ASSET_HELM"],
        controllers=ControllerBinaries(
            kube_controller_manager=paths["TEST_ASSET_KUBE_CONTROLLER_MANAGER"],
            kube_scheduler=paths["TEST_ASSET_KUBE_SCHEDULER"],
            kwok=paths["TEST_ASSET_KWOK"],
            kwok_stages=paths["TEST_ASSET_KWOK_STAGES"],
        ),
        registry=paths["TEST_ASSET_REGISTRY"],
        registry_tokens=paths["TEST_ASSET_REGISTRY_TOKENS"],
        sops=paths["TEST_ASSET_SOPS"],
        age_keygen=paths["TEST_ASSET_AGE_KEYGEN"],
        flux_push=paths["TEST_ASSET_FLUX_PUSH"],
        oras=paths["TEST_ASSET_ORAS"],
    )


_HANDED_OUT: set[int] = set()
_HANDED_OUT_LOCK = threading.Lock()
FIRST_PORT = 20000
"""Ports handed out lie from here to the first ephemeral port (32768 on Linux)."""


def free_port() -> int:
    """A port nothing listens on now, below the kernel's range of ephemeral ports, within
    this test worker's own share of that range, and one this process never handed out
    before. Outgoing connections take ephemeral ports: one took a port probed here seconds
    before kube-scheduler bound it, the scheduler exited ("address already in use") and
    another test worker's listener answered its /healthz. Each worker has a share of its
    own: two workers once probed the same free port and handed it out both, and the second
    daemon to bind it exited. Handed out once: the listeners of one daemon's
    configuration, asked for one after the other, would otherwise share one."""
    lowest, highest = worker_ports(FIRST_PORT, _first_ephemeral_port())
    while True:
        port = lowest + secrets.randbelow(max(highest - lowest, 1))
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue  # taken: another
        with _HANDED_OUT_LOCK:
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port


def worker_ports(lowest: int, highest: int) -> tuple[int, int]:
    """This pytest-xdist worker's slice of [lowest, highest): gwN of M takes the N-th of M
    equal slices; outside xdist (make bench, make demo), the whole range."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "").removeprefix("gw")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.isdigit() or count < 2:
        return lowest, highest
    size = (highest - lowest) // count
    start = lowest + int(worker) * size
    return start, start + size


def _first_ephemeral_port() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _die_with_parent() -> None:
    """Runs in the child before exec: the kernel sends SIGTERM when the test process dies."""
    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(pki: Path) -> None:
    """A throwaway CA, a serving certificate for 127.0.0.1, and the service-account key pair."""
    pki.mkdir(parents=True, exist_ok=True)
    ca = "req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=gitopsd-test-ca"
    _openssl(*ca.split(), "-keyout", "ca.key", "-out", "ca.crt", cwd=pki)
    request = "req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver"
    _openssl(*request.split(), "-keyout", "server.key", "-out", "server.csr", cwd=pki)
    san = "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n"
    (pki / "san.cnf").write_text(san)
    sign = "x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2"
    _openssl(*sign.split(), "-extfile", "san.cnf", "-out", "server.crt", cwd=pki)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


class ControlPlane:
    """The control plane's processes as children; `start()` returns once the API server is
    ready and, with `with_controllers`, the controllers are healthy and the nodes Ready."""

    def __init__(
        self,
        binaries: Binaries,
        workdir: Path,
        with_controllers: bool = True,
        flags: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.binaries = binaries
        self.workdir = workdir
        self.with_controllers = with_controllers
        self.flags = flags or {}
        """More flags by component ("etcd", "kube-apiserver"), for a plane of a test's own."""
        self.pki = workdir / "pki"
        self.admin_token = secrets.token_hex(16)
        self.audited_token = secrets.token_hex(16)
        self.component_tokens = {name: secrets.token_hex(16) for name in controllers.USERS}
        self.peer_tokens = {user: secrets.token_hex(16) for user in PEER_USERS}
        self.port = 0
        self.etcd_url = ""
        self.processes: list[subprocess.Popen[bytes]] = []
        self.apiserver: subprocess.Popen[bytes] | None = None
        self.etcd: subprocess.Popen[bytes] | None = None
        self.controllers: list[subprocess.Popen[bytes]] = []
        self.ready_at = float("inf")
        """When the API server first answered ready: its audit log holds events of before."""

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        return self.pki / "ca.crt"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def audited_kubeconfig(self) -> Path:
        """Admin rights as AUDITED_USER, whose every request the audit log records."""
        return self.workdir / "audited-kubeconfig"

    @property
    def audit_log(self) -> Path:
        """JSON lines, one per write request the API server answered, and one per request
        of AUDITED_USER (see AUDIT_POLICY)."""
        return self.workdir / "audit.log"

    def peer_kubeconfig(self, user: str) -> Path:
        """Admin rights as `user`, one of PEER_USERS, whose every request the log records."""
        path = self.workdir / f"{user}-kubeconfig"
        write_kubeconfig(path, self.url, self.ca_file, user, self.peer_tokens[user])
        return path

    def start(self) -> None:
        make_certificates(self.pki)
        self.etcd_url = self._start_etcd()
        self.port = free_port()
        self._start_apiserver()
        self.ready_at = time.time()
        write_kubeconfig(self.kubeconfig, self.url, self.ca_file, "admin", self.admin_token)
        write_kubeconfig(
            self.audited_kubeconfig, self.url, self.ca_file, AUDITED_USER, self.audited_token
        )
        if self.with_controllers:
            self._start_controllers()

    def stop(self) -> None:
        """Stops every process, the last started first: SIGTERM, then SIGKILL after a grace
        period."""
        for process in reversed(self.processes):
            stop_process(process)
        self.processes.clear()

    @contextlib.contextmanager
    def apiserver_stopped(self) -> Iterator[None]:
        """Stops kube-apiserver (etcd keeps every object) for the body, then starts it again
        on the same port with the same certificates and tokens, even when the body raises,
        and returns once it and the controllers (`_restart_controllers`) are at work: later
        tests find the control plane as it was."""
        assert self.apiserver is not None
        stop_process(self.apiserver)
        place = self.processes.index(self.apiserver)
        self.processes.remove(self.apiserver)
        try:
            yield
        finally:
            self._start_apiserver()
            # back in its place: stopped after the controllers and kwok, whose own shutdown
            # waits for an API server to talk to
            self.processes.insert(place, self.processes.pop())
            self._restart_controllers()

    @contextlib.contextmanager
    def apiserver_paused(self) -> Iterator[None]:
        """kube-apiserver stopped with SIGSTOP for the body (its connections stay open and
        say nothing: a hung server, not a dead one), then SIGCONT, even when the body
        raises, and returns once the controllers (`_restart_controllers`) are at work."""
        assert self.apiserver is not None
        self.apiserver.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.apiserver.send_signal(signal.SIGCONT)
            self._restart_controllers()

    def pause_etcd(self) -> None:
        """Stops etcd with SIGSTOP, the API server left running: its requests to etcd hang."""
        assert self.etcd is not None
        self.etcd.send_signal(signal.SIGSTOP)

    def resume_etcd(self) -> None:
        """SIGCONT to etcd; returns once the API server says it reaches etcd again."""
        assert self.etcd is not None
        self.etcd.send_signal(signal.SIGCONT)
        self._await("kube-apiserver to reach etcd", lambda: self._apiserver_ready("/readyz/etcd"))

    def _spawn(
        self, name: str, argv: list[str], environment: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        process = spawn(argv, self.workdir / f"{name}.log", environment)
        self.processes.append(process)
        return process

    def _start_etcd(self) -> str:
        client, peer = free_port(), free_port()
        client_url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        flags = {
            "--data-dir": str(self.workdir / "etcd"),
            "--listen-client-urls": client_url,
            "--advertise-client-urls": client_url,
            "--listen-peer-urls": peer_url,
            "--initial-advertise-peer-urls": peer_url,
            "--initial-cluster": f"default={peer_url}",
            "--unsafe-no-fsync": "true",
            "--log-level": "warn",
            **self.flags.get("etcd", {}),
        }
        self.etcd = self._spawn("etcd", [str(self.binaries.etcd), *as_arguments(flags)])
        self._wait_until_ready("etcd", self.etcd, lambda: _etcd_healthy(client_url))
        return client_url

    def _start_apiserver(self) -> None:
        tokens = self.workdir / "tokens.csv"
        components = "".join(
            f'{self.component_tokens[name]},{user},{user},"system:masters"\n'
            for name, user in controllers.USERS.items()
        )
        components += "".join(
            f'{token},{user},{user},"system:masters,{AUDITED_GROUP}"\n'
            for user, token in self.peer_tokens.items()
        )
        tokens.write_text(
            f'{self.admin_token},admin,admin,"system:masters"\n'
            f"{self.audited_token},{AUDITED_USER},{AUDITED_USER},"
            f'"system:masters,{AUDITED_GROUP}"\n' + components
        )
        tokens.chmod(0o600)
        policy = self.workdir / "audit-policy.json"
        policy.write_text(json.dumps(AUDIT_POLICY))
        flags = {
            "--etcd-servers": self.etcd_url,
            "--bind-address": "127.0.0.1",
            "--advertise-address": "127.0.0.1",
            "--secure-port": str(self.port),
            "--cert-dir": str(self.workdir / "apiserver-certs"),
            "--tls-cert-file": str(self.pki / "server.crt"),
            "--tls-private-key-file": str(self.pki / "server.key"),
            "--client-ca-file": str(self.ca_file),
            "--token-auth-file": str(tokens),
            "--authorization-mode": "RBAC",
            "--service-account-issuer": "https://kubernetes.default.svc",
            "--service-account-key-file": str(self.pki / "sa.pub"),
            "--service-account-signing-key-file": str(self.pki / "sa.key"),
            "--service-cluster-ip-range": SERVICE_CLUSTER_IP_RANGE,
            "--allow-privileged": "true",
            # kwok's nodes have no node-lifecycle controller to lift the not-ready taint
            "--disable-admission-plugins": "TaintNodesByCondition",
            "--profiling": "false",
            "--audit-policy-file": str(policy),
            "--audit-log-path": str(self.audit_log),
            "--audit-log-mode": "blocking",  # written before the answer: tests read it at once
            # never rotated (by default at 100 MB): events moved out of the file tests read
            # would make "no write" pass for the wrong reason (audit.py fails if it happens)
            "--audit-log-maxsize": str(1024 * 1024),
            **self.flags.get("kube-apiserver", {}),
        }
        binary = str(self.binaries.kube_apiserver)
        self.apiserver = self._spawn("kube-apiserver", [binary, *as_arguments(flags)])
        self._wait_until_ready("kube-apiserver", self.apiserver, self._apiserver_ready)

    def _start_controllers(self, register: bool = True) -> None:
        """Starts the controllers and kwok, each once healthy; then registers kwok's nodes
        and StorageClass (unless they are there from before), and returns once every node
        is Ready and the `default` namespace has its ServiceAccount (the controllers are at
        work)."""
        running = {}
        for component in self._components():
            process = self._spawn(component.name, component.argv, component.environment)
            self._wait_until_ready(component.name, process, component.healthy)
            running[component.name] = process
        self.controllers = list(running.values())
        if register:
            for name in controllers.NODES:
                self.request("POST", "/api/v1/nodes", controllers.node(name))
            self.request("POST", STORAGE_CLASSES, controllers.STORAGE_CLASS)
        self._wait_until_ready("kwok", running["kwok"], self._nodes_ready)
        manager = running["kube-controller-manager"]
        self._wait_until_ready("kube-controller-manager", manager, self._default_account)

    def _restart_controllers(self) -> None:
        """Replaces the controllers and kwok with fresh ones once the API server is back,
        and returns once a probe Deployment has its pod Ready. An informer that lost the
        API server watches again only after a backoff of its own, up to a minute (the
        deployment controller was seen creating a ReplicaSet it had made 45 s before, over
        and over); a fresh one lists at once."""
        if not self.with_controllers:
            return
        for process in self.controllers:
            stop_process(process)
            self.processes.remove(process)
        self._start_controllers(register=False)
        self._await_probe()

    def _await_probe(self) -> None:
        """Returns once a Deployment made now has its pod Ready: the deployment and replica
        set controllers, the scheduler and kwok are at work."""
        name = f"probe-{secrets.token_hex(4)}"
        deployments = "/apis/apps/v1/namespaces/default/deployments"
        self._await(
            "the API server to take a write",
            lambda: self._sent("POST", deployments, controllers.probe(name)),
        )
        try:
            probe = f"{deployments}/{name}"
            self._await(
                "the controllers to be at work again",
                lambda: self._answered(probe, controllers.probe_ready),
            )
        finally:
            self._sent("DELETE", f"{deployments}/{name}")

    def _await(self, what: str, ready: Callable[[], bool]) -> None:
        """Polls `ready` until true; raises at START_DEADLINE_SECONDS, leaving the plane
        running (it is the other tests' too)."""
        deadline = time.monotonic() + START_DEADLINE_SECONDS
        while not ready():
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"timed out after {START_DEADLINE_SECONDS:.0f} s waiting for {what}"
                )
            time.sleep(0.2)

    def _sent(self, method: str, path: str, body: object = None) -> bool:
        """Whether the request was answered with success, or found its work done (409 or
        404: a try before it was lost on the way back); other answers are not."""
        try:
            self.request(method, path, body)
        except urllib.error.HTTPError as error:
            return error.code in (404, 409)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False
        return True

    def _answered(self, path: str, check: Callable[[Any], bool]) -> bool:
        """Whether a GET of `path` answers an object for which `check` holds."""
        try:
            return check(self.request("GET", path))
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def _components(self) -> list[controllers.Component]:
        """The controllers' processes, each with a kubeconfig of its own user."""
        for name, user in controllers.USERS.items():
            kubeconfig = controllers.kubeconfig_of(self.workdir, name)
            write_kubeconfig(kubeconfig, self.url, self.ca_file, user, self.component_tokens[name])
        ports = {name: free_port() for name in controllers.USERS}
        return controllers.components(self.binaries.controllers, self.workdir, self.pki, ports)

    def _nodes_ready(self) -> bool:
        nodes = self.request("GET", "/api/v1/nodes")["items"]
        return len(nodes) == len(controllers.NODES) and all(map(controllers.node_ready, nodes))

    def _default_account(self) -> bool:
        path = "/api/v1/namespaces/default/serviceaccounts/default"
        try:
            self.request("GET", path)
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return False
            raise
        return True

    def request(self, method: str, path: str, body: object = None) -> Any:
        """One request to the API server as admin; the answer's JSON."""
        request = urllib.request.Request(  # noqa: S310 - our own https URL
            f"{self.url}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {self.admin_token}",
                "Content-Type": "application/json",
            },
        )
        context = ssl.create_default_context(cafile=str(self.ca_file))
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:  # noqa: S310 - our own https URL
            return json.load(answer)

    def _wait_until_ready(
        self, name: str, process: subprocess.Popen[bytes], ready: Callable[[], bool]
    ) -> None:
        deadline = time.monotonic() + START_DEADLINE_SECONDS
        # ready while it runs: another process may answer on its port once it exited
        while not (ready() and process.poll() is None):
            if process.poll() is not None or time.monotonic() > deadline:
                log_tail = (self.workdir / f"{name}.log").read_text(errors="replace")[-4000:]
                self.stop()
                raise RuntimeError(f"{name} did not become ready; its log ends:\n{log_tail}")
            time.sleep(0.2)

    def _apiserver_ready(self, check: str = "/readyz") -> bool:
        request = urllib.request.Request(  # noqa: S310 - our own https URL
            f"{self.url}{check}", headers={"Authorization": f"Bearer {self.admin_token}"}
        )
        context = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            with urllib.request.urlopen(request, context=context, timeout=2) as answer:  # noqa: S310 - our own https URL
                return bool(answer.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after a grace period."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _etcd_healthy(client_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{client_url}/health", timeout=2) as answer:  # noqa: S310 - our own loopback URL
            return bool(json.load(answer).get("health") == "true")
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return False


def write_kubeconfig(path: Path, server: str, ca_file: Path, user: str, token: str) -> None:
    """A kubeconfig with one context, `test`, that authenticates `user` with a bearer token."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "test", "cluster": {"server": server, "certificate-authority": str(ca_file)}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}],
        "current-context": "test",
    }
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML, which every client reads
    path.chmod(0o600)


def process_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


@contextlib.contextmanager
def running_control_plane(
    binaries: Binaries,
    workdir: Path,
    with_controllers: bool = True,
    flags: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[ControlPlane]:
    """Starts a control plane and stops it on exit, even when the body raises."""
    plane = ControlPlane(binaries, workdir, with_controllers, flags)
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()
