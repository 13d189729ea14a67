"""The command line without a cluster: output rendering, and flags checked before any use."""

from __future__ import annotations

import importlib.metadata
import io
import json
import platform
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gitopsd import diff
from gitopsd.cli import control, main, render, settings, stop
from gitopsd.cli.parser import build_parser
from gitopsd.cluster import Cluster
from gitopsd.cluster.api import Api
from gitopsd.cluster.discovery import Discovery
from gitopsd.config import ChartSettings, Limits
from gitopsd.errors import ClusterError, ConfigError, ExitCode, GitopsdError
from gitopsd.health import Health, Status
from gitopsd.objects import ObjectKey
from tests.harness.scripted_api import Answer, Transport

KEY = ObjectKey("", "ConfigMap", "ns", "app")


@pytest.mark.parametrize("color", [True, False])
def test_a_unified_diff_is_colored_only_on_request(color: bool) -> None:
    drift = diff.Drift(
        KEY,
        diff.State.MODIFIED,
        (diff.FieldChange("data.k", "a", "b", "kubectl-edit"),),
        live={"data": {"k": "a"}},
        desired={"data": {"k": "b"}},
    )
    out = io.StringIO()
    render.render_drift([drift], {KEY: "cm.yaml:1"}, out, color)
    text = out.getvalue()
    assert (
        'modified ConfigMap/ns/app (cm.yaml:1)\n  data.k: "a" -> "b"  (manager: kubectl-edit)'
        in text
    )
    assert ("\033[31m-  k: a\033[0m" in text) is color
    assert ("\033[32m+  k: b\033[0m" in text) is color
    assert "-  k: a" in text and "+  k: b" in text


def test_no_drift_says_so() -> None:
    out = io.StringIO()
    render.render_drift([], {}, out, False)
    assert out.getvalue() == "no drift\n"


@pytest.mark.case("BI-07")
def test_bi07_limit_flags_override_only_what_they_name() -> None:
    arguments = build_parser().parse_args(
        ["validate", ".", "--max-object-bytes", "1Mi", "--max-documents", "7"]
    )

    limits = settings.source_spec(arguments).limits

    assert limits == replace(Limits(), max_object_bytes=1 << 20, max_documents=7)


@pytest.mark.case("BI-07")
@pytest.mark.parametrize("value", ["0", "3MB", "-5"])
def test_bi07_a_limit_flag_must_be_a_positive_size(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["validate", ".", "--max-revision-bytes", value])

    assert "--max-revision-bytes: expected a positive whole number" in capsys.readouterr().err


def test_chart_flags_set_the_charts_settings() -> None:
    flags = (
        "--helm-release web --helm-namespace shop --helm-values a.yaml --helm-values ../b.yaml "
        "--helm-set replicas=3 --helm-set image.tag=1.2 --helm-set image.pull=true "
        "--helm-set 'note=two words' --helm-set 'list=[1, 2]'"
    )
    arguments = build_parser().parse_args(["sync", ".", *shlex.split(flags)])

    helm = settings.source_spec(arguments).helm

    assert (helm.release_name, helm.namespace) == ("web", "shop")
    assert helm.values_files == ("a.yaml", "../b.yaml")
    assert json.loads(helm.values) == {
        "replicas": 3,
        "image": {"tag": 1.2, "pull": True},
        "note": "two words",
        "list": [1, 2],
    }
    assert settings.source_spec(build_parser().parse_args(["sync", "."])).helm == ChartSettings()


def test_chart_flags_name_a_chart_of_a_chart_repository() -> None:
    flags = ["--helm-chart", "podinfo", "--helm-version", "~6.5"]
    arguments = build_parser().parse_args(["sync", "https://charts.example", *flags])

    helm = settings.source_spec(arguments).helm

    assert (helm.chart, helm.version) == ("podinfo", "~6.5")


@pytest.mark.parametrize(
    ("source", "flags", "registry", "chart"),
    [
        ("oci://reg.example/charts/greeter", [], "oci://reg.example/charts", "greeter"),
        ("OCI://reg.example/greeter/", [], "oci://reg.example", "greeter"),
        (
            "oci://reg.example/charts",
            ["--helm-chart", "greeter"],
            "oci://reg.example/charts",
            "greeter",
        ),
        ("https://charts.example/greeter", [], "https://charts.example/greeter", None),
    ],
)
def test_an_oci_reference_may_name_its_chart_as_helm_install_takes_it(
    source: str, flags: list[str], registry: str, chart: str | None
) -> None:
    spec = settings.source_spec(build_parser().parse_args(["diff", source, *flags]))

    assert (spec.url, spec.helm.chart) == (registry, chart)


