"""Kustomize renders only what the revision holds and runs none of its code (SE-15, SE-11,
SE-12, SE-02, BI-07). Each hostile repository is committed to a real git repository and read
by `gitopsd validate` and `gitopsd sync` with the real kubectl: refused with a clear error,
no sentinel file written, no canary in any output, nothing created in the namespace."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tests.harness.cli import Gitopsd
from tests.harness.gitserver import GitRepo, GitServer
from tests.integration.test_prune import config_maps
from tests.integration.test_sync import scope

INVALID = 2
GOOD = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\ndata:\n  k: v\n"
PLUGIN = "app/.config/kustomize/plugin/gitopsd.test/v1/pwn/Pwn"
CANARY = "CANARY-generated-0123456789"


def kuberc(**defaults: str) -> str:
    """A kuberc that changes `kubectl kustomize`'s flag defaults, as a repository could."""
    options = "".join(
        f"  - name: {name}\n    default: {json.dumps(value)}\n" for name, value in defaults.items()
    )
    return (
        "apiVersion: kubectl.config.k8s.io/v1beta1\nkind: Preference\ndefaults:\n"
        f"- command: kustomize\n  options:\n{options}"
    )


def program(sentinel: Path) -> str:
    """A program that leaves `sentinel` behind and prints a ConfigMap (or a helm version)."""
    return (
        f"#!/bin/sh\ntouch {sentinel}\n"
        'case "$1" in version) echo v3.15.0 ;;\n'
        "*) printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: pwned\\n' ;; esac\n"
    )


def assert_refused(
    gitopsd: Gitopsd,
    admin_api: Any,
    url: str,
    namespace: str,
    mentions: list[str],
    canaries: list[str] = [],  # noqa: B006 - never mutated
    flags: tuple[str, ...] = (),
) -> None:
    runs = {
        "validate": gitopsd("validate", url, "--allow-insecure-source", *flags),
        "sync": gitopsd("sync", url, *scope(namespace), *flags),
    }
    for command, run in runs.items():
        assert run.code == INVALID, f"{command}: {run.text}"
        for mention in mentions:
            assert mention in run.err, f"{command}: {mention!r} not in {run.err!r}"
        for canary in canaries:
            assert canary not in run.text, f"{command} shows {canary!r}: {run.text!r}"
    assert config_maps(admin_api, namespace) == set()


