"""Charts rendered by helm in the sandbox, then synced like any other manifests."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import io
import json
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gitopsd import helm, manifests, source
from gitopsd.config import ChartSettings
from gitopsd.helm.chart import RemoteDependency
from gitopsd.reconcile.desired import read_revision
from tests.harness import contract
from tests.harness.canary import Canary
from tests.harness.checkouts import file_spec
from tests.harness.cli import Gitopsd, example_files
from tests.harness.cluster_reads import config_map_named, config_map_names
from tests.harness.commands import scope
from tests.harness.controlplane import Binaries
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import create, patch_spec, wait_ready
from tests.harness.manifests import HELLO_CHART
from tests.harness.operators import operator
from tests.harness.refusals import assert_refused
from tests.harness.waiting import wait_for

SHOP = ["--path", "shop", "--helm-release", "web"]
EXAMPLE_GROUP = "shop.gitopsd.example"
CANARY = "CANARY-values-0123456789"


def shop_files(namespace: str) -> dict[str, str]:
    """examples/chart, its CRD's group made the test's own: a CRD is cluster-scoped, and
    belongs to the one source that applied it."""
    files = example_files("chart")
    return {name: text.replace(EXAMPLE_GROUP, group(namespace)) for name, text in files.items()}


def group(namespace: str) -> str:
    return f"{namespace}.gitopsd.example"


def drift(gitopsd: Gitopsd, url: str, namespace: str, *flags: str) -> list[dict[str, Any]]:
    run = gitopsd("diff", url, *scope(namespace), *SHOP, *flags, "-o", "json")
    assert run.code in (0, 1), run.text
    found: list[dict[str, Any]] = run.document("DiffResult")["drift"]
    assert run.code == (1 if found else 0), run.text
    return found


def test_a_chart_with_helpers_dependencies_and_crds_syncs_healthy_then_shows_no_drift(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(shop_files(namespace))
    url = git_server.file_url(git_repo)

    synced = gitopsd("sync", url, *scope(namespace), *SHOP, "--wait")

    assert synced.code == 0, synced.text
    migrate = f"batch/Job/{namespace}/web-shop-migrate"
    assert f"hook       {migrate}  (pre-sync hook: Current" in synced.out
    batch: Any = client.BatchV1Api(admin_api)
    assert batch.list_namespaced_job(namespace).items == []  # deleted once it succeeded
    shop = config_map_named(admin_api, namespace, "web-shop")
    version = client.VersionApi(admin_api).get_code().git_version
    assert shop.data == {
        "greeting": "hello",
        "kubeVersion": version,  # .Capabilities are the cluster's
        "servesDeployments": "true",
    }
    assert shop.metadata.labels["helm.sh/chart"] == "shop-0.1.0"  # the file:// library
    assert config_map_named(admin_api, namespace, "web-cache").data == {"size": "64Mi"}  # vendored
    apps: Any = client.AppsV1Api(admin_api)
    assert apps.read_namespaced_deployment("web-shop", namespace).status.ready_replicas == 1
    promotions: Any = client.CustomObjectsApi(admin_api).list_namespaced_custom_object(
        group(namespace), "v1", namespace, "promotions"
    )
    assert [p["metadata"]["name"] for p in promotions["items"]] == ["web-shop-launch"]
    assert drift(gitopsd, url, namespace) == []

    gitopsd.kubectl("delete", "service/web-shop", "-n", namespace)
    [missing] = drift(gitopsd, url, namespace)
    assert missing["state"] == "missing"
    assert missing["origin"] == "shop/templates/service.yaml:1"  # the template it came from


def test_a_values_change_shows_only_the_fields_it_changes_with_their_manager(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(shop_files(namespace))
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace), *SHOP).code == 0

    git_repo.commit(
        {
            "shop/values.yaml": shop_files(namespace)["shop/values.yaml"].replace(
                "greeting: hello", "greeting: welcome"
            )
        }
    )
    changes = {
        (contract.named(found["object"]), change["path"]): change
        for found in drift(gitopsd, url, namespace)
        for change in found["changes"]
    }

    greeting = changes.pop((f"ConfigMap/{namespace}/web-shop", "data.greeting"))
    assert (greeting["live"], greeting["desired"], greeting["manager"]) == (
        "hello",
        "welcome",
        "gitopsd",
    )
    # the checksum of the ConfigMap the Deployment's pods carry, and nothing else
    assert list(changes) == [
        (
            f"apps/Deployment/{namespace}/web-shop",
            "spec.template.metadata.annotations.checksum/config",
        )
    ]
    # values files and --helm-set, applied after the chart's values, as helm applies them
    production = ("--helm-values", "values-production.yaml", "--helm-set", "cache.size=1Gi")
    assert gitopsd("sync", url, *scope(namespace), *SHOP, *production).code == 0
    assert drift(gitopsd, url, namespace, *production) == []


def test_a_template_removed_from_the_chart_is_pruned(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(shop_files(namespace))
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace), *SHOP).code == 0

    git_repo.commit({"shop/templates/service.yaml": None})
    pruned = gitopsd("sync", url, *scope(namespace), *SHOP, "--prune")

    assert pruned.code == 0, pruned.text
    core: Any = client.CoreV1Api(admin_api)
    assert [s.metadata.name for s in core.list_namespaced_service(namespace).items] == []
    assert config_map_names(admin_api, namespace) >= {"web-shop", "web-cache"}


def test_a_revision_that_changes_nothing_of_the_chart_renders_nothing(
    binaries: Binaries, git_server: GitServer, git_repo: GitRepo, tmp_path: Path
) -> None:
    """A render is kept by the fingerprint of what it read (the blobs of the chart and its
    values files, the values, the release): `ParseCache.parses` counts the renders."""
    git_repo.commit({**HELLO_CHART, "values/prod.yaml": "greeting: prod\n"})
    spec = dataclasses.replace(
        file_spec(git_server, git_repo),
        paths=("hello",),
        helm=ChartSettings(values_files=("../values/prod.yaml",)),
    )
    parses = manifests.ParseCache()

    def greeting() -> str:
        revision = source.fetch(spec, tmp_path)
        [found] = read_revision(revision, spec, tmp_path, parses)
        return str(found.body["data"]["greeting"])

    assert (greeting(), parses.parses) == ("prod", 1)
    git_repo.commit({"README.md": "a new revision, the chart untouched\n"})
    assert (greeting(), parses.parses) == ("prod", 1)
    git_repo.commit({"values/prod.yaml": "greeting: changed\n"})
    assert (greeting(), parses.parses) == ("changed", 2)
    spec = dataclasses.replace(spec, helm=ChartSettings(release_name="other"))
    assert (greeting(), parses.parses) == ("hello", 3)


class _CountedReads(manifests.Directory):
    """A directory whose files have blob ids, as a git revision's do (so a render has a
    fingerprint), counting the reads of each file."""

    def __init__(self, root: Path) -> None:
        files = [path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file()]
        super().__init__(root, {rel: f"blob of {rel}" for rel in files})
        self.reads: Counter[str] = Counter()

    def read(self, rel: str, limit: int) -> bytes:
        self.reads[rel] += 1
        return super().read(rel, limit)


def test_a_render_checks_the_chart_once(binaries: Binaries, tmp_path: Path) -> None:
    """A render the cache misses walks the chart and bounds its archives once, for its
    fingerprint and for helm alike: a vendored subchart's archive is read once."""
    subchart = io.BytesIO()
    with tarfile.open(fileobj=subchart, mode="w:gz") as archive:
        chart_file = b"apiVersion: v2\nname: sub\nversion: 0.1.0\n"
        header = tarfile.TarInfo("sub/Chart.yaml")
        header.size = len(chart_file)
        archive.addfile(header, io.BytesIO(chart_file))
    write_files(tmp_path, HELLO_CHART)
    (tmp_path / "hello/charts").mkdir()
    (tmp_path / "hello/charts/sub-0.1.0.tgz").write_bytes(subchart.getvalue())
    tree = _CountedReads(tmp_path)

    def no_fetch(dependency: RemoteDependency) -> Path:
        raise AssertionError(f"{dependency.name} is vendored")

    charts = helm.renderer(ChartSettings(), "default", None, no_fetch, tenant="")
    found = manifests.load(tree, ("hello",), render_chart=charts)

    assert [manifest.key.name for manifest in found] == ["hello-hello"]
    assert tree.reads["hello/charts/sub-0.1.0.tgz"] == 1