def test_an_oci_reference_without_a_chart_says_how_to_name_one() -> None:
    arguments = build_parser().parse_args(["diff", "oci://reg.example"])

    with pytest.raises(ConfigError, match=r"oci://HOST/PATH/CHART, or its registry with --helm"):
        settings.source_spec(arguments)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--helm-release=-x"], "--helm-release: '-x' must be a Helm release name"),
        (["--helm-namespace", "A"], "--helm-namespace: 'A' must be a DNS-1123 label"),
        (["--helm-set", "replicas"], "--helm-set: 'replicas': expected KEY.PATH=VALUE"),
        (["--helm-set", "a..b=1"], "--helm-set: 'a..b=1': expected KEY.PATH=VALUE"),
        (["--helm-set", "a=1", "--helm-set", "a.b=2"], "--helm-set: 'a.b': a is set to a value"),
        (["--helm-chart", "a/b"], "--helm-chart: 'a/b' must be a chart's name"),
        (["--helm-chart", "a", "--helm-version", "1.2.3.4"], "--helm-version: version range"),
    ],
)
def test_chart_flags_are_checked(flags: list[str], message: str) -> None:
    arguments = build_parser().parse_args(["sync", ".", *flags])

    with pytest.raises(ConfigError) as refused:
        settings.source_spec(arguments)

    assert str(refused.value).startswith(message)


def test_a_source_without_flags_is_read_whole_at_the_remote_head() -> None:
    spec = settings.source_spec(build_parser().parse_args(["validate", "."]))

    assert (spec.paths, spec.exclude, spec.ref) == ((".",), (), "HEAD")
    assert spec.credentials.username == "git"


def test_a_sync_without_flags_takes_the_documented_defaults() -> None:
    arguments = build_parser().parse_args(["sync", "."])

    synced = settings.sync_settings(arguments, settings.source_spec(arguments))

    assert (synced.inventory_namespace, synced.default_namespace) == ("default", "default")
    assert synced.force_conflicts and not synced.adopt and not synced.dry_run
    assert synced.crd_timeout_seconds == 60 and synced.health_timeout_seconds == 300
    assert not synced.prune.enabled and synced.prune.budget_percent == 25
    assert not arguments.wait


def test_sync_flags_set_what_they_name() -> None:
    flags = "--prune --prune-budget 50 --no-force-conflicts --crd-timeout 5 --concurrency 3"
    arguments = build_parser().parse_args(["sync", ".", *flags.split(), "-n", "team"])

    synced = settings.sync_settings(arguments, settings.source_spec(arguments))

    assert synced.prune.enabled and synced.prune.budget_percent == 50
    assert not synced.prune.allow_empty
    assert not synced.force_conflicts and synced.crd_timeout_seconds == 5
    assert (synced.concurrency, synced.default_namespace) == (3, "team")
    assert synced.inventory_namespace == "team"  # the record lives where it applies


def test_diff_takes_concurrency_and_never_prunes() -> None:
    arguments = build_parser().parse_args(["diff", ".", "--concurrency", "32"])

    synced = settings.sync_settings(arguments, settings.source_spec(arguments))

    assert synced.concurrency == 32 and not synced.prune.enabled


@pytest.mark.parametrize("command", ["diff", "sync"])
@pytest.mark.parametrize("value", ["0", "-1", "1.5", "many", "\u00b2"])
def test_concurrency_must_be_a_positive_whole_number(
    command: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, ".", "--concurrency", value])

    assert (
        f"argument --concurrency: expected a positive whole number, got {value!r}"
        in capsys.readouterr().err
    )


