"""The Recorder: drift gauges replace themselves, a scrape reads each measurement whole, the
per-object series stay within their budget, and every label but the budgeted ones is a
closed enumeration."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from gitopsd.changes import Action, ChangeSet, Outcome
from gitopsd.diff import Drift, FieldChange, State
from gitopsd.errors import ClusterReason, Stage
from gitopsd.health import Health, Status
from gitopsd.metrics import Recorder
from gitopsd.objects import ObjectKey


def value(registry: CollectorRegistry, metric: str, **labels: str) -> float | None:
    return registry.get_sample_value(metric, labels)


def modified(name: str, manager: str = "kubectl-edit") -> Drift:
    change = FieldChange("spec.replicas", 5, 2, manager)
    return Drift(ObjectKey("apps", "Deployment", "n", name), State.MODIFIED, (change,))


def test_drift_gauges_follow_the_latest_measurement() -> None:
    registry = CollectorRegistry()
    recorder = Recorder(registry)
    web = modified("web")
    missing = Drift(ObjectKey("", "ConfigMap", "n", "cfg"), State.MISSING)

    recorder.drift("app", [web, missing])

    by_kind = {"source": "app", "group_kind": "Deployment.apps", "state": "modified"}
    assert value(registry, "gitopsd_drift_objects", **by_kind) == 1
    web_series = {
        "source": "app",
        "group_kind": "Deployment.apps",
        "namespace": "n",
        "name": "web",
        "manager": "kubectl-edit",
    }
    assert value(registry, "gitopsd_object_drift", **web_series) == 1
    assert (
        value(
            registry,
            "gitopsd_object_drift",
            **{**web_series, "group_kind": "ConfigMap", "name": "cfg", "manager": "deleted"},
        )
        == 1
    )

    recorder.drift("app", [])

    assert value(registry, "gitopsd_drift_objects", **by_kind) is None
    assert value(registry, "gitopsd_object_drift", **web_series) is None


def test_a_scrape_reads_each_measurement_whole() -> None:
    """Scrapes run beside reconciles: a measurement recorded while a scrape is under way
    shows in the next scrape, not in the drift gauges this one has yet to read."""
    registry = CollectorRegistry()
    recorder = Recorder(registry)
    recorder.drift("app", [modified("web")])

    scraped = {}
    for family in registry.collect():
        if family.name in ("gitopsd_drift_objects", "gitopsd_object_drift"):
            recorder.drift("app", [])  # healed between two families of one scrape
            scraped[family.name] = len(family.samples)

    assert scraped == {"gitopsd_drift_objects": 1, "gitopsd_object_drift": 1}
    next_scrape = {
        family.name: len(family.samples)
        for family in registry.collect()
        if family.name in ("gitopsd_drift_objects", "gitopsd_object_drift")
    }
    assert next_scrape == {"gitopsd_drift_objects": 0, "gitopsd_object_drift": 0}


def test_a_measurement_replaces_its_own_gauges_and_keeps_the_others() -> None:
    registry = CollectorRegistry()
    recorder = Recorder(registry)
    recorder.revision("app", "abc", "in-cluster")
    recorder.reconciled("app", "success", 0.5, now=1000.0)
    recorder.health("app", {ObjectKey("", "ConfigMap", "n", "a"): Health(Status.CURRENT)})

    recorder.drift("app", [modified("web")])
    recorder.drift_policy("app", [])

    assert value(registry, "gitopsd_source_revision_info", source="app", revision="abc") == 1
    assert value(registry, "gitopsd_last_success_timestamp_seconds", source="app") == 1000
    assert value(registry, "gitopsd_source_health", source="app", status="Current") == 1
    assert value(registry, "gitopsd_object_drift_over_budget", source="app") == 0


def test_per_object_series_stay_within_the_budget() -> None:
    registry = CollectorRegistry()
    recorder = Recorder(registry, object_series_budget=2)

    recorder.drift("app", [modified(f"web{i}") for i in range(5)])

    series = [s for m in registry.collect() if m.name == "gitopsd_object_drift" for s in m.samples]
    assert len(series) == 2
    assert value(registry, "gitopsd_object_drift_over_budget", source="app") == 3
    assert (
        value(
            registry,
            "gitopsd_drift_objects",
            source="app",
            group_kind="Deployment.apps",
            state="modified",
        )
        == 5
    )


def test_outcomes_failures_and_revisions() -> None:
    registry = CollectorRegistry()
    recorder = Recorder(registry)
    key = ObjectKey("", "ConfigMap", "n", "a")
    changes = ChangeSet([Outcome(key, Action.CREATED), Outcome(key, Action.UNCHANGED)])

    recorder.changes("app", changes)
    recorder.apply_failed("app", "apply", ClusterReason.CONFLICT, 2)
    recorder.revision("app", "abc", "in-cluster")
    recorder.revision("app", "def", "in-cluster")
    recorder.applied("app", commit_time=100.0, now=130.0)

    assert (
        value(registry, "gitopsd_apply_total", source="app", action="created", result="success")
        == 1
    )
    assert (
        value(registry, "gitopsd_apply_total", source="app", action="apply", result="conflict") == 2
    )
    assert value(registry, "gitopsd_source_revision_info", source="app", revision="abc") is None
    assert value(registry, "gitopsd_source_revision_info", source="app", revision="def") == 1
    assert value(registry, "gitopsd_commit_to_applied_seconds_sum", source="app") == 30


def test_health_gauges_count_objects_by_status_and_name_the_sources_state() -> None:
    registry = CollectorRegistry()
    recorder = Recorder(registry)
    web, api = (
        ObjectKey("apps", "Deployment", "n", "web"),
        ObjectKey("apps", "Deployment", "n", "api"),
    )
    cfg = ObjectKey("", "ConfigMap", "n", "cfg")
    rolling = Health(Status.IN_PROGRESS, "Rollout")

    recorder.health("app", {web: rolling, api: rolling, cfg: Health(Status.CURRENT)})

    deployments = {"source": "app", "group_kind": "Deployment.apps"}
    assert value(registry, "gitopsd_health_objects", **deployments, status="InProgress") == 2
    assert value(registry, "gitopsd_health_objects", **deployments, status="Current") is None
    state = {
        s: value(registry, "gitopsd_source_health", source="app", status=s)
        for s in ("Current", "InProgress", "Failed")
    }
    assert state == {"Current": 0, "InProgress": 1, "Failed": 0}

    recorder.health("app", {web: Health(Status.CURRENT), cfg: Health(Status.CURRENT)})

    assert value(registry, "gitopsd_health_objects", **deployments, status="InProgress") is None
    assert value(registry, "gitopsd_health_objects", **deployments, status="Current") == 1
    assert value(registry, "gitopsd_source_health", source="app", status="Current") == 1
    assert value(registry, "gitopsd_source_health", source="app", status="InProgress") == 0


def test_health_moved_for_a_few_objects_recounts_only_those_and_matches_a_full_count() -> None:
    """A rollout's reassessment tells the few objects that moved, with their health before."""
    registry = CollectorRegistry()
    recorder = Recorder(registry)
    keys = [ObjectKey("apps", "Deployment", "n", f"d{n}") for n in range(4)]
    rolling, done, broken = (
        Health(Status.IN_PROGRESS, "Rollout"),
        Health(Status.CURRENT),
        Health(Status.FAILED, "ProgressDeadlineExceeded"),
    )
    before = dict.fromkeys(keys, rolling)
    recorder.health("app", before)

    now = {**before, keys[0]: done, keys[1]: done, keys[2]: broken}
    recorder.health("app", now, {key: rolling for key in keys[:3]})

    deployments = {"source": "app", "group_kind": "Deployment.apps"}
    counted = {
        s: value(registry, "gitopsd_health_objects", **deployments, status=s)
        for s in ("Current", "InProgress", "Failed")
    }
    assert counted == {"Current": 2, "InProgress": 1, "Failed": 1}
    assert value(registry, "gitopsd_source_health", source="app", status="Failed") == 1

    rolled = {key: done for key in keys}
    recorder.health("app", rolled, {keys[2]: broken, keys[3]: rolling})
    assert value(registry, "gitopsd_health_objects", **deployments, status="Current") == 4
    assert value(registry, "gitopsd_health_objects", **deployments, status="Failed") is None
    assert value(registry, "gitopsd_source_health", source="app", status="Current") == 1


