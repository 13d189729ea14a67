"""Bad input (the catalogue's BI cases, docs/reliability.md) gets a clear error naming the
file or object, and nothing in the cluster changes: a valid ConfigMap committed beside the
bad file is never created, and with prune on, the owned objects the bad revision leaves out
are not deleted (read from the audit log)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.harness import audit
from tests.harness.canary import Canary
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_names
from tests.harness.commands import INVALID, scope
from tests.harness.controlplane import AUDITED_USER, ControlPlane
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.hostile_names import HOSTILE_NAMES
from tests.harness.owned_config_maps import OWNED, owned_files, versions

GOOD = {"good.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\ndata:\n  k: v\n"}
LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)
SENTINEL = Path("/tmp/gitopsd-bi17-sentinel")
CANARY = "Q0FOQVJZ" + "c2VjcmV0"  # base64 of CANARYsecret: a value no output may hold

BAD_INPUTS: dict[str, tuple[dict[str, str | bytes], int, list[str]]] = {
    "BI-01 malformed YAML": (
        {"bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n"},
        INVALID,
        ["bad.yaml:5:1", "line 4"],
    ),
    "BI-02 duplicate keys": (
        {"bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  name: y\n"},
        INVALID,
        ["bad.yaml", "name", "4", "5"],
    ),
    "BI-03 duplicate objects": (
        {
            "one.yaml": GOOD["good.yaml"].replace("good", "twin"),
            "two.yaml": GOOD["good.yaml"].replace("good", "twin").replace("k: v", "k: w"),
        },
        INVALID,
        ["one.yaml:1", "two.yaml:1", "ConfigMap"],
    ),
    "BI-04 unknown kind": (
        {"bad.yaml": "apiVersion: apps/v1\nkind: Deploymnet\nmetadata:\n  name: x\n"},
        INVALID,
        ["bad.yaml:1", "Deploymnet"],
    ),
    "BI-04 removed API version": (
        {"bad.yaml": "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: x\n"},
        INVALID,
        ["bad.yaml:1", "batch/v1beta1", "batch/v1"],
    ),
    "BI-06 custom resource without its CRD": (
        {"bad.yaml": "apiVersion: k106.com/v1alpha1\nkind: Bob\nmetadata:\n  name: x\n"},
        INVALID,
        ["bad.yaml:1", "Bob", "no CRD"],
    ),
    "BI-07 an object over the limit": (
        {
            "big.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  k: "
            + "x" * (4 * 1024 * 1024)
        },
        INVALID,
        ["big.yaml:1:1", "object is 4.0 MiB, over the per-object limit of 3 MiB"],
    ),
    "BI-07 more documents than the limit": (
        {"bad.yaml": "a: 1\n---\n" * 50_001},
        INVALID,
        ["bad.yaml:100000:1", "more than 50000 YAML documents", "limits.maxDocuments"],
    ),
    "BI-08 billion laughs": ({"bad.yaml": LAUGHS}, INVALID, ["bad.yaml", "alias"]),
    "BI-09 deep nesting": (
        {"bad.yaml": "a: " + "[" * 20000 + "]" * 20000 + "\n"},
        INVALID,
        ["bad.yaml:1:", "nested deeper than the limit"],
    ),
    "BI-10 NUL bytes": (
        {"bad.yaml": b"apiVersion: v1\nkind: ConfigMap\x00\n"},
        INVALID,
        ["bad.yaml:2", "NUL byte at byte offset 30"],
    ),
    "BI-11 Latin-1": (
        {
            "bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caf\xe9\n".encode(
                "latin-1"
            )
        },
        INVALID,
        ["bad.yaml:4", "invalid UTF-8 at byte offset 52"],
    ),
    "BI-11 UTF-16": (
        {"bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n".encode("utf-16")},
        INVALID,
        ["bad.yaml:1", "NUL byte at byte offset 3", "must be UTF-8"],
    ),
    "BI-18 invalid base64 in a Secret": (
        {
            "bad.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n"
            f"  password: {CANARY}*\n"
        },
        INVALID,
        ["bad.yaml:1", "Secret s: data key 'password' is not valid base64"],
    ),
    "BI-21 an ignore rule nested without end": (
        {
            "bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  annotations:\n"
            f"    gitopsd.io/drift-policy: {json.dumps('[' * 900 + ']' * 900)}\n"
        },
        INVALID,
        ["bad.yaml:1", "gitopsd.io/drift-policy: nested deeper than 3 levels"],
    ),
    "BI-22 a number where a string belongs": (
        {
            "bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
            "data:\n  mode: 0755\n"
        },
        INVALID,
        ["ConfigMap/", "bad.yaml:1", ".data.mode: expected string"],
    ),
    "BI-14 invalid name": (
        {"bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n"},
        INVALID,
        ["ConfigMap", "Bad_Name", "bad.yaml:1", "metadata.name", "DNS-1123 subdomain"],
    ),
    "BI-14 namespace on a cluster-scoped kind": (
        {"bad.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n  namespace: y\n"},
        INVALID,
        ["bad.yaml:1", "cluster-scoped"],
    ),
    "BI-15 unknown field": (
        {
            "bad.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n"
            "  replcas: 2\n  selector: {matchLabels: {a: b}}\n  template:\n"
            "    metadata: {labels: {a: b}}\n"
            "    spec: {containers: [{name: c, image: busybox}]}\n"
        },
        INVALID,
        ["apps/Deployment/", "bad.yaml:1", "replcas"],
    ),
    "BI-16 document without apiVersion": (
        {"bad.yaml": "---\n---\nkind: ConfigMap\nmetadata:\n  name: x\n"},
        INVALID,
        ["bad.yaml", "apiVersion"],
    ),
    "BI-17 python tag": (
        {"bad.yaml": f"a: !!python/object/apply:os.system ['touch {SENTINEL}']\n"},
        INVALID,
        ["bad.yaml:1", "tag"],
    ),
    "BI-17 custom tag": ({"bad.yaml": "a: !foo bar\n"}, INVALID, ["bad.yaml:1", "tag"]),
    "BI-19 ownership label": (
        {
            "bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels:\n"
            "    applyset.kubernetes.io/part-of: applyset-x-v1\n"
        },
        INVALID,
        ["bad.yaml", "applyset.kubernetes.io/part-of"],
    ),
}


@pytest.mark.parametrize("case", BAD_INPUTS, ids=list(BAD_INPUTS))
def test_bad_input_is_a_clear_error_and_changes_nothing(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    case: str,
    control_plane: ControlPlane,
) -> None:
    files, code, mentions = BAD_INPUTS[case]
    url = git_server.file_url(git_repo)
    git_repo.commit(owned_files(""))
    assert gitopsd("sync", url, *scope(namespace), "--prune").code == 0
    before, since = versions(admin_api, namespace), time.time()
    git_repo.commit({**GOOD, **files, **{f"{name}.yaml": None for name in OWNED}})

    run = gitopsd("sync", url, *scope(namespace), "--prune")

    assert run.code == code, run.text
    for mention in mentions:
        assert mention in run.err, f"{mention!r} not in {run.err!r}"
    Canary(CANARY).assert_absent(run.text, "gitopsd's output")
    assert "good" not in config_map_names(admin_api, namespace)
    assert audit.deletes(control_plane, namespace, since) == []
    assert versions(admin_api, namespace) == before  # owned, left out, kept unchanged
    assert not SENTINEL.exists()


@pytest.mark.case("BI-12")
@pytest.mark.parametrize(
    "target", ["/etc/passwd", "../../outside/canary.yaml", "sub/../../escape.yaml", "."]
)
def test_bi12_symlinks_are_refused_their_targets_never_read_and_nothing_pruned(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    target: str,
    control_plane: ControlPlane,
) -> None:
    url = git_server.file_url(git_repo)
    git_repo.commit(owned_files(""))
    assert gitopsd("sync", url, *scope(namespace), "--prune").code == 0
    before, since = versions(admin_api, namespace), time.time()
    git_repo.commit({**GOOD, **{f"{name}.yaml": None for name in OWNED}})
    git_repo.commit_symlink("link.yaml", target)

    run = gitopsd("sync", url, *scope(namespace), "--prune")

    assert run.code == INVALID, run.text
    assert "link.yaml" in run.err and "symlink" in run.err
    assert "root:" not in run.text
    assert "good" not in config_map_names(admin_api, namespace)
    assert audit.deletes(control_plane, namespace, since) == []
    assert versions(admin_api, namespace) == before


@pytest.mark.case("BI-05")
def test_a_custom_resource_applies_with_its_crd_in_one_commit(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    """BI-05: the CRD is applied and Established before its custom resources."""
    group = f"{namespace}.example.com"
    crd = f"""apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{kind: Widget, plural: widgets}}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"""
    widgets = "".join(
        f"---\napiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: w{i}\nsize: {i}\n"
        for i in range(20)
    )
    git_repo.commit({"crd.yaml": crd, "widgets.yaml": widgets})
    url = git_server.file_url(git_repo)

    run = gitopsd("sync", url, *scope(namespace))

    assert run.code == 0, run.text
    assert "21 created" in run.out
    diff = gitopsd("diff", url, *scope(namespace))
    assert diff.code == 0, diff.text


@pytest.mark.case("SE-01", "SE-07")
def test_secret_values_never_appear_in_diff_or_sync_output(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    canary: Canary,
) -> None:
    """SE-01, SE-07: a Secret's values, git's and a live one, are masked in the dry-run results
    diff and sync show, and written nowhere in the cluster."""
    changed = Canary.fresh()
    secret = (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n"
        f"stringData:\n  token: {json.dumps(canary.value)}\n  user: admin\n"
    )
    git_repo.commit({"secret.yaml": secret})
    url = git_server.file_url(git_repo)
    first = gitopsd("sync", url, *scope(namespace))
    assert first.code == 0, first.text
    patch = json.dumps({"data": {"token": changed.base64}})
    gitopsd.kubectl("patch", "secret/creds", "-n", namespace, "-p", patch)

    text = gitopsd("diff", url, *scope(namespace))
    as_json = gitopsd("diff", url, *scope(namespace), "-o", "json")
    second = gitopsd("sync", url, *scope(namespace))

    assert text.code == as_json.code == 1
    [drift] = as_json.document("DiffResult")["drift"]
    assert drift["changes"] == [
        {
            "path": "data.token",
            "live": "***",
            "desired": "*** (changed)",
            "manager": "kubectl-patch",
            "decision": "heal",
            "rule": None,
        }
    ]
    assert second.code == 0
    for run in (first, text, as_json, second):
        canary.assert_absent(run.text, "gitopsd's output")
        changed.assert_absent(run.text, "gitopsd's output")
    canary.assert_not_in_cluster(admin_api, namespace)
    changed.assert_not_in_cluster(admin_api, namespace)


def test_validate_checks_a_local_directory_offline(gitopsd: Gitopsd, tmp_path: Path) -> None:
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "cm.yaml").write_text(GOOD["good.yaml"])
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "cm.yaml").write_text("kind: ConfigMap\nmetadata:\n  name: x\n")

    assert gitopsd("validate", str(tmp_path / "ok")).out == "1 objects valid\n"
    invalid = gitopsd("validate", str(tmp_path / "bad"))
    assert invalid.code == INVALID
    assert "cm.yaml" in invalid.err and "apiVersion" in invalid.err


def test_a_kustomization_is_rendered_by_kustomize(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(
        {
            "base/kustomization.yaml": "resources: [cm.yaml]\nnamePrefix: kz-\n"
            "configMapGenerator:\n- name: generated\n  literals: [a=1]\n",
            "base/cm.yaml": GOOD["good.yaml"],
        }
    )
    url = git_server.file_url(git_repo)

    run = gitopsd("sync", url, *scope(namespace))

    assert run.code == 0, run.text
    assert {"kz-good"} <= config_map_names(admin_api, namespace)
    assert any(name.startswith("kz-generated-") for name in config_map_names(admin_api, namespace))
    assert gitopsd("diff", url, *scope(namespace)).code == 0


def test_a_kubeconfig_credential_plugin_runs_only_when_allowed(
    gitopsd: Gitopsd, tmp_path: Path
) -> None:
    sentinel = tmp_path / "ran"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [{"name": "c", "cluster": {"server": gitopsd.plane.url}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "users": [
                    {
                        "name": "u",
                        "user": {
                            "exec": {
                                "apiVersion": "client.authentication.k8s.io/v1",
                                "command": "touch",
                                "args": [str(sentinel)],
                            }
                        },
                    }
                ],
            }
        )
    )
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "cm.yaml").write_text(GOOD["good.yaml"])

    run = gitopsd("diff", str(tmp_path / "app"), "--kubeconfig", str(kubeconfig))

    assert run.code == INVALID
    assert "--allow-exec-credentials" in run.err
    assert not sentinel.exists()


HOSTILE_CASES = [(field, case) for field in ("name", "namespace") for case in HOSTILE_NAMES]


def config_map(name: str, namespace: str) -> str:
    # JSON strings are YAML too: each hostile value is written exactly.
    return (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {json.dumps(name)}\n"
        f"  namespace: {json.dumps(namespace)}\n"
    )


@pytest.mark.case("SE-11")
@pytest.mark.parametrize(
    ("field", "case"), HOSTILE_CASES, ids=[f"{f}-{c}" for f, c in HOSTILE_CASES]
)
def test_se11_hostile_names_are_refused_and_never_reach_the_api_server(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    field: str,
    case: str,
) -> None:
    hostile = HOSTILE_NAMES[case]
    name, where = (hostile, namespace) if field == "name" else ("victim", hostile)
    git_repo.commit({**GOOD, "bad.yaml": "# hostile\n" + config_map(name, where)})
    url = git_server.file_url(git_repo)
    since = time.time()

    validate = gitopsd("validate", url, "--allow-insecure-source")
    sync = gitopsd(
        "sync", url, *scope(namespace), "--kubeconfig", str(control_plane.audited_kubeconfig)
    )

    for run in (validate, sync):
        assert run.code == INVALID, run.text
        assert "bad.yaml:2: document 1: " in run.err and f"metadata.{field} " in run.err
        assert "x" * 81 not in run.err
    assert audit.requests(control_plane, AUDITED_USER, since) == []


def test_the_audited_user_has_every_request_logged(
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """The oracle above proves something only if the audited user's reads are logged."""
    git_repo.commit(GOOD)
    since = time.time()

    run = gitopsd(
        "diff",
        git_server.file_url(git_repo),
        *scope(namespace),
        "--kubeconfig",
        str(control_plane.audited_kubeconfig),
    )

    assert run.code == 1, run.text  # good is missing
    reads = audit.requests(control_plane, AUDITED_USER, since)
    assert any(r.verb == "get" and r.resource == "configmaps" for r in reads), reads


