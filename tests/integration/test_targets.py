"""Safe by default: two targets of one source never share a record, so a sync never prunes
what another target applied; a record an earlier gitopsd kept is found and moved; refusals
say what they kept and why."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_names
from tests.harness.commands import CLUSTER_FAILED, PRUNE_BLOCKED
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import create_namespace
from tests.harness.manifests import CONFIG_MAP, folder
from tests.harness.records import TARGET_ANNOTATION, earlier_record, parents, without_identity


def test_one_folder_synced_into_a_second_namespace_leaves_the_first_alone(
    control_plane: ControlPlane,
    gitopsd: Gitopsd,
    admin_api: Any,
    namespace: str,
    tmp_path: Path,
) -> None:
    """The new user's walk: the same folder into prod, then into staging, both --prune."""
    one = folder(tmp_path / "one", "settings")
    prod, staging = namespace, create_namespace(admin_api)
    assert gitopsd("sync", str(one), "-n", prod, "--prune").code == 0
    since = time.time()

    second = gitopsd("sync", str(one), "-n", staging, "--prune")

    assert second.code == 0, second.text
    assert "0 pruned" in second.out and "pruned     " not in second.out
    assert config_map_names(admin_api, prod) >= {"settings"}
    assert config_map_names(admin_api, staging) >= {"settings"}
    assert audit.deletes(control_plane, prod, since) == []
    [prod_parent], [staging_parent] = parents(admin_api, prod), parents(admin_api, staging)
    assert prod_parent != staging_parent  # each target keeps its record where it applies
    identity = json.loads(parents(admin_api, staging)[staging_parent][TARGET_ANNOTATION])
    assert (identity["tool"], identity["namespace"]) == ("cli", staging)


HELM_CHART = {
    "Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    "values.yaml": "env: none\n",
    "values-prod.yaml": "env: prod\n",
    "values-staging.yaml": "env: staging\n",
    "templates/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings-{{ .Values.env }}\n"
        "data:\n  env: {{ .Values.env | quote }}\n"
    ),
}


def test_two_values_files_of_one_chart_are_two_targets(
    control_plane: ControlPlane, gitopsd: Gitopsd, admin_api: Any, namespace: str, tmp_path: Path
) -> None:
    chart = folder(tmp_path / "web", **HELM_CHART)
    sync = ("sync", str(chart), "-n", namespace, "--prune", "--helm-values")
    assert gitopsd(*sync, "values-prod.yaml").code == 0
    since = time.time()

    staging = gitopsd(*sync, "values-staging.yaml")

    assert staging.code == 0, staging.text
    assert config_map_names(admin_api, namespace) >= {"settings-prod", "settings-staging"}
    assert audit.deletes(control_plane, namespace, since) == []
    assert len(parents(admin_api, namespace)) == 2


def test_two_contexts_of_one_cluster_differing_in_their_namespace_are_two_targets(
    control_plane: ControlPlane, gitopsd: Gitopsd, admin_api: Any, namespace: str, tmp_path: Path
) -> None:
    prod, staging = namespace, create_namespace(admin_api)
    kubeconfig = yaml.safe_load(control_plane.kubeconfig.read_text())
    [context] = kubeconfig["contexts"]
    kubeconfig["contexts"] = [
        {"name": name, "context": {**context["context"], "namespace": name}}
        for name in (prod, staging)
    ]
    contexts = tmp_path / "contexts.kubeconfig"
    contexts.write_text(yaml.safe_dump(kubeconfig))
    one = folder(tmp_path / "one", "settings")
    assert gitopsd("sync", str(one), "--kubeconfig", str(contexts), "--context", prod).code == 0
    since = time.time()

    second = gitopsd(
        "sync", str(one), "--kubeconfig", str(contexts), "--context", staging, "--prune"
    )

    assert second.code == 0, second.text
    assert config_map_names(admin_api, prod) >= {"settings"}
    assert audit.deletes(control_plane, prod, since) == []


