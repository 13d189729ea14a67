"""What a tenant's GitSync makes the daemon evaluate or run is boxed (cases TA-01
and TA-07 of ../shared/RELIABILITY.md): a health rule in CEL, a chart's templates, a
chart's values schema. Each runs under a bound the tenant cannot raise, and the daemon,
inside a memory limit like the Deployment's, lives to heal the other tenants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.harness.cluster_reads import config_map_data_value
from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.gitserver import GitServer
from tests.harness.gitsyncs import condition, create, events, get, wait_ready
from tests.harness.hostile_charts import RENDER_BOMB
from tests.harness.hostile_rules import slow_rule, string_bomb
from tests.harness.kube import create_namespace, unique_name
from tests.harness.manifests import config_map_with_value
from tests.harness.waiting import wait_for

CANARY = "canary-7f3a9c"
DEPLOYMENT_MEMORY_MIB = 1024
"""The shipped Deployment's memory limit."""


def caged_operator(daemons: Daemons, namespace: str, *others: str, **top: Any) -> DaemonProcess:
    """A daemon serving the GitSyncs of `namespace` (and `others`), inside the Deployment's
    memory limit."""
    settings = {"enabled": True, "namespaces": [namespace, *others], "allowInsecure": True}
    daemon = daemons.start_with([], "operator", gitSyncs=settings, **top)
    daemon.memory_limit_mib = DEPLOYMENT_MEMORY_MIB
    return daemon.start()


def assert_alive(daemon: DaemonProcess) -> None:
    assert daemon.process is not None and daemon.process.poll() is None, daemon.logs()[-2000:]
    assert daemon.cage is not None and daemon.cage.oom_kills() == 0, "the daemon was OOM-killed"


def wait_alive(
    daemon: DaemonProcess, api: Any, namespace: str, name: str, reason: str, deadline: float = 60
) -> dict[str, Any]:
    """The GitSync once it is not Ready for `reason`; fails at once if the daemon died."""

    seen: list[dict[str, Any]] = [{}]

    def refused() -> dict[str, Any] | None:
        assert_alive(daemon)
        found = get(api, namespace, name)
        seen[0] = ready = condition(found, "Ready")
        return found if (ready.get("status"), ready.get("reason")) == ("False", reason) else None

    try:
        return wait_for(refused, f"GitSync {name} Ready=False ({reason})", deadline)
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}; Ready was {seen[0]}") from None


def assert_heals(api: Any, namespace: str, name: str) -> None:
    """Another tenant's object, changed out of band, is put back by the daemon."""
    core: Any = client.CoreV1Api(api)
    core.patch_namespaced_config_map(name, namespace, {"data": {"value": "tampered"}})
    wait_for(
        lambda: config_map_data_value(api, namespace, name) == "one",
        f"ConfigMap {name} healed",
        60,
    )


def test_ta01_a_health_rule_that_builds_gigabytes_is_stopped_at_its_bound(
    admin_api: Any, namespace: str, gitsync_crd: str, daemons: Daemons, git_server: GitServer
) -> None:
    """TA-01: the rule's evaluation stops at the health rules' memory bound; the GitSync says
    so, naming the bound; the daemon lives and keeps healing another GitSync."""
    attacker = git_server.create_repo(unique_name("attacker"))
    victim = git_server.create_repo(unique_name("victim"))
    attacker.commit({"bait.yaml": config_map_with_value("bait")})
    victim.commit({"steady.yaml": config_map_with_value("steady")})
    daemon = caged_operator(daemons, namespace)
    create(admin_api, namespace, "victim", {"repository": {"url": git_server.file_url(victim)}})
    wait_ready(admin_api, namespace, "victim", "True", "Succeeded")

    rule = {"apiVersion": "v1", "kind": "ConfigMap", "current": string_bomb()}
    spec = {"repository": {"url": git_server.file_url(attacker)}, "healthCheckExprs": [rule]}
    create(admin_api, namespace, "attacker", spec)
    refused = wait_alive(daemon, admin_api, namespace, "attacker", "HealthCheckFailed")

    message = condition(refused, "Ready")["message"]
    assert "memory bound of health rules" in message, message
    assert "sandbox.expressionMemory" in message, message
    assert_alive(daemon)
    assert_heals(admin_api, namespace, "steady")
    assert_alive(daemon)


SLOW_OBJECTS = 30
RULE_SHARE = {"healthRuleSecondsPerMinute": 2}
"""About four of the attacker's rules a minute: its 30 take the evaluator for minutes, not
the 16 s they take in a row."""


def waits_for_its_share(daemon: DaemonProcess, namespace: str) -> bool:
    return any(
        f"health rules of namespace {namespace} used their share" in line.get("message", "")
        for line in daemon.log_lines()
    )