LEAK = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\ndata:\n  k: {CANARY}\n"
OUTSIDE = "<outside>"
"""Stands for a directory outside the checkout, holding a chart and a values file, each
greeting with the canary (the checkout's own secrets/leak.yaml holds it too)."""
ESCAPES = {
    "BI-12 a template linked out of the chart, into the checkout": (
        {"hello/templates/leak.yaml": "../../secrets/leak.yaml"},
        (),
        "hello/templates/leak.yaml: is a symlink; gitopsd never follows symlinks",
    ),
    "BI-12 values.yaml linked out of the checkout": (
        {"hello/values.yaml": f"{OUTSIDE}/values.yaml"},
        (),
        "hello/values.yaml: is a symlink; gitopsd never follows symlinks",
    ),
    "BI-12 a chart directory linked out of the checkout": (
        {"apps/hello": f"{OUTSIDE}/hello"},
        ("--path", "apps"),
        "apps/hello: is a symlink; gitopsd never follows symlinks",
    ),
    "BI-12 a file:// dependency linked out of the checkout": (
        {"lib": f"{OUTSIDE}/hello"},
        ("--path", "needs-lib"),
        "needs-lib/Chart.yaml: file://../lib: is a symlink; gitopsd never follows symlinks",
    ),
    "SE-11 a values file outside the checkout": (
        {},
        ("--helm-values", "../" * 16 + f"{OUTSIDE}/values.yaml"),
        "/outside/values.yaml' resolves outside the checkout",
    ),
    "SE-11 a values file linked out of the checkout": (
        {"prod.yaml": f"{OUTSIDE}/values.yaml"},
        ("--helm-values", "../prod.yaml"),
        "helm valuesFiles: ../prod.yaml: is a symlink; gitopsd never follows symlinks",
    ),
}