def test_an_object_another_target_owns_is_named_and_left_as_it_is(
    gitopsd: Gitopsd, admin_api: Any, namespace: str, tmp_path: Path
) -> None:
    """Both targets render one object that names its namespace: the second finds it owned
    by the first, says which target that is, and changes nothing of it."""
    prod, staging = namespace, create_namespace(admin_api)
    shared = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: shared, namespace: {prod}}}\n"
    one = folder(tmp_path / "one", "settings", **{"shared.yaml": shared})
    assert gitopsd("sync", str(one), "-n", prod).code == 0
    core: Any = client.CoreV1Api(admin_api)
    before = core.read_namespaced_config_map("shared", prod).metadata.resource_version

    second = gitopsd("sync", str(one), "-n", staging)

    assert second.code == CLUSTER_FAILED, second.text
    assert f"ConfigMap/{prod}/shared" in second.err
    assert "is owned by another target: gitopsd source one-" in second.err
    assert f"gitopsd sync of {one} (paths .) into namespace {prod}" in second.err
    assert core.read_namespaced_config_map("shared", prod).metadata.resource_version == before


def test_a_record_an_earlier_gitopsd_kept_is_left_to_its_target_and_moved_by_it(
    control_plane: ControlPlane, gitopsd: Gitopsd, admin_api: Any, namespace: str, tmp_path: Path
) -> None:
    """Prod's record as the earlier gitopsd left it: staging neither takes nor prunes it;
    prod's next sync finds it, moves it where prod applies, and prunes what left git."""
    prod, staging = namespace, create_namespace(admin_api)
    one = folder(tmp_path / "one", "settings", "old")
    earlier = earlier_record(gitopsd, admin_api, one, prod)
    since = time.time()

    assert gitopsd("sync", str(one), "-n", staging, "--prune").code == 0

    assert audit.deletes(control_plane, prod, since) == []
    assert earlier in parents(admin_api, "default")
    folder(one, "settings", "new")  # old left git
    diff = gitopsd("diff", str(one), "-n", prod, "-o", "json")
    assert diff.code == 1, diff.text
    states = {d["object"]["name"]: d["state"] for d in diff.document("DiffResult")["drift"]}
    assert states == {"old": "extraneous", "new": "missing"}
    assert f"ConfigMap/default/{earlier}, where an earlier gitopsd kept it" in diff.err

    moved = gitopsd("sync", str(one), "-n", prod, "--prune")

    assert moved.code == 0, moved.text
    assert f"gitopsd: note: moved ConfigMap/default/{earlier} to ConfigMap/{prod}/" in moved.err
    assert f"pruned     ConfigMap/{prod}/old" in moved.out
    assert config_map_names(admin_api, prod) >= {"settings", "new"}
    assert "old" not in config_map_names(admin_api, prod)
    assert earlier not in parents(admin_api, "default")
    [own] = parents(admin_api, prod)
    assert "gitopsd.io/moved-from" not in parents(admin_api, prod)[own]  # the move is done
    assert gitopsd("diff", str(one), "-n", prod).code == 0
    deleted = {(w.namespace, w.name) for w in audit.deletes(control_plane, prod, since)}
    assert deleted == {(prod, "old")}


def test_a_named_sources_record_moves_from_default_to_where_it_applies(
    gitopsd: Gitopsd, admin_api: Any, namespace: str, tmp_path: Path
) -> None:
    name = f"named-{namespace}"
    one = folder(tmp_path / "one", "a", "b")
    where = ("-n", namespace, "--name", name)
    assert gitopsd("sync", str(one), *where, "--inventory-namespace", "default").code == 0
    without_identity(gitopsd, f"gitopsd-{name}")
    folder(one, "a")

    moved = gitopsd("sync", str(one), *where, "--prune")

    assert moved.code == 0, moved.text
    assert f"pruned     ConfigMap/{namespace}/b" in moved.out
    assert f"gitopsd-{name}" not in parents(admin_api, "default")
    assert f"gitopsd-{name}" in parents(admin_api, namespace)


