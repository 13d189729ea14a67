"""GitSyncSets against the real control plane: GitSyncs generated from a list, a
repository's directories and their matrix, kept equal to the generators as they change,
each syncing its manifests with the element's variables; the deletion guard; and what a
set may not do: generate into another namespace, take over a GitSync not its own, or
generate past its bounds."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.harness.cli import EXAMPLES, Gitopsd, example_files
from tests.harness.cluster_reads import config_map_data_value, config_map_value
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import GROUP, VERSION
from tests.harness.gitsyncs import create as create_gitsync
from tests.harness.gitsyncs import get as get_gitsync
from tests.harness.gitsyncs import wait_ready as wait_gitsync_ready
from tests.harness.gitsyncsets import (
    PLURAL,
    create,
    events,
    gitsync_names,
    install_crd,
    patch_spec,
    set_operator,
    wait_ready,
)
from tests.harness.manifests import config_map_with_value
from tests.harness.waiting import wait_for

PRUNE = {"gitopsd.io/delete-policy": "prune"}


@pytest.fixture
def gitsyncset_crd(admin_api: Any, gitsync_crd: str) -> str:
    return install_crd(admin_api)


def listed(*values: str, key: str = "env") -> dict[str, Any]:
    return {"list": {"elements": [{key: value} for value in values]}}


def directories(*globs: str) -> dict[str, Any]:
    return {"git": {"repository": {"url": ""}, "directories": [{"path": g} for g in globs]}}


def template(url: str, name: str, paths: list[str], **metadata: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, **metadata},
        "spec": {"interval": "1s", "repository": {"url": url}, "paths": paths},
    }


def holds_value(admin_api: Any, namespace: str, name: str, value: str) -> bool:
    return config_map_data_value(admin_api, namespace, name) == value


def reasons(admin_api: Any, namespace: str, name: str) -> list[str]:
    return [event.reason for event in events(admin_api, namespace, name)]


def test_a_list_generates_gitsyncs_that_sync_with_their_elements_variables(
    admin_api: Any,
    namespace: str,
    gitsyncset_crd: str,
    daemons: Daemons,
    git_repo: GitRepo,
    git_server: GitServer,
    gitopsd: Gitopsd,
) -> None:
    git_repo.commit({"base/settings.yaml": config_map_with_value("settings-${env}", "${env}")})
    url = git_server.file_url(git_repo)
    set_operator(daemons, namespace)
    create(
        admin_api,
        namespace,
        "web",
        {"generators": [listed("dev", "prod")], "template": template(url, "web-${env}", ["base"])},
    )

    status = wait_ready(admin_api, namespace, "web", "True", "Generated")["status"]
    assert status["gitSyncs"] == ["web-dev", "web-prod"] and status["total"] == 2
    for env in ("dev", "prod"):
        wait_gitsync_ready(admin_api, namespace, f"web-{env}", "True", "Succeeded")
        assert config_map_data_value(admin_api, namespace, f"settings-{env}") == env
    generated = get_gitsync(admin_api, namespace, "web-dev") or {}
    [owner] = generated["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("GitSyncSet", "web", True)
    assert generated["metadata"]["labels"]["gitopsd.io/gitsyncset"] == "web"
    assert generated["spec"]["postBuild"]["substitute"] == {"env": "dev"}
    table = gitopsd.kubectl("get", "gitsyncsets", "-n", namespace).splitlines()
    assert table[0].split() == ["NAME", "READY", "GITSYNCS", "REASON", "AGE"]
    assert table[1].split()[:4] == ["web", "True", "2", "Generated"]
    wait_for(lambda: "GitSyncsChanged" in reasons(admin_api, namespace, "web"), "its Event")

    # Deleted: its GitSyncs go with it, by their owner reference (the garbage collector).
    objects: Any = client.CustomObjectsApi(admin_api)
    objects.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "web")
    wait_for(lambda: gitsync_names(admin_api, namespace) == [], "its GitSyncs deleted with it")


def test_a_directory_each_its_gitsync_created_and_deleted_with_its_directory(
    admin_api: Any,
    namespace: str,
    gitsyncset_crd: str,
    daemons: Daemons,
    git_repo: GitRepo,
    git_server: GitServer,
) -> None:
    git_repo.commit(
        {
            "apps/a/cm.yaml": config_map_with_value("a"),
            "apps/b/cm.yaml": config_map_with_value("b"),
            "apps/skipped/cm.yaml": config_map_with_value("skipped"),
        }
    )
    url = git_server.file_url(git_repo)
    generator = directories("apps/*")
    generator["git"]["repository"]["url"] = url
    generator["git"]["directories"].append({"path": "apps/skipped", "exclude": True})
    set_operator(daemons, namespace)
    each = template(url, "app-${basename}", ["${path}"], annotations=PRUNE)
    create(admin_api, namespace, "apps", {"generators": [generator], "template": each})

    wait_ready(admin_api, namespace, "apps", "True", "Generated")
    assert gitsync_names(admin_api, namespace) == ["app-a", "app-b"]
    wait_for(lambda: config_map_data_value(admin_api, namespace, "a") == "one", "app a synced")

    git_repo.commit({"apps/c/cm.yaml": config_map_with_value("c")})
    wait_for(lambda: "app-c" in gitsync_names(admin_api, namespace), "app-c generated")
    wait_for(lambda: config_map_data_value(admin_api, namespace, "c") == "one", "app c synced")

    git_repo.commit({"apps/a": None})
    wait_for(lambda: gitsync_names(admin_api, namespace) == ["app-b", "app-c"], "app-a deleted")
    wait_for(
        lambda: config_map_data_value(admin_api, namespace, "a") is None,
        "app-a's ConfigMap pruned with it (delete-policy prune)",
    )
    assert config_map_data_value(admin_api, namespace, "skipped") is None


def test_a_matrix_of_a_list_and_directories(
    admin_api: Any,
    namespace: str,
    gitsyncset_crd: str,
    daemons: Daemons,
    git_repo: GitRepo,
    git_server: GitServer,
) -> None:
    git_repo.commit(
        {
            "apps/a/cm.yaml": config_map_with_value("${basename}-${env}", "${path}"),
            "apps/b/cm.yaml": config_map_with_value("${basename}-${env}", "${path}"),
        }
    )
    url = git_server.file_url(git_repo)
    generator = directories("apps/*")
    generator["git"]["repository"]["url"] = url
    matrix = {"matrix": {"generators": [listed("dev", "qa"), generator]}}
    set_operator(daemons, namespace)
    each = template(url, "${basename}-${env}", ["${path}"])
    create(admin_api, namespace, "grid", {"generators": [matrix], "template": each})

    status = wait_ready(admin_api, namespace, "grid", "True", "Generated")["status"]
    assert status["gitSyncs"] == ["a-dev", "a-qa", "b-dev", "b-qa"]
    for name in status["gitSyncs"]:
        holds = partial(holds_value, admin_api, namespace, name, f"apps/{name[0]}")
        wait_for(holds, f"{name} synced with the matrix's variables")


def test_a_gitsync_for_each_declared_cluster_the_namespace_may_target(
    admin_api: Any,
    namespace: str,
    control_plane: ControlPlane,
    gitsyncset_crd: str,
    daemons: Daemons,
    git_repo: GitRepo,
    git_server: GitServer,
) -> None:
    """Two clusters declared (both this control plane, by another name), one allowed for
    the set's namespace: its GitSync syncs into it, with the variable cluster."""
    git_repo.commit({"base/cm.yaml": config_map_with_value("settings", "${cluster}")})
    url = git_server.file_url(git_repo)
    kubeconfig = str(control_plane.kubeconfig)
    clusters = [
        {"name": "mirror", "kubeconfig": kubeconfig, "namespaces": [namespace]},
        {"name": "forbidden", "kubeconfig": kubeconfig, "namespaces": ["elsewhere"]},
    ]
    set_operator(daemons, namespace, clusters=clusters)
    each = template(url, "app-${cluster}", ["base"])
    each["spec"]["cluster"] = "${cluster}"
    create(admin_api, namespace, "fleet", {"generators": [{"clusters": {}}], "template": each})

    status = wait_ready(admin_api, namespace, "fleet", "True", "Generated")["status"]
    assert status["gitSyncs"] == ["app-mirror"]
    assert (get_gitsync(admin_api, namespace, "app-mirror") or {})["spec"]["cluster"] == "mirror"
    wait_for(lambda: holds_value(admin_api, namespace, "settings", "mirror"), "synced there")


