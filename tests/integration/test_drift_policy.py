"""Drift policy against the real API server: a writer of the scale subresource, as the HPA
controller writes it, owns a Deployment's replicas and is never fought over, while a
person's edit of the same field is healed; each action as `gitopsd diff` shows it."""

from __future__ import annotations

import json
import time
from typing import Any

from kubernetes import client

from tests.harness import audit, contract
from tests.harness.cli import Gitopsd, example_files
from tests.harness.cluster_reads import replicas
from tests.harness.commands import scope
from tests.harness.controlplane import ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.waiting import wait_for

HPA = "kube-controller-manager"
"""The field manager of the HPA controller's writes (its user agent's program name)."""
ACCEPT_HPA = {
    "name": "hpa-replicas",
    "target": {"group": "apps", "kind": "Deployment"},
    "paths": ["spec.replicas"],
    "managers": [HPA],
    "action": "accept",
}


def scale_as_the_hpa(admin_api: Any, namespace: str, count: int) -> None:
    """An update of the scale subresource, as the HPA controller makes it: read, then
    written under its resourceVersion, again on a conflict (the Deployment controller
    writes the status meanwhile)."""
    apps: Any = client.AppsV1Api(admin_api)

    def scaled() -> bool:
        scale = apps.read_namespaced_deployment_scale("web", namespace)
        scale.spec.replicas = count
        try:
            apps.replace_namespaced_deployment_scale("web", namespace, scale, field_manager=HPA)
        except client.ApiException as error:
            if error.status != 409:
                raise
            return False
        return True

    wait_for(scaled, f"the scale to {count} to be written", 10)


def object_drift_series(samples: Any, name: str) -> list[Any]:
    return [
        labels
        for (metric, labels), value in samples.items()
        if metric == "gitopsd_object_drift" and dict(labels)["name"] == name and value
    ]


def told(admin_api: Any, namespace: str, reason: str) -> list[Any]:
    """The Events of `reason` on the Deployment web."""
    core: Any = client.CoreV1Api(admin_api)
    events = core.list_namespaced_event(namespace).items
    return [e for e in events if e.reason == reason and e.involved_object.name == "web"]


def heals_of_web(plane: ControlPlane, user: str, since: float) -> list[audit.Write]:
    return [
        w
        for w in audit.changes(plane, user, since)
        if w.resource == "deployments" and w.name == "web" and w.verb == "patch"
    ]


