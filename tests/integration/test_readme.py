"""The documentation's copy-paste examples (the blocks marked `<!-- readme-test: NAME -->` in
README.md and docs/*.md) run as written, against the test control plane."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from gitopsd import configfile
from gitopsd.errors import ConfigError
from tests.harness import audit, contract
from tests.harness.cli import Gitopsd
from tests.harness.controllers import USERS
from tests.harness.controlplane import ControlPlane, free_port
from tests.harness.daemon import DaemonProcess
from tests.harness.docs import doc_block, doc_text
from tests.harness.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
CONTROLLER_MANAGER = USERS["kube-controller-manager"]
JOB_STATUS = "/apis/batch/v1/namespaces/shop/jobs/migrate/status"
APP = "/apis/apps/v1/namespaces/shop/deployments/shop?"  # server-side apply: a PATCH


def expected_exit(line: str) -> int:
    found = re.search(r"#\s*exit (\d+)", line)
    return int(found.group(1)) if found else 0


def run_block(gitopsd: Gitopsd, name: str) -> list[str]:
    """Runs the sh block `name` line by line as a user would, in the repository's root:
    the output of each line, once its exit code is the one its comment says (or 0)."""
    environment = {
        **os.environ,
        "KUBECONFIG": str(gitopsd.plane.kubeconfig),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        "XDG_CACHE_HOME": str(gitopsd.cache),
    }
    outputs = []
    for line in doc_block(name):
        done = subprocess.run(
            ["bash", "-c", line],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == expected_exit(line), f"{line}\n{done.stdout}{done.stderr}"
        for form in re.findall(r"-o (json|yaml)\b", line) if "|" not in line else ():
            contract.parsed(done.stdout, form=form)  # the example prints the contract
        outputs.append(done.stdout)
    return outputs


def test_the_cli_examples_run_as_documented(gitopsd: Gitopsd) -> None:
    outputs = run_block(gitopsd, "cli")
    assert outputs[0].strip() == "3 objects valid"
    assert contract.parsed(outputs[4], "DiffResult")["drift"] == []
    # the README's example of the drift report: the field, both values and the manager
    drifted = "modified apps/Deployment/demo/web (deployment.yaml:1)\n"
    assert drifted + "  spec.replicas: 5 -> 2  (manager: kubectl)" in outputs[6]


def test_the_json_examples_print_the_contract(gitopsd: Gitopsd) -> None:
    as_json, as_yaml = run_block(gitopsd, "json")

    assert as_json.strip() == "true"
    assert contract.parsed(as_yaml, "ValidateResult", form="yaml")["objects"] == 3


def test_the_validate_examples_run_as_documented(gitopsd: Gitopsd) -> None:
    """The second line's exit 2 is checked by run_block; the first checks against the
    test control plane's schemas."""
    [cluster, _typo] = run_block(gitopsd, "validate")
    assert cluster.strip() == "3 objects valid"


def test_the_build_examples_print_the_objects_namespaced_labelled_and_in_order(
    gitopsd: Gitopsd,
) -> None:
    stream, chart = run_block(gitopsd, "build")

    objects = list(yaml.safe_load_all(stream))
    assert [o["kind"] for o in objects] == ["ConfigMap", "Service", "Deployment"]
    for found in objects:
        assert found["metadata"]["namespace"] == "demo"
        assert "applyset.kubernetes.io/part-of" in found["metadata"]["labels"]
    kinds = [o["kind"] for o in contract.parsed(chart, "BuildResult")["objects"]]
    assert (kinds[0], kinds[-1], len(kinds)) == ("CustomResourceDefinition", "Job", 7)


def test_the_drift_policy_example_accepts_the_replicas_and_sync_keeps_them(
    gitopsd: Gitopsd,
) -> None:
    [*_, drifted, accepted, synced, kept] = run_block(gitopsd, "drift-policy")

    assert "spec.replicas" in drifted and "kubectl-patch" in drifted
    assert "no drift" in accepted and "accepted apps/Deployment/policy/web" in accepted
    assert "accept by rule drift[0]" in accepted
    assert "configured apps/Deployment/policy/web" in synced  # sent with its live replicas
    assert kept.strip() == "5"


def test_the_helm_example_renders_syncs_and_diffs_the_chart(gitopsd: Gitopsd) -> None:
    [_, validated, synced, changed] = run_block(gitopsd, "helm")

    assert validated.strip() == "7 objects valid"
    assert "6 created" in synced and "1 hook" in synced and "health: 6 Current" in synced
    assert "data.greeting" in changed and "spec.replicas" in changed


def test_the_waves_example_applies_the_app_once_its_migration_completed(
    gitopsd: Gitopsd, control_plane: ControlPlane
) -> None:
    """The Job controller completes the migration (kwok runs its pod); the app is applied
    only after the controller's write of the Job's status that completed it (since
    Kubernetes 1.31 SuccessCriteriaMet comes a write before Complete; it may write the
    status again after that, as it settles the pod's accounting)."""
    started = time.time()

    [_, synced] = run_block(gitopsd, "waves")

    assert "2 created" in synced and "health: 2 Current" in synced
    written = audit.writes_by_anyone(control_plane, started)
    completed = min(
        w.received
        for w in written
        if w.user == CONTROLLER_MANAGER and w.uri.startswith(JOB_STATUS) and complete(w.answer)
    )
    applied = min(w.received for w in written if w.uri.startswith(APP) and not w.dry_run)
    assert applied > completed


