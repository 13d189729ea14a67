"""A chart of a Helm chart repository or an OCI registry as a source: picked by version
range, followed to each new version by the daemon, and refused whole when the repository
is hostile."""

from __future__ import annotations

import base64
import gzip
import hashlib
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from gitopsd.errors import ExitCode
from tests.harness.archives import archive
from tests.harness.chartrepo import ChartRepository, serving
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_named
from tests.harness.commands import scope
from tests.harness.controlplane import Binaries
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import create, get, wait_ready
from tests.harness.operators import operator
from tests.harness.registry import Registry, serving_registry
from tests.harness.waiting import wait_for

HELLO = {
    "hello/Chart.yaml": "apiVersion: v2\nname: hello\nversion: 0.1.0\n",
    "hello/values.yaml": "greeting: hello\n",
    "hello/templates/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"
        "data:\n  greeting: {{ .Values.greeting | quote }}\n"
        "  version: {{ .Chart.Version | quote }}\n"
    ),
}


@pytest.fixture
def charts(tmp_path: Path) -> Iterator[ChartRepository]:
    with serving(tmp_path / "chart-repository") as repository:
        yield repository


@pytest.fixture
def registry(binaries: Binaries, tmp_path: Path) -> Iterator[Registry]:
    with serving_registry(binaries, tmp_path / "registry") as served:
        yield served


@pytest.fixture(params=["chart repository", "OCI registry"])
def any_repository(request: pytest.FixtureRequest) -> ChartRepository | Registry:
    """Each kind of place charts are published, in turn."""
    fixture = "charts" if request.param == "chart repository" else "registry"
    found: ChartRepository | Registry = request.getfixturevalue(fixture)
    return found


def chart_flags(charts: ChartRepository | Registry, tmp_path: Path, version: str) -> list[str]:
    password = tmp_path / "chart-password"
    password.write_text(charts.password)
    return [
        *("--helm-chart", "hello", "--helm-version", version),
        *("--username", charts.username, "--password-file", str(password)),
    ]


def version_of(admin_api: Any, namespace: str) -> str:
    found = config_map_named(admin_api, namespace, "hello")
    return str(found.data["version"]) if found else ""


def test_a_chart_syncs_at_the_highest_version_its_range_allows_then_shows_no_drift(
    gitopsd: Gitopsd, admin_api: Any, charts: ChartRepository, namespace: str, tmp_path: Path
) -> None:
    for version in ("1.0.0", "1.1.0", "1.2.0-rc.1", "2.0.0"):
        charts.publish(HELLO, version)
    flags = [*scope(namespace), *chart_flags(charts, tmp_path, "^1.0")]

    synced = gitopsd("sync", charts.url, *flags, "--helm-set", "greeting=hi")

    assert synced.code == 0, synced.text
    assert "1.1.0@sha256:" in synced.out  # the version resolved, reported as the revision
    assert config_map_named(admin_api, namespace, "hello").data == {
        "greeting": "hi",
        "version": "1.1.0",
    }
    assert gitopsd("diff", charts.url, *flags, "--helm-set", "greeting=hi").code == 0

    charts.publish(HELLO, "1.3.0")
    changed = gitopsd("diff", charts.url, *flags, "--helm-set", "greeting=hi", "-o", "json")
    assert changed.code == 1, changed.text
    assert "1.3.0@sha256:" in changed.out
    changed.document("DiffResult")
    assert gitopsd("sync", charts.url, *flags, "--helm-set", "greeting=hi").code == 0
    assert version_of(admin_api, namespace) == "1.3.0"
    archives = [path for path in charts.requests if path.endswith(".tgz")]
    assert archives == ["/charts/hello-1.1.0.tgz", "/charts/hello-1.3.0.tgz"]  # one fetch each


