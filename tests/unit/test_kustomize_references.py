"""What a kustomization may reach (SE-11, SE-12): checked before kustomize ever runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitopsd.config import Limits
from gitopsd.errors import ManifestError
from gitopsd.kustomize import references
from gitopsd.manifests import Directory
from tests.harness.manifests import write

LIMITS = Limits()
GENERATOR = "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: m\n"
BASE = {"base/kustomization.yaml": "resources: [cm.yaml]\n", "base/cm.yaml": "x: 1\n"}

ALLOWED = {
    "a base beside it": ("resources: [../base]\n", {}),
    "a file of its own": ("resources: [own.yaml]\n", {"app/own.yaml": "x: 1\n"}),
    "a component": ("components: [../base]\n", {}),
    "a cycle ends": ("resources: [../base]\n", {"base/kustomization.yaml": "bases: [../app]\n"}),
    "an inline transformer": ("transformers:\n- |\n  apiVersion: builtin\n  kind: X\n", {}),
    "an inline patch": ("patchesStrategicMerge:\n- |\n  kind: X\n", {}),
    "a patch file": ("patches:\n- path: p.yaml\n", {"app/p.yaml": "x: 1\n"}),
    "a generator file": ("configMapGenerator:\n- name: c\n  files: [k=f.txt]\n", {}),
}


@pytest.mark.parametrize(("kustomization", "extra"), ALLOWED.values(), ids=ALLOWED.keys())
def test_references_inside_the_revision_are_allowed(
    tmp_path: Path, kustomization: str, extra: dict[str, str]
) -> None:
    write(tmp_path, {**BASE, "app/kustomization.yaml": kustomization, **extra})

    references.check(Directory(tmp_path), "app", LIMITS)


REFUSED = {
    "SE-11 resources escape": (
        "resources: [../../../elsewhere]\n",
        {},
        "app/kustomization.yaml: resources entry '../../../elsewhere' resolves outside",
    ),
    "SE-11 components escape": ("components: [../..]\n", {}, "components entry '../..' resolves"),
    "SE-11 bases escape": (
        "bases: [../base/../../x]\n",
        {},
        "bases entry '../base/../../x' resolves",
    ),
    "SE-11 generators escape": (
        "generators: [../../g]\n",
        {},
        "generators entry '../../g' resolves",
    ),
    "SE-11 absolute": ("resources: [/etc]\n", {}, "resources entry '/etc' must be a path inside"),
    "SE-11 escape through a base": (
        "resources: [../base]\n",
        {"base/kustomization.yaml": "resources: [../../x]\n"},
        "base/kustomization.yaml: resources entry '../../x' resolves outside",
    ),
    "SE-11 key in another case": (
        "Resources: [../../x]\n",
        {},
        "resources entry '../../x' resolves",
    ),
    "SE-11 key with a long s": (
        "re\u017fources: [../../x]\n",
        {},
        "entry '../../x' resolves outside",
    ),
    "SE-11 merge key": ("<<: {resources: [../../x]}\n", {}, "resources entry '../../x' resolves"),
    "SE-11 patch file escape": (
        "patches:\n- path: ../../p.yaml\n",
        {},
        "patches.path entry '../../p.yaml'",
    ),
    "SE-11 env file escape": (
        "secretGenerator:\n- name: s\n  envs: [../../../etc/x.env]\n",
        {},
        "secretGenerator.envs entry '../../../etc/x.env' resolves outside",
    ),
    "SE-11 missing directory": (
        "resources: [nothere]\n",
        {},
        "entry 'nothere' is not in the revision",
    ),
    "SE-12 https base": ("resources: [https://example.com/r.git]\n", {}, "is remote"),
    "SE-12 github shorthand": ("resources: [github.com/org/repo//app?ref=v1]\n", {}, "is remote"),
    "SE-12 scp-like": ("resources: ['git@github.com:org/repo']\n", {}, "is remote"),
    "SE-12 git prefix": ("bases: ['git::https://h/r']\n", {}, "is remote"),
    "SE-12 remote patch": ("patches:\n- path: http://127.0.0.1:8080/p.yaml\n", {}, "is remote"),
    "SE-12 remote crd": ("crds: [https://h/crd.yaml]\n", {}, "crds entry 'https://h/crd.yaml'"),
    "SE-12 a generator config file fetching loopback": (
        "generators: [gen.yaml]\n",
        {"app/gen.yaml": GENERATOR + "files: [m=http://127.0.0.1:9090/metrics]\n"},
        "app/gen.yaml: files entry 'http://127.0.0.1:9090/metrics' is remote",
    ),
    "SE-12 an inline generator config": (
        "generators:\n- |\n  " + GENERATOR.replace("\n", "\n  ") + "files: [m=https://h/x]\n",
        {},
        "app/kustomization.yaml (generators, inline): files entry 'https://h/x' is remote",
    ),
    "SE-11 a transformer config escaping": (
        "transformers: [t.yaml]\n",
        {"app/t.yaml": "apiVersion: builtin\nkind: PatchTransformer\npath: ../../etc/p.yaml\n"},
        "app/t.yaml: path entry '../../etc/p.yaml' resolves outside",
    ),
    "SE-11 a generator config's env file escaping, in a list of configs": (
        "generators: [gen.yaml]\n",
        {"app/gen.yaml": "---\n" + GENERATOR + "---\n" + GENERATOR + "envs: [../../s.env]\n"},
        "app/gen.yaml: envs entry '../../s.env' resolves outside",
    ),
    "SE-11 a validator config's path, in another case": (
        "validators: [v.yaml]\n",
        {"app/v.yaml": "kind: X\nspec:\n  Paths: [/etc/passwd]\n"},
        "app/v.yaml: spec.Paths entry '/etc/passwd' must be a path inside",
    ),
    "SE-11 a helm values file": (
        "helmCharts:\n- name: c\n  valuesFile: ../../v.yaml\n",
        {},
        "helmCharts.valuesFile entry '../../v.yaml' resolves outside",
    ),
}


@pytest.mark.parametrize(
    ("kustomization", "extra", "expected"), REFUSED.values(), ids=REFUSED.keys()
)
def test_references_leaving_the_revision_are_refused(
    tmp_path: Path, kustomization: str, extra: dict[str, str], expected: str
) -> None:
    write(tmp_path, {**BASE, "app/kustomization.yaml": kustomization, **extra})

    with pytest.raises(ManifestError) as caught:
        references.check(Directory(tmp_path), "app", LIMITS)

    assert expected in str(caught.value)
    assert caught.value.reason in ("path_escape", "remote")


@pytest.mark.case("SE-11")
@pytest.mark.parametrize("reference", ["../linked", "../real/../linked/x", "../via/base"])
def test_se11_a_symlink_on_the_way_is_refused(tmp_path: Path, reference: str) -> None:
    write(tmp_path, {**BASE, "app/kustomization.yaml": f"resources: [{reference}]\n"})
    (tmp_path / "real").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "base")
    (tmp_path / "via").symlink_to(tmp_path)

    with pytest.raises(ManifestError) as caught:
        references.check(Directory(tmp_path), "app", LIMITS)

    assert caught.value.reason == "symlink"
    assert f"app/kustomization.yaml: resources entry '{reference}' passes through a symlink" in (
        str(caught.value)
    )


@pytest.mark.case("SE-11")
def test_se11_a_symlinked_kustomization_file_is_refused(tmp_path: Path) -> None:
    write(tmp_path, {"real.yaml": "resources: []\n", "app/x": ""})
    (tmp_path / "app" / "kustomization.yaml").symlink_to(tmp_path / "real.yaml")

    with pytest.raises(ManifestError) as caught:
        references.check(Directory(tmp_path), "app", LIMITS)

    assert caught.value.reason == "symlink"


@pytest.mark.case("SE-02")
def test_se02_generator_values_are_returned_for_scrubbing(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "app/kustomization.yaml": "secretGenerator:\n- name: s\n  literals: [A=lit-value]\n"
            "  envs: [s.env]\n",
            "app/s.env": "# comment\nTOKEN=env-value\nexport OTHER = spaced \n",
        },
    )

    reach = references.check(Directory(tmp_path), "app", LIMITS)

    assert reach.secrets == ["lit-value", "env-value", "spaced"]


def test_the_reach_is_every_kustomization_and_every_path_they_name(tmp_path: Path) -> None:
    """What a private copy for kustomize must hold: nothing kustomize may read is left out."""
    write(
        tmp_path,
        {
            **BASE,
            "app/kustomization.yaml": "resources: [../base, ../shared/cm.yaml]\n"
            "patches:\n- path: ../patches/p.yaml\n"
            "configMapGenerator:\n- name: c\n  envs: [c.env]\n",
            "app/c.env": "A=1\n",
            "shared/cm.yaml": "x: 1\n",
            "patches/p.yaml": "x: 1\n",
            "unrelated/u.yaml": "x: 1\n",
        },
    )

    reach = references.check(Directory(tmp_path), "app", LIMITS)

    assert reach.paths == {
        *("app", "app/c.env", "base", "base/cm.yaml", "shared/cm.yaml", "patches/p.yaml")
    }


@pytest.mark.case("SE-02")
def test_se02_values_of_generator_configs_are_returned_for_scrubbing(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "app/kustomization.yaml": "generators: [gen.yaml]\n",
            "app/gen.yaml": GENERATOR + "literals: ['PASSWORD:hunter2', B=two]\nenvs: [s.env]\n",
            "app/s.env": "TOKEN=from-env\n",
        },
    )

    reach = references.check(Directory(tmp_path), "app", LIMITS)

    assert sorted(reach.secrets) == ["PASSWORD:hunter2", "from-env", "two"]
    assert reach.paths == {"app", "app/gen.yaml", "app/s.env"}


def test_the_kustomizations_one_render_reaches_are_bounded(tmp_path: Path) -> None:
    chain = {f"k{n}/kustomization.yaml": f"resources: [../k{n + 1}]\n" for n in range(5)}
    write(tmp_path, {**chain, "k5/kustomization.yaml": "resources: []\n"})

    references.check(Directory(tmp_path), "k0", Limits(max_kustomizations=6))
    with pytest.raises(ManifestError) as caught:
        references.check(Directory(tmp_path), "k0", Limits(max_kustomizations=5))

    assert caught.value.reason == "size_limit"
    assert str(caught.value) == (
        "k0: reaches more than 5 kustomizations in one render "
        "(--max-kustomizations, limits.maxKustomizations)"
    )
