"""The in-cluster install (config/) against the real API server: it applies, its pod is
admitted under Pod Security "restricted", and its RBAC lets the daemon do its job and
nothing the rules do not grant."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.harness.cli import Gitopsd, example_files
from tests.harness.cluster_reads import config_map_value, replicas
from tests.harness.controlplane import provided
from tests.harness.daemon import DaemonProcess, Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.install import Install
from tests.harness.kube import token_of, unique_name, wait_established
from tests.harness.waiting import wait_for

Identity = tuple[str, str, str]  # kind, namespace, name


def identities(objects: list[dict[str, Any]]) -> set[Identity]:
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objects}


def live_identities(install: Install) -> set[Identity]:
    """What the API server holds of the install's objects (kubectl get -k)."""
    found = json.loads(install.gitopsd.kubectl("get", "-k", str(install.directory), "-o", "json"))
    return identities(found["items"])


def only(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind]
    return found


@pytest.mark.parametrize("component", ["default", "namespaced"])
def test_the_install_applies_with_a_server_dry_run_and_then_for_real(
    gitopsd: Gitopsd, namespace: str, tmp_path: Path, component: str
) -> None:
    install = Install.of(gitopsd, component, namespace, tmp_path)
    rendered = install.objects()
    deployment = only(rendered, "Deployment")

    dry = install.apply("--dry-run=server")

    assert len(dry.splitlines()) == len(rendered), dry
    assert all(line.endswith("(server dry run)") for line in dry.splitlines()), dry
    role = next(o for o in rendered if o["kind"] == "ClusterRole")["metadata"]["name"]
    with pytest.raises(AssertionError, match="NotFound"):
        gitopsd.kubectl("get", "clusterrole", role)

    install.apply()

    assert live_identities(install) == identities(rendered)
    live = json.loads(
        gitopsd.kubectl(
            "get", "deployment", deployment["metadata"]["name"], "-n", namespace, "-o", "json"
        )
    )
    assert live["spec"]["replicas"] == 2
    probes = live["spec"]["template"]["spec"]["containers"][0]
    assert probes["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert probes["readinessProbe"]["httpGet"]["path"] == "/readyz"


def restricted_violations(gitopsd: Gitopsd, pod: dict[str, Any], tmp_path: Path) -> str:
    """What Pod Security admission says of creating `pod` (a server dry run): "" if admitted."""
    path = tmp_path / f"{pod['metadata']['name']}.json"
    path.write_text(json.dumps(pod))
    try:
        gitopsd.kubectl("create", "--dry-run=server", "-f", str(path))
    except AssertionError as refusal:
        return str(refusal)
    return ""


def pod_of(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    template = copy.deepcopy(deployment["spec"]["template"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": deployment["metadata"]["namespace"],
            "labels": template["metadata"]["labels"],
        },
        "spec": template["spec"],
    }


@pytest.mark.case("SE-10")
def test_the_daemon_pod_is_admitted_where_pod_security_is_restricted(
    gitopsd: Gitopsd, namespace: str, tmp_path: Path
) -> None:
    """SE-10."""
    install = Install.of(gitopsd, "manager", namespace, tmp_path)
    install.apply()  # the shipped Namespace (here: the test's) enforces "restricted"
    labels = json.loads(gitopsd.kubectl("get", "namespace", namespace, "-o", "json"))
    assert labels["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    deployment = only(install.objects(), "Deployment")
    pod = pod_of(deployment, "gitopsd")
    lax = pod_of(deployment, "lax")
    del lax["spec"]["containers"][0]["securityContext"]

    assert restricted_violations(gitopsd, pod, tmp_path) == ""
    refusal = restricted_violations(gitopsd, lax, tmp_path)
    assert 'violates PodSecurity "restricted:latest"' in refusal
    assert "allowPrivilegeEscalation != false" in refusal


def can_i(install: Install, token: str, *question: str) -> str:
    """kubectl auth can-i, asked with `token`: "yes" or "no"."""
    answer = install.kubectl_as(token, "auth", "can-i", *question)
    return answer.stdout.strip()


def acting_as(install: Install, token: str, *identity: str) -> subprocess.CompletedProcess[str]:
    """`kubectl auth can-i get secrets`, asked with `token` impersonating `identity` (--as,
    --as-group): the API server checks the impersonation before it answers."""
    return install.kubectl_as(token, *identity, "auth", "can-i", "get", "secrets")


def cluster_role_binding_to_admin(name: str) -> dict[str, str]:
    return {
        f"{name}.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
        f"metadata:\n  name: {name}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n"
        "  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n"
        "  - kind: ServiceAccount\n    name: default\n    namespace: default\n"
    }


def config_map(namespace: str, name: str) -> dict[str, str]:
    return {
        f"{namespace}-{name}.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
        f"  name: {name}\n  namespace: {namespace}\ndata:\n  k: v\n"
    }


def shipped_daemon(daemons: Daemons, install: Install, admin_api: Any, url: str) -> DaemonProcess:
    """The daemon as the shipped Deployment runs it: the install's ServiceAccount, only the
    install's rights, leader election on the Lease the shipped Role names."""
    token = token_of(admin_api, install.namespace, install.account)
    user = f"system:serviceaccount:{install.namespace}:{install.account}"
    election = {"enabled": True, "namespace": install.namespace, "name": "gitopsd"}
    source = daemons.source(url)
    return daemons.configure_as(user, token, [source], "shipped", leaderElection=election).start()


def app_synced_by(
    component: str, gitopsd: Gitopsd, daemons: Daemons, admin_api: Any, repo: GitRepo, url: str
) -> tuple[Install, DaemonProcess]:
    """config/<component> installed in the test's namespace, and the app synced there by a
    daemon run as its Deployment would run it."""
    install = Install.of(gitopsd, component, daemons.namespace, daemons.workdir)
    install.apply()
    repo.commit(example_files("app"))
    daemon = shipped_daemon(daemons, install, admin_api, url)
    wait_for(lambda: replicas(admin_api, daemons.namespace) == 2, f"the app, by {component}")
    return install, daemon


def forbidden_in_logs(daemon: DaemonProcess, what: str) -> Callable[[], bool]:
    """The daemon logged, as a source error, a Forbidden answer about `what`."""

    def logged() -> bool:
        return any(
            line.get("reason") == "forbidden" and what in line["message"]
            for line in daemon.log_lines()
            if line.get("source") == "app"
        )

    return logged


@pytest.mark.case("SE-08")
def test_the_shipped_account_syncs_and_is_refused_what_the_cluster_rbac_does_not_grant(
    gitopsd: Gitopsd,
    daemons: Daemons,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """SE-08."""
    url = git_server.file_url(git_repo)
    install, daemon = app_synced_by("default", gitopsd, daemons, admin_api, git_repo, url)

    daemon.wait_value("gitopsd_leader", lambda v: v == 1, "the shipped Role to grant the Lease")
    escalation = unique_name("escalate")
    git_repo.commit(cluster_role_binding_to_admin(escalation))
    wait_for(
        forbidden_in_logs(daemon, f"rbac.authorization.k8s.io/ClusterRoleBinding/{escalation}"),
        "git's binding to cluster-admin, refused as Forbidden",
    )
    token = token_of(admin_api, namespace, install.account)
    assert can_i(install, token, "create", "deployments", "-n", "kube-system") == "yes"
    for question in (
        ("bind", "clusterroles"),
        ("escalate", "clusterroles"),
        ("impersonate", "serviceaccounts", "-n", "kube-system"),  # bound per namespace only
        ("impersonate", "users"),
        ("impersonate", "groups"),
        ("impersonate", "uids"),
        ("impersonate", "userextras/scopes"),
        ("approve", "certificatesigningrequests"),
        ("get", "/metrics"),
    ):
        assert can_i(install, token, *question) == "no", question
    rbac: Any = client.RbacAuthorizationV1Api(admin_api)
    assert not rbac.list_cluster_role_binding(field_selector=f"metadata.name={escalation}").items


def impersonation_grants(name: str, namespace: str) -> dict[str, str]:
    """A repository's try to pass the impersonate right on: cluster-wide, and in a namespace."""
    rule = (
        'rules:\n  - apiGroups: [""]\n    resources: [serviceaccounts]\n    verbs: [impersonate]\n'
    )
    return {
        f"{name}-cluster.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
        f"metadata:\n  name: {name}\n{rule}",
        f"{name}-role.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\n"
        f"metadata:\n  name: {name}\n  namespace: {namespace}\n{rule}",
    }


def test_impersonation_is_granted_per_namespace_and_no_repository_can_pass_it_on(
    gitopsd: Gitopsd,
    daemons: Daemons,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    """The impersonator ClusterRole, bound by a RoleBinding in one namespace, as docs/install.md
    says: the daemon may act as that namespace's ServiceAccounts and no other's, and a
    Role or ClusterRole in git that grants impersonation elsewhere is Forbidden."""
    url = git_server.file_url(git_repo)
    install, daemon = app_synced_by("default", gitopsd, daemons, admin_api, git_repo, url)
    impersonator = next(
        o["metadata"]["name"]
        for o in install.objects()
        if o["kind"] == "ClusterRole" and o["metadata"]["name"].startswith("gitopsd-impersonator")
    )
    gitopsd.kubectl(
        "create", "rolebinding", "gitopsd-impersonator", "-n", namespace,
        f"--clusterrole={impersonator}", f"--serviceaccount={namespace}:{install.account}",
    )  # fmt: skip
    token = token_of(admin_api, namespace, install.account)

    assert can_i(install, token, "impersonate", "serviceaccounts", "-n", namespace) == "yes"
    assert can_i(install, token, "impersonate", "serviceaccounts", "-n", "default") == "no"
    account = f"--as=system:serviceaccount:{namespace}:tenant"
    as_account = acting_as(install, token, account)  # answered for the account: it may not
    assert (as_account.stdout.strip(), as_account.stderr) == ("no", ""), as_account
    elsewhere = acting_as(install, token, "--as=system:serviceaccount:kube-system:default")
    assert 'cannot impersonate resource "serviceaccounts"' in elsewhere.stderr, elsewhere
    as_user = acting_as(install, token, "--as=jane")
    assert 'cannot impersonate resource "users"' in as_user.stderr, as_user
    as_group = acting_as(install, token, account, "--as-group=system:masters")
    assert 'cannot impersonate resource "groups"' in as_group.stderr, as_group

    grants = unique_name("pass-on")
    git_repo.commit(impersonation_grants(grants, "default"))
    for kind in ("ClusterRole", "Role"):
        where = "" if kind == "ClusterRole" else "default/"
        wait_for(
            forbidden_in_logs(daemon, f"rbac.authorization.k8s.io/{kind}/{where}{grants}"),
            f"git's {kind} granting impersonation, refused as Forbidden",
        )


def test_the_namespaced_account_syncs_its_namespace_and_nothing_else(
    gitopsd: Gitopsd,
    daemons: Daemons,
    admin_api: Any,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    url = git_server.file_url(git_repo)
    install, daemon = app_synced_by("namespaced", gitopsd, daemons, admin_api, git_repo, url)

    git_repo.commit(config_map("kube-public", "outside"))
    wait_for(
        forbidden_in_logs(daemon, "watch of configmaps in namespace kube-public"),
        "reading a namespace it is not bound in, refused as Forbidden",
    )
    assert config_map_value(admin_api, "kube-public", "outside") is None
    token = token_of(admin_api, namespace, install.account)
    assert can_i(install, token, "create", "deployments", "-n", namespace) == "yes"
    assert can_i(install, token, "create", "deployments", "-n", "kube-public") == "no"
    assert can_i(install, token, "list", "deployments", "--all-namespaces") == "no"
    assert can_i(install, token, "create", "namespaces") == "no"


@pytest.mark.parametrize("leases", ["leaderElection", "sharding"])
def test_with_no_sources_the_daemon_leads_and_serves_health_on_the_lease_rights_alone(
    gitopsd: Gitopsd,
    daemons: Daemons,
    admin_api: Any,
    namespace: str,
    tmp_path: Path,
    leases: str,
) -> None:
    install = Install.of(gitopsd, "manager", namespace, tmp_path)  # no rights on objects
    install.apply()
    token = token_of(admin_api, namespace, install.account)
    user = f"system:serviceaccount:{namespace}:{install.account}"
    election: dict[str, Any] = {"enabled": True, "namespace": namespace, "name": "gitopsd"}
    top: dict[str, Any] = {leases: election}

    daemon = daemons.configure_as(user, token, [], "empty", "", **top).start()

    daemon.wait_value("gitopsd_leader", lambda v: v == 1, "the lease, taken with its Role")
    wait_for(lambda: daemon.get("/readyz")[0] == 200, "an empty daemon to be ready")
    assert daemon.stop() == 0
    coordination: Any = client.CoordinationV1Api(admin_api)
    released = coordination.list_namespaced_lease(namespace).items
    assert [lease.spec.holder_identity for lease in released] == [""]  # given up, at once


OPERATOR_CRDS = Path(__file__).resolve().parents[1] / "prometheus" / "operator-crds.sh"


def install_operator_crds(gitopsd: Gitopsd, admin_api: Any) -> None:
    """The Prometheus Operator's ServiceMonitor and PrometheusRule CRDs, as its install has."""
    crds = provided(OPERATOR_CRDS)["PROMETHEUS_OPERATOR_CRDS"]
    for plural in ("servicemonitors", "prometheusrules"):
        gitopsd.kubectl(
            "apply", "--server-side", "-f", str(crds / f"monitoring.coreos.com_{plural}.yaml")
        )
        wait_established(admin_api, f"{plural}.monitoring.coreos.com")


def test_the_prometheus_objects_apply_where_the_operator_crds_validate_them(
    gitopsd: Gitopsd, admin_api: Any, namespace: str, tmp_path: Path
) -> None:
    install_operator_crds(gitopsd, admin_api)
    install = Install.of(gitopsd, "prometheus", namespace, tmp_path)
    rendered = install.objects()
    assert {o["kind"] for o in rendered} == {"ServiceMonitor", "PrometheusRule"}

    install.apply("--dry-run=server")
    install.apply()

    assert live_identities(install) == identities(rendered)
    manager = Install.of(gitopsd, "manager", namespace, tmp_path).objects()
    selector = only(rendered, "ServiceMonitor")["spec"]["selector"]["matchLabels"]
    [service] = [
        o
        for o in manager
        if o["kind"] == "Service" and selector.items() <= o["metadata"]["labels"].items()
    ]
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert {e["port"] for e in only(rendered, "ServiceMonitor")["spec"]["endpoints"]} <= ports
