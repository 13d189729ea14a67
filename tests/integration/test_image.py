"""The container image, built from the Dockerfile with buildah and run the way the shipped
Deployment runs it: read-only root, numeric user, in-cluster credentials, only the shipped
RBAC, the daemon as PID 1."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.harness.cli import Gitopsd, example_files
from tests.harness.controlplane import Binaries, ControlPlane, free_port
from tests.harness.daemon import IMAGE_ENVIRONMENT, DaemonProcess
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.image import Container, Image, Volume, main_pid
from tests.harness.install import Install
from tests.harness.kube import token_of
from tests.harness.signing import Keychain
from tests.harness.sops import Sops
from tests.harness.waiting import wait_for

pytestmark = pytest.mark.image

USER = "65532:65532"
ENTRYPOINT = ["/opt/gitopsd/bin/gitopsd"]
CMD = ["run", "--config", "/etc/gitopsd/gitopsd.yaml"]
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
RENDERED = {"rendered-by": "kubectl-in-the-image"}
"""A label only `kubectl kustomize` inside the image can have put on the examples."""


def test_the_image_runs_the_daemon_as_a_numeric_non_root_user(image: Image) -> None:
    config = image.config()

    uid, gid = config["User"].split(":")
    assert uid.isdigit() and gid.isdigit() and int(uid) != 0, config["User"]
    assert config["User"] == USER
    assert config["Entrypoint"] == ENTRYPOINT
    assert config["Cmd"] == CMD
    env = dict(variable.split("=", 1) for variable in config["Env"])
    assert env["HOME"] == "/tmp"
    assert env["PYTHONDONTWRITEBYTECODE"] == env["PYTHONUNBUFFERED"] == "1"
    assert env.items() >= IMAGE_ENVIRONMENT.items()  # as the tests' daemons run
    labels = config["Labels"]
    assert labels["org.opencontainers.image.title"] == "gitopsd"
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"


def test_the_image_has_git_ssh_kubectl_helm_and_sops_and_no_build_tools(image: Image) -> None:
    with image.container() as container:
        for command in (
            ["git", "--version"],
            ["ssh", "-G", "git.example.invalid"],  # refuses a uid without a passwd entry
            ["kubectl", "version", "--client"],
            ["helm", "version"],
            ["sops", "--version", "--disable-version-check"],
            [*ENTRYPOINT, "--version"],
        ):
            done = container.run(*command)
            assert done.returncode == 0, f"{command}: {done.stderr}"

        tools = "gcc cc c++ make ld pip pip3"
        found = container.run("sh", "-c", f"for t in {tools}; do command -v $t; done; true")
        pip = container.run("python3", "-c", "import pip")
        setuptools = container.run("python3", "-c", "import setuptools")
    assert found.returncode == 0 and found.stdout == "", found.stdout  # `which` says nothing
    assert "No module named 'pip'" in pip.stderr
    assert "No module named 'setuptools'" in setuptools.stderr


def test_the_image_renders_a_chart_with_its_own_helm(image: Image, tmp_path: Path) -> None:
    """In the sandbox, as the Deployment runs it: read-only root, /tmp its only volume."""
    tmp = owned_by_the_image_user(tmp_path / "tmp", 0o1777)
    for name, text in example_files("chart").items():
        (tmp / "chart" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "chart" / name).write_text(text)
    validate = [*ENTRYPOINT, "validate", "/tmp/chart", "--path", "shop"]
    with image.container() as container:
        done = container.run(*validate, volumes=(Volume(tmp, "/tmp"),))
    assert (done.returncode, done.stdout) == (0, "7 objects valid\n"), done.stderr


@pytest.mark.case("SE-14")
def test_the_image_verifies_signed_commits_with_its_own_gpg_and_ssh_keygen(
    image: Image, git_repo: GitRepo, tmp_path: Path
) -> None:
    """As the Deployment runs it: a commit signed with an OpenPGP key and one signed with
    an SSH key are read with their keys, and the OpenPGP-signed one is refused when only
    SSH signers are allowed."""
    with Keychain() as keys:
        alice, carol = keys.openpgp("alice@example.com"), keys.ssh("carol@example.com")
        manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: signed\n"
        git_repo.commit({"one.yaml": manifest}, signer=alice)
        git_repo.commit({"one.yaml": manifest}, branch="ssh", signer=carol)
        tmp = owned_by_the_image_user(tmp_path / "tmp", 0o1777)
        (tmp / "team.asc").write_bytes(alice.public_key())
        (tmp / "allowed_signers").write_text(carol.allowed_signers())
    shutil.copytree(git_repo.bare, tmp / "repo.git")
    uid, gid = (int(n) for n in USER.split(":"))
    for path in [tmp / "repo.git", *(tmp / "repo.git").rglob("*")]:
        os.chown(path, uid, gid)
    validate = [*ENTRYPOINT, "validate", "file:///tmp/repo.git", "--allow-insecure-source"]
    validate += ["--cache-dir", "/tmp/cache"]
    openpgp = ["--verify-public-keys", "/tmp/team.asc"]
    ssh = ["--verify-allowed-signers", "/tmp/allowed_signers"]
    with image.container() as container:
        volumes = (Volume(tmp, "/tmp"),)
        by_alice = container.run(*validate, *openpgp, volumes=volumes)
        by_carol = container.run(*validate, "--ref", "ssh", *ssh, volumes=volumes)
        refused = container.run(*validate, *ssh, volumes=volumes)
    assert (by_alice.returncode, by_alice.stdout) == (0, "1 objects valid\n"), by_alice.stderr
    assert (by_carol.returncode, by_carol.stdout) == (0, "1 objects valid\n"), by_carol.stderr
    assert refused.returncode == 3 and "(verification_failed)" in refused.stderr, refused.stderr
    assert f"OpenPGP key {alice.key_id}, which is not among" in refused.stderr, refused.stderr


@pytest.mark.case("SE-18")
def test_the_image_decrypts_sops_files_with_its_own_sops(
    image: Image, binaries: Binaries, tmp_path: Path
) -> None:
    """In the sandbox, as the Deployment runs it: a Secret encrypted for an age identity
    and one for an OpenPGP key are read with their keys, and refused without them."""
    tmp = owned_by_the_image_user(tmp_path / "tmp", 0o1777)
    sops = Sops(binaries.sops, binaries.age_keygen, tmp_path)
    try:
        age, openpgp = sops.age(), sops.openpgp("team@example.com")
        secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  k: v\n"
        for name, sealed in (
            ("age", sops.encrypt("secret.yaml", secret, age=(age,))),
            ("openpgp", sops.encrypt("secret.yaml", secret, openpgp=(openpgp,))),
        ):
            (tmp / name).mkdir()
            (tmp / name / "secret.yaml").write_bytes(sealed)
    finally:
        sops.close()
    (tmp / "identities.agekey").write_bytes(age.identity)
    (tmp / "team.asc").write_bytes(openpgp.private)
    by_age = ["/tmp/age", "--sops-age-key-file", "/tmp/identities.agekey"]
    by_openpgp = ["/tmp/openpgp", "--sops-pgp-key-file", "/tmp/team.asc"]
    wrong = ["/tmp/openpgp", "--sops-age-key-file", "/tmp/identities.agekey"]
    with image.container() as container:
        runs = [
            container.run(*ENTRYPOINT, "validate", *flags, volumes=(Volume(tmp, "/tmp"),))
            for flags in (by_age, by_openpgp, wrong)
        ]
    for done in runs[:2]:
        assert (done.returncode, done.stdout) == (0, "1 objects valid\n"), done.stderr
    refused = runs[2]
    assert refused.returncode == 2, refused.stderr
    assert "no key of the source's decrypts it" in refused.stderr, refused.stderr


def kustomized_examples() -> dict[str, str]:
    """examples/app under app/, with a kustomization that adds RENDERED to every object."""
    files = example_files("app")
    kustomization = {"resources": sorted(files), "labels": [{"pairs": RENDERED}]}
    return {
        **{f"app/{name}": body for name, body in files.items()},
        "app/kustomization.yaml": json.dumps(kustomization),
    }


def owned_by_the_image_user(path: Path, mode: int) -> Path:
    """A directory the image's user may write to, as an emptyDir with fsGroup is."""
    path.mkdir(parents=True, exist_ok=True)
    uid, gid = (int(n) for n in USER.split(":"))
    os.chown(path, uid, gid)
    path.chmod(mode)
    return path