def test_ta01_a_namespaces_slow_health_rules_wait_for_its_share_and_no_other_does(
    admin_api: Any, namespace: str, gitsync_crd: str, daemons: Daemons, git_server: GitServer
) -> None:
    """TA-01, of the class "cannot stop the others": the attacker's 30 objects each have a
    rule of half a second, under a deadline that lets them run. Its rules are charged to its
    namespace's share of the one evaluator; past the share they wait, saying so, and the
    victim's rule, in another namespace, is served between them: the victim is Ready while
    the attacker's rules still wait."""
    attacker, victim = namespace, create_namespace(admin_api, "victim")
    slow = git_server.create_repo(unique_name("attacker"))
    steady = git_server.create_repo(unique_name("victim"))
    slow.commit({f"cm-{i}.yaml": config_map_with_value(f"cm-{i}") for i in range(SLOW_OBJECTS)})
    steady.commit({"steady.yaml": config_map_with_value("steady")})
    daemon = caged_operator(
        daemons, attacker, victim, sandbox={"expressionTimeout": "60s"}, tenantQuota=RULE_SHARE
    )

    rule = {"apiVersion": "v1", "kind": "ConfigMap", "current": slow_rule()}
    spec = {"repository": {"url": git_server.file_url(slow)}, "healthCheckExprs": [rule]}
    create(admin_api, attacker, "attacker", spec)
    wait_for(lambda: waits_for_its_share(daemon, attacker), "the attacker's rules waiting", 90)
    quick = {"apiVersion": "v1", "kind": "ConfigMap", "current": "has(data.value)"}
    spec = {"repository": {"url": git_server.file_url(steady)}, "healthCheckExprs": [quick]}
    create(admin_api, victim, "victim", spec)

    wait_ready(admin_api, victim, "victim", "True", "Succeeded")
    attacker_ready = condition(get(admin_api, attacker, "attacker"), "Ready")
    assert attacker_ready.get("status") != "True", attacker_ready
    assert not waits_for_its_share(daemon, victim)
    assert_alive(daemon)


CHART = "apiVersion: v2\nname: bomb\nversion: 0.1.0\n"


def test_a_chart_that_renders_gigabytes_fails_at_the_render_memory_bound(
    admin_api: Any, namespace: str, gitsync_crd: str, daemons: Daemons, git_server: GitServer
) -> None:
    """helm is bounded: the render stops at the render memory bound, the GitSync's
    revision fails naming it, and the daemon lives and heals another GitSync."""
    attacker = git_server.create_repo(unique_name("attacker"))
    victim = git_server.create_repo(unique_name("victim"))
    attacker.commit({"Chart.yaml": CHART, "templates/bomb.yaml": RENDER_BOMB})
    victim.commit({"steady.yaml": config_map_with_value("steady")})
    daemon = caged_operator(daemons, namespace)
    create(admin_api, namespace, "victim", {"repository": {"url": git_server.file_url(victim)}})
    wait_ready(admin_api, namespace, "victim", "True", "Succeeded")

    create(admin_api, namespace, "attacker", {"repository": {"url": git_server.file_url(attacker)}})
    refused = wait_alive(daemon, admin_api, namespace, "attacker", "SizeLimit")

    message = condition(refused, "Ready")["message"]
    assert "helm template ran out of memory: over the render memory bound, 1Gi" in message
    assert "(sandbox.renderMemory)" in message
    assert_alive(daemon)
    assert_heals(admin_api, namespace, "steady")
    assert_alive(daemon)


HOG_TEMPLATE = """{{- $held := list }}
{{- range until 1000 }}{{ $held = append $held (until 500000) }}
{{- range until 1000 }}{{ range until 1000 }}{{ end }}{{ end }}{{ end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: hog
data:
  held: {{ len $held | quote }}
"""
"""Keeps 4 MB more at each of a thousand steps, spinning a million steps between them: held
until the render memory bound stops it. A fifth of the spin it had: six of them niced on a
machine with a core kept busy outlasted the test's 300 s (each waits for a processor, and
no longer fails at a 60 s wall bound for it)."""


def test_ta01_render_bombs_of_three_namespaces_at_once_wait_for_a_render_slot(
    admin_api: Any, namespace: str, gitsync_crd: str, daemons: Daemons, git_server: GitServer
) -> None:
    """TA-01 (renders in a box), of TA-03's class (what all tenants hold at once): two
    GitSyncs in each of three namespaces render a chart that holds memory until its bound.
    Each stays under its bound, but six at once would pass the pod's limit: with the renders
    in flight bounded (sandbox.rendersInFlight), the daemon in the Deployment's memory limit
    is not OOM-killed, every bomb fails naming its bound, and another tenant is healed."""
    hog = git_server.create_repo(unique_name("hog"))
    victim = git_server.create_repo(unique_name("victim"))
    hog.commit({"Chart.yaml": CHART, "templates/hog.yaml": HOG_TEMPLATE})
    victim.commit({"steady.yaml": config_map_with_value("steady")})
    tenants = [create_namespace(admin_api) for _ in range(3)]
    daemon = caged_operator(daemons, namespace, *tenants)
    create(admin_api, namespace, "victim", {"repository": {"url": git_server.file_url(victim)}})
    wait_ready(admin_api, namespace, "victim", "True", "Succeeded")

    bombs = [(tenant, f"hog-{n}") for tenant in tenants for n in range(2)]
    for tenant, name in bombs:
        create(admin_api, tenant, name, {"repository": {"url": git_server.file_url(hog)}})
    for tenant, name in bombs:
        refused = wait_alive(daemon, admin_api, tenant, name, "SizeLimit", deadline=180)
        message = condition(refused, "Ready")["message"]
        assert "over the render memory bound, 1Gi of address space" in message, message
    assert_alive(daemon)
    assert_heals(admin_api, namespace, "steady")
    assert_alive(daemon)


