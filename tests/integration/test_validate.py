"""`gitopsd validate` through the real CLI: offline, it finds what `sync` would be refused
for (every problem, each with its field's line, object and path; no Secret value), and
with `--cluster` it checks against what the real API server serves, the CRDs installed
there included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.harness.cli import Gitopsd
from tests.harness.commands import INVALID
from tests.harness.controlplane import ControlPlane
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.kube import unique_name, wait_established
from tests.harness.waiting import wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "app" / "deployment.yaml"
SECRET = """\
apiVersion: v1
kind: Secret
metadata: {name: db}
stringData:
  password: [hunter2-s3cret]
"""

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n"


def crd(group: str) -> str:
    return f"""\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: gadgets.{group}}}
spec:
  group: {group}
  names: {{kind: Gadget, plural: gadgets}}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {{type: integer}}
"""


def gadget(group: str, spec: str) -> str:
    return f"apiVersion: {group}/v1\nkind: Gadget\nmetadata: {{name: g}}\nspec: {spec}\n"


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_validate_reports_every_problem_sync_would_be_refused_for(
    gitopsd: Gitopsd, tmp_path: Path, namespace: str
) -> None:
    typo = EXAMPLE.read_text().replace("  replicas: 2", "  replica: 2")
    source = write(
        tmp_path / "app",
        {
            "deployment.yaml": typo.replace("name: MODE", "nam: MODE"),
            "gadget.yaml": crd("example.com") + "---\n" + gadget("example.com", "{size: big}"),
            "secret.yaml": SECRET,
            "service.yaml": "apiVersion: v1\nkind: Servise\nmetadata: {name: web}\n",
        },
    )

    run = gitopsd("validate", str(source))

    assert run.code == INVALID and run.out == ""
    assert run.err.splitlines() == [
        "gitopsd: error: deployment.yaml:8: apps/Deployment/web: .spec.replica: "
        "field not declared in schema",
        "gitopsd: error: deployment.yaml:24: apps/Deployment/web: "
        ".spec.template.spec.containers[0].env[0].nam: field not declared in schema",
        "gitopsd: error: deployment.yaml:24: apps/Deployment/web: "
        ".spec.template.spec.containers[0].env[0].name: required, but not set",
        "gitopsd: error: gadget.yaml:24: example.com/Gadget/g: .spec.size: "
        "must be integer, not string",
        "gitopsd: error: secret.yaml:5: Secret/db: .stringData.password: must be string, not array",
        "gitopsd: error: service.yaml:2: Servise/web: .kind: v1 has no kind "
        "Servise in Kubernetes v1.34.4 or the revision's CRDs: did you mean Service?",
        "gitopsd: error: 6 problems in 4 of 5 objects",
    ]
    # the API server refuses the first of them alike
    only_the_typo = write(tmp_path / "typo", {"deployment.yaml": typo})
    assert gitopsd("validate", str(only_the_typo)).code == INVALID
    synced = gitopsd("sync", str(only_the_typo), "--namespace", namespace)
    assert synced.code == INVALID and ".spec.replica: field not declared in schema" in synced.err


def test_validate_out_of_process_says_what_is_valid(tmp_path: Path) -> None:
    source = write(tmp_path / "app", {"deployment.yaml": EXAMPLE.read_text()})
    command = [sys.executable, "-m", "gitopsd", "validate", str(source)]
    command += ["--cache-dir", str(tmp_path / "cache")]

    done = subprocess.run(command, capture_output=True, text=True, check=False)

    assert (done.returncode, done.stdout, done.stderr) == (0, "1 objects valid\n", "")


def test_validate_cluster_checks_the_crds_installed_there(
    gitopsd: Gitopsd, admin_api: Any, tmp_path: Path, namespace: str
) -> None:
    group = f"{unique_name('validate')}.example.com"
    install(gitopsd.plane, admin_api, crd(group))
    kubeconfig = ["--kubeconfig", str(gitopsd.plane.kubeconfig)]
    valid = write(tmp_path / "valid", {"gadget.yaml": gadget(group, "{size: 2}")})
    typo = write(tmp_path / "typo", {"gadget.yaml": gadget(group, "{size: 2, sise: 3}")})

    offline = gitopsd("validate", str(valid))
    checked = gitopsd("validate", str(valid), "--cluster", *kubeconfig)
    refused = gitopsd("validate", str(typo), "--cluster", *kubeconfig)

    assert offline.code == INVALID and "so there is no schema to check it against" in offline.err
    assert (checked.code, checked.out, checked.err) == (0, "1 objects valid\n", "")
    assert refused.code == INVALID
    assert refused.err.splitlines()[0] == (
        f"gitopsd: error: gadget.yaml:4: {group}/Gadget/g: .spec.sise: field not declared in schema"
    )
    synced = gitopsd("sync", str(typo), "--namespace", namespace)
    assert synced.code == INVALID and ".spec.sise: field not declared in schema" in synced.err


def install(plane: ControlPlane, api: Any, definition_yaml: str) -> None:
    """Creates the CRD and waits until it is served and the cluster publishes its schema
    (its OpenAPI v3 document follows the CRD shortly)."""
    definition = yaml.safe_load(definition_yaml)
    extensions: Any = client.ApiextensionsV1Api(api)
    extensions.create_custom_resource_definition(definition)
    name, group = definition["metadata"]["name"], definition["spec"]["group"]
    wait_established(api, name)
    listed = f"apis/{group}/v1"
    wait_for(lambda: listed in plane.request("GET", "/openapi/v3")["paths"], f"{listed} published")


def test_a_path_the_revision_lacks_is_named_with_what_is_there(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo
) -> None:
    """A typo in --path: the error lists the names of the deepest directory that exists,
    read from git's object store (the revision is never listed whole for it)."""
    git_repo.commit({"apps/web/cm.yaml": CM, "apps/api/cm.yaml": CM, "base/cm.yaml": CM})
    url = git_server.file_url(git_repo)

    at_the_root = gitopsd("validate", url, "--allow-insecure-source", "--path", "app")
    below = gitopsd("validate", url, "--allow-insecure-source", "--path", "apps/wbe")

    assert (at_the_root.code, below.code) == (INVALID, INVALID)
    assert "path app not found in the revision; the root holds apps, base\n" in at_the_root.err
    assert "path apps/wbe not found in the revision; apps/ holds api, web\n" in below.err