def complete(job: Any) -> bool:
    """Done, as gitopsd's health rule for Jobs reads it."""
    conditions = ((job or {}).get("status") or {}).get("conditions") or []
    done = ("Complete", "SuccessCriteriaMet")
    return any(c.get("type") in done and c.get("status") == "True" for c in conditions)


@pytest.mark.parametrize("command", ["make demo", "make test"])
def test_the_two_commands_are_named(command: str) -> None:
    readme = (ROOT / "README.md").read_text()
    assert f"{command} " in readme
    target = command.split()[1]
    assert re.search(rf"^{target}:", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("exec make test")


def test_the_demo_walks_through_the_command_line_and_the_daemon(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    """`make demo` (its own control plane beside the suite's): every step it prints."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert (
        out.splitlines().count("no drift") == 2
        and "spec.replicas: 5 -> 2  (manager: kubectl)" in out
    )
    rolled_out = re.search(r"^health: \d+ Current$", out, re.MULTILINE)  # after sync --wait
    assert rolled_out, out
    assert "healed: replicas 2" in out and "applied: replicas 3" in out
    configured = r'^gitopsd_apply_total\{action="configured".*\} 2\.0$'
    assert re.search(configured, out, re.MULTILINE), out
    assert "gitopsd run exited 0" in out


def test_the_daemon_example_runs_as_documented(
    control_plane: ControlPlane, admin_api: Any, tmp_path: Path
) -> None:
    """docs/daemon.md's configuration, with only the listen ports, cache directory and cluster
    access adapted to this machine."""
    config = yaml.safe_load(doc_text("daemon", "yaml"))
    [source] = config["sources"]
    config |= {
        "listen": f"127.0.0.1:{free_port()}",
        "probeListen": f"127.0.0.1:{free_port()}",
        "controlListen": f"127.0.0.1:{free_port()}",
        "cacheDir": str(tmp_path / "cache"),
        "kubeconfig": str(control_plane.kubeconfig),
    }
    core: Any = client.CoreV1Api(admin_api)
    core.create_namespace({"metadata": {"name": source["namespace"]}})
    daemon = DaemonProcess(config, tmp_path, user="admin")
    try:
        daemon.start()
        apps: Any = client.AppsV1Api(admin_api)
        wait_for(
            lambda: apps.list_namespaced_deployment(source["namespace"]).items,
            "the example's Deployment",
        )
        wait_for(lambda: daemon.get("/readyz")[0] == 200, "the daemon to be ready")
        metrics = daemon.metrics().splitlines()
        assert any(
            line.startswith('gitopsd_reconcile_total{result="success",source="app"}')
            for line in metrics
        )
        listed, reconciled = control_block(f"http://{config['controlListen']}")
        assert listed.splitlines()[1].startswith("app ")
        assert reconciled.startswith("app: reconciled: ")
    finally:
        assert daemon.stop() == 0


def control_block(daemon_url: str) -> list[str]:
    """docs/daemon.md's control commands, pointed at `daemon_url` (the one thing adapted)."""
    outputs = []
    for line in doc_block("control"):
        command = line.split("#")[0].strip() + f" --daemon {daemon_url}"
        environment = {
            **os.environ,
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        }
        done = subprocess.run(
            ["bash", "-c", command], env=environment, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}{done.stderr}"
        outputs.append(done.stdout)
    return outputs


def test_the_install_overlay_renders_the_daemon_with_its_image_and_configuration(
    gitopsd: Gitopsd, tmp_path: Path
) -> None:
    """docs/install.md's overlay, beside a copy of the clone, as `kubectl apply -k` renders it."""
    shutil.copytree(ROOT / "config", tmp_path / "gitopsd" / "config")
    overlay = tmp_path / "my-gitopsd"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(doc_text("overlay", "yaml"))
    (overlay / "gitopsd.yaml").write_text(doc_text("overlay-config", "yaml"))

    objects = list(yaml.safe_load_all(gitopsd.kubectl("kustomize", str(overlay))))

    [config_map] = [o for o in objects if o["metadata"]["name"].startswith("gitopsd-config")]
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert config_map["data"]["gitopsd.yaml"] == doc_text("overlay-config", "yaml")
    assert pod["containers"][0]["image"] == "registry.example.com/gitopsd:0.1.0"
    [volume] = [v for v in pod["volumes"] if v["name"] == "config"]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert [s.name for s in configfile.load(overlay / "gitopsd.yaml").sources] == ["platform"]


def test_the_sharding_block_in_place_of_leader_election_configures_sharded_replicas(
    tmp_path: Path,
) -> None:
    """docs/operator.md's `sharding` block, put into the overlay's gitopsd.yaml instead of
    `leaderElection`, loads as sharding; beside it, it is refused (they exclude each
    other). Replicas so configured are run by tests/integration/test_sharding.py."""
    config = yaml.safe_load(doc_text("overlay-config", "yaml"))
    sharding = yaml.safe_load(doc_text("sharding", "yaml"))
    path = tmp_path / "gitopsd.yaml"
    path.write_text(yaml.safe_dump({**config, **sharding, "leaderElection": {"enabled": False}}))

    loaded = configfile.load(path)

    assert loaded.sharding.enabled and not loaded.leader_election.enabled
    assert (loaded.sharding.namespace, loaded.sharding.name) == ("gitopsd-system", "gitopsd")
    path.write_text(yaml.safe_dump({**config, **sharding}))
    with pytest.raises(ConfigError, match="leaderElection and sharding are both enabled"):
        configfile.load(path)