@pytest.mark.case("SE-11")
@pytest.mark.parametrize(("links", "flags", "message"), ESCAPES.values(), ids=ESCAPES.keys())
def test_se11_a_chart_reads_no_file_outside_itself(
    gitopsd: Gitopsd,
    admin_api: Any,
    namespace: str,
    tmp_path: Path,
    links: dict[str, str],
    flags: tuple[str, ...],
    message: str,
) -> None:
    """A local directory as the source, so each link is a real one that helm would follow:
    each is refused naming the file, before helm reads it, and nothing is applied."""
    outside = tmp_path / "outside"
    greeting = f"greeting: {CANARY}\n"
    write_files(outside, {**HELLO_CHART, "hello/values.yaml": greeting, "values.yaml": greeting})
    lib = HELLO_CHART["hello/Chart.yaml"].replace("hello", "needs-lib")
    dependency = "dependencies:\n- name: lib\n  version: 0.1.0\n  repository: file://../lib\n"
    checkout = tmp_path / "checkout"
    write_files(
        checkout,
        {
            **HELLO_CHART,
            "secrets/leak.yaml": LEAK,
            "needs-lib/Chart.yaml": lib + dependency,
            "apps/README.md": "charts\n",
        },
    )
    for name, target in links.items():
        (checkout / name).unlink(missing_ok=True)
        (checkout / name).symlink_to(target.replace(OUTSIDE, str(outside)))
    given = [flag.replace(OUTSIDE, str(outside)[1:]) for flag in flags]
    given = given if "--path" in given else ["--path", "hello", *given]

    assert_refused(gitopsd, admin_api, str(checkout), namespace, [message], [CANARY], tuple(given))


