"""`gitopsd check`'s verdicts, apart from the cluster that answers them: a Kubernetes
version is tested when its minor version is that of the built-in schemas, and the rights
check names each verb and resource refused; the GitSync API is this gitopsd's version."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

import pytest

from gitopsd import validation
from gitopsd.cli.check import gitsync_check, rights_check, version_check
from gitopsd.cluster import Cluster
from gitopsd.errors import ExitCode

TESTED = validation.built_in().where.rpartition(" ")[2]  # v1.34.4
MAJOR, MINOR, _ = TESTED.removeprefix("v").split(".")


@pytest.mark.parametrize(
    ("server", "ok"),
    [
        (TESTED, True),
        (f"v{MAJOR}.{MINOR}.0", True),
        (f"v{MAJOR}.{MINOR}.9+k3s1", True),
        (f"v{MAJOR}.{MINOR}.2-eks-113cf36", True),
        (f"v{MAJOR}.{int(MINOR) - 1}.7", False),
        (f"v{MAJOR}.{int(MINOR) + 1}.0", True),  # newer: passes, said untested
        (f"v{MAJOR}.{MINOR}0.0", True),  # not v1.34.x, though it starts alike: newer
        ("v1", False),
        ("", False),
    ],
)
def test_a_version_passes_unless_older_than_the_minor_of_the_built_in_schemas(
    server: str, ok: bool
) -> None:
    found = version_check(server)

    assert found.ok is ok
    assert f"v{MAJOR}.{MINOR}.x" in found.detail
    assert found.failure is None or found.failure.exit_code == ExitCode.CLUSTER_FAILED


def test_every_verb_refused_is_named_with_its_resource_and_the_namespace() -> None:
    found = rights_check(
        {"configmaps": ["delete"], "deployments.apps": ["create", "patch"]}, "shop"
    )

    assert not found.ok
    assert found.detail == (
        "may not delete configmaps; nor create, patch deployments.apps in namespace shop"
    )
    assert found.failure is not None and found.failure.exit_code == ExitCode.CLUSTER_FAILED


def test_rights_that_suffice_are_said_in_full() -> None:
    found = rights_check({"configmaps": [], "deployments.apps": []}, "shop")

    assert found.ok
    assert found.detail == (
        "may get, list, watch, create, patch, delete configmaps, deployments.apps in namespace shop"
    )


@dataclass
class Served:
    """Discovery of a cluster that serves GitSync in `api_versions`."""

    api_versions: tuple[str, ...]

    def find(self, api_version: str, kind: str) -> Any:
        return object() if api_version in self.api_versions and kind == "GitSync" else None

    def served_versions(self, api_version: str, kind: str) -> list[str]:
        return sorted(self.api_versions)


def serving(*api_versions: str) -> Cluster:
    return cast(Cluster, SimpleNamespace(discovery=Served(api_versions)))


@pytest.mark.parametrize(
    ("api_versions", "says"),
    [
        (
            ("gitopsd.io/v1alpha1",),
            "GitSync gitopsd.io/v1alpha1, which this gitopsd reads, is served",
        ),
        (
            ("gitopsd.io/v1beta1",),
            "the cluster serves gitopsd.io/v1beta1, not GitSync gitopsd.io/v1alpha1, which this "
            "gitopsd reads: apply its config/crd",
        ),
        ((), "its CRD gitsyncs.gitopsd.io is not installed (kubectl apply -f config/crd"),
    ],
)
def test_the_gitsync_api_passes_when_this_gitopsds_version_is_served(
    api_versions: tuple[str, ...], says: str
) -> None:
    found = gitsync_check(serving(*api_versions))

    assert found.ok is (api_versions == ("gitopsd.io/v1alpha1",))
    assert says in found.detail
