"""Kustomize renders only what the revision holds and runs none of its code (SE-15, SE-11,
SE-12, SE-02, BI-07, BI-13). Each hostile repository is committed to a real git repository
and read by `gitopsd validate` and `gitopsd sync` with the real kubectl: refused with a
clear error, no program of the repository run, no canary in any output, nothing created in
the namespace (and with prune on, nothing deleted)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gitopsd import sandbox
from tests.harness import audit
from tests.harness.canary import Canary
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_names
from tests.harness.commands import INVALID, scope
from tests.harness.controlplane import Binaries, ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import create, get, wait_ready
from tests.harness.loopback import Loopback, serving
from tests.harness.operators import operator
from tests.harness.owned_config_maps import owned_files, versions
from tests.harness.refusals import HOSTILE_PROGRAM, assert_refused

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


@pytest.mark.case("SE-15")
def test_se15_a_kuberc_in_the_repository_cannot_switch_on_exec_plugins(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    """The repository is laid out as a home kubectl and kustomize could be given: a kuberc
    that switches exec plugins on, and the plugin where kustomize looks for it. The plugin
    can leave no trace of its own here (a snapshot's files are never executable, and the
    render's fence lets nothing but kubectl execute, nor /bin/sh be read), so the proof is
    kustomize's own words: plugins were off when it met the generator. Had the kuberc been
    obeyed, kustomize would have named the plugin as one it could not run; with those walls
    down too, it would have rendered the plugin's ConfigMap `pwned`."""
    git_repo.commit(
        {
            "app/.kube/kuberc": kuberc(**{"enable-alpha-plugins": "true"}),
            "app/kustomization.yaml": "resources: [good.yaml]\ngenerators: [pwn.yaml]\n",
            "app/good.yaml": GOOD,
            "app/pwn.yaml": "apiVersion: gitopsd.test/v1\nkind: Pwn\nmetadata:\n  name: pwn\n",
            PLUGIN: HOSTILE_PROGRAM,
        },
        executable=[PLUGIN],
    )

    assert_refused(
        gitopsd,
        admin_api,
        git_server.file_url(git_repo),
        namespace,
        ["app: kustomize failed", "external plugins disabled; unable to load external plugin"],
    )


@pytest.mark.case("SE-15")
def test_se15_a_kuberc_in_the_repository_cannot_run_helm_from_it(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    """A kuberc switches kustomize's helm on and points it at a program on the machine.
    Under the render's fence that program cannot start (it lies outside what the render may
    read, and so does /bin/sh): had kustomize tried to run it, the render would have failed;
    unfenced, the chart's objects would have been the program's ConfigMap `pwned`. So the
    proof is a sync that succeeds with exactly the chart's objects, by gitopsd's own helm."""
    url = git_server.file_url(git_repo)
    # Revisions are read from snapshots at random paths, so the program a kuberc names is
    # one that exists on the machine already: the kuberc must not be read at all.
    helm = tmp_path / "helm"
    helm.write_text(HOSTILE_PROGRAM)
    helm.chmod(0o755)
    git_repo.commit(
        {
            "app/.kube/kuberc": kuberc(**{"enable-helm": "true", "helm-command": str(helm)}),
            "app/kustomization.yaml": "helmCharts:\n- name: chart\n  releaseName: r\n",
            "app/charts/chart/Chart.yaml": "apiVersion: v2\nname: chart\nversion: 0.1.0\n",
            "app/charts/chart/values.yaml": "",  # kustomize inflates no chart without one
            "app/charts/chart/templates/cm.yaml": GOOD,
        }
    )

    # gitopsd renders helmCharts itself, with its own helm: kustomize runs none
    synced = gitopsd("sync", url, *scope(namespace), "--path", "app")
    assert synced.code == 0, synced.text
    assert config_map_names(admin_api, namespace) == {"gitopsd-test", "good"}


@pytest.mark.case("SE-11")
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
    escape = "../" * 20 + str(outside).lstrip("/")  # from any checkout, up to / and down again
    git_repo.commit({"app/kustomization.yaml": f"resources: [{escape}]\n"})

    assert_refused(
        gitopsd,
        admin_api,
        git_server.file_url(git_repo),
        namespace,
        [f"app/kustomization.yaml: resources entry '{escape}' resolves outside the checkout"],
        [canary],
    )


@pytest.mark.case("SE-12")
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


@pytest.mark.case("BI-13")
def test_bi13_a_cycle_of_kustomizations_is_refused_without_hanging_or_pruning(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    control_plane: ControlPlane,
) -> None:
    url, flags = git_server.file_url(git_repo), ("--path", "app", "--prune")
    owned = {f"app/{name}": text for name, text in owned_files("").items() if text}
    listed = f"resources: [{', '.join(name.removeprefix('app/') for name in owned)}]\n"
    git_repo.commit({"app/kustomization.yaml": listed, **owned})
    assert gitopsd("sync", url, *scope(namespace), *flags).code == 0
    before, since = versions(admin_api, namespace), time.time()
    assert len(before) == len(owned)
    git_repo.commit(
        {
            "app/kustomization.yaml": "resources: [../base]\n",
            "base/kustomization.yaml": "resources: [../app, cm.yaml]\n",
            "base/cm.yaml": GOOD,
            **dict.fromkeys(owned),
        }
    )

    run = gitopsd("sync", url, *scope(namespace), *flags)

    assert run.code == INVALID, run.text
    assert "app: kustomize failed: error:" in run.err and "cycle" in run.err, run.err
    assert "good" not in config_map_names(admin_api, namespace)
    assert audit.deletes(control_plane, namespace, since) == []
    assert versions(admin_api, namespace) == before  # owned, left out, kept unchanged


SECRET_INPUTS = {
    "env file with a bad byte": (
        "secretGenerator:\n- name: s\n  envs: [s.env]\n",
        b"TOKEN=" + CANARY.encode() + b"\xff\n",
    ),
    "literal without a key": (f"secretGenerator:\n- name: s\n  literals: ['={CANARY}']\n", b""),
    "literal without =": (f"secretGenerator:\n- name: s\n  literals: ['{CANARY}']\n", b""),
}


@pytest.mark.case("SE-02")
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


@pytest.mark.case("BI-07")
def test_bi07_a_generator_output_over_the_revision_limit_is_cut_off(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    """Four generators of one 3 MiB file: what is written fits, what kustomize prints does not."""
    generators = "".join(f"- name: big-{n}\n  files: [big.txt]\n" for n in range(4))
    git_repo.commit(
        {
            "app/kustomization.yaml": f"configMapGenerator:\n{generators}",
            "app/big.txt": "x" * (3 * 1024 * 1024),  # compresses to nothing in git
        }
    )

    assert_refused(
        gitopsd,
        admin_api,
        git_server.file_url(git_repo),
        namespace,
        ["app: kustomize's output is over the", "per-revision limit (--max-revision-bytes"],
        flags=("--max-revision-bytes", "8Mi"),  # read as it comes: never all 12 MiB at once
    )


@pytest.mark.case("BI-07")
def test_bi07_a_huge_generator_input_is_refused_before_it_is_written(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(
        {
            "app/kustomization.yaml": "configMapGenerator:\n- name: big\n  files: [big.txt]\n",
            "app/big.txt": "x" * (21 * 1024 * 1024),
        }
    )

    assert_refused(
        gitopsd,
        admin_api,
        git_server.file_url(git_repo),
        namespace,
        [
            "app/big.txt: the 2 files kustomize would read (this one the largest) add up to",
            "over the per-revision limit of 8388608 (--max-revision-bytes, "
            "limits.maxRevisionBytes); none was written",
        ],
        flags=("--max-revision-bytes", "8Mi"),
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
        assert "overlay-good" in config_map_names(admin_api, namespace)


# What kustomize reads is what was checked, and it reaches no network
# (docs/ARCHITECTURE.md, Trust boundaries)


@pytest.fixture
def loopback_canary() -> Iterator[Loopback]:
    """What the daemon's own /metrics or a `kubectl proxy` would serve: another tenant's data."""
    with serving(Loopback(200, "/metrics", f"api_key={CANARY}\n".encode())) as canary:
        yield canary


GENERATOR = "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata:\n  name: m\n"


def loopback_configs(url: str, app: str = "app") -> dict[str, tuple[dict[str, str | None], str]]:
    """Each way a kustomization in folder `app` can hand kustomize a config naming `url`,
    with the refusal it gets."""
    inline = "generators:\n- |\n  " + (GENERATOR + f"files: [m={url}]\n").replace("\n", "\n  ")
    patch = "apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: p\n"
    return {
        "a generator config file": (
            {
                f"{app}/kustomization.yaml": "generators: [gen.yaml]\n",
                f"{app}/gen.yaml": GENERATOR + f"files: [m={url}]\n",
            },
            f"{app}/gen.yaml: files entry '{url}' is remote",
        ),
        "an inline generator config": (
            {f"{app}/kustomization.yaml": inline},
            f"{app}/kustomization.yaml (generators, inline): files entry '{url}' is remote",
        ),
        "a transformer config file": (
            {
                f"{app}/kustomization.yaml": "transformers: [t.yaml]\n",
                f"{app}/t.yaml": patch + f"path: {url}\n",
            },
            f"{app}/t.yaml: path entry '{url}' is remote",
        ),
    }


@pytest.mark.case("SE-12")
@pytest.mark.parametrize("variant", loopback_configs("http://127.0.0.1"))
def test_se12_a_plugin_config_cannot_fetch_from_loopback(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    loopback_canary: Loopback,
    variant: str,
) -> None:
    files, refusal = loopback_configs(loopback_canary.url)[variant]
    git_repo.commit(files)

    url = git_server.file_url(git_repo)
    assert_refused(gitopsd, admin_api, url, namespace, [refusal], [CANARY])
    assert loopback_canary.requests == []


@pytest.mark.case("SE-12")
def test_se12_kustomize_runs_with_no_network_at_all_loopback_included(
    binaries: Binaries, tmp_path: Path, loopback_canary: Loopback
) -> None:
    """The sandbox itself, past every check: kubectl as gitopsd starts it, on a generator
    that names a loopback URL (kustomize fetches it when it can: shown first)."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "kustomization.yaml").write_text(
        f"configMapGenerator:\n- name: m\n  files: [m={loopback_canary.url}]\n"
    )
    kustomize = [str(binaries.kubectl), "kustomize", str(app)]
    reached = subprocess.run(kustomize, capture_output=True, text=True, check=False)
    assert CANARY in reached.stdout and len(loopback_canary.requests) == 1  # it would fetch

    offline = [sys.executable, "-I", "-S", str(sandbox.OFFLINE), *kustomize]
    closed = subprocess.run(offline, capture_output=True, text=True, check=False)

    assert closed.returncode != 0
    assert "socket: permission denied" in closed.stderr
    assert CANARY not in closed.stdout + closed.stderr
    assert len(loopback_canary.requests) == 1


def attributes_attack(git_repo: GitRepo, victim: Path, folder: str = "app") -> None:
    """A hostile repository: `¥x2e` is harmless text in the blob (a directory of that
    name exists, so the check passes), but checked out as SHIFT_JIS `¥` becomes `\\`, and in
    a double-quoted YAML string `\\x2e` is `.`: the kustomization kustomize would read names
    `../../…/<victim>`, a directory outside the checkout holding an API key."""
    victim.mkdir(parents=True)
    (victim / "kustomization.yaml").write_text(
        f"configMapGenerator:\n- name: stolen\n  literals: [api-key={CANARY}]\n"
    )
    hidden = "¥x2e¥x2e/" * 40 + str(victim).lstrip("/")  # from any checkout, to / and down
    git_repo.commit(
        {
            f"{folder}/kustomization.yaml": f'resources: ["{hidden}"]\n',
            f"{folder}/{hidden}/kustomization.yaml": "resources: [decoy.yaml]\n",
            f"{folder}/{hidden}/decoy.yaml": GOOD,
        }
    )
    git_repo.commit({".gitattributes": "*.yaml working-tree-encoding=SHIFT_JIS\n"})


@pytest.mark.case("SE-11")
def test_se11_gitattributes_cannot_change_the_bytes_kustomize_reads(
    gitopsd: Gitopsd,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    attributes_attack(git_repo, tmp_path / "victim")
    url = git_server.file_url(git_repo)

    checked = gitopsd("validate", url, "--allow-insecure-source")
    synced = gitopsd("sync", url, *scope(namespace))

    for run in (checked, synced):
        assert run.code == 0, run.text  # harmless: the decoy, as the blob says
        Canary(CANARY).assert_absent(run.text, "gitopsd's output")
    assert config_map_names(admin_api, namespace) == {"good", "gitopsd-test"}  # and the parent


@pytest.mark.case("SE-02")
def test_se02_a_literal_of_a_generator_config_never_shows_in_kustomizes_error(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(
        {
            "app/kustomization.yaml": "generators: [gen.yaml]\n",
            "app/gen.yaml": GENERATOR.replace("ConfigMap", "Secret")
            + f"literals: ['PASSWORD:{CANARY}']\n",
        }
    )

    assert_refused(
        gitopsd,
        admin_api,
        git_server.file_url(git_repo),
        namespace,
        ["app: kustomize failed: error:"],
        [CANARY, base64.b64encode(CANARY.encode()).decode()],
    )


@pytest.mark.case("SE-11", "SE-12")
def test_se11_se12_hostile_kustomizations_reach_no_gitsync_status_event_log_or_object(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
    tmp_path: Path,
    loopback_canary: Loopback,
) -> None:
    """Each variant as a GitSync of the daemon's own: refused or harmless, and its canary
    nowhere: not in a status, an Event, the daemon's log, or an object of the namespace."""
    attributes_attack(git_repo, tmp_path / "victim", folder="attributes")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "kustomization.yaml").write_text(
        f"configMapGenerator:\n- name: outside\n  literals: [k={CANARY}]\n"
    )
    loopbacks = {f"loopback-{n}": variant for n, variant in enumerate(loopback_configs(""))}
    files: dict[str, str | None] = {
        "literal/kustomization.yaml": "generators: [gen.yaml]\n",
        "literal/gen.yaml": GENERATOR + f"literals: ['PASSWORD:{CANARY}']\n",
        "outside/kustomization.yaml": f"resources: [{'../' * 40}{str(outside)[1:]}]\n",
    }
    for folder, variant in loopbacks.items():
        files |= loopback_configs(loopback_canary.url, folder)[variant][0]
    git_repo.commit(files)
    daemon = operator(daemons, namespace)
    repository = {"repository": {"url": git_server.file_url(git_repo)}}
    for variant in ("attributes", *loopbacks, "literal", "outside"):
        create(admin_api, namespace, variant, {**repository, "paths": [variant]})

    wait_ready(admin_api, namespace, "attributes", "True", "Succeeded")  # the decoy
    for folder in loopbacks:
        wait_ready(admin_api, namespace, folder, "False", "Remote")
    wait_ready(admin_api, namespace, "literal", "False", "Invalid")
    wait_ready(admin_api, namespace, "outside", "False", "PathEscape")

    statuses = [json.dumps(get(admin_api, namespace, name)) for name in (*loopbacks, "literal")]
    core: Any = client.CoreV1Api(admin_api)
    said = [
        *statuses,
        *(event.message or "" for event in core.list_namespaced_event(namespace).items),
        daemon.logs(),
        *(json.dumps(cm.data) for cm in core.list_namespaced_config_map(namespace).items),
        *(json.dumps(s.data) for s in core.list_namespaced_secret(namespace).items),
    ]
    assert "kustomize failed" in statuses[-1]
    for text in said:
        Canary(CANARY).assert_absent(text, "a status, an Event, the logs or an object")
    assert loopback_canary.requests == []