@pytest.mark.parametrize("value", ["0", "-5", "100.5", "1e9", "nan", "inf", "half"])
def test_the_prune_budget_is_a_percentage_as_in_the_config_file(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sync", ".", "--prune", "--prune-budget", value])

    assert (
        f"argument --prune-budget: expected a number above 0 and at most 100, got {value!r}"
        in capsys.readouterr().err
    )
    arguments = build_parser().parse_args(["sync", ".", "--prune-budget", "100"])
    assert (
        settings.sync_settings(arguments, settings.source_spec(arguments)).prune.budget_percent
        == 100
    )


def test_help_shows_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sync", "--help"])

    help_text = " ".join(capsys.readouterr().out.split())
    for documented in [
        "--max-object-bytes BYTES largest object, as its YAML document or JSON file (default 3Mi)",
        "--max-revision-bytes BYTES all manifest files together (default 64Mi)",
        "--max-documents COUNT YAML documents in all files together (default 50000)",
        "--max-fetch-bytes BYTES largest pack git may receive (default 2Gi)",
        "as a share of the owned objects (one is always allowed) (default 25)",
        "Established (default 60)",
        "namespace of the ApplySet parent (default: the namespace it applies into, --namespace)",
        "a file name must match to be read (default *.yaml, *.yml, *.json)",
        "--no-force-conflicts take over the fields other managers own (reported); off, report "
        "them as conflicts (default on)",
    ]:
        assert documented in help_text
    assert re.search(r"--concurrency N API requests in flight at once \(default \d+\)", help_text)


@pytest.mark.case("SE-11")
@pytest.mark.parametrize(
    ("flag", "value", "rule"),
    [
        ("--namespace", "../../kube-system", "must be a DNS-1123 label"),
        ("--inventory-namespace", "Upper", "must be a DNS-1123 label"),
        ("--name", "x?dryRun=All", "use lower-case letters, digits and '-'"),
        ("--name", "x" * 51, r"\(at most 50\)"),
    ],
)
def test_se11_names_given_on_the_command_line_are_checked(flag: str, value: str, rule: str) -> None:
    arguments = build_parser().parse_args(["sync", ".", flag, value])

    with pytest.raises(ConfigError, match=f"^{flag} .*{rule}"):
        settings.sync_settings(arguments, settings.source_spec(arguments))


@pytest.mark.case("SE-11")
def test_se11_validates_namespace_is_checked_before_anything_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It names the ConfigMaps and Secrets --substitute-from reads: it ends up in URLs."""
    given = ["validate", str(tmp_path), "-n", "../../kube-system"]

    assert main([*given, "--substitute-from", "configmap/vars"]) == ExitCode.INVALID
    assert "--namespace '../../kube-system' must be a DNS-1123 label" in capsys.readouterr().err


@pytest.mark.case("FA-21")
def test_fa21_a_command_restores_the_signal_handlers_it_replaced(tmp_path: Path) -> None:
    """In-process callers (tests, an embedding program) keep their own Ctrl-C."""
    before = {number: signal.getsignal(number) for number in stop.STOP_SIGNALS}
    assert main(["validate", str(tmp_path)]) == ExitCode.OK
    assert {number: signal.getsignal(number) for number in stop.STOP_SIGNALS} == before
    assert stop.STOP.running()


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("5m", 300), ("1h30m", 5400), ("45", 45)]
)
def test_the_health_timeout_is_a_duration(text: str, seconds: float) -> None:
    arguments = build_parser().parse_args(["sync", ".", "--wait", "--timeout", text])

    synced = settings.sync_settings(arguments, settings.source_spec(arguments))

    assert arguments.wait and synced.health_timeout_seconds == seconds


@pytest.mark.parametrize("text", ["0", "0s", "soon", "-5m", "5 m", ""])
def test_a_timeout_that_is_no_duration_is_refused(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sync", ".", f"--timeout={text}"])

    assert "argument --timeout: expected a duration such as 90s" in capsys.readouterr().err


WEB = ObjectKey("apps", "Deployment", "n", "web")
CFG = ObjectKey("", "ConfigMap", "n", "cfg")
JOB = ObjectKey("batch", "Job", "n", "seed")
HEALTHS = {
    WEB: Health(Status.IN_PROGRESS, "Rollout", "available replicas 0/1"),
    CFG: Health(Status.CURRENT),
    JOB: Health(
        Status.FAILED, "BackoffLimitExceeded", "Job has reached the specified backoff limit"
    ),
}


def test_health_names_what_is_not_current_failed_first_then_counts() -> None:
    out = io.StringIO()

    render.render_health(HEALTHS, out)

    assert out.getvalue().splitlines() == [
        "  Failed       batch/Job/n/seed  BackoffLimitExceeded: Job has reached the specified "
        "backoff limit",
        "  InProgress   apps/Deployment/n/web  Rollout: available replicas 0/1",
        "health: 1 Current, 1 Failed, 1 InProgress",
    ]


def test_the_daemon_refuses_a_configuration_that_says_one_thing_twice(tmp_path: Path) -> None:
    config = tmp_path / "gitopsd.yaml"
    config.write_text(
        "sources:\n- name: app\n  repository: https://example.com/app.git\n"
        "  mode: observe\n  mode: enforce\n"
    )

    daemon = [sys.executable, "-m", "gitopsd", "run", "--config", str(config)]
    run = subprocess.run(daemon, capture_output=True, text=True, timeout=60, check=False)

    assert run.returncode == ExitCode.INVALID
    assert f"{config}:5:3: duplicate key 'mode' at lines 4 and 5" in run.stderr, run.stderr


def test_a_ref_for_a_local_directory_is_refused_with_the_way_to_read_a_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "app.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")

    code = main(["validate", str(tmp_path), "--ref", "main"])

    assert code == ExitCode.INVALID
    error = capsys.readouterr().err
    assert f"--ref: {tmp_path} is a local directory" in error
    assert f"file://{tmp_path} --allow-insecure-source --ref REF" in error


def test_a_target_context_is_refused_where_the_daemon_is_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["tree", "app", "--target-context", "east", "--daemon", "http://127.0.0.1:1"])

    assert code == ExitCode.INVALID
    assert "--target-context reads a record through the API server" in capsys.readouterr().err


def test_a_file_given_as_source_is_called_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "app.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")

    code = main(["validate", str(manifest)])

    assert code == ExitCode.SOURCE_FAILED
    error = capsys.readouterr().err
    assert f"source {manifest} is a file: give the directory that holds it" in error
    assert "does not exist" not in error


def test_the_daemon_names_its_own_setting_for_an_insecure_repository(tmp_path: Path) -> None:
    config = tmp_path / "gitopsd.yaml"
    config.write_text("sources:\n- name: app\n  repository: file:///srv/git/app.git\n")

    daemon = [sys.executable, "-m", "gitopsd", "run", "--config", str(config)]
    run = subprocess.run(daemon, capture_output=True, text=True, timeout=60, check=False)

    assert run.returncode == ExitCode.INVALID
    assert "file:// is refused unless the source says allowInsecure: true" in run.stderr
    assert "--allow-insecure-source" not in run.stderr


def test_help_is_grouped_with_examples_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sync", "--help"])
    sync_help = capsys.readouterr().out
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    top_help = capsys.readouterr().out

    groups = re.findall(r"^([a-z][a-z ]+):$", sync_help, re.MULTILINE)
    assert groups == [
        "positional arguments",
        "options",
        "source",
        "limits of one revision",
        "cluster",
        "sync",
        "output",
        "examples",
        "exit codes",
    ]
    assert "gitopsd sync ./deploy --namespace shop" in sync_help
    assert "6  not healthy (--wait, a sync wave)" in sync_help
    for command in (
        "validate",
        "diff",
        "sync",
        "run",
        "get",
        "reconcile",
        "suspend",
        "resume",
        "history",
    ):
        assert re.search(rf"^    {command}\b", top_help, re.MULTILINE), command


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ({"exitCode": 2}, ExitCode.INVALID),
        ({"exitCode": 6}, ExitCode.UNHEALTHY),
        ({}, ExitCode.CLUSTER_FAILED),  # a GitSync's line: its status names no code
        ({"exitCode": 0}, ExitCode.CLUSTER_FAILED),  # a failure never exits 0
        ({"exitCode": "2"}, ExitCode.CLUSTER_FAILED),
        ({"exitCode": True}, ExitCode.CLUSTER_FAILED),
        ({"exitCode": 99}, ExitCode.CLUSTER_FAILED),
    ],
)
def test_a_failed_reconcile_exits_with_a_documented_code_only(
    line: dict[str, Any], code: int
) -> None:
    assert control._failure_code(line) == code


@pytest.mark.parametrize(
    ("seconds", "age"),
    [(0, "0s"), (119, "119s"), (120, "2m"), (7199, "119m"), (7200, "2h"), (2 * 86400, "2d")],
)
def test_the_last_sync_is_shown_as_its_age_as_kubectl_shows_one(seconds: int, age: str) -> None:
    synced = 1_764_892_800  # 2025-12-05T00:00:00Z

    assert render._age("2025-12-05T00:00:00Z", synced + seconds) == age
    assert render._age("", synced) == "-"


def test_version_says_what_version_it_is_and_what_it_was_tested_against(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["version"]) == 0

    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == f"gitopsd {importlib.metadata.version('gitopsd')}"
    assert re.fullmatch(r"Kubernetes v1\.\d+\.\d+ \(the schemas built in, .*\)", shown[1])
    assert shown[2] == f"Python {platform.python_version()}"


SERVER = "the API server at https://127.0.0.1:6443 (context test, user alice)"
NO_GROUPS = Answer(200, b'{"items": []}')
GITSYNC_GROUP = {
    "metadata": {"name": "gitopsd.io"},
    "versions": [
        {
            "version": "v1alpha1",
            "resources": [
                {"resource": "gitsyncs", "responseKind": {"kind": "GitSync"}, "scope": "Namespaced"}
            ],
        }
    ],
}
NO_GITSYNC = b'{"kind": "Status", "code": 404, "details": {"name": "web", "kind": "gitsyncs"}}'


PAGE_NOT_FOUND = Answer(404, b"404 page not found\n", {"Content-Type": "text/plain"})
VERSION = Answer(200, b'{"gitVersion": "v1.34.4"}')


THERE = Answer(200, b'{"metadata": {}, "items": [{"metadata": {"name": "wbe"}}]}')


@pytest.mark.parametrize(
    ("read", "groups", "listed", "says", "code"),
    [
        (
            [PAGE_NOT_FOUND, VERSION],
            [],
            [],
            f"{SERVER} serves no GitSyncs: the GitSync CRD is not installed: "
            "kubectl apply -f config/crd/gitsyncs.yaml",
            ExitCode.CLUSTER_FAILED,
        ),
        (
            [Answer(404, NO_GITSYNC)],
            [GITSYNC_GROUP],
            [THERE],
            "no GitSync web in namespace n; those there: wbe",
            ExitCode.INVALID,
        ),
    ],
    ids=["no-crd", "no-such-gitsync"],
)
def test_a_gitsync_not_found_says_whether_the_cluster_serves_gitsyncs_at_all(
    read: list[Answer],
    groups: list[dict[str, Any]],
    listed: list[Answer],
    says: str,
    code: ExitCode,
) -> None:
    discovered = [NO_GROUPS, Answer(200, json.dumps({"items": groups}).encode())]  # /api, /apis
    api = Api(Transport([*read, *discovered, *listed]), server=SERVER)
    cluster = Cluster(api, Discovery(api))

    with pytest.raises(GitopsdError) as failed:
        control.read_gitsync(cluster, "n", "web")

    assert str(failed.value) == says
    assert failed.value.exit_code == code


def test_a_reconcile_that_waits_says_so_every_ten_seconds_until_it_is_done() -> None:
    now = [0.0]
    clock = control.Clock(now=lambda: now[0], pause=lambda seconds: now.append(now.pop() + seconds))
    answers = iter([*[None] * 50, {"name": "app"}])  # done after 25 s
    said: list[str] = []

    found = control._wait(lambda: next(answers), "source app to reconcile", 300, said.append, clock)

    assert found == {"name": "app"}
    assert said == [
        "waiting for source app to reconcile: 10 s of at most 300 s",
        "waiting for source app to reconcile: 20 s of at most 300 s",
    ]


def test_a_reconcile_that_is_never_done_times_out_saying_how_long_it_waited() -> None:
    now = [0.0]
    clock = control.Clock(now=lambda: now[0], pause=lambda seconds: now.append(now.pop() + seconds))
    said: list[str] = []

    with pytest.raises(ClusterError, match="timed out after 30 s waiting for source app"):
        control._wait(lambda: None, "source app to reconcile", 30, said.append, clock)

    assert [line.split(": ")[1] for line in said] == [
        "10 s of at most 30 s",
        "20 s of at most 30 s",
    ]