SLOW_TEMPLATE = """{{- range $i := until 50000 }}{{ range $j := until 1000 }}{{ end }}{{ end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: slow
"""
"""A chart that renders one ConfigMap after 50 million steps (about 2 s of CPU here, in
little memory): it holds a render slot well past a 1 s wait, and stays far within the 60 s
of its own time a render has (time waiting for a processor not counted: niced, on a busy
machine it waits most of its wall time)."""


def test_ta01_a_render_that_waits_too_long_for_a_slot_is_retried_naming_the_bound(
    admin_api: Any, namespace: str, gitsync_crd: str, daemons: Daemons, git_server: GitServer
) -> None:
    """TA-01: with one render slot, a slow chart's render in one namespace holds it past the
    other's wait deadline; the other's poll fails (Timeout) naming both bounds, its revision
    is not marked bad, and it is retried until it renders: both GitSyncs become Ready."""
    slow = git_server.create_repo(unique_name("slow"))
    slow.commit({"Chart.yaml": CHART, "templates/slow.yaml": SLOW_TEMPLATE})
    other = create_namespace(admin_api)
    bounds = {"rendersInFlight": 1, "renderQueueTimeout": "1s"}
    daemon = caged_operator(daemons, namespace, other, sandbox=bounds)
    for tenant in (namespace, other):
        create(admin_api, tenant, "slow", {"repository": {"url": git_server.file_url(slow)}})

    def waited() -> str | None:
        assert_alive(daemon)
        for tenant in (namespace, other):
            ready = condition(get(admin_api, tenant, "slow"), "Ready")
            if ready.get("reason") == "Timeout":
                return str(ready["message"])
        return None

    message = wait_for(waited, "a render that waited past its deadline", 120)
    assert "waited 1 s (sandbox.renderQueueTimeout) for a render slot" in message, message
    assert "renders in flight are at most 1 (sandbox.rendersInFlight)" in message, message
    for tenant in (namespace, other):
        wait_ready(admin_api, tenant, "slow", "True", "Succeeded", deadline=180)
    assert_alive(daemon)


SPINNING_TEMPLATE = (
    "{{- range $i := until 100000 }}{{ range $j := until 100000 }}{{ end }}{{ end }}\n"
)
"""Ten billion steps, in little memory."""


def test_a_chart_that_spins_fails_at_the_render_cpu_bound(
    admin_api: Any, namespace: str, gitsync_crd: str, daemons: Daemons, git_server: GitServer
) -> None:
    """helm is bounded in processor time, set by the admin (of TA-01's class)."""
    attacker = git_server.create_repo(unique_name("attacker"))
    attacker.commit({"Chart.yaml": CHART, "templates/spin.yaml": SPINNING_TEMPLATE})
    daemon = caged_operator(daemons, namespace, sandbox={"renderCPU": "2s"})
    create(admin_api, namespace, "attacker", {"repository": {"url": git_server.file_url(attacker)}})
    refused = wait_alive(daemon, admin_api, namespace, "attacker", "Invalid")

    message = condition(refused, "Ready")["message"]
    assert "helm template was stopped at the render CPU bound, 2 s of processor time" in message
    assert "(sandbox.renderCPU)" in message


def test_ta07_a_values_schema_ref_to_a_file_outside_the_chart_reveals_nothing(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    tmp_path: Path,
) -> None:
    """TA-07: helm reads nothing outside the chart (Landlock): a `$ref: file://` to a canary
    the daemon may read fails, and no byte of it shows in the status, Events or log."""
    canary = tmp_path / "canary.json"
    canary.write_text('{"type": "string", "description": "' + CANARY + '"}')
    schema = {"type": "object", "properties": {"x": {"$ref": canary.as_uri()}}}
    attacker = git_server.create_repo(unique_name("attacker"))
    attacker.commit(
        {
            "Chart.yaml": CHART,
            "values.yaml": "x: 1\n",
            "values.schema.json": json.dumps(schema),
            "templates/cm.yaml": config_map_with_value("plain"),
        }
    )
    daemon = caged_operator(daemons, namespace)
    create(admin_api, namespace, "attacker", {"repository": {"url": git_server.file_url(attacker)}})
    refused = wait_alive(daemon, admin_api, namespace, "attacker", "Invalid")

    message = condition(refused, "Ready")["message"]
    assert "permission denied" in message, message
    said = [str(event.message) for event in events(admin_api, namespace, "attacker")]
    shown = json.dumps(refused) + json.dumps(said) + daemon.logs()
    assert CANARY not in shown and "string" not in message