def test_se15_a_kuberc_in_the_repository_cannot_switch_on_exec_plugins(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    sentinel = tmp_path / "plugin-ran"
    git_repo.commit(
        {
            "app/.kube/kuberc": kuberc(**{"enable-alpha-plugins": "true"}),
            "app/kustomization.yaml": "resources: [good.yaml]\ngenerators: [pwn.yaml]\n",
            "app/good.yaml": GOOD,
            "app/pwn.yaml": "apiVersion: gitopsd.test/v1\nkind: Pwn\nmetadata:\n  name: pwn\n",
            PLUGIN: program(sentinel),
        },
        executable=[PLUGIN],
    )

    assert_refused(
        gitopsd, admin_api, git_server.file_url(git_repo), namespace, ["app: kustomize failed"]
    )
    assert not sentinel.exists()


def test_se15_a_kuberc_in_the_repository_cannot_run_helm_from_it(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    sentinel = tmp_path / "helm-ran"
    url = git_server.file_url(git_repo)
    # Revisions are read from snapshots at random paths, so the program a kuberc names is
    # one that exists on the machine already: the kuberc must not be read at all.
    helm = tmp_path / "helm"
    helm.write_text(program(sentinel))
    helm.chmod(0o755)
    git_repo.commit(
        {
            "app/.kube/kuberc": kuberc(**{"enable-helm": "true", "helm-command": str(helm)}),
            "app/kustomization.yaml": "helmCharts:\n- name: chart\n  releaseName: r\n",
            "app/charts/chart/Chart.yaml": "apiVersion: v2\nname: chart\nversion: 0.1.0\n",
        }
    )

    assert_refused(gitopsd, admin_api, url, namespace, ["app: kustomize failed"])
    assert not sentinel.exists()


def test_se11_a_resource_outside_the_checkout_is_refused(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    canary = "canary-outside-4711"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "kustomization.yaml").write_text("resources: [cm.yaml]\n")
    (outside / "cm.yaml").write_text(GOOD.replace("good", canary))
    escape = "../" * 40 + str(outside).lstrip("/")  # from any checkout, up to / and down again
    git_repo.commit({"app/kustomization.yaml": f"resources: [{escape}]\n"})

    assert_refused(
        gitopsd,
        admin_api,
        git_server.file_url(git_repo),
        namespace,
        [f"app/kustomization.yaml: resources entry '{escape}' resolves outside the checkout"],
        [canary],
    )


def test_se12_a_remote_base_is_refused(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    remote = "https://github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v5.7.0"
    git_repo.commit({"app/kustomization.yaml": f"resources: ['{remote}']\n"})

    assert_refused(
        gitopsd,
        admin_api,
        git_server.file_url(git_repo),
        namespace,
        [f"app/kustomization.yaml: resources entry '{remote}' is remote"],
    )


def test_kustomizes_own_error_is_kept(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit({"app/kustomization.yaml": "patches:\n- path: missing-patch.yaml\n"})

    assert_refused(
        gitopsd,
        admin_api,
        git_server.file_url(git_repo),
        namespace,
        [
            "app: kustomize failed: error:",
            "failed to get the patch file from path(missing-patch.yaml)",
        ],
    )


SECRET_INPUTS = {
    "env file with a bad byte": (
        "secretGenerator:\n- name: s\n  envs: [s.env]\n",
        b"TOKEN=" + CANARY.encode() + b"\xff\n",
    ),
    "literal without a key": (f"secretGenerator:\n- name: s\n  literals: ['={CANARY}']\n", b""),
    "literal without =": (f"secretGenerator:\n- name: s\n  literals: ['{CANARY}']\n", b""),
}


@pytest.mark.parametrize(("kustomization", "env"), SECRET_INPUTS.values(), ids=SECRET_INPUTS)
def test_se02_a_generator_value_never_shows_in_kustomizes_error(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    kustomization: str,
    env: bytes,
) -> None:
    git_repo.commit({"app/kustomization.yaml": kustomization, "app/s.env": env})

    assert_refused(
        gitopsd,
        admin_api,
        git_server.file_url(git_repo),
        namespace,
        ["app: kustomize failed: error: loading KV pairs"],
        [CANARY, base64.b64encode(CANARY.encode()).decode(), " ".join(map(str, CANARY.encode()))],
    )


def test_bi07_a_huge_generator_input_is_refused_by_the_revision_limit(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(
        {
            "app/kustomization.yaml": "configMapGenerator:\n- name: big\n  files: [big.txt]\n",
            "app/big.txt": "x" * (21 * 1024 * 1024),  # compresses to nothing in git
        }
    )

    assert_refused(
        gitopsd,
        admin_api,
        git_server.file_url(git_repo),
        namespace,
        ["app: kustomize's output is over the", "per-revision limit (--max-revision-bytes"],
        flags=("--max-revision-bytes", "8Mi"),  # read as it comes: never all 21 MiB at once
    )


@pytest.mark.parametrize("command", ["validate", "sync"])
def test_a_base_inside_the_checkout_still_renders(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    command: str,
) -> None:
    git_repo.commit(
        {
            "base/kustomization.yaml": "resources: [cm.yaml]\n",
            "base/cm.yaml": GOOD,
            "overlay/kustomization.yaml": "resources: [../base]\nnamePrefix: overlay-\n",
        }
    )
    url = git_server.file_url(git_repo)

    if command == "validate":
        run = gitopsd("validate", url, "--allow-insecure-source", "--path", "overlay")
        assert (run.code, run.out) == (0, "1 objects valid\n"), run.text
    else:
        run = gitopsd("sync", url, *scope(namespace), "--path", "overlay")
        assert run.code == 0, run.text
        assert "overlay-good" in config_maps(admin_api, namespace)
