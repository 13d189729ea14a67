"""`diff` catches what `sync` would refuse: it dry-runs an object that does not exist yet as
a create, says once that a namespace is missing, and shows what the server would store."""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.harness import audit
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_names
from tests.harness.commands import CLUSTER_FAILED, DRIFT, INVALID
from tests.harness.controlplane import AUDITED_USER, ControlPlane
from tests.harness.manifests import folder

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  {replicas}: 2
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: web, image: registry.example/web:1}}]
"""


def written_in(plane: ControlPlane, namespace: str, since: float) -> list[audit.Write]:
    """What gitopsd, run as the audited user, wrote in `namespace` since `since`, dry-runs
    aside (the namespace's controllers write there too)."""
    return [w for w in audit.changes(plane, AUDITED_USER, since) if w.namespace == namespace]


def deployment(name: str, replicas: str = "replicas") -> str:
    return DEPLOYMENT.format(name=name, replicas=replicas)


def test_diff_fails_an_invalid_new_object_as_sync_would_naming_each(
    control_plane: ControlPlane, gitopsd: Gitopsd, namespace: str, tmp_path: Path
) -> None:
    """The reproduction: a Deployment that does not exist yet with `spec.replica` (a typo),
    and a second one with the same typo: diff fails with exit 2 naming both, file and line
    and the field, and writes nothing but dry-runs."""
    files = {"web.yaml": deployment("web", "replica"), "api.yaml": deployment("api", "replica")}
    m = folder(tmp_path / "m", **files)
    since = time.time()

    audited = ("--kubeconfig", str(control_plane.audited_kubeconfig))
    diff = gitopsd("diff", str(m), "-n", namespace, *audited)
    sync = gitopsd("sync", str(m), "-n", namespace, *audited)

    assert diff.code == INVALID, diff.text
    for name in ("web", "api"):
        line = f"apps/Deployment/{namespace}/{name} ({name}.yaml:1)"
        assert line in diff.err, diff.err
    assert diff.err.count(".spec.replica: field not declared in schema") == 2
    assert sync.code == INVALID, sync.text
    assert written_in(control_plane, namespace, since) == []
    dry_runs = [w for w in audit.writes(control_plane, AUDITED_USER, since) if w.dry_run]
    assert len(dry_runs) >= 4, dry_runs  # each object dry-run by diff and by sync


def test_diff_shows_a_missing_object_as_the_server_would_store_it(
    gitopsd: Gitopsd, namespace: str, tmp_path: Path
) -> None:
    m = folder(tmp_path / "m", **{"web.yaml": deployment("web")})

    diff = gitopsd("diff", str(m), "-n", namespace)

    assert diff.code == DRIFT, diff.text
    assert f"missing apps/Deployment/{namespace}/web (web.yaml:1)" in diff.out
    assert "+  revisionHistoryLimit: 10" in diff.out  # the server's default, not git's
    assert "+  progressDeadlineSeconds: 600" in diff.out
    assert "uid" not in diff.out and "creationTimestamp" not in diff.out


def test_a_missing_namespace_is_said_once_with_its_remedy(
    control_plane: ControlPlane, gitopsd: Gitopsd, admin_api: Any, tmp_path: Path
) -> None:
    absent = f"absent-{secrets.token_hex(4)}"
    m = folder(tmp_path / "m", "a", "b", "c", "d")
    since = time.time()

    audited = ("--kubeconfig", str(control_plane.audited_kubeconfig))
    diff = gitopsd("diff", str(m), "-n", absent, *audited)
    sync = gitopsd("sync", str(m), "-n", absent, *audited)

    remedy = "create it, or add the Namespace to the revision, or give --create-namespace"
    for run in (diff, sync):
        assert run.code == CLUSTER_FAILED, run.text
        assert run.err.count(f"namespace {absent} does not exist") == 1, run.err
        assert "4 of its objects go there" in run.err and remedy in run.err
        assert "not found" not in run.err  # not once per object
    assert written_in(control_plane, absent, since) == []


def test_create_namespace_makes_it_first_labelled_as_the_sources_and_never_prunes_it(
    control_plane: ControlPlane, gitopsd: Gitopsd, admin_api: Any, tmp_path: Path
) -> None:
    core: Any = client.CoreV1Api(admin_api)
    target = f"new-{secrets.token_hex(4)}"
    m = folder(tmp_path / "m", "a", "b")

    diff = gitopsd("diff", str(m), "-n", target, "--create-namespace")
    synced = gitopsd("sync", str(m), "-n", target, "--create-namespace", "--prune")

    assert diff.code == DRIFT, diff.text
    assert f"missing Namespace/{target} (--create-namespace)" in diff.out
    assert synced.code == 0, synced.text
    assert f"created    Namespace/{target}" in synced.out
    namespace = core.read_namespace(target)
    assert namespace.metadata.labels["gitopsd.io/created-by"].startswith("applyset-")
    assert "applyset.kubernetes.io/part-of" not in namespace.metadata.labels
    assert config_map_names(admin_api, target) >= {"a", "b"}
    since = time.time()

    again = gitopsd("sync", str(m), "-n", target, "--prune", "--prune-protected")

    assert again.code == 0, again.text
    assert "pruned     " not in again.out
    namespaces = audit.writes_by_anyone(control_plane, since)
    assert [w for w in namespaces if w.resource == "namespaces"] == []
    assert gitopsd("diff", str(m), "-n", target, "--create-namespace").code == 0


def test_a_named_path_that_holds_no_manifest_is_an_error_an_unnamed_one_a_warning(
    gitopsd: Gitopsd, namespace: str, tmp_path: Path
) -> None:
    """A typo in --path (a directory of notes, not manifests) would sync nothing, and with
    --prune try to delete everything: refused. A source that holds nothing at all is said."""
    m = folder(tmp_path / "m", "a", **{"docs/README.md": "# notes\n"})
    empty = folder(tmp_path / "empty", **{"README.md": "# nothing here\n"})

    named = gitopsd("diff", str(m), "-n", namespace, "--path", "docs")
    unnamed = gitopsd("diff", str(empty), "-n", namespace)
    validated = gitopsd("validate", str(empty))

    assert named.code == INVALID, named.text
    assert "path docs: holds no manifest to read: no file there is named *.yaml" in named.err
    assert unnamed.code == 0, unnamed.text
    warning = "gitopsd: warning: the source holds no manifest: no file under . is named *.yaml"
    assert warning in unnamed.err
    assert validated.code == 0 and warning in validated.err, validated.text
    # an empty source allowed: a named path that holds nothing is what was meant
    allowed = ("--path", "docs", "--allow-empty", "--prune", "--dry-run")
    meant = gitopsd("sync", str(m), "-n", namespace, *allowed)
    assert meant.code == 0 and "no file under docs is named *.yaml" in meant.err, meant.text