def test_the_deletion_guard_refuses_a_mass_deletion_until_it_is_allowed(
    admin_api: Any,
    namespace: str,
    gitsyncset_crd: str,
    daemons: Daemons,
    git_repo: GitRepo,
    git_server: GitServer,
) -> None:
    git_repo.commit({"base/cm.yaml": config_map_with_value("cm-${team}")})
    url = git_server.file_url(git_repo)
    set_operator(daemons, namespace)
    each = template(url, "team-${team}", ["base"])
    four = listed("a", "b", "c", "d", key="team")
    create(admin_api, namespace, "teams", {"generators": [four], "template": each})
    wait_ready(admin_api, namespace, "teams", "True", "Generated")

    # One element left, and the template changed too: neither half is written.
    changed = template(url, "team-${team}", ["base"], labels={"tier": "gold"})
    one = [listed("a", key="team")]
    patch_spec(admin_api, namespace, "teams", {"generators": one, "template": changed})
    refused = wait_ready(admin_api, namespace, "teams", "False", "DeletionBlocked")
    message = refused["status"]["conditions"][0]["message"]
    assert "3 of the 4 GitSyncs this set owns would be deleted (team-b, team-c, team-d)" in message
    assert "spec.guards.allowMassDeletion: true" in message
    assert gitsync_names(admin_api, namespace) == ["team-a", "team-b", "team-c", "team-d"]
    labels = (get_gitsync(admin_api, namespace, "team-a") or {})["metadata"]["labels"]
    assert "tier" not in labels
    wait_for(lambda: "DeletionBlocked" in reasons(admin_api, namespace, "teams"), "the Event")

    patch_spec(admin_api, namespace, "teams", {"guards": {"allowMassDeletion": True}})
    wait_ready(admin_api, namespace, "teams", "True", "Generated")
    wait_for(lambda: gitsync_names(admin_api, namespace) == ["team-a"], "the three deleted")
    assert (get_gitsync(admin_api, namespace, "team-a") or {})["metadata"]["labels"][
        "tier"
    ] == "gold"