def config_volume(
    directory: Path, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> dict[str, Any]:
    """/etc/gitopsd: gitopsd.yaml syncing the examples over smart HTTP, and the password."""
    (directory / "git").mkdir(parents=True)
    (directory / "git" / "password").write_text(git_server.password)
    config = {
        "listen": f"127.0.0.1:{free_port()}",
        "probeListen": f"127.0.0.1:{free_port()}",
        "controlListen": f"127.0.0.1:{free_port()}",
        "cacheDir": "/var/cache/gitopsd",
        "leaderElection": {"enabled": True, "namespace": namespace, "name": "gitopsd"},
        "shutdownGraceSeconds": 20,
        "sources": [
            {
                "name": "examples",
                "repository": git_server.http_url(git_repo),
                "allowInsecure": True,  # the test git server speaks plain HTTP on loopback
                "paths": ["app"],
                "interval": "2s",
                "namespace": namespace,
                "inventoryNamespace": namespace,
                "credentials": {
                    "username": git_server.username,
                    "passwordFile": "/etc/gitopsd/git/password",
                },
            }
        ],
    }
    (directory / "gitopsd.yaml").write_text(json.dumps(config))
    return config


def service_account_volume(
    directory: Path, plane: ControlPlane, admin_api: Any, install: Install
) -> Path:
    """What the kubelet projects for the install's ServiceAccount: token, ca.crt, namespace."""
    directory.mkdir(parents=True)
    (directory / "token").write_text(token_of(admin_api, install.namespace, install.account))
    shutil.copy(plane.ca_file, directory / "ca.crt")
    (directory / "namespace").write_text(install.namespace)
    for file in directory.iterdir():
        file.chmod(0o644)
    return directory


def labelled_deployment(admin_api: Any, namespace: str) -> Callable[[], bool]:
    apps: Any = client.AppsV1Api(admin_api)

    def found() -> bool:
        items = apps.list_namespaced_deployment(namespace, field_selector="metadata.name=web").items
        return bool(items) and RENDERED.items() <= (items[0].metadata.labels or {}).items()

    return found


def alive(
    process: subprocess.Popen[bytes], daemon: DaemonProcess, check: Callable[[], bool]
) -> Callable[[], bool]:
    """`check`, failing at once (with the daemon's log) when the container has exited."""

    def checked() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the container exited {process.returncode}:\n{daemon.logs()}")
        return check()

    return checked


def status_of(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def root_mount_options(pid: int) -> list[str]:
    """The per-mount options of / as process `pid` sees it (its mountinfo, relative to its root)."""
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            return fields[5].split(",")
    raise AssertionError(f"no / in the mountinfo of {pid}")


def test_the_image_syncs_the_examples_in_cluster_with_a_read_only_root_and_exits_on_sigterm(
    image: Image,
    gitopsd: Gitopsd,
    control_plane: ControlPlane,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    tmp_path: Path,
) -> None:
    install = Install.of(gitopsd, "default", namespace, tmp_path)
    install.apply()  # the account's only rights: its Lease Role and the cluster RBAC
    git_repo.commit(kustomized_examples())
    config = config_volume(tmp_path / "etc-gitopsd", git_server, git_repo, namespace)
    cache = owned_by_the_image_user(tmp_path / "cache", 0o770)
    volumes = (
        Volume(tmp_path / "etc-gitopsd", "/etc/gitopsd", read_only=True),
        Volume(cache, "/var/cache/gitopsd"),
        Volume(owned_by_the_image_user(tmp_path / "tmp", 0o1777), "/tmp"),
        Volume(
            service_account_volume(tmp_path / "sa", control_plane, admin_api, install),
            SERVICE_ACCOUNT_DIR,
            read_only=True,
        ),
    )
    in_cluster = {
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(control_plane.port),
    }
    daemon = DaemonProcess(config, tmp_path / "container", "in the image")
    daemon.workdir.mkdir()

    with image.container() as container:
        process = container.start(daemon.log_file, volumes, in_cluster)
        _check_the_running_daemon(container, process, daemon, admin_api, namespace, cache)

        os.kill(main_pid(process), signal.SIGTERM)  # what the kubelet's runtime sends PID 1

        assert exit_code(process, 60) == 0, daemon.logs()


def exit_code(process: subprocess.Popen[bytes], deadline_seconds: float) -> int:
    try:
        return process.wait(deadline_seconds)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still running {deadline_seconds:.0f} s after SIGTERM") from None


def _check_the_running_daemon(
    container: Container,
    process: subprocess.Popen[bytes],
    daemon: DaemonProcess,
    admin_api: Any,
    namespace: str,
    cache: Path,
) -> None:
    wait_for(alive(process, daemon, labelled_deployment(admin_api, namespace)), "the examples", 120)
    daemon.wait_value("gitopsd_leader", lambda v: v == 1, "the shipped Role to grant the Lease")
    daemon.wait_value(  # the Deployment is applied before the reconcile ends
        "gitopsd_reconcile_total",
        lambda v: v >= 1,
        "a success",
        source="examples",
        result="success",
    )
    assert any(cache.iterdir()), "no checkout in the cacheDir volume"

    pid = main_pid(process)
    status = status_of(pid)
    assert status["NSpid"].split()[-1] == "1", "the daemon is not PID 1 in its namespace"
    assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1] == ENTRYPOINT[0].encode()
    assert status["Uid"].split() == [USER.split(":")[0]] * 4
    assert "ro" in root_mount_options(pid)
    as_root = container.run("sh", "-c", "touch /probe; touch /opt/gitopsd/probe", user="0:0")
    assert as_root.stderr.count("Read-only file system") == 2, as_root  # not just forbidden


RUNTIME_DEFAULT = Path("/usr/share/containers/seccomp.json")
"""The containers' default seccomp profile (CRI-O's RuntimeDefault; containerd's allows the
same Landlock calls since 1.6): the shipped Deployment's `seccompProfile: RuntimeDefault`."""
CANARY = "canary-seccomp-4e1d"


def test_ta07_renders_are_fenced_under_the_pods_runtime_default_seccomp_profile(
    image: Image,
) -> None:
    """TA-07 in the shipped pod's seccomp profile: Landlock is allowed there, so the image's
    own helm, started by the sandbox, cannot read a file outside the chart that the image's
    user can: a values schema's `$ref` to it fails `permission denied`, revealing nothing."""
    schema = {"type": "object", "properties": {"x": {"$ref": "file:///opt/canary.json"}}}
    files = {
        "/opt/canary.json": json.dumps({"type": "string", "description": CANARY}),
        "/tmp/chart/Chart.yaml": "apiVersion: v2\nname: fenced\nversion: 0.1.0\n",
        "/tmp/chart/values.yaml": "x: 1\n",
        "/tmp/chart/values.schema.json": json.dumps(schema),
        "/tmp/chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        "/tmp/seccomp.sh": "grep '^Seccomp:' /proc/self/status; exec \"$@\"\n",
    }
    validate = ["sh", "/tmp/seccomp.sh", *ENTRYPOINT, "validate", "/tmp/chart"]
    done = image.run_confined(files, *validate, seccomp=RUNTIME_DEFAULT)

    assert done.stdout.startswith("Seccomp:\t2\n"), done.stdout  # a filter is in force
    assert done.returncode == 2, done.stdout + done.stderr
    assert "permission denied" in done.stderr, done.stderr
    assert CANARY not in done.stdout + done.stderr and "string" not in done.stderr
    assert "Landlock is unavailable" not in done.stderr, done.stderr
