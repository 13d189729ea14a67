"""What helm may read (SE-11, BI-07, BI-12): a chart is checked before helm ever runs."""

from __future__ import annotations

import gzip
import tarfile
from pathlib import Path

import pytest

from gitopsd.config import Limits
from gitopsd.errors import ManifestError, ManifestReason
from gitopsd.helm import chart, output
from gitopsd.manifests import Directory
from tests.harness.archives import archive
from tests.harness.manifests import write

LIMITS = Limits()
SMALL = Limits(max_revision_bytes=1024 * 1024)
CHART = {
    "app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\n",
    "app/values.yaml": "replicas: 1\n",
    "app/templates/cm.yaml": "kind: ConfigMap\n",
}


def write_bytes(root: Path, rel: str, data: bytes) -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_bytes(data)


def test_a_chart_lists_every_file_it_holds(tmp_path: Path) -> None:
    write(tmp_path, CHART)

    found = chart.inspect(Directory(tmp_path), "app", LIMITS)

    assert found.files == ("app/Chart.yaml", "app/templates/cm.yaml", "app/values.yaml")
    assert found.dependencies == ()


def test_a_file_dependency_inside_the_checkout_is_placed(tmp_path: Path) -> None:
    dependency = "dependencies:\n- name: common\n  repository: file://../lib/common\n"
    write(
        tmp_path,
        {
            **CHART,
            "app/Chart.yaml": CHART["app/Chart.yaml"] + dependency,
            "lib/common/Chart.yaml": "apiVersion: v2\nname: common\nversion: 1.0.0\n",
            "lib/common/templates/_helpers.tpl": '{{- define "x" }}{{- end }}\n',
        },
    )

    found = chart.inspect(Directory(tmp_path), "app", LIMITS)

    assert [(d.name, d.chart.rel) for d in found.dependencies] == [("common", "lib/common")]
    assert "lib/common/templates/_helpers.tpl" in set(found.every_file())


def test_a_repositorys_dependency_is_listed_at_the_version_chart_lock_pins(
    tmp_path: Path,
) -> None:
    dependencies = (
        "dependencies:\n"
        "- name: redis\n  version: ^19.0\n  repository: https://charts.example/stable\n"
        "- name: podinfo\n  version: 6.x\n  repository: oci://ghcr.io/stefanprodan/charts\n"
        "- name: vendored\n  version: 1.x\n  repository: https://charts.example/stable\n"
    )
    lock = (
        "dependencies:\n"
        "- name: redis\n  repository: https://charts.example/stable\n  version: 19.6.4\n"
    )
    write(
        tmp_path,
        {
            **CHART,
            "app/Chart.yaml": CHART["app/Chart.yaml"] + dependencies,
            "app/Chart.lock": lock,
            "app/charts/vendored/Chart.yaml": "apiVersion: v2\nname: vendored\nversion: 1.0.0\n",
        },
    )

    found = chart.inspect(Directory(tmp_path), "app", LIMITS)

    assert found.remote == (
        chart.RemoteDependency("redis", "https://charts.example/stable", "=19.6.4"),
        chart.RemoteDependency("podinfo", "oci://ghcr.io/stefanprodan/charts", "6.x"),
    )


def test_a_dependency_on_helms_own_repository_configuration_is_refused(tmp_path: Path) -> None:
    dependency = "dependencies:\n- name: redis\n  version: 1.x\n  repository: '@bitnami'\n"
    write(tmp_path, {**CHART, "app/Chart.yaml": CHART["app/Chart.yaml"] + dependency})

    with pytest.raises(
        ManifestError, match=r"app/Chart\.yaml: dependency redis: repository '@bitnami'"
    ):
        chart.inspect(Directory(tmp_path), "app", LIMITS)


def test_a_vendored_dependency_is_left_to_helm(tmp_path: Path) -> None:
    dependency = "dependencies:\n- name: common\n  repository: file://../../elsewhere\n"
    write(tmp_path, {**CHART, "app/Chart.yaml": CHART["app/Chart.yaml"] + dependency})
    write_bytes(tmp_path, "app/charts/common-1.0.0.tgz", archive({"common/Chart.yaml": b"x"}))

    found = chart.inspect(Directory(tmp_path), "app", LIMITS)

    assert found.dependencies == ()
    assert "app/charts/common-1.0.0.tgz" in found.files


REFUSED = {
    "SE-11 a file dependency outside the checkout": (
        {"app/Chart.yaml": "name: app\ndependencies:\n- name: x\n  repository: file://../../x\n"},
        "app/Chart.yaml: 'file://../../x' resolves outside the checkout",
    ),
    "SE-11 an absolute file dependency": (
        {"app/Chart.yaml": "name: app\ndependencies:\n- name: x\n  repository: file:///etc\n"},
        "app/Chart.yaml: 'file:///etc' must be a path inside the checkout",
    ),
    "a file dependency that is not there": (
        {"app/Chart.yaml": "name: app\ndependencies:\n- name: x\n  repository: file://../x\n"},
        "app/Chart.yaml: dependency file://../x: no such directory",
    ),
    "a dependency without a name": (
        {"app/Chart.yaml": "name: app\ndependencies:\n- repository: file://../x\n"},
        "app/Chart.yaml: dependencies[0]: name must be a chart's name",
    ),
    "Chart.yaml that is not a mapping": (
        {"app/Chart.yaml": "- a\n"},
        "app/Chart.yaml: a chart's Chart.yaml must be one YAML mapping",
    ),
}