def test_a_set_generates_into_its_own_namespace_only(
    admin_api: Any,
    namespace: str,
    gitsyncset_crd: str,
    daemons: Daemons,
    git_repo: GitRepo,
    git_server: GitServer,
) -> None:
    git_repo.commit({"base/cm.yaml": config_map_with_value("cm")})
    url = git_server.file_url(git_repo)
    set_operator(daemons, namespace)
    elsewhere = template(url, "web-${env}", ["base"], namespace="kube-system")
    create(admin_api, namespace, "web", {"generators": [listed("dev")], "template": elsewhere})

    refused = wait_ready(admin_api, namespace, "web", "False", "InvalidSpec")
    message = refused["status"]["conditions"][0]["message"]
    assert "template.metadata.namespace: 'kube-system'" in message
    assert "into its own namespace" in message and "nothing was applied or deleted" in message
    assert gitsync_names(admin_api, namespace) == []
    assert "web-dev" not in gitsync_names(admin_api, "kube-system")


def test_a_gitsync_of_the_same_name_not_the_sets_is_never_taken_over(
    admin_api: Any,
    namespace: str,
    gitsyncset_crd: str,
    daemons: Daemons,
    git_repo: GitRepo,
    git_server: GitServer,
) -> None:
    git_repo.commit({"base/cm.yaml": config_map_with_value("cm-${env}")})
    url = git_server.file_url(git_repo)
    create_gitsync(admin_api, namespace, "web-dev", {"repository": {"url": url}, "paths": ["x"]})
    set_operator(daemons, namespace)
    each = template(url, "web-${env}", ["base"])
    create(admin_api, namespace, "web", {"generators": [listed("dev", "prod")], "template": each})

    taken = wait_ready(admin_api, namespace, "web", "False", "NameTaken")["status"]
    assert "GitSyncs web-dev exist and are not this set's" in taken["conditions"][0]["message"]
    assert taken["gitSyncs"] == ["web-prod"]
    wait_gitsync_ready(admin_api, namespace, "web-prod", "True", "Succeeded")
    mine = get_gitsync(admin_api, namespace, "web-dev") or {}
    assert "ownerReferences" not in mine["metadata"]
    assert mine["spec"]["paths"] == ["x"]


def test_a_set_past_its_bound_of_elements_generates_nothing(
    admin_api: Any,
    namespace: str,
    gitsyncset_crd: str,
    daemons: Daemons,
    git_repo: GitRepo,
    git_server: GitServer,
) -> None:
    git_repo.commit({"base/cm.yaml": config_map_with_value("cm")})
    url = git_server.file_url(git_repo)
    set_operator(daemons, namespace)
    rows = listed(*[str(n) for n in range(40)], key="row")
    columns = listed(*[str(n) for n in range(30)], key="column")
    matrix = {"matrix": {"generators": [rows, columns]}}
    each = template(url, "cell-${row}-${column}", ["base"])
    create(admin_api, namespace, "grid", {"generators": [matrix], "template": each})

    refused = wait_ready(admin_api, namespace, "grid", "False", "InvalidSpec")
    message = refused["status"]["conditions"][0]["message"]
    assert "1200 elements, over the most a GitSyncSet may generate, 1000" in message
    assert gitsync_names(admin_api, namespace) == []