def write_files(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


HOSTILE_CHARTS = {
    "SE-11 a file:// dependency outside the checkout": (
        {
            "hello/Chart.yaml": HELLO_CHART["hello/Chart.yaml"]
            + "dependencies:\n- name: x\n  version: 0.1.0\n  repository: file://../../../x\n"
        },
        "hello/Chart.yaml: 'file://../../../x' resolves outside the checkout",
    ),
    "SE-12 a dependency through a helm plugin's scheme": (
        {
            "hello/Chart.yaml": HELLO_CHART["hello/Chart.yaml"]
            + "dependencies:\n- name: x\n  version: 0.1.0\n  repository: pwn://x\n"
        },
        "hello/Chart.yaml: dependency x: source URL pwn://x: scheme pwn:// is refused",
    ),
    "SE-12 a dependency from where gitopsd does not fetch": (
        {
            "hello/Chart.yaml": HELLO_CHART["hello/Chart.yaml"]
            + "dependencies:\n- name: x\n  version: 0.1.0\n  repository: ext::sh -c x\n"
        },
        "hello/Chart.yaml: dependency x: source URL ext::sh -c x: remote-helper transports are",
    ),
}


def test_hostile_charts_are_refused_and_nothing_is_applied(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    for files, message in HOSTILE_CHARTS.values():
        git_repo.commit({**HELLO_CHART, **files})
        assert_refused(
            gitopsd,
            admin_api,
            git_server.file_url(git_repo),
            namespace,
            [message],
            flags=("--path", "hello"),
        )


@pytest.mark.case("BI-07")
def test_bi07_an_archive_bomb_under_charts_is_refused_before_helm_unpacks_it(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    """1 GiB of zeros in a 1 MiB archive (gzip members in a row make one stream)."""
    header = tarfile.TarInfo("bomb/templates/zeros.yaml")
    header.size = 1024**3
    bomb = gzip.compress(header.tobuf()) + gzip.compress(bytes(1024 * 1024)) * 1024
    git_repo.commit({**HELLO_CHART, "hello/charts/bomb-1.0.0.tgz": bomb})

    assert_refused(
        gitopsd,
        admin_api,
        git_server.file_url(git_repo),
        namespace,
        ["hello/charts/bomb-1.0.0.tgz: unpacks to more than the per-revision limit"],
        flags=("--path", "hello"),
    )


def helm_plugins(sentinel: Path) -> dict[str, str]:
    """A post-renderer `pwn` and a downloader for `pwn://`, each of which, run, leaves
    `sentinel` (by the shell's own means: a render finds no program on PATH) and gives a
    ConfigMap `pwned` for the chart's objects."""
    run = (
        f"#!/bin/sh\necho ran > {sentinel}\n"
        "printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: pwned\\n'\n"
    )
    post_renderer = (
        "apiVersion: v1\ntype: postrenderer/v1\nname: pwn\nversion: 0.1.0\nruntime: subprocess\n"
        "runtimeConfig:\n  platformCommand:\n  - command: ${HELM_PLUGIN_DIR}/run\n"
    )
    downloader = "name: pwn-get\nversion: 0.1.0\ndownloaders:\n- command: run\n  protocols: [pwn]\n"
    return {
        "pwn/plugin.yaml": post_renderer,
        "pwn/run": run,
        "pwn-get/plugin.yaml": downloader,
        "pwn-get/run": run,
    }


REPOSITORIES = "repositories:\n- name: x\n  url: pwn://x\n"
VENDORED_FROM_A_PLUGINS_SCHEME = {
    "hello/Chart.yaml": HELLO_CHART["hello/Chart.yaml"]
    + "dependencies:\n- name: x\n  version: 0.1.0\n  repository: pwn://x\n",
    "hello/charts/x/Chart.yaml": "apiVersion: v2\nname: x\nversion: 0.1.0\n",
    "hello/charts/x/templates/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-x\n"
    ),
}
"""A chart whose dependency names a repository of the plugin's scheme, vendored: helm would
fetch it through the downloader only if asked to update dependencies."""


@pytest.mark.case("SE-15")
def test_se15_no_plugin_post_renderer_or_setting_of_the_repository_runs(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """helm runs a plugin only when asked (a post-renderer by its flag, a downloader for a
    URL's scheme) and takes its settings from its environment and its home. So plugins lie
    where the daemon's environment points helm, and in every place of the repository helm
    could be pointed at; that environment also names settings helm acts on as it starts (a
    release store read from a file that is not there stops it; a profile written); a
    repositories.yaml names the plugin's scheme. The chart renders as written, and nothing
    ran."""
    sentinel = tmp_path / "plugin-ran"
    plugins = helm_plugins(sentinel)
    daemons = tmp_path / "daemon"
    for place in ("plugins", "data/helm/plugins"):
        write_files(daemons / place, plugins)
        for run in (daemons / place).glob("*/run"):
            run.chmod(0o755)
    write_files(daemons, {"config/helm/repositories.yaml": REPOSITORIES})
    monkeypatch.setenv("HELM_PLUGINS", str(daemons / "plugins"))
    monkeypatch.setenv("XDG_DATA_HOME", str(daemons / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(daemons / "config"))
    monkeypatch.setenv("HELM_DRIVER", "memory")
    monkeypatch.setenv("HELM_MEMORY_DRIVER_DATA", str(tmp_path / "no-releases.yaml"))
    monkeypatch.setenv("HELM_PPROF_CPU_PROFILE", str(sentinel))
    places = ["hello/plugins", "hello/.local/share/helm/plugins", ".helm/plugins"]
    files = {f"{place}/{name}": text for place in places for name, text in plugins.items()}
    configs = ["hello/.config/helm/repositories.yaml", ".config/helm/repositories.yaml"]
    files |= {config: REPOSITORIES for config in configs}
    executable = [name for name in files if name.endswith("/run")]
    git_repo.commit(
        {**HELLO_CHART, **VENDORED_FROM_A_PLUGINS_SCHEME, **files}, executable=executable
    )

    synced = gitopsd("sync", git_server.file_url(git_repo), *scope(namespace), "--path", "hello")

    assert synced.code == 0, synced.text
    assert config_map_names(admin_api, namespace) == {"gitopsd-test", "hello-hello", "hello-x"}
    assert config_map_named(admin_api, namespace, "hello-hello").data == {"greeting": "hello"}
    assert not sentinel.exists()


@pytest.mark.case("SE-02")
def test_se02_a_value_never_leaks_from_a_secret_or_a_failure(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    secret = (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n"
        "stringData:\n  password: {{ .Values.password | quote }}\n"
    )
    failing = (
        '{{ if .Values.strict }}{{ fail (printf "bad password %s" .Values.password) }}{{ end }}\n'
    )
    git_repo.commit(
        {
            **HELLO_CHART,
            "hello/templates/secret.yaml": secret,
            "hello/templates/check.yaml": failing,
            "prod.yaml": f"password: {CANARY}\n",
        }
    )
    url = git_server.file_url(git_repo)
    chart = ("--path", "hello", "--helm-values", "../prod.yaml")

    synced = gitopsd("sync", url, *scope(namespace), *chart)
    assert synced.code == 0, synced.text
    gitopsd.kubectl("patch", "secret/db", "-n", namespace, "-p", '{"stringData":{"password":"x"}}')
    shown = gitopsd("diff", url, *scope(namespace), *chart, "-o", "json")
    assert shown.code == 1, shown.text
    shown.document("DiffResult")
    Canary(CANARY).assert_absent(shown.text, "the diff")

    strict = (*chart, "--helm-set", "strict=true")
    failed = "hello: helm template failed: Error: execution error at (hello/templates/check.yaml"
    for refused in (
        gitopsd("validate", url, "--allow-insecure-source", *strict),
        gitopsd("sync", url, *scope(namespace), *strict),
    ):
        assert refused.code == 2, refused.text
        assert failed in refused.err
        Canary(CANARY).assert_absent(refused.text, "the refusal")


def test_a_gitsync_renders_its_chart_with_the_values_of_its_spec(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    git_repo.commit(HELLO_CHART)
    operator(daemons, namespace)
    helm = {"releaseName": "team", "values": {"greeting": "from the spec"}}
    create(
        admin_api,
        namespace,
        "hello",
        {"repository": {"url": git_server.file_url(git_repo)}, "paths": ["hello"], "helm": helm},
    )

    wait_ready(admin_api, namespace, "hello", "True", "Succeeded")
    assert config_map_named(admin_api, namespace, "team-hello").data == {
        "greeting": "from the spec"
    }

    patch_spec(admin_api, namespace, "hello", {"helm": {"values": {"greeting": "changed"}}})
    wait_for(
        lambda: (
            config_map_named(admin_api, namespace, "team-hello").data == {"greeting": "changed"}
        ),
        "the chart rendered again with the GitSync's new values",
        deadline_seconds=60,
    )


@pytest.mark.case("SE-02")
def test_se02_a_gitsyncs_values_reach_no_status_event_log_or_metric(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    """A template that fails quoting a value of the spec's: the failure is told everywhere
    the daemon tells things, the value nowhere (plain or base64)."""
    failing = '{{ fail (printf "bad password %s" .Values.password) }}\n'
    git_repo.commit({**HELLO_CHART, "hello/templates/check.yaml": failing})
    daemon = operator(daemons, namespace)
    helm = {"values": {"password": CANARY}}
    spec = {"repository": {"url": git_server.file_url(git_repo)}, "paths": ["hello"], "helm": helm}
    create(admin_api, namespace, "hello", spec)

    failed = wait_ready(admin_api, namespace, "hello", "False", "Invalid")

    core: Any = client.CoreV1Api(admin_api)
    status = json.dumps(failed["status"])
    said = [
        status,
        *(event.message or "" for event in core.list_namespaced_event(namespace).items),
        daemon.logs(),
        daemon.metrics(),
    ]
    assert "hello: helm template failed: Error: execution error at" in status
    encoded = base64.b64encode(CANARY.encode()).decode()
    assert not [text for text in said if CANARY in text or encoded in text]