def every_series(registry: CollectorRegistry) -> list[dict[str, str]]:
    return [sample.labels for family in registry.collect() for sample in family.samples]


def test_a_forgotten_source_leaves_no_series_behind() -> None:
    """A deleted GitSync's series go, whichever metric made them; another source's stay."""
    registry = CollectorRegistry()
    recorder = Recorder(registry, object_series_budget=2)
    for source in ("team/gone", "team/kept"):
        recorder.revision(source, "abc", "in-cluster")
        recorder.fetched(source, 0.1)
        recorder.drift(source, [modified("a"), modified("b"), modified("c")])
        recorder.health(source, {ObjectKey("", "ConfigMap", "n", "a"): Health(Status.CURRENT)})
        recorder.reconciled(source, "success", 0.5, 1.0)
        recorder.changes(
            source, ChangeSet([Outcome(ObjectKey("", "ConfigMap", "n", "a"), Action.CREATED)])
        )
        recorder.apply_failed(source, "apply", ClusterReason.CONFLICT, 1)
        recorder.refused(source, ["not_owned"])
        recorder.applied(source, 0.0, 1.0)
        recorder.detected(source, 0.2)
    recorder.drift("team/gone", [modified("d")])  # series replaced before the deletion

    recorder.forget("team/gone")

    sources = {labels.get("source") for labels in every_series(registry)}
    assert "team/gone" not in sources
    assert "team/kept" in sources
    before = len(every_series(registry))
    recorder.forget("team/gone")  # twice is harmless
    assert len(every_series(registry)) == before


def test_counters_are_exported_at_zero_for_each_closed_label_set_until_they_count() -> None:
    registry = CollectorRegistry()
    recorder = Recorder(registry)
    recorder.serving("app")
    recorder.error("app", Stage.CLUSTER, ClusterReason.CONFLICT)

    assert (
        value(registry, "gitopsd_errors_total", source="app", stage="cluster", reason="conflict")
        == 1
    )
    assert value(registry, "gitopsd_errors_total", source="app", stage="source", reason="auth") == 0
    assert (
        value(registry, "gitopsd_apply_total", source="app", action="pruned", result="success") == 0
    )
    assert (
        value(registry, "gitopsd_apply_total", source="app", action="prune", result="forbidden")
        == 0
    )
    assert value(registry, "gitopsd_prune_blocked_total", source="app", reason="threshold") == 0
    assert value(registry, "gitopsd_reconcile_total", source="app", result="standby") == 0
    # reasons of another stage are no label set of this one
    assert (
        value(registry, "gitopsd_errors_total", source="app", stage="source", reason="conflict")
        is None
    )

    recorder.forget("app")
    assert (
        value(registry, "gitopsd_errors_total", source="app", stage="source", reason="auth") is None
    )