def test_a_chart_of_an_oci_registry_syncs_by_range_through_the_registry_token_flow(
    gitopsd: Gitopsd, admin_api: Any, registry: Registry, namespace: str, tmp_path: Path
) -> None:
    for version in ("1.0.0", "1.1.0", "1.1.1+build.5", "1.2.0", "2.0.0"):
        registry.publish(HELLO, version)  # the registry's tag of 1.1.1+build.5: 1.1.1_build.5
    flags = [*scope(namespace), *chart_flags(registry, tmp_path, "~1.1")]

    synced = gitopsd("sync", registry.url, *flags)

    assert synced.code == 0, synced.text
    assert "1.1.1+build.5@sha256:" in synced.out
    assert version_of(admin_api, namespace) == "1.1.1+build.5"
    assert gitopsd("diff", registry.url, *flags).code == 0
    helm_style = [*scope(namespace), *chart_flags(registry, tmp_path, "~1.1")[2:]]
    assert gitopsd("diff", f"{registry.url}/hello", *helm_style).code == 0  # the same target

    (tmp_path / "chart-password").write_text("wrong-password-canary")
    refused = gitopsd("diff", registry.url, *flags)
    assert refused.code == ExitCode.SOURCE_FAILED, refused.text
    assert "token service: HTTP 401: check the credentials" in refused.err
    assert "wrong-password-canary" not in refused.text


@pytest.mark.case("SE-05")
def test_se05_wrong_chart_repository_credentials_fail_without_showing_them(
    gitopsd: Gitopsd, admin_api: Any, charts: ChartRepository, namespace: str, tmp_path: Path
) -> None:
    charts.publish(HELLO, "1.0.0")
    flags = chart_flags(charts, tmp_path, "*")
    (tmp_path / "chart-password").write_text("wrong-password-canary")

    refused = gitopsd("sync", charts.url, *scope(namespace), *flags)

    assert refused.code == ExitCode.SOURCE_FAILED, refused.text
    assert "index.yaml: HTTP 401: check the credentials" in refused.err
    assert "wrong-password-canary" not in refused.text
    anonymous = gitopsd("sync", charts.url, *scope(namespace), *flags[:4])  # no credentials
    assert anonymous.code == ExitCode.SOURCE_FAILED, anonymous.text
    asked = "index.yaml: HTTP 401: the server asks for credentials and none were given "
    assert asked + "(--username and --password-file;" in anonymous.err
    assert "hello" not in gitopsd.kubectl("get", "configmaps", "-n", namespace, "-o", "name")


def credential_forms(charts: ChartRepository) -> dict[str, str]:
    """Each spelling of the repository's credentials a message could carry."""
    basic = f"{charts.username}:{charts.password}".encode()
    return {
        "the password": charts.password,
        "its base64": base64.b64encode(charts.password.encode()).decode(),
        "the Authorization: Basic value": base64.b64encode(basic).decode(),
        "user:password": basic.decode(),
    }


@pytest.mark.case("SE-05")
@pytest.mark.parametrize(
    "form", ["user:password", "the Authorization: Basic value", "its base64", "the password"]
)
def test_se05_chart_repository_credentials_are_masked_in_every_form(
    gitopsd: Gitopsd, charts: ChartRepository, namespace: str, tmp_path: Path, form: str
) -> None:
    """A repository whose index names its archive with the credentials it was sent, as some
    do: in a URL's userinfo, or in its path as the Authorization header's value, as base64
    or as they are. The archive is refused or not found, and the error names its URL with
    *** where the credentials were, in every form."""
    spelled = credential_forms(charts)[form]
    origin = charts.url.rsplit("/", 1)[0]
    archive = f"{origin}/charts/{spelled}/hello-1.0.0.tgz"
    if form == "user:password":  # the userinfo of a URL on another host (localhost)
        archive = f"http://{spelled}@localhost:{origin.rsplit(':', 1)[1]}/hello-1.0.0.tgz"
    entry = {"version": "1.0.0", "digest": "0" * 64, "urls": [archive]}
    index = {"apiVersion": "v1", "entries": {"hello": [entry]}}
    charts.put("index.yaml", yaml.safe_dump(index).encode())

    refused = gitopsd("sync", charts.url, *scope(namespace), *chart_flags(charts, tmp_path, "*"))

    assert refused.code == ExitCode.SOURCE_FAILED, refused.text
    assert "chart hello 1.0.0 (" in refused.err and "***" in refused.err, refused.err
    for name, secret in credential_forms(charts).items():
        assert secret not in refused.text, f"{name} in {refused.text!r}"


