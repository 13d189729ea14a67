"""Operator mode's pure parts: the generated CRD, a GitSync read into a source, and the
status and Events made of what a source's worker saw."""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gitopsd.config import (
    ChartSettings,
    Credentials,
    Decryption,
    PrunePolicy,
    Setting,
    Verification,
)
from gitopsd.configfile import GitSyncSettings, Mode
from gitopsd.diff import Drift, FieldChange, State
from gitopsd.drift_policy import Decision
from gitopsd.errors import (
    ClusterError,
    ClusterReason,
    ConfigError,
    GitopsdError,
    ManifestError,
    ManifestReason,
    SourceError,
    SourceReason,
)
from gitopsd.gitsync import DELETE_POLICY_ANNOTATION, FINALIZER, schema, spec, status
from gitopsd.gitsync.status import Event, Failure, SourceReport
from gitopsd.health import Health
from gitopsd.health import Status as Verdict
from gitopsd.objects import GroupKind, ObjectKey
from gitopsd.settings_table import VerifyMode

CRD_FILE = Path(__file__).resolve().parents[2] / "config" / "crd" / "gitsyncs.yaml"
URL = "https://git.example.com/team/apps.git"
CANARY = "CANARY-value-7f3a"
"""A field value that must never reach a status or an Event."""
T0, T1, T2, T3 = 1_700_000_000.0, 1_700_000_600.0, 1_700_001_200.0, 1_700_001_800.0
NO_CREDENTIALS = Credentials(password_env=None)

# --- the CRD ---------------------------------------------------------------------------


def version() -> dict[str, Any]:
    [served] = schema.crd()["spec"]["versions"]
    found: dict[str, Any] = served
    return found


