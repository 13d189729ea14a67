"""A kustomization's helmCharts, read as gitopsd renders them (kustomize's own fields)."""

from __future__ import annotations

import pytest

from gitopsd.config import ChartInflation, ChartSettings
from gitopsd.errors import ManifestError
from gitopsd.kustomize.helm_charts import inflations, without_charts

FILE = "app/kustomization.yaml"


def test_entries_map_onto_charts_of_the_revision_or_of_a_repository() -> None:
    data = {
        "HelmGlobals": {"chartHome": "../vendor"},
        "helmCharts": [
            {"name": "db", "valuesFile": "db.yaml", "additionalValuesFiles": ["../x.yaml"]},
            {
                "Name": "web",
                "repo": "oci://ghcr.io/team/charts",
                "version": "^2",
                "releaseName": "shop",
                "namespace": "shop",
                "valuesInline": {"replicas": 2},
                "includeCRDs": True,
                "skipHooks": True,
            },
        ],
    }

    local, remote = inflations(FILE, "app", data)

    assert local == ChartInflation(
        where=f"{FILE}: helmCharts[0]",
        name="db",
        chart="vendor/db",
        settings=ChartSettings(release_name="db"),  # not a random name: it would drift
        values_files=("app/db.yaml", "x.yaml"),
    )
    assert remote == ChartInflation(
        where=f"{FILE}: helmCharts[1]",
        name="web",
        chart=None,
        repository="oci://ghcr.io/team/charts",
        version="^2",
        settings=ChartSettings(release_name="shop", namespace="shop", values='{"replicas":2}'),
        include_crds=True,
        skip_hooks=True,
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"helmCharts": {"name": "x"}}, "helmCharts must be a list"),
        ({"helmCharts": [{"name": "a/b"}]}, "helmCharts[0]: name must be a chart's name"),
        ({"helmCharts": [{"name": "x", "kubeVersion": "1.30"}]}, "kubeVersion: not a field"),
        ({"helmCharts": [{"name": "x", "valuesMerge": "merge"}]}, "valuesMerge: gitopsd renders"),
        ({"helmCharts": [{"name": "x", "valuesInline": [1]}]}, "valuesInline: expected a mapping"),
        ({"helmCharts": [{"name": "x", "version": 2}]}, "version must be a string"),
        ({"helmGlobals": {"configHome": "/h"}, "helmCharts": []}, "configHome: not a field"),
    ],
)
def test_what_gitopsd_would_not_render_as_kustomize_does_is_refused(
    data: dict[str, object], message: str
) -> None:
    with pytest.raises(ManifestError) as refused:
        inflations(FILE, "app", data)

    assert str(refused.value).startswith(FILE) and message in str(refused.value)


def test_the_kustomization_kustomize_reads_lists_the_rendered_charts_as_resources() -> None:
    data = {"Resources": ["cm.yaml"], "helmCharts": [{"name": "x"}], "helmglobals": {}, "a": 1}

    assert without_charts(data, [".gitopsd-helm-0-x.yaml"]) == {
        "Resources": ["cm.yaml", ".gitopsd-helm-0-x.yaml"],
        "a": 1,
    }
    assert without_charts({"helmCharts": []}, ["g.yaml"]) == {"resources": ["g.yaml"]}