def test_a_refused_prune_says_its_guard_numbers_objects_and_override(
    gitopsd: Gitopsd, admin_api: Any, namespace: str, tmp_path: Path
) -> None:
    names = [f"c{i:02}" for i in range(13)]
    one = folder(tmp_path / "one", *names)
    assert gitopsd("sync", str(one), "-n", namespace).code == 0
    folder(one, "c00")

    refused = gitopsd("sync", str(one), "-n", namespace, "--prune")

    assert refused.code == PRUNE_BLOCKED, refused.text
    [line] = [line for line in refused.out.splitlines() if line.startswith("prune refused")]
    assert line.startswith(
        "prune refused (threshold): 12 of the 13 objects it owns left git, over the limit of "
        "3 (25%) one sync may prune (--prune-budget PERCENT or --allow-mass-prune overrides it)"
    )
    kept = ", ".join(f"ConfigMap/{namespace}/{name}" for name in names[1:11])
    assert line.endswith(f"kept {kept} and 2 more")
    again = gitopsd("sync", str(one), "-n", namespace, "--prune", "-o", "json")
    document = again.document("SyncResult")
    assert document["pruneRefusals"] == [line]
    assert len(document["pruneRefused"]) == document["counts"]["skipped"] == 12
    assert document["pruneRefused"][0]["object"]["version"] == "v1"


def test_a_sync_without_prune_says_what_left_git_and_a_dry_run_says_it_is_one(
    gitopsd: Gitopsd, admin_api: Any, namespace: str, tmp_path: Path
) -> None:
    one = folder(tmp_path / "one", "a", "b", "c")
    assert gitopsd("sync", str(one), "-n", namespace).code == 0
    folder(one, "a")

    kept = gitopsd("sync", str(one), "-n", namespace)
    dry = gitopsd("sync", str(one), "-n", namespace, "--prune", "--dry-run")
    document = gitopsd("sync", str(one), "-n", namespace, "-o", "json").document("SyncResult")

    assert kept.code == 0, kept.text
    assert "2 objects this source applied left git and were kept: --prune deletes them" in kept.out
    assert (document["leftGit"], document["dryRun"]) == (2, False)
    assert dry.out.rstrip().endswith("(dry run: nothing was changed)"), dry.out
    assert config_map_names(admin_api, namespace) >= {"a", "b", "c"}


def test_a_daemon_source_meeting_a_cli_sync_of_its_target_says_so_backs_off_then_adopts(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """From the CLI to the daemon: objects `gitopsd sync` of the same repository, paths and
    namespace recorded are refused with the setting that takes them over, the refusal backs
    off (each retry waits at least as long as the one before) and is counted; with
    `adopt: true` the daemon takes them over, and then the CLI's record owns nothing."""
    git_repo.commit({"a.yaml": CONFIG_MAP.format(name="a")})
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, "-n", namespace, "--allow-insecure-source").code == 0

    daemon = daemons.start(url)
    daemon.wait_value("gitopsd_errors_total", lambda v: v >= 3, "three refusals", 60)

    refusals = [line for line in daemon.log_lines() if line.get("reason") == "conflict"]
    said = refusals[0]["message"]
    assert f"ConfigMap/{namespace}/a (a.yaml:1): is recorded by a `gitopsd sync`" in said
    assert "to take its objects over, set adopt: true" in said
    waits = [float(line["message"].rpartition("retrying in ")[2].split()[0]) for line in refusals]
    assert waits == sorted(waits) and waits[2] >= 2.0, waits
    daemon.stop()

    adopting = daemons.start(url, name="adopting", adopt=True)
    adopting.wait_value(
        "gitopsd_reconcile_total", lambda v: v >= 1, "a sync", source="app", result="success"
    )

    diff = gitopsd("diff", url, "-n", namespace, "--allow-insecure-source")
    assert diff.code == 1, diff.text
    assert "is owned by another target: gitopsd source app" in diff.out
    assert f"daemon source of {url.removesuffix('.git')} (paths .) into namespace" in diff.out