@pytest.mark.parametrize(("files", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_a_chart_that_reaches_out_is_refused(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    write(tmp_path, {**CHART, **files})

    with pytest.raises(ManifestError) as refused:
        chart.inspect(Directory(tmp_path), "app", LIMITS)

    assert message in str(refused.value)


@pytest.mark.case("BI-12")
def test_bi12_a_symlink_in_a_chart_is_refused(tmp_path: Path) -> None:
    write(tmp_path, CHART)
    (tmp_path / "app/templates/passwd.yaml").symlink_to("/etc/passwd")

    with pytest.raises(ManifestError) as refused:
        chart.inspect(Directory(tmp_path), "app", LIMITS)

    assert refused.value.reason == ManifestReason.SYMLINK
    assert "app/templates/passwd.yaml: is a symlink" in str(refused.value)
    assert "/etc/passwd" not in str(refused.value)


ARCHIVES = {
    "BI-12 a symlink member": (
        archive({"x/Chart.yaml": b"name: x\n"}, links={"x/templates/a.yaml": "/etc/passwd"}),
        "member 'x/templates/a.yaml' is a symlink",
    ),
    "SE-11 a member outside the archive": (
        archive({"../../x.yaml": b"kind: X\n"}),
        "member '../../x.yaml' points outside the archive",
    ),
    "BI-07 a bomb past the revision's limit": (
        archive({"x/big.yaml": bytes(SMALL.max_revision_bytes + 1)}),
        "unpacks to more than the per-revision limit (--max-revision-bytes",
    ),
    "BI-07 a bomb inside an archive inside the archive": (
        archive({"x/charts/y-1.tgz": archive({"y/big": bytes(SMALL.max_revision_bytes)})}),
        "unpacks to more than the per-revision limit",
    ),
    "not an archive at all": (b"not gzip", "not a gzipped tar archive (BadGzipFile)"),
}


@pytest.mark.parametrize(("data", "message"), ARCHIVES.values(), ids=ARCHIVES.keys())
def test_a_hostile_archive_is_refused(tmp_path: Path, data: bytes, message: str) -> None:
    write(tmp_path, CHART)
    write_bytes(tmp_path, "app/charts/x-1.0.0.tgz", data)

    with pytest.raises(ManifestError) as refused:
        chart.inspect(Directory(tmp_path), "app", SMALL)

    assert "app/charts/x-1.0.0.tgz" in str(refused.value)
    assert message in str(refused.value)


@pytest.mark.case("BI-07")
def test_bi07_a_bomb_costs_no_more_than_its_budget(tmp_path: Path) -> None:
    """1 GiB of zeros gzipped is about a megabyte (made here of gzip members, which one
    stream may hold in a row): refused once the budget is read, long before the gigabyte."""
    header = tarfile.TarInfo("x/big.yaml")
    header.size = 1024**3
    bomb = gzip.compress(header.tobuf()) + gzip.compress(bytes(1024 * 1024)) * 1024
    write(tmp_path, CHART)
    write_bytes(tmp_path, "app/charts/x-1.0.0.tgz", bomb)

    with pytest.raises(ManifestError, match="unpacks to more than the per-revision limit"):
        chart.inspect(Directory(tmp_path), "app", Limits(max_revision_bytes=8 * 1024 * 1024))


VALUES_FILES = {
    "SE-11 outside the checkout": ("../../../etc/passwd", "resolves outside the checkout"),
    "SE-11 absolute": ("/etc/passwd", "must be a path inside the checkout"),
    "SE-12 a URL": ("https://example.com/values.yaml", "must be a path inside the checkout"),
    "missing": ("nothere.yaml", "no such file in the revision (app/nothere.yaml)"),
}


@pytest.mark.parametrize(("entry", "message"), VALUES_FILES.values(), ids=VALUES_FILES.keys())
def test_a_values_file_must_lie_in_the_checkout(tmp_path: Path, entry: str, message: str) -> None:
    write(tmp_path, CHART)

    with pytest.raises(ManifestError) as refused:
        chart.values_file(Directory(tmp_path), "app", entry, "helm valuesFiles")

    assert str(refused.value).startswith("helm valuesFiles: ")
    assert message in str(refused.value)


def test_a_values_file_beside_the_chart_is_found(tmp_path: Path) -> None:
    write(tmp_path, {**CHART, "envs/prod.yaml": "replicas: 3\n"})

    found = chart.values_file(Directory(tmp_path), "app", "../envs/prod.yaml", "valuesFiles")

    assert found == "envs/prod.yaml"


def test_helms_output_is_split_by_the_template_it_came_from() -> None:
    rendered = (
        "---\n# Source: app/crds/crd.yaml\nkind: CustomResourceDefinition\n"
        "---\n# Source: app/templates/a.yaml\nkind: A\n"
        "---\n# Source: app/templates/a.yaml\nkind: B\n"
        "---\n# Source: app/charts/sub/templates/c.yaml\nkind: C\n"
    )

    pieces = output.pieces(rendered, "charts/app")

    assert pieces == [
        ("charts/app/crds/crd.yaml", "kind: CustomResourceDefinition\n"),
        ("charts/app/templates/a.yaml", "kind: A\n---\nkind: B\n"),
        ("charts/app/charts/sub/templates/c.yaml", "kind: C\n"),
    ]


def test_a_render_of_nothing_is_no_piece() -> None:
    assert output.pieces("", "app") == []
    assert output.pieces("\n", "app") == []