def test_an_autoscalers_replicas_are_accepted_and_a_persons_edit_healed(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    control_plane: ControlPlane,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(example_files("app"))
    daemon = daemons.start(git_server.file_url(git_repo), drift=[ACCEPT_HPA])
    wait_for(lambda: replicas(admin_api, namespace) == 2, "the app to be applied")
    # the sync's report follows its writes: until then the series say what it measured first
    wait_for(lambda: object_drift_series(daemon.samples(), "web") == [], "the sync reported")
    started = time.time()

    # ten minutes of an HPA's writes (one per 15 s sync period), compressed into a loop
    for count in [3, 4, 5, 6, 5, 4, 7, 8, 9, 8, 7, 6, 5, 6, 7, 8, 9, 10, 9, 8] * 2:
        scale_as_the_hpa(admin_api, namespace, count)
        samples = daemon.samples()
        assert object_drift_series(samples, "web") == []
    accepted = {"source": "app", "rule": "hpa-replicas", "action": "accept"}
    daemon.wait_value("gitopsd_drift_policy_fields", lambda v: v == 1, "accepted", 30, **accepted)
    wait_for(lambda: len(told(admin_api, namespace, "DriftAccepted")) >= 1, "the Event")

    # a person's edit of the same field is healed, back to git's value; the daemon drains
    # watch events in order, so the HPA's writes before it have all been measured by then
    edited = time.time()
    gitopsd.kubectl("patch", "deployment/web", "-n", namespace, "-p", '{"spec":{"replicas":1}}')
    wait_for(lambda: replicas(admin_api, namespace) == 2, "the person's edit to be healed", 10)

    heals = heals_of_web(control_plane, daemon.user, started)
    assert heals, "the person's edit was not healed"
    before = [w for w in heals if w.received < edited]
    assert not before, f"the daemon wrote web while only the autoscaler changed it: {before}"
    daemon.wait_value("gitopsd_drift_objects", lambda v: v == 0, "the heal measured", 10)
    [event] = told(admin_api, namespace, "DriftAccepted")  # once, not once per write
    assert "spec.replicas (by kube-controller-manager; rule hpa-replicas)" in event.message

    # the autoscaler takes over again, and a new revision keeps its replicas
    scale_as_the_hpa(admin_api, namespace, 6)
    daemon.wait_value("gitopsd_drift_policy_fields", lambda v: v == 1, "accepted", 30, **accepted)
    git_repo.commit({"deployment.yaml": _with_image("nginx:1.28")})
    apps: Any = client.AppsV1Api(admin_api)

    def new_image() -> bool:
        spec = apps.read_namespaced_deployment("web", namespace).spec
        return bool(spec.template.spec.containers[0].image == "nginx:1.28")

    wait_for(new_image, "the new revision to be applied", 60)
    assert replicas(admin_api, namespace) == 6


def _with_image(image: str) -> str:
    text = example_files("app")["deployment.yaml"]
    return text.replace("nginx:1.27", image)


def diff_json(gitopsd: Gitopsd, url: str, namespace: str, *flags: str) -> tuple[int, Any]:
    run = gitopsd("diff", url, *scope(namespace), "-o", "json", *flags)
    return run.code, run.document("DiffResult")


def test_diff_shows_which_rule_decided_each_field_and_what_it_hid(
    gitopsd: Gitopsd, admin_api: Any, git_server: GitServer, git_repo: GitRepo, namespace: str
) -> None:
    git_repo.commit(example_files("app"))
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    scale_as_the_hpa(admin_api, namespace, 5)
    gitopsd.kubectl("label", "service/web", "-n", namespace, "touched=by-hand")
    gitopsd.kubectl(
        "patch", "configmap/web-config", "-n", namespace, "-p", '{"data":{"LOG_LEVEL":"debug"}}'
    )
    rules = [
        "--drift-rule",
        json.dumps(ACCEPT_HPA),
        "--drift-rule",
        "{name: labels, target: {kind: Service}, paths: [metadata.labels], action: ignore}",
        "--drift-rule",
        "{name: config, target: {kind: ConfigMap}, managers: ['kubectl-*'], action: alert}",
    ]

    code, found = diff_json(gitopsd, url, namespace, *rules)
    assert code == 1  # the alert is drift
    assert [contract.named(d["object"]) for d in found["drift"]] == [
        f"ConfigMap/{namespace}/web-config"
    ]
    [change] = found["drift"][0]["changes"]
    assert (change["path"], change["decision"], change["rule"]) == (
        "data.LOG_LEVEL",
        "alert",
        "config",
    )
    assert [contract.named(d["object"]) for d in found["held"]] == [
        f"apps/Deployment/{namespace}/web"
    ]
    [accepted] = found["held"][0]["accepted"]
    assert (accepted["path"], accepted["manager"], accepted["rule"]) == (
        "spec.replicas",
        HPA,
        "hpa-replicas",
    )

    code, shown = diff_json(gitopsd, url, namespace, *rules, "--show-ignored")
    ignored = {contract.named(d["object"]): d["ignored"] for d in shown["held"]}
    assert [c["path"] for c in ignored[f"Service/{namespace}/web"]] == ["metadata.labels.touched"]

    text = gitopsd("diff", url, *scope(namespace), *rules[:2]).out
    assert "accepted apps/Deployment" in text and "accept by rule hpa-replicas" in text
    assert "touched" in text  # not ignored without its rule, the label is drift

    # sync heals nothing a rule holds: the alerted value and the autoscaler's replicas stay
    synced = gitopsd("sync", url, *scope(namespace), *rules)
    assert synced.code == 0
    held = f"held       ConfigMap/{namespace}/web-config: data.LOG_LEVEL (alert by rule config)"
    assert held in synced.out
    core: Any = client.CoreV1Api(admin_api)
    assert core.read_namespaced_config_map("web-config", namespace).data["LOG_LEVEL"] == "debug"
    assert replicas(admin_api, namespace) == 5
    assert core.read_namespaced_service("web", namespace).metadata.labels["touched"] == "by-hand"


def test_a_secrets_value_changed_by_a_program_is_drift_and_healed(
    gitopsd: Gitopsd, git_server: GitServer, git_repo: GitRepo, namespace: str, admin_api: Any
) -> None:
    """A Secret applied with stringData keeps its values in data, where a program's edit
    (the python client's manager, no takeover manager) takes no field of gitopsd's: it is
    drift all the same, named with its manager, masked, and a sync puts git's value back."""
    secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: one\n"
    git_repo.commit({"secret.yaml": secret})
    url = git_server.file_url(git_repo)
    assert gitopsd("sync", url, *scope(namespace)).code == 0
    core: Any = client.CoreV1Api(admin_api)
    core.patch_namespaced_secret("db", namespace, {"stringData": {"password": "edited"}})

    diff = gitopsd("diff", url, *scope(namespace), "-o", "json")
    healed = gitopsd("sync", url, *scope(namespace))

    assert diff.code == 1, diff.text
    [drift] = contract.parsed(diff.out, "DiffResult")["drift"]
    [change] = drift["changes"]
    assert (change["path"], change["manager"]) == ("data.password", "OpenAPI-Generator"), change
    assert "edited" not in diff.text and "ZWRpdGVk" not in diff.text
    assert healed.code == 0, healed.text
    assert core.read_namespaced_secret("db", namespace).data["password"] == "b25l"  # "one"