def test_the_example_gitsyncset_makes_a_gitsync_of_each_example_folder(
    admin_api: Any,
    namespace: str,
    gitsyncset_crd: str,
    daemons: Daemons,
    git_repo: GitRepo,
    git_server: GitServer,
) -> None:
    """examples/gitsyncset.yaml as written, but for its namespace and repository URL, over
    three of the example folders: the chart's is excluded."""
    example = yaml.safe_load((EXAMPLES / "gitsyncset.yaml").read_text())
    url = git_server.file_url(git_repo)
    example["metadata"]["namespace"] = namespace
    example["spec"]["generators"][0]["git"]["repository"]["url"] = url
    example["spec"]["template"]["spec"]["repository"]["url"] = url
    files: dict[str, str | bytes | None] = {}
    for folder in ("app", "jobs", "chart"):
        files |= {f"{folder}/{name}": text for name, text in example_files(folder).items()}
    git_repo.commit(files)
    set_operator(daemons, namespace)
    objects: Any = client.CustomObjectsApi(admin_api)
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, example)

    status = wait_ready(admin_api, namespace, "examples", "True", "Generated")["status"]
    assert status["gitSyncs"] == ["example-app", "example-jobs"]
    wait_for(
        lambda: config_map_value(admin_api, namespace, "web-config", "GREETING") == "hello",
        "example-app's ConfigMap applied",
    )


def test_a_repository_of_more_directories_than_a_git_generator_scans_generates_nothing(
    admin_api: Any,
    namespace: str,
    gitsyncset_crd: str,
    daemons: Daemons,
    git_repo: GitRepo,
    git_server: GitServer,
) -> None:
    """A crafted tree of a few objects naming 32,766 directories: the listing stops past
    the bound, and the set says so."""
    git_repo.commit({"base/cm.yaml": config_map_with_value("cm")})
    tree = git_repo.tree({"cm.yaml": ("100644", git_repo.blob(config_map_with_value("cm")))})
    for _ in range(14):
        tree = git_repo.tree({"a": ("040000", tree), "b": ("040000", tree)})
    git_repo.push_tree(tree)
    url = git_server.file_url(git_repo)
    set_operator(daemons, namespace)
    generator = directories("**")
    generator["git"]["repository"]["url"] = url
    each = template(url, "dir-${basename}", ["${path}"])
    create(admin_api, namespace, "deep", {"generators": [generator], "template": each})

    refused = wait_ready(admin_api, namespace, "deep", "False", "SizeLimit")
    message = refused["status"]["conditions"][0]["message"]
    assert "holds more than 10000 directories, the most a GitSyncSet's git generator" in message
    assert gitsync_names(admin_api, namespace) == []


def test_a_namespace_past_its_share_of_sets_waits_until_one_goes(
    admin_api: Any,
    namespace: str,
    gitsyncset_crd: str,
    daemons: Daemons,
    git_repo: GitRepo,
    git_server: GitServer,
) -> None:
    """tenantQuota.gitSyncSets: 1. The younger set generates nothing while the older is
    there; once it is deleted, the younger generates."""
    git_repo.commit({"base/cm.yaml": config_map_with_value("cm-${env}")})
    url = git_server.file_url(git_repo)
    set_operator(daemons, namespace, tenantQuota={"gitSyncSets": 1})
    create(
        admin_api,
        namespace,
        "first",
        {"generators": [listed("a")], "template": template(url, "first-${env}", ["base"])},
    )
    wait_ready(admin_api, namespace, "first", "True", "Generated")
    create(
        admin_api,
        namespace,
        "second",
        {"generators": [listed("b")], "template": template(url, "second-${env}", ["base"])},
    )

    waiting = wait_ready(admin_api, namespace, "second", "False", "QuotaExceeded")
    message = waiting["status"]["conditions"][0]["message"]
    assert "may have 1 GitSyncSets passed over (tenantQuota.gitSyncSets)" in message
    assert gitsync_names(admin_api, namespace) == ["first-a"]

    client.CustomObjectsApi(admin_api).delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "first"
    )
    wait_ready(admin_api, namespace, "second", "True", "Generated")
    assert "second-b" in gitsync_names(admin_api, namespace)