def test_a_gitsync_follows_its_chart_repository_to_each_new_version(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    any_repository: ChartRepository | Registry,
) -> None:
    charts = any_repository
    charts.publish(HELLO, "1.0.0")
    secret = credentials_secret(admin_api, namespace, charts)
    daemon = operator(daemons, namespace)
    repository = {"url": charts.url, "secretRef": {"name": secret}}
    helm = {"chart": "hello", "version": "1.x", "releaseName": "hello"}
    create(admin_api, namespace, "hello", {"repository": repository, "helm": helm})

    first = wait_ready(admin_api, namespace, "hello", "True", "Succeeded")["status"]
    assert first["lastAppliedRevision"].startswith("1.0.0@sha256:")
    assert version_of(admin_api, namespace) == "1.0.0"

    charts.publish(HELLO, "2.0.0")  # outside the range: never picked
    charts.publish(HELLO, "1.1.0")
    wait_for(
        lambda: version_of(admin_api, namespace) == "1.1.0",
        "the daemon applied the chart's new version",
        deadline_seconds=60,
    )
    revision = wait_for(
        lambda: (
            _applied_revision(admin_api, namespace).startswith("1.1.0@sha256:")
            and _applied_revision(admin_api, namespace)
        ),
        "the GitSync's status names the new version",
        deadline_seconds=30,
    )
    assert f'revision="{revision}"' in daemon.metrics()


def _applied_revision(admin_api: Any, namespace: str) -> str:
    return str(
        ((get(admin_api, namespace, "hello") or {}).get("status") or {}).get(
            "lastAppliedRevision", ""
        )
    )


def credentials_secret(admin_api: Any, namespace: str, charts: ChartRepository | Registry) -> str:
    core: Any = client.CoreV1Api(admin_api)
    core.create_namespaced_secret(
        namespace,
        {
            "metadata": {
                "name": "chart-credentials",
                "annotations": {"gitopsd.io/git-credentials-for": charts.url},
            },
            "stringData": {"username": charts.username, "password": charts.password},
        },
    )
    return "chart-credentials"


def bomb() -> bytes:
    """1 GiB of zeros in a chart's template, about 1 MiB compressed."""
    header = tarfile.TarInfo("hello/templates/zeros.yaml")
    header.size = 1024**3
    return gzip.compress(header.tobuf()) + gzip.compress(bytes(1024 * 1024)) * 1024


def serve_instead(
    charts: ChartRepository, index: dict[str, Any], data: bytes, url: str = "", digest: str = ""
) -> None:
    """Version 1.0.0 of the index served as `data` (under its true digest, or `digest`),
    from `url` if given."""
    name = f"hello-{hashlib.sha256(data).hexdigest()[:8]}.tgz"
    charts.put(name, data)
    [entry] = index["entries"]["hello"]
    entry = {**entry, "digest": digest or hashlib.sha256(data).hexdigest(), "urls": [url or name]}
    served = {**index, "entries": {"hello": [entry]}}
    (charts.directory / "index.yaml").write_text(yaml.safe_dump(served))


@pytest.mark.case("BI-07", "SE-12")
def test_bi07_se12_hostile_chart_repositories_are_refused_and_nothing_is_applied(
    gitopsd: Gitopsd, admin_api: Any, charts: ChartRepository, namespace: str, tmp_path: Path
) -> None:
    genuine = charts.publish(HELLO, "1.0.0").read_bytes()
    index = yaml.safe_load((charts.directory / "index.yaml").read_text())
    digest = hashlib.sha256(genuine).hexdigest()
    flags = [*scope(namespace), *chart_flags(charts, tmp_path, "1.0.0")]
    elsewhere = charts.url.replace("127.0.0.1", "localhost")
    charts.redirects["/charts/moved.tgz"] = f"{elsewhere}/hello-1.0.0.tgz"
    invalid, failed = ExitCode.INVALID, ExitCode.SOURCE_FAILED
    chart = {name: text.encode() for name, text in HELLO.items()}
    symlink = archive(chart, {"hello/templates/x.yaml": "/etc/passwd"})
    cases = [
        (genuine + b"\0", "", digest, failed, "sha256 is not the digest the repository gives"),
        (
            genuine,
            f"{elsewhere}/hello-1.0.0.tgz",
            "",
            failed,
            "is on another host than the source's",
        ),
        (genuine, "moved.tgz", "", failed, "redirected to another host"),
        (bomb(), "", "", invalid, ": unpacks to more than the per-revision limit"),
        (symlink, "", "", invalid, "member 'hello/templates/x.yaml' is a symlink"),
        (archive({**chart, "hello/../../x.yaml": b"x"}), "", "", invalid, "points outside"),
    ]
    for data, url, claimed, code, message in cases:
        serve_instead(charts, index, data, url, claimed)
        refused = gitopsd("sync", charts.url, *flags, "--max-revision-bytes", "16Mi")
        assert (refused.code, message in refused.err) == (code, True), f"{message}: {refused.text}"
        assert charts.password not in refused.text
    assert "hello" not in gitopsd.kubectl("get", "configmaps", "-n", namespace, "-o", "name")


