"""Suite-wide fixtures: one real control plane and one real git server per test session."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.harness import census
from tests.harness.browser import BrowserBinaries, provide_browser
from tests.harness.canary import Canary
from tests.harness.cli import Gitopsd
from tests.harness.controllers import NODES
from tests.harness.controlplane import (
    Binaries,
    ControlPlane,
    process_alive,
    provide_binaries,
    running_control_plane,
)
from tests.harness.daemon import Daemons
from tests.harness.faultproxy import FaultProxy
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.image import Image, build_image, provide_buildah
from tests.harness.kube import Gate, api_client, create_namespace, unique_name
from tests.harness.prometheus import PrometheusBinaries, provide_prometheus
from tests.harness.shells import provide_shells
from tests.harness.waiting import wait_for

GITSYNC_CRD = Path(__file__).parent.parent / "config" / "crd" / "gitsyncs.yaml"


@pytest.fixture(scope="session")
def binaries() -> Binaries:
    """The control-plane binaries; kubectl, helm and sops go on PATH (they render
    kustomizations and charts, and decrypt SOPS-encrypted files)."""
    found = provide_binaries()
    programs = (found.kubectl, found.helm, found.sops)
    renderers = os.pathsep.join(str(binary.parent) for binary in programs)
    os.environ["PATH"] = f"{renderers}{os.pathsep}{os.environ.get('PATH', '')}"
    return found


@pytest.fixture(scope="session")
def control_plane(
    binaries: Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    with running_control_plane(binaries, tmp_path_factory.mktemp("control-plane")) as plane:
        pids = [process.pid for process in plane.processes]
        yield plane
    survivors = [pid for pid in pids if process_alive(pid)]
    assert not survivors, f"control-plane processes survived teardown: {survivors}"


@pytest.fixture(scope="session")
def admin_api(control_plane: ControlPlane) -> Iterator[Any]:
    api = api_client(control_plane)
    yield api
    api.close()


@pytest.fixture
def namespace(admin_api: Any) -> str:
    """A fresh namespace per test, left in place after it: deleting it would have the
    namespace controller sweep every resource type in it, about 0.2 s of the machine's CPU
    per namespace, a minute and a half over the suite, on the cores the tests need
    (test_cluster_behaviour.py deletes namespaces for real)."""
    return create_namespace(admin_api)


@pytest.fixture
def canary() -> Canary:
    """A fresh secret value for a test that handles a Secret or a credential; it looks for
    the value in every form it could leak in (tests.harness.canary)."""
    return Canary.fresh()


@pytest.fixture
def gate(admin_api: Any, namespace: str) -> Iterator[Gate]:
    """Holds the test's rollouts until `gate.open()` (tests.harness.kube.Gate)."""
    held = Gate(admin_api, namespace, NODES[0])
    yield held
    held.close()


@pytest.fixture(scope="session")
def gitsync_crd(admin_api: Any) -> str:
    """The GitSync CRD from config/crd, installed (and Established) once per session."""
    definition = yaml.safe_load(GITSYNC_CRD.read_text())
    extensions: Any = client.ApiextensionsV1Api(admin_api)
    name: str = definition["metadata"]["name"]
    try:
        extensions.create_custom_resource_definition(definition)
    except client.ApiException as error:
        if error.status != 409:
            raise
    wait_for(lambda: _established(extensions.read_custom_resource_definition(name)), name)
    return name


def _established(crd: Any) -> bool:
    return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])


@pytest.fixture(scope="session")
def git_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitServer]:
    server = GitServer(root=tmp_path_factory.mktemp("git-server"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def git_repo(git_server: GitServer) -> GitRepo:
    return git_server.create_repo(unique_name("repo"))


@pytest.fixture
def gitopsd(
    control_plane: ControlPlane, binaries: Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Gitopsd:
    """The gitopsd CLI, in-process, pointed at the test control plane."""
    return Gitopsd(control_plane, tmp_path_factory.getbasetemp() / "source-cache", binaries)


@pytest.fixture
def daemons(
    control_plane: ControlPlane,
    binaries: Binaries,
    admin_api: Any,
    namespace: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Daemons]:
    """`gitopsd run` as real subprocesses; all stopped when the test ends, then the census
    taken (tests.harness.census) unless the test is marked `census_exempt` with why."""
    started = Daemons(control_plane, admin_api, namespace, tmp_path)
    yield started
    started.stop_all()
    if request.node.get_closest_marker("census_exempt") is None:
        users = sorted({daemon.user for daemon in started.started})
        found = census.problems(control_plane, binaries.kubectl, admin_api, namespace, users)
        assert found == [], "the census after the test:\n" + "\n".join(found)


@pytest.fixture
def proxy(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[FaultProxy]:
    """A fault-injecting proxy in front of the API server (tests.harness.faultproxy)."""
    started = FaultProxy(control_plane).start()
    yield started
    if "daemons" in request.fixturenames:  # while their way to the API server still works
        request.getfixturevalue("daemons").stop_all()
    started.stop()


@pytest.fixture(scope="session")
def prometheus_binaries() -> PrometheusBinaries:
    """Prometheus and promtool from Debian's package (tests/prometheus/provide.sh)."""
    return provide_prometheus()


@pytest.fixture(scope="session")
def browser_binaries() -> BrowserBinaries:
    """chromium and chromedriver from Debian's packages (tests/browser/provide.sh)."""
    return provide_browser()


@pytest.fixture(scope="session")
def shells() -> dict[str, Path]:
    """bash, zsh and fish by name; zsh and fish from Debian's packages (tests/shells/provide.sh)."""
    return provide_shells()


@pytest.fixture(scope="session")
def image(tmp_path_factory: pytest.TempPathFactory) -> Image:
    """The Dockerfile built with buildah (tests/image/provide.sh), once per session."""
    log = tmp_path_factory.mktemp("image") / "build.log"
    return build_image(provide_buildah(), "localhost/gitopsd:test", log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use the control plane are marked `cluster`, so `-m 'not cluster'` skips them;
    and the files with the most of them come first, so that parallel workers (which take
    files in this order, `--no-loadscope-reorder`) end on the quick files that need no
    cluster, not on a fault test that waits a minute while the other worker idles."""
    for item in items:
        if "control_plane" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cluster)
    in_cluster = Counter(item.path for item in items if item.get_closest_marker("cluster"))
    items.sort(key=lambda item: -in_cluster[item.path])


def pytest_report_header() -> str:
    return f"gitopsd tests: control plane from {Path(__file__).parent / 'controlplane'}"