def spec_schema() -> dict[str, Any]:
    found: dict[str, Any] = version()["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return found


def test_the_crd_file_is_what_the_schema_module_prints() -> None:
    assert CRD_FILE.read_text() == schema.crd_yaml(), (
        f"{CRD_FILE} is stale: run `make crd` to regenerate it from gitopsd/gitsync/schema.py"
    )


def defaulted(node: dict[str, Any], value: Any) -> Any:
    """`value` with the schema's defaults filled in, as the API server fills them."""
    if node.get("type") != "object" or not isinstance(value, dict):
        return value
    filled = dict(value)
    for key, child in node.get("properties", {}).items():
        if key not in filled and "default" in child:
            filled[key] = copy.deepcopy(child["default"])
        if key in filled:
            filled[key] = defaulted(child, filled[key])
    return filled


def test_a_gitsync_with_the_crds_defaults_filled_in_runs_as_one_without() -> None:
    minimal = gitsync()
    stored = {**minimal, "spec": defaulted(spec_schema(), minimal["spec"])}
    assert stored["spec"]["guards"]["pruneBudgetPercent"] == 25  # the defaults were filled

    as_stored = spec.read(stored, GitSyncSettings()).source(NO_CREDENTIALS)
    as_written = spec.read(minimal, GitSyncSettings()).source(NO_CREDENTIALS)

    assert as_stored == as_written


def test_printer_columns_short_name_and_status_subresource() -> None:
    served = version()
    names = schema.crd()["spec"]["names"]

    columns = [(c["name"], c.get("priority", 0)) for c in served["additionalPrinterColumns"]]
    assert columns == [
        ("Ready", 0),
        ("Mode", 0),
        ("Revision", 0),
        ("Drift", 0),
        ("Health", 0),
        ("Suspended", 0),
        ("Age", 0),
        ("Message", 1),
    ]
    assert names["shortNames"] == ["gs"]
    assert names["kind"] == "GitSync" and names["plural"] == "gitsyncs"
    assert served["subresources"] == {"status": {}}
    assert served["served"] and served["storage"]


# --- reading a GitSync -----------------------------------------------------------------


def gitsync(
    name: str = "app", /, meta: dict[str, Any] | None = None, **fields: Any
) -> dict[str, Any]:
    """GitSync `name` of namespace team; `fields` go to its spec, `meta` to its metadata."""
    return {
        "apiVersion": "gitopsd.io/v1alpha1",
        "kind": "GitSync",
        "metadata": {"namespace": "team", "name": name, "generation": 3, **(meta or {})},
        "spec": {"repository": {"url": URL}, **fields},
    }


def test_spec_fields_map_onto_the_source() -> None:
    body = gitsync(
        repository={"url": URL, "ref": "main", "secretRef": {"name": "git-creds"}},
        paths=["apps", "base/config.yaml"],
        include=["*.yaml"],
        exclude=["tmp/*"],
        interval="5m",
        timeout="90s",
        mode="enforce",
        selfHeal=False,
        prune=True,
        guards={
            "allowEmpty": True,
            "pruneBudgetPercent": 50,
            "allowMassPrune": True,
            "pruneProtected": True,
        },
        helm={"releaseName": "web", "valuesFiles": ["prod.yaml"], "values": {"replicas": 2}},
        drift=[{"name": "hpa", "paths": ["spec.replicas"], "action": "accept"}],
        replaceOnImmutable=True,
        healthCheckExprs=[{"apiVersion": "v1", "kind": "Service", "current": "true"}],
    )
    credentials = Credentials(username="bot", password_env=None)

    read = spec.read(body, GitSyncSettings())
    source = read.source(credentials)

    assert (read.key, read.generation, read.secret_name) == ("team/app", 3, "git-creds")
    assert not read.suspend and read.target_namespace == "team"
    assert source.name == "team/app"
    assert source.settings.name == "app"
    assert (source.spec.url, source.spec.ref) == (URL, "main")
    assert source.spec.paths == ("apps", "base/config.yaml")
    assert (source.spec.include, source.spec.exclude) == (("*.yaml",), ("tmp/*",))
    assert (source.interval_seconds, source.timeout_seconds) == (300, 90)
    assert (source.mode, source.self_heal) == (Mode.ENFORCE, False)
    assert source.settings.prune == PrunePolicy(
        enabled=True,
        allow_empty=True,
        budget_percent=50,
        allow_mass_prune=True,
        prune_protected=True,
    )
    assert source.settings.inventory_namespace == "team"
    assert source.settings.default_namespace == "team"
    assert source.spec.credentials == credentials
    assert not source.spec.allow_insecure
    assert source.spec.helm == ChartSettings(
        release_name="web", values_files=("prod.yaml",), values='{"replicas":2}'
    )
    assert [rule.label for rule in source.settings.drift_rules] == ["hpa"]
    assert source.settings.replace_on_immutable
    assert list(source.settings.checks) == [GroupKind("", "Service")]


@pytest.mark.parametrize("mode", list(Mode))
def test_each_mode_is_read(mode: Mode) -> None:
    source = spec.read(gitsync(mode=str(mode)), GitSyncSettings()).source(NO_CREDENTIALS)

    assert source.mode == mode


def test_a_gitsync_verifies_with_its_secrets_keys_in_its_mode() -> None:
    body = gitsync(verify={"mode": "Tag", "secretRef": {"name": "team-keys"}})
    read = spec.read(body, GitSyncSettings())
    keys = Verification(public_keys_file=Path("/cache/team/app/public_keys"))

    assert read.verify_secret == "team-keys"
    assert read.source(Credentials(password_env=None), keys).spec.verify == Verification(
        mode=VerifyMode.TAG, public_keys_file=Path("/cache/team/app/public_keys")
    )
    assert not spec.read(gitsync(), GitSyncSettings()).source(Credentials()).spec.verify.enabled


def test_a_gitsync_decrypts_with_its_secrets_keys() -> None:
    body = gitsync(decryption={"provider": "sops", "secretRef": {"name": "sops-keys"}})
    read = spec.read(body, GitSyncSettings())
    keys = Decryption(age_key_file=Path("/cache/team/app/decryption/identities.agekey"))

    assert read.decryption_secret == "sops-keys"
    assert read.source(Credentials(password_env=None), None, keys).spec.decryption == keys
    assert not spec.read(gitsync(), GitSyncSettings()).source(Credentials()).spec.decryption.enabled


@pytest.mark.parametrize(
    ("decryption", "message"),
    [
        ({"provider": "sops"}, "decryption: secretRef: the Secret of the keys is required"),
        (
            {"provider": "vault", "secretRef": {"name": "k"}},
            "decryption: provider: sops is the only one",
        ),
    ],
)
def test_a_decryption_block_without_its_secret_or_of_another_provider_is_refused(
    decryption: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        spec.read(gitsync(decryption=decryption), GitSyncSettings())


def test_a_verify_block_without_its_secret_is_refused() -> None:
    """The CRD requires it; one stored under an older CRD must not verify nothing."""
    with pytest.raises(ConfigError, match="verify: secretRef: the Secret of the keys is required"):
        spec.read(gitsync(verify={"mode": "HEAD"}), GitSyncSettings())


def test_allow_insecure_comes_from_the_daemon_not_the_gitsync() -> None:
    body = gitsync(repository={"url": "file:///srv/git/app"})

    permitted = spec.read(body, GitSyncSettings(allow_insecure=True))
    refused = spec.read(body, GitSyncSettings())

    assert permitted.source(NO_CREDENTIALS).spec.allow_insecure
    assert not refused.source(NO_CREDENTIALS).spec.allow_insecure


def test_daemon_only_settings_in_a_spec_are_ignored() -> None:
    """A GitSync stored under an older (or a hand-edited) CRD cannot reach the daemon's
    own files, credentials or namespaces through file-source keys."""
    body = gitsync(
        allowInsecure=True,
        credentials={"passwordEnv": "GITOPSD_GIT_PASSWORD", "sshKeyFile": "/etc/gitopsd/key"},
        webhookSecretFile="/etc/passwd",
        namespace="kube-system",
        inventoryNamespace="kube-system",
        forceConflicts=False,
    )

    read = spec.read(body, GitSyncSettings())
    source = read.source(NO_CREDENTIALS)

    assert source.spec.credentials.password_env is None
    assert source.spec.credentials.ssh_key_file is None
    assert source.webhook_secret is None
    assert not source.spec.allow_insecure
    assert source.settings.default_namespace == "team"
    assert source.settings.inventory_namespace == "team"
    assert source.settings.confined_to == "team"
    assert source.settings.force_conflicts
    assert "credentials" not in read.fields and "webhookSecretFile" not in read.fields


def test_adopt_and_create_namespace_are_a_tenants_to_set() -> None:
    """Remedies a GitSync's status names (spec.adopt) are fields of its spec; both act only
    within what the GitSync may write (its namespace, or its service account's rights)."""
    source = spec.read(gitsync(adopt=True, createNamespace=True), GitSyncSettings()).source(
        NO_CREDENTIALS
    )

    assert source.settings.adopt
    assert source.settings.create_namespace
    assert source.settings.tool == "gitsync"
    assert source.settings.say(Setting.ADOPT) == "spec.adopt"


def test_ta01_a_gitsyncs_health_rules_are_charged_to_its_namespace() -> None:
    """Its namespace's share of the rules' evaluator (tenantQuota.healthRuleSecondsPerMinute)
    pays for them, whatever namespace it writes to."""
    rule = {"apiVersion": "v1", "kind": "Service", "current": "has(spec.clusterIP)"}
    body = gitsync(healthCheckExprs=[rule], serviceAccountName="deployer", targetNamespace="x")
    source = spec.read(body, GitSyncSettings()).source(NO_CREDENTIALS)

    assert [check.namespace for check in source.settings.health_checks] == ["team"]


def test_without_a_service_account_a_gitsync_is_confined_to_its_namespace() -> None:
    read = spec.read(gitsync(targetNamespace="team"), GitSyncSettings())
    source = read.source(NO_CREDENTIALS)

    assert read.service_account is None and read.user is None
    assert source.settings.confined_to == "team"
    assert source.settings.default_namespace == "team"


def test_without_a_service_account_another_target_namespace_is_refused() -> None:
    with pytest.raises(ConfigError) as refused:
        spec.read(gitsync(targetNamespace="elsewhere"), GitSyncSettings())

    message = str(refused.value)
    assert "GitSync team/app" in message
    assert "targetNamespace" in message and "elsewhere" in message


def test_a_service_account_is_impersonated_and_may_target_another_namespace() -> None:
    body = gitsync(serviceAccountName="deployer", targetNamespace="apps")

    read = spec.read(body, GitSyncSettings())
    source = read.source(NO_CREDENTIALS)

    assert read.user == "system:serviceaccount:team:deployer"
    assert source.settings.confined_to is None
    assert source.settings.default_namespace == "apps"
    assert source.settings.inventory_namespace == "team"


def test_the_default_service_account_applies_when_none_is_named() -> None:
    settings = GitSyncSettings(default_service_account="gitops")

    defaulted_account = spec.read(gitsync(targetNamespace="apps"), settings)
    named = spec.read(gitsync(serviceAccountName="deployer"), settings)

    assert defaulted_account.user == "system:serviceaccount:team:gitops"
    assert defaulted_account.source(NO_CREDENTIALS).settings.confined_to is None
    assert named.user == "system:serviceaccount:team:deployer"


INVALID_FIELDS: dict[str, tuple[str, Any]] = {
    "interval 5x": ("interval", "5x"),
    "interval 0s": ("interval", "0s"),
    "interval 200h": ("interval", "200h"),
    "timeout abc": ("timeout", "abc"),
    "mode": ("mode", "sometimes"),
    "paths empty": ("paths", []),
    "selfHeal": ("selfHeal", "yes"),
    "guards unknown": ("guards", {"pruneBudget": 10}),
    "budget 0": ("guards", {"pruneBudgetPercent": 0}),
    "helm releaseName": ("helm", {"releaseName": "Web"}),
    "helm values": ("helm", {"values": "replicas=2"}),
}


@pytest.mark.parametrize("case", INVALID_FIELDS, ids=list(INVALID_FIELDS))
def test_an_invalid_field_is_an_error_naming_the_gitsync_and_the_field(case: str) -> None:
    key, value = INVALID_FIELDS[case]

    with pytest.raises(ConfigError) as refused:
        spec.read(gitsync(**{key: value}), GitSyncSettings())

    message = str(refused.value)
    assert "GitSync team/app" in message
    named = "pruneBudget" if key == "guards" else key
    assert named in message, message


def test_an_invalid_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="GitSync team/Bad_Name"):
        spec.read(gitsync("Bad_Name"), GitSyncSettings())


def test_a_missing_repository_is_refused() -> None:
    body = gitsync()
    del body["spec"]["repository"]

    with pytest.raises(ConfigError, match="repository"):
        spec.read(body, GitSyncSettings())


def test_finalizer_deletion_and_delete_policy_are_read() -> None:
    deleting = gitsync(
        meta={
            "finalizers": ["other.io/keep", FINALIZER],
            "deletionTimestamp": "2026-01-02T03:04:05Z",
            "annotations": {DELETE_POLICY_ANNOTATION: "prune"},
        },
        suspend=True,
    )
    orphaning = gitsync(
        meta={"finalizers": ["other.io/keep"], "annotations": {DELETE_POLICY_ANNOTATION: "x"}}
    )

    first = spec.read(deleting, GitSyncSettings())
    second = spec.read(orphaning, GitSyncSettings())
    plain = spec.read(gitsync(), GitSyncSettings())

    assert (first.finalized, first.deleting, first.prune_on_delete, first.suspend) == (
        True,
        True,
        True,
        True,
    )
    assert (second.finalized, second.deleting, second.prune_on_delete) == (False, False, False)
    assert (plain.finalized, plain.deleting, plain.prune_on_delete, plain.suspend) == (
        False,
        False,
        False,
        False,
    )


# --- status ----------------------------------------------------------------------------


def stamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def conditions(current: status.Document) -> dict[str, dict[str, Any]]:
    found = {c["type"]: c for c in current["conditions"]}
    assert len(found) == len(current["conditions"]), "one condition per type"
    return found


def summary(current: status.Document) -> dict[str, tuple[str, str]]:
    return {kind: (c["status"], c["reason"]) for kind, c in conditions(current).items()}


def modified(name: str = "web", value: str = CANARY) -> Drift:
    return Drift(
        ObjectKey("apps", "Deployment", "team", name),
        State.MODIFIED,
        (
            FieldChange(
                "spec.replicas", live=f"{value}-live", desired=f"{value}-git", manager="hpa"
            ),
            FieldChange(
                "spec.template.spec.containers[name=web].image",
                live={"image": value},
                desired=[value],
                manager="kubectl-edit",
            ),
        ),
        live={"spec": {"replicas": value}},
        desired={"spec": {"replicas": f"{value}-git"}},
    )


def synced(
    revision: str = "abc123",
    drifts: list[Drift] | None = None,
    accepted: list[Drift] | None = None,
) -> SourceReport:
    return SourceReport(
        finished=1,
        attempted_revision=revision,
        applied_revision=revision,
        synced_at=T0,
        drifts=drifts if drifts is not None else [],
        accepted=accepted or [],
        inventory=Counter({GroupKind("", "ConfigMap"): 2, GroupKind("apps", "Deployment"): 1}),
    )


def failed(error: GitopsdError, finished: int = 1) -> SourceReport:
    return SourceReport(finished=finished, failure=Failure.of(error))


def test_the_first_reconcile_is_progressing() -> None:
    current = status.status_of(4, SourceReport(), None, now=T0)

    assert summary(current) == {
        "Ready": ("Unknown", "Progressing"),
        "Reconciling": ("True", "Progressing"),
    }
    assert current["observedGeneration"] == 4


def test_a_sync_without_drift_is_ready_only() -> None:
    current = status.status_of(7, synced(), None, now=T0)

    assert summary(current) == {"Ready": ("True", "Succeeded")}
    ready = conditions(current)["Ready"]
    assert "abc123" in ready["message"]
    assert ready["observedGeneration"] == 7 and current["observedGeneration"] == 7
    assert ready["lastTransitionTime"] == stamp(T0)
    assert current["lastAppliedRevision"] == current["lastAttemptedRevision"] == "abc123"
    assert current["lastSyncTime"] == stamp(T0)
    assert current["drift"] == {
        "total": 0,
        "missing": 0,
        "modified": 0,
        "extraneous": 0,
        "unowned": 0,
        "objects": [],
        "accepted": 0,
        "acceptedObjects": [],
    }
    assert current["inventory"] == {
        "total": 3,
        "kinds": [
            {"groupKind": "ConfigMap", "count": 2},
            {"groupKind": "Deployment.apps", "count": 1},
        ],
    }


def test_drift_is_named_by_object_field_and_manager_never_by_value() -> None:
    previous = status.status_of(1, synced(), None, now=T0)

    current = status.status_of(1, synced(drifts=[modified()]), previous, now=T1)

    assert summary(current) == {"Ready": ("False", "DriftDetected")}
    message = conditions(current)["Ready"]["message"]
    assert "apps/Deployment/team/web" in message
    assert "spec.replicas" in message and "hpa" in message
    assert "spec.template.spec.containers[name=web].image" in message
    assert "kubectl-edit" in message
    assert current["drift"]["objects"] == [
        {
            "object": "apps/Deployment/team/web",
            "state": "modified",
            "fields": [
                {"path": "spec.replicas", "manager": "hpa"},
                {
                    "path": "spec.template.spec.containers[name=web].image",
                    "manager": "kubectl-edit",
                },
            ],
        }
    ]
    told = json.dumps(current) + json.dumps([e.message for e in status.events(previous, current)])
    assert CANARY not in told


def test_an_object_refused_alone_stalls_the_gitsync_naming_it() -> None:
    report = synced()
    report.not_applied = ["batch/Job/team/migrate: not applied: git changes spec.template"]

    current = status.status_of(1, report, None, now=T0)

    assert summary(current) == {
        "Ready": ("False", "ApplyRefused"),
        "Stalled": ("True", "ApplyRefused"),
    }
    assert "batch/Job/team/migrate" in conditions(current)["Ready"]["message"]
    assert current["lastAppliedRevision"] == "abc123"  # the rest of it was applied


def test_the_status_names_the_rule_that_decided_and_what_is_accepted() -> None:
    alert = FieldChange("data.k", "a", "b", "kubectl-edit", decision=Decision.ALERT, rule="cfg")
    accept = FieldChange("spec.replicas", 5, 2, "hpa", decision=Decision.ACCEPT, rule="hpa")
    config_map = Drift(ObjectKey("", "ConfigMap", "team", "cfg"), State.MODIFIED, (alert,))
    web = Drift(ObjectKey("apps", "Deployment", "team", "web"), State.MODIFIED, accepted=(accept,))

    current = status.status_of(1, synced(drifts=[config_map], accepted=[web]), None, now=T0)

    assert current["drift"]["total"] == 1 and current["drift"]["accepted"] == 1
    [drifted] = current["drift"]["objects"]
    assert drifted["fields"] == [
        {"path": "data.k", "manager": "kubectl-edit", "decision": "alert", "rule": "cfg"}
    ]
    assert current["drift"]["acceptedObjects"] == [
        {
            "object": "apps/Deployment/team/web",
            "fields": [
                {"path": "spec.replicas", "manager": "hpa", "decision": "accept", "rule": "hpa"}
            ],
        }
    ]


def test_the_drift_summary_counts_all_and_lists_at_most_twenty() -> None:
    drifts = (
        [Drift(ObjectKey("", "ConfigMap", "team", f"gone-{i:02}"), State.MISSING) for i in range(9)]
        + [modified(f"web-{i:02}") for i in range(12)]
        + [Drift(ObjectKey("", "Secret", "team", f"x-{i:02}"), State.EXTRANEOUS) for i in range(4)]
    )

    current = status.status_of(1, synced(drifts=drifts), None, now=T0)

    drift = current["drift"]
    assert (drift["total"], drift["missing"], drift["modified"], drift["extraneous"]) == (
        25,
        9,
        12,
        4,
    )
    listed = [o["object"] for o in drift["objects"]]
    assert len(listed) == schema.MAX_DRIFTED_SHOWN == 20
    assert listed == sorted(str(d.key) for d in drifts)[:20]
    message = conditions(current)["Ready"]["message"]
    assert message.startswith("25 objects differ from git (9 missing, 12 modified, 4 extraneous)")
    assert "and 20 more" in message
    assert CANARY not in json.dumps(current)


TRANSIENT = {
    "cluster unreachable": (
        ClusterError("GET /api: connection refused", ClusterReason.UNREACHABLE),
        "Unreachable",
    ),
    "git unreachable": (SourceError("cannot reach git.example.com"), "Unreachable"),
    "kind not served yet": (
        ManifestError("x.yaml:1: no CRD serves Widget", ManifestReason.UNKNOWN_KIND),
        "UnknownKind",
    ),
}


@pytest.mark.parametrize("case", TRANSIENT, ids=list(TRANSIENT))
def test_a_transient_failure_is_retried(case: str) -> None:
    error, reason = TRANSIENT[case]

    current = status.status_of(
        2, failed(error), status.status_of(2, synced(), None, now=T0), now=T1
    )

    assert summary(current) == {
        "Ready": ("False", reason),
        "Reconciling": ("True", "ProgressingWithRetry"),
    }
    assert str(error) in conditions(current)["Reconciling"]["message"]
    assert current["lastAppliedRevision"] == "abc123"


TERMINAL = {
    "invalid manifest": (ManifestError("x.yaml:3: bad", ManifestReason.SYNTAX), "Syntax"),
    "forbidden": (ClusterError("cannot create configmaps", ClusterReason.FORBIDDEN), "Forbidden"),
    "git auth": (SourceError("authentication failed", SourceReason.AUTH), "Auth"),
    "invalid spec": (ConfigError("GitSync team/app: spec: interval: bad"), "InvalidSpec"),
}


@pytest.mark.parametrize("case", TERMINAL, ids=list(TERMINAL))
def test_a_failure_only_a_person_can_cure_is_stalled(case: str) -> None:
    error, reason = TERMINAL[case]

    current = status.status_of(2, failed(error, finished=0), None, now=T0)

    assert summary(current) == {"Ready": ("False", reason), "Stalled": ("True", reason)}
    assert conditions(current)["Stalled"]["message"] == str(error)


def test_failed_status_is_a_stalled_status() -> None:
    failure = Failure.of(ConfigError("GitSync team/app: spec: mode: bad"))

    current = status.failed_status(5, failure, None)

    assert summary(current) == {
        "Ready": ("False", "InvalidSpec"),
        "Stalled": ("True", "InvalidSpec"),
    }
    assert current["observedGeneration"] == 5


def test_a_refused_prune_is_stalled() -> None:
    report = synced()
    report.refused = ["/ConfigMap/team/a: prune budget (25%) exceeded"]

    current = status.status_of(1, report, None, now=T0)

    assert summary(current) == {
        "Ready": ("False", "PruneBlocked"),
        "Stalled": ("True", "PruneBlocked"),
    }
    assert "ConfigMap/team/a" in conditions(current)["Ready"]["message"]
    assert "budget" in conditions(current)["Stalled"]["message"]


@pytest.mark.parametrize("held", ["True", "False"])
def test_a_suspended_gitsync_keeps_its_ready_status(held: str) -> None:
    report = synced() if held == "True" else synced(drifts=[modified()])
    previous = status.status_of(1, report, None, now=T0)

    current = status.status_of(2, failed(ClusterError("down")), previous, suspended=True, now=T1)

    assert summary(current) == {"Ready": (held, "Suspended")}
    ready = conditions(current)["Ready"]
    assert ready["lastTransitionTime"] == stamp(T0)
    assert ready["observedGeneration"] == 2
    assert "suspend" in ready["message"]


def test_suspending_a_drifted_gitsync_is_no_new_problem() -> None:
    previous = status.status_of(1, synced(drifts=[modified()]), None, now=T0)

    current = status.status_of(2, synced(drifts=[modified()]), previous, suspended=True, now=T1)

    assert status.events(previous, current) == []


def test_a_suspended_gitsync_never_reconciled_is_unknown() -> None:
    current = status.status_of(1, SourceReport(), None, suspended=True, now=T0)

    assert summary(current) == {"Ready": ("Unknown", "Suspended")}


def test_a_transition_time_holds_while_the_status_does() -> None:
    first = status.status_of(1, synced(), None, now=T0)
    again = status.status_of(1, synced("def456"), first, now=T1)
    drifted = status.status_of(1, synced("def456", [modified()]), again, now=T2)
    down = failed(ClusterError("down", ClusterReason.UNREACHABLE))
    retried = status.status_of(1, down, drifted, now=T3)

    assert conditions(first)["Ready"]["lastTransitionTime"] == stamp(T0)
    assert conditions(again)["Ready"]["lastTransitionTime"] == stamp(T0)
    assert conditions(drifted)["Ready"]["lastTransitionTime"] == stamp(T2)
    # Ready stays False (another reason): its time holds; Reconciling is new.
    assert conditions(retried)["Ready"]["lastTransitionTime"] == stamp(T2)
    assert conditions(retried)["Reconciling"]["lastTransitionTime"] == stamp(T3)


def test_revisions_and_sync_time_are_kept_when_the_report_has_none() -> None:
    previous = status.status_of(1, synced("abc123"), None, now=T0)

    restarted = status.status_of(2, SourceReport(), previous, now=T1)
    later = status.status_of(2, synced("def456"), restarted, now=T2)

    assert restarted["lastAppliedRevision"] == "abc123"
    assert restarted["lastAttemptedRevision"] == "abc123"
    assert restarted["lastSyncTime"] == stamp(T0)
    assert later["lastAppliedRevision"] == "def456"


def test_no_sync_time_before_a_revision_is_applied() -> None:
    current = status.status_of(1, SourceReport(), None, now=T0)

    assert "lastSyncTime" not in current
    assert current["lastAppliedRevision"] == ""


# --- Events ----------------------------------------------------------------------------


def test_a_new_applied_revision_is_a_synced_event() -> None:
    progressing = status.status_of(1, SourceReport(), None, now=T0)
    current = status.status_of(1, synced("abc123"), progressing, now=T1)

    assert status.events(None, progressing) == []
    assert status.events(progressing, current) == [
        Event("Normal", "Synced", "applied revision abc123 (3 objects)")
    ]
    newer = status.status_of(1, synced("def456"), current, now=T2)
    [event] = status.events(current, newer)
    assert (event.type, event.reason) == ("Normal", "Synced") and "def456" in event.message


def test_a_repeated_status_is_no_event() -> None:
    for report in (
        synced(),
        synced(drifts=[modified()]),
        failed(ClusterError("down", ClusterReason.UNREACHABLE)),
        failed(ManifestError("x.yaml:1: bad")),
    ):
        first = status.status_of(1, report, None, now=T0)
        again = status.status_of(1, report, first, now=T1)

        assert status.events(first, again) == [], report


PROBLEMS = {
    "drift": (synced(drifts=[modified()]), "DriftDetected"),
    "prune blocked": (
        SourceReport(finished=1, applied_revision="abc123", refused=["/ConfigMap/team/a: budget"]),
        "PruneBlocked",
    ),
    "transient failure": (failed(ClusterError("down", ClusterReason.UNREACHABLE)), "Failed"),
    "terminal failure": (failed(ManifestError("x.yaml:1: bad")), "Failed"),
}


@pytest.mark.parametrize("case", PROBLEMS, ids=list(PROBLEMS))
def test_a_new_problem_is_a_warning(case: str) -> None:
    report, reason = PROBLEMS[case]
    healthy = status.status_of(1, synced("abc123"), None, now=T0)

    current = status.status_of(1, report, healthy, now=T1)

    assert status.events(healthy, current) == [
        Event("Warning", reason, conditions(current)["Ready"]["message"])
    ]


# Health, and waiting for dependencies

WEB = ObjectKey("apps", "Deployment", "team", "web")
SETTINGS = ObjectKey("", "ConfigMap", "team", "settings")
ROLLING = Health(Verdict.IN_PROGRESS, "Rollout", "available replicas 0/1")
STUCK = Health(Verdict.FAILED, "ProgressDeadlineExceeded", 'ReplicaSet "web-1" timed out')
CURRENT = Health(Verdict.CURRENT)


def assessed(**healths: Health) -> SourceReport:
    report = synced()
    report.health = {WEB: healths.get("web", CURRENT), SETTINGS: healths.get("settings", CURRENT)}
    return report


def test_ready_waits_for_every_object_to_be_healthy_not_only_applied() -> None:
    rolling = status.status_of(1, assessed(web=ROLLING), None, now=T0)
    healthy = status.status_of(1, assessed(), rolling, now=T1)

    assert summary(rolling) == {
        "Ready": ("False", "Progressing"),
        "Reconciling": ("True", "Progressing"),
    }
    message = conditions(rolling)["Ready"]["message"]
    assert message == (
        "1 of 2 objects not healthy yet: apps/Deployment/team/web: InProgress: Rollout: "
        "available replicas 0/1"
    )
    assert summary(healthy) == {"Ready": ("True", "Succeeded")}
    assert rolling["health"] == {
        "status": "InProgress",
        "total": 2,
        "current": 1,
        "objects": [
            {
                "object": "apps/Deployment/team/web",
                "status": "InProgress",
                "reason": "Rollout",
                "message": "available replicas 0/1",
            }
        ],
    }
    assert healthy["health"] == {"status": "Current", "total": 2, "current": 2, "objects": []}
    assert status.events(None, rolling) == [
        Event("Normal", "Synced", "applied revision abc123 (3 objects)")
    ]  # work under way is no Warning


def test_a_rollout_of_many_names_failed_objects_first_then_by_key_and_counts_the_rest() -> None:
    """Thousands not healthy yet: the status names the first few in order, counts them all."""
    report = synced()
    rolling = {ObjectKey("apps", "Deployment", "team", f"d{n:04d}"): ROLLING for n in range(3000)}
    stuck = ObjectKey("apps", "Deployment", "team", "z-stuck")
    report.health = {**rolling, stuck: STUCK, SETTINGS: CURRENT}

    written = status.status_of(1, report, None, now=T0)

    named = [entry["object"] for entry in written["health"]["objects"]]
    assert named == [str(stuck), *(f"apps/Deployment/team/d{n:04d}" for n in range(19))]
    assert (written["health"]["total"], written["health"]["current"]) == (3002, 1)
    message = conditions(written)["Ready"]["message"]
    assert message.startswith(f"3001 of 3002 objects not healthy yet: {stuck}: Failed")
    assert message.endswith("; and 2996 more")


def test_a_failed_object_fails_the_health_check_with_its_reason_and_message() -> None:
    current = status.status_of(1, assessed(web=STUCK), None, now=T0)

    assert summary(current) == {"Ready": ("False", "HealthCheckFailed")}
    message = conditions(current)["Ready"]["message"]
    assert (
        'apps/Deployment/team/web: Failed: ProgressDeadlineExceeded: ReplicaSet "web-1"' in message
    )
    assert Event("Warning", "HealthCheckFailed", message) in status.events(None, current)


def test_a_gitsync_waiting_for_its_dependencies_says_which_and_why() -> None:
    report = synced()
    report.waiting = "source team/db: its revision abc is not applied yet"

    current = status.status_of(1, report, None, now=T0)

    assert summary(current) == {
        "Ready": ("False", "DependencyNotReady"),
        "Reconciling": ("True", "DependencyNotReady"),
    }
    assert conditions(current)["Ready"]["message"] == report.waiting
    assert not [e for e in status.events(None, current) if e.type == "Warning"]


UNREADY = {
    "ready": (assessed(), ""),
    "failed": (failed(SourceError("down", SourceReason.UNREACHABLE)), "last reconcile failed"),
    "never reconciled": (SourceReport(), "has not reconciled yet"),
    "waiting itself": (dataclasses.replace(assessed(), waiting="x"), "waits for its own"),
    "not applied": (
        dataclasses.replace(assessed(), applied_revision="old"),
        "revision abc123 is not applied yet",
    ),
    "rolling out": (assessed(web=ROLLING), "apps/Deployment/team/web: InProgress: Rollout"),
    "failed object": (assessed(web=STUCK), "apps/Deployment/team/web: Failed"),
}


@pytest.mark.parametrize("case", UNREADY)
def test_a_source_is_ready_for_its_dependents_once_applied_and_healthy(case: str) -> None:
    report, why = UNREADY[case]
    found = status.unready(report)
    assert (why in found) if why else found == ""


def test_depends_on_names_default_to_the_gitsyncs_namespace() -> None:
    body = gitsync(dependsOn=[{"name": "db"}, {"name": "certs", "namespace": "infra"}])

    found = spec.read(body, GitSyncSettings(cross_namespace_refs=True))

    assert found.depends_on == ("team/db", "infra/certs")
    assert found.source(NO_CREDENTIALS).depends_on == found.depends_on


def test_a_dependency_in_another_namespace_needs_the_daemons_consent() -> None:
    """Its status would tell this GitSync's tenant about another's GitSync."""
    body = gitsync(dependsOn=[{"name": "db"}, {"name": "certs", "namespace": "infra"}])

    with pytest.raises(ConfigError) as refused:
        spec.read(body, GitSyncSettings())

    assert str(refused.value) == (
        "GitSync team/app: spec: dependsOn: infra/certs is in another namespace; a GitSync may "
        "depend only on GitSyncs of its own namespace unless the daemon's configuration sets "
        "gitSyncs.crossNamespaceRefs: true"
    )
    own = gitsync(dependsOn=[{"name": "db", "namespace": "team"}])
    assert spec.read(own, GitSyncSettings()).depends_on == ("team/db",)


@pytest.mark.parametrize("account", ["x:y", "a\r\nImpersonate-Group: system:masters", "UP"])
def test_a_service_account_name_that_is_no_name_is_never_impersonated(account: str) -> None:
    with pytest.raises(ConfigError) as refused:
        spec.read(gitsync(serviceAccountName=account), GitSyncSettings())
    assert "serviceAccountName" in str(refused.value)


OPT_IN = [
    # (annotation, url, allowed)
    (None, "https://git.example.com/team-a/app.git", False),
    ("", "https://git.example.com/team-a/app.git", False),
    ("https://git.example.com/team-a/app.git", "https://git.example.com/team-a/app.git", True),
    ("https://git.example.com/team-a/", "https://git.example.com/team-a/app.git", True),
    ("https://git.example.com/team-a", "https://git.example.com/team-ab/app.git", False),
    ("https://git.example.com/team-a/", "https://git.example.com.evil.io/team-a/x", False),
    ("https://git.example.com/team-a/", "https://evil.io/team-a/", False),
    ("https://a.io/x.git, https://git.example.com/", "https://git.example.com/b.git", True),
    ("HTTPS://GIT.EXAMPLE.COM/", "https://git.example.com/b.git", False),  # exact, or nothing
]


@pytest.mark.parametrize(("annotation", "url", "allowed"), OPT_IN)
def test_a_secret_opts_in_to_exactly_the_urls_its_annotation_names(
    annotation: str | None, url: str, allowed: bool
) -> None:
    annotations = {} if annotation is None else {"gitopsd.io/git-credentials-for": annotation}
    secret = {"metadata": {"name": "git", "annotations": annotations}}
    assert spec.credentials_allowed(secret, url) is allowed


def test_health_is_unknown_until_objects_were_assessed() -> None:
    assert status.status_of(1, SourceReport(), None)["health"]["status"] == "Unknown"
    assert status.status_of(1, SourceReport(health={}), None)["health"]["status"] == "Current"


def test_a_gitsync_that_cannot_run_answers_a_reconcile_request_with_its_failure() -> None:
    failure = Failure("NotFound", "Secret team/creds not found", stalled=False)
    failed = status.failed_status(3, failure, None, handled="2026-11-25T20:00:00Z")
    assert failed["lastHandledReconcileAt"] == "2026-11-25T20:00:00Z"
    assert status.summary("team/web", failed, suspended=False)["failed"] is True


def _served_elsewhere(generation: int, observed: int, ready: str) -> dict[str, Any]:
    condition = {
        "type": "Ready",
        "status": ready,
        "reason": "Succeeded" if ready == "True" else "Failed",
    }
    return {
        "metadata": {"generation": generation},
        "status": {"observedGeneration": observed, "conditions": [condition]},
    }


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (_served_elsewhere(2, 2, "True"), ""),
        (_served_elsewhere(2, 1, "True"), "its status is not of its latest generation yet"),
        (_served_elsewhere(2, 2, "False"), "it is not ready (Failed)"),
        ({"metadata": {"generation": 1}}, "its status is not of its latest generation yet"),
        (None, "it does not exist"),
    ],
)
def test_a_dependency_another_replica_serves_is_ready_by_its_status_of_its_generation(
    body: dict[str, Any] | None, why: str
) -> None:
    assert status.unready_status(body) == why