GREETER = {
    "greeter/Chart.yaml": "apiVersion: v2\nname: greeter\nversion: 0.1.0\n",
    "greeter/templates/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-greeter\n"
        "data:\n  version: {{ .Chart.Version | quote }}\n"
    ),
}


@pytest.fixture
def public_charts(tmp_path: Path) -> Iterator[ChartRepository]:
    with serving(tmp_path / "public-charts", anonymous=True) as repository:
        yield repository


@pytest.fixture
def public_registry(binaries: Binaries, tmp_path: Path) -> Iterator[Registry]:
    with serving_registry(binaries, tmp_path / "public-registry", anonymous=True) as served:
        yield served


def umbrella(charts: str, registry: str, lock: str = "") -> dict[str, str]:
    """A chart in git that depends on `hello` of a chart repository and `greeter` of a
    registry, neither vendored; `lock`: the version of hello its Chart.lock pins."""
    files = {
        "shop/Chart.yaml": (
            "apiVersion: v2\nname: shop\nversion: 1.0.0\ndependencies:\n"
            f"- name: hello\n  version: ^1.0\n  repository: {charts}\n"
            f"- name: greeter\n  version: 2.x\n  repository: {registry}\n"
        ),
    }
    if lock:
        files["shop/Chart.lock"] = (
            f"dependencies:\n- name: hello\n  repository: {charts}\n  version: {lock}\n"
            f"- name: greeter\n  repository: {registry}\n  version: 2.0.0\n"
            "digest: sha256:0000000000000000000000000000000000000000000000000000000000000000\n"
            "generated: '2026-11-26T00:00:00Z'\n"
        )
    return files


def test_dependencies_of_repositories_and_registries_are_fetched_at_the_locked_version(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    public_charts: ChartRepository,
    public_registry: Registry,
) -> None:
    for version in ("1.0.0", "1.1.0", "2.0.0"):
        public_charts.publish(HELLO, version)
    public_registry.publish(GREETER, "2.0.0")
    public_registry.publish(GREETER, "2.1.0")
    git_repo.commit(umbrella(public_charts.url, public_registry.url, lock="1.0.0"))
    url = git_server.file_url(git_repo)
    flags = [*scope(namespace), "--path", "shop", "--helm-release", "web"]

    assert gitopsd("sync", url, *flags).code == 0
    hello = config_map_named(admin_api, namespace, "web")
    assert hello.data["version"] == "1.0.0"  # Chart.lock's, not the newest in ^1.0
    assert config_map_named(admin_api, namespace, "web-greeter").data == {"version": "2.0.0"}

    git_repo.commit({"shop/Chart.lock": None})  # unlocked: the highest each range allows
    assert gitopsd("sync", url, *flags).code == 0
    assert config_map_named(admin_api, namespace, "web").data["version"] == "1.1.0"
    assert config_map_named(admin_api, namespace, "web-greeter").data == {"version": "2.1.0"}