DASHBOARDS_FILE_BYTES = 1_053_739  # the file a widely used monitoring stack ships


def dashboards(total: int) -> str:
    """ConfigMaps of Grafana-like dashboard JSON in one multi-document file of `total` bytes."""
    panel = {"type": "timeseries", "targets": [{"expr": "sum(rate(http_requests_total[5m]))"}]}
    documents = []
    for number in range(24):
        payload = json.dumps({"title": f"dashboard {number}", "panels": [panel] * 150})
        documents.append(
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dashboard-{number}\n"
            f"data:\n  dashboard.json: {json.dumps(payload)}\n"
        )
    text = "---\n" + "---\n".join(documents)
    return text + "#" * (total - len(text.encode()))  # a comment pads to the exact size


@pytest.mark.case("BI-07")
def test_bi07_a_large_file_of_dashboards_syncs(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    text = dashboards(DASHBOARDS_FILE_BYTES)
    assert len(text.encode()) == DASHBOARDS_FILE_BYTES
    git_repo.commit({"dashboards.yaml": text})

    run = gitopsd("sync", git_server.file_url(git_repo), *scope(namespace))

    assert run.code == 0, run.text
    assert {f"dashboard-{n}" for n in range(24)} <= config_map_names(admin_api, namespace)


@pytest.mark.case("LD-05")
def test_ld05_an_object_over_3_mib_is_refused_naming_its_line(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    huge = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: huge\ndata:\n  k: " + "x" * (
        7 << 19
    )
    git_repo.commit(
        {**GOOD, "big.yaml": GOOD["good.yaml"].replace("good", "small") + "---\n" + huge}
    )

    run = gitopsd("sync", git_server.file_url(git_repo), *scope(namespace))

    assert run.code == INVALID, run.text
    assert (
        "big.yaml:7:1: object is 3.5 MiB, over the per-object limit of 3 MiB "
        "(--max-object-bytes, limits.maxObjectBytes)"
    ) in run.err
    assert "good" not in config_map_names(admin_api, namespace)


@pytest.mark.case("BI-07")
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--max-revision-bytes", "200"],
            "cm3.yaml: the revision's manifests reach 264 bytes, over the per-revision limit of "
            "200 bytes "
            "(--max-revision-bytes, limits.maxRevisionBytes)",
        ),
        (
            ["--max-documents", "3"],
            "cm3.yaml:1: more than 3 YAML documents, the per-revision limit "
            "(--max-documents, limits.maxDocuments)",
        ),
        (
            ["--max-object-bytes", "64"],
            "cm0.yaml:1:1: object is 66 bytes, over the per-object limit of 64 bytes "
            "(--max-object-bytes, limits.maxObjectBytes)",
        ),
    ],
    ids=["revision-bytes", "documents", "object-bytes"],
)
def test_bi07_limits_set_on_the_command_line_take_effect(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    flags: list[str],
    message: str,
) -> None:
    files = {f"cm{n}.yaml": GOOD["good.yaml"].replace("good", f"cm{n}") for n in range(4)}
    git_repo.commit(files)
    url = git_server.file_url(git_repo)

    refused = gitopsd("sync", url, *scope(namespace), *flags)
    accepted = gitopsd("validate", url, "--allow-insecure-source")

    assert refused.code == INVALID, refused.text
    assert message in refused.err
    assert config_map_names(admin_api, namespace) == set()
    assert accepted.code == 0, accepted.text