@pytest.mark.case("SE-12")
def test_se12_a_dependency_gitopsd_may_not_fetch_is_refused_naming_the_chart(
    gitopsd: Gitopsd, git_repo: GitRepo, public_charts: ChartRepository, namespace: str
) -> None:
    public_charts.publish(HELLO, "1.0.0")
    plain_http = umbrella(public_charts.url, "oci://registry.invalid/charts")
    cases = {
        # a directory source does not allow insecure URLs: http:// is refused
        "source URL http://127.0.0.1": plain_http,
        "repository '@stable' names a repository of helm's own configuration": {
            "shop/Chart.yaml": (
                "apiVersion: v2\nname: shop\nversion: 1.0.0\ndependencies:\n"
                "- name: hello\n  version: 1.x\n  repository: '@stable'\n"
            )
        },
    }
    for message, files in cases.items():
        git_repo.commit(files)
        refused = gitopsd("validate", str(git_repo.work), "--path", "shop")
        assert refused.code == ExitCode.INVALID, refused.text
        assert f"shop/Chart.yaml: dependency hello: {message}" in refused.err, refused.text
    assert public_charts.requests == []


def test_a_kustomizations_helm_charts_render_with_gitopsds_helm_then_its_transformers(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    public_charts: ChartRepository,
) -> None:
    public_charts.publish(HELLO, "1.0.0")
    public_charts.publish(HELLO, "1.1.0")
    kustomization = (
        "labels:\n- pairs: {team: shop}\n"
        "helmCharts:\n"
        "- name: greeter\n  releaseName: local\n  valuesFile: values-prod.yaml\n"
        f"- name: hello\n  repo: {public_charts.url}\n  version: ~1.0.0\n"
        "  releaseName: remote\n  valuesInline: {greeting: inline}\n"
    )
    git_repo.commit(
        {
            "app/kustomization.yaml": kustomization,
            "app/values-prod.yaml": "unused: true\n",
            **{f"app/charts/{path}": text for path, text in GREETER.items()},
        }
    )
    url = git_server.file_url(git_repo)

    synced = gitopsd("sync", url, *scope(namespace), "--path", "app")

    assert synced.code == 0, synced.text
    local = config_map_named(admin_api, namespace, "local-greeter")
    assert (local.data, local.metadata.labels["team"]) == ({"version": "0.1.0"}, "shop")
    remote = config_map_named(admin_api, namespace, "remote")
    assert remote.data == {"greeting": "inline", "version": "1.0.0"}
    assert remote.metadata.labels["team"] == "shop"  # the kustomization's own transformer
    assert gitopsd("diff", url, *scope(namespace), "--path", "app").code == 0


@pytest.mark.case("SE-12")
@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("- name: hello\n  nameTemplate: x\n", "helmCharts[0]: nameTemplate: not a field"),
        ("- name: hello\n  valuesMerge: replace\n", "helmCharts[0]: valuesMerge: gitopsd renders"),
        (
            "- name: hello\n  valuesFile: ../../../etc/passwd\n",
            "helmCharts.valuesFile entry '../../../etc/passwd' resolves outside the checkout",
        ),
        ("- name: hello\n  repo: pwn://x\n", "helmCharts[0]: source URL pwn://x: scheme pwn://"),
    ],
)
def test_se12_a_helm_charts_entry_gitopsd_cannot_render_as_kustomize_would_is_refused(
    gitopsd: Gitopsd, git_repo: GitRepo, entry: str, message: str
) -> None:
    git_repo.commit({"app/kustomization.yaml": "helmCharts:\n" + entry})

    refused = gitopsd("validate", str(git_repo.work), "--path", "app")

    assert refused.code == ExitCode.INVALID, refused.text
    assert f"app/kustomization.yaml: {message}" in refused.err, refused.text


def test_a_chart_kept_outside_the_chart_home_is_named_with_the_setting_that_finds_it(
    gitopsd: Gitopsd, git_repo: GitRepo
) -> None:
    chart = {f"mycharts/{path}": text for path, text in GREETER.items()}
    git_repo.commit({"app/kustomization.yaml": "helmCharts:\n- name: greeter\n", **chart})

    refused = gitopsd("validate", str(git_repo.work), "--path", "app")
    git_repo.commit(
        {"app/kustomization.yaml": "helmGlobals: {chartHome: ../mycharts}\n"
         "helmCharts:\n- name: greeter\n"}
    )  # fmt: skip
    found = gitopsd("validate", str(git_repo.work), "--path", "app")

    assert refused.code == ExitCode.INVALID, refused.text
    said = "app/kustomization.yaml: helmCharts[0]: no chart greeter in app/charts/ "
    assert said + "(helmGlobals.chartHome, default charts," in refused.err, refused.err
    assert found.code == 0, found.text
