"""The daemon's configuration file: the annotated example loads, and every invalid field is
an error naming it; one invalid source is set aside, the others load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitopsd.config import (
    ChartSettings,
    Decryption,
    Limits,
    Verification,
)
from gitopsd.configfile import DaemonConfig, Mode, TenantQuota, cycle_in, load
from gitopsd.errors import ConfigError
from gitopsd.quantities import format_size, parse_duration, parse_size
from gitopsd.settings_table import VerifyMode

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "gitopsd.yaml"


def write(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "gitopsd.yaml"
    path.write_text(json.dumps(document))
    return path


def source(**fields: Any) -> dict[str, Any]:
    return {"name": "app", "repository": "https://git.example.com/app.git", **fields}


def test_the_annotated_example_loads(tmp_path: Path) -> None:
    config = load(EXAMPLE)

    assert config.listen_address == ("127.0.0.1", 9290)
    assert config.leader_election.enabled
    assert config.leader_election.lease_seconds == 15
    [team] = config.sources
    assert (team.name, team.mode, team.interval_seconds) == ("team-apps", Mode.WARN, 300)
    assert team.spec.credentials.known_hosts_file == Path("/etc/gitopsd/git/known_hosts")
    # Its webhook secret file exists only in a real install: that source is set aside, named.
    [(name, error)] = config.invalid_sources
    assert name == "platform" and "webhookSecretFile: cannot read" in error
    lines = EXAMPLE.read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "- name: platform" in text)
    assert error.startswith(f"{EXAMPLE}:{line}: source platform: ")


def test_a_minimal_source_takes_the_documented_defaults(tmp_path: Path) -> None:
    [app] = load(write(tmp_path, {"sources": [source()]})).sources

    assert app.spec.ref == "HEAD" and app.spec.paths == (".",) and app.spec.exclude == ()
    assert (app.mode, app.self_heal, app.interval_seconds) == (Mode.ENFORCE, True, 60)
    assert app.timeout_seconds == 600
    assert app.settings.name == "app"
    assert not app.settings.prune.enabled and app.settings.prune.budget_percent == 25
    assert (app.settings.inventory_namespace, app.settings.default_namespace) == (
        "default",
        "default",
    )
    assert app.settings.force_conflicts and not app.settings.adopt
    assert app.spec.credentials.password_env == "GITOPSD_GIT_PASSWORD"
    assert app.webhook_secret is None
    assert load(write(tmp_path, {"sources": [source()]})).listen == DaemonConfig.listen


def test_the_webhook_secret_is_read_and_kept_out_of_repr(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("  s3cret-value\n")

    [app] = load(write(tmp_path, {"sources": [source(webhookSecretFile=str(secret))]})).sources

    assert app.webhook_secret == b"s3cret-value"
    assert "s3cret" not in repr(app)


def test_chart_settings_are_set_per_source(tmp_path: Path) -> None:
    helm = {
        "releaseName": "web",
        "releaseNamespace": "shop",
        "valuesFiles": ["values-prod.yaml", "../shared/values.yaml"],
        "values": {"replicas": 3, "image": {"tag": "1.2"}},
    }
    document = {"sources": [source(name="chart", helm=helm), source(name="plain")]}

    chart, plain = load(write(tmp_path, document)).sources

    assert chart.spec.helm == ChartSettings(
        release_name="web",
        namespace="shop",
        values_files=("values-prod.yaml", "../shared/values.yaml"),
        values='{"image":{"tag":"1.2"},"replicas":3}',
    )
    assert plain.spec.helm == ChartSettings()


def test_a_source_can_be_a_chart_of_a_chart_repository(tmp_path: Path) -> None:
    helm = {"chart": "podinfo", "version": ">=6.5 <7"}
    document = {"sources": [source(name="chart", repository="https://charts.example", helm=helm)]}

    [chart] = load(write(tmp_path, document)).sources

    assert (chart.spec.helm.chart, chart.spec.helm.version) == ("podinfo", ">=6.5 <7")
    assert ChartSettings().version == "*"


@pytest.mark.case("BI-07")
def test_bi07_limits_are_set_per_source(tmp_path: Path) -> None:
    limits = {
        "maxObjectBytes": "1Mi",
        "maxRevisionBytes": 200_000_000,
        "maxDocuments": 7,
        "maxFetchBytes": "3Gi",
    }
    document = {"sources": [source(name="big", limits=limits), source(name="small")]}

    big, small = load(write(tmp_path, document)).sources

    assert big.spec.limits == Limits(
        max_object_bytes=1 << 20,
        max_revision_bytes=200_000_000,
        max_documents=7,
        max_fetch_bytes=3 << 30,
    )
    assert small.spec.limits == Limits()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"repository": ""}, "repository: expected a non-empty string"),
        ({"paths": []}, "paths: expected a non-empty list of non-empty strings"),
        ({"exclude": "*.md"}, "exclude: expected a list of non-empty strings"),
        ({"interval": "soon"}, "interval: expected a duration above 0"),
        ({"interval": "8d"}, "interval: expected a duration"),
        ({"interval": 0}, "interval: expected a duration above 0"),
        ({"mode": "sometimes"}, "mode: expected observe, warn or enforce, got 'sometimes'"),
        ({"selfHeal": "yes"}, "selfHeal: expected true or false"),
        ({"guards": {"pruneBudgetPercent": 150}}, "pruneBudgetPercent: expected a number"),
        ({"guards": {"pruneEverything": True}}, "guards: unknown field(s) pruneEverything"),
        ({"credentials": {"token": "x"}}, "credentials: unknown field(s) token"),
        ({"webhookSecretFile": "/nonexistent/secret"}, "webhookSecretFile: cannot read"),
        ({"colour": "blue"}, "unknown field(s) colour"),
        ({"limits": {"maxFileBytes": 1}}, "limits: unknown field(s) maxFileBytes"),
        ({"limits": {"maxDocuments": 0}}, "maxDocuments: expected a positive whole number"),
        ({"limits": {"maxObjectBytes": "3MB"}}, "maxObjectBytes: expected a positive whole"),
        ({"limits": {"maxRevisionBytes": True}}, "maxRevisionBytes: expected a positive"),
        ({"concurrency": 0}, "concurrency: expected a positive whole number, got 0"),
        ({"concurrency": "8"}, "concurrency: expected a positive whole number, got '8'"),
        ({"concurrency": True}, "concurrency: expected a positive whole number, got True"),
        ({"concurrency": 1.5}, "concurrency: expected a positive whole number, got 1.5"),
        ({"namespace": "Team_A"}, "namespace: 'Team_A' must be a DNS-1123 label"),
        ({"inventoryNamespace": "a/b"}, "inventoryNamespace: 'a/b' must be a DNS-1123 label"),
        ({"dependsOn": "good"}, "dependsOn: expected a list of non-empty strings"),
        ({"dependsOn": ["bad"]}, "dependsOn: 'bad' is not another source's name"),
        ({"dependsOn": ["Good"]}, "dependsOn: 'Good' is not another source's name"),
        ({"dependsOn": ["nowhere"]}, "dependsOn: no source nowhere"),
        ({"helm": {"release": "x"}}, "helm: unknown field(s) release"),
        ({"helm": {"releaseName": "Web_1"}}, "helm: releaseName: 'Web_1' must be a Helm release"),
        ({"helm": {"releaseName": "w" * 54}}, "releaseName: 'ww"),
        ({"helm": {"releaseNamespace": "A"}}, "helm: releaseNamespace: 'A' must be a DNS-1123"),
        ({"helm": {"valuesFiles": "prod.yaml"}}, "helm: valuesFiles: expected a list"),
        ({"helm": {"values": ["a"]}}, "helm: values: expected a mapping"),
        ({"helm": {"chart": "../x"}}, "helm: chart: '../x' must be a chart's name"),
        ({"helm": {"chart": "x", "version": "^1.x.q"}}, "helm: version: version range '^1.x.q'"),
        ({"helm": {"version": 1}}, "helm: version: must be a string"),
        ({"verify": {"mode": "HEAD"}}, "verify: give the keys a revision must be signed with"),
        ({"decryption": {}}, "decryption: give the keys SOPS-encrypted files are decrypted"),
        ({"decryption": {"provider": "sops"}}, "decryption: unknown field(s) provider"),
        ({"verify": {"mode": "head", "publicKeysFile": "/k"}}, "expected HEAD, Tag or TagAndHEAD"),
        (
            {"repository": "/srv/app", "verify": {"allowedSignersFile": "/k"}},
            "verify: the source reads a local directory: only a git revision carries",
        ),
        (
            {"verify": {"allowedSignersFile": "/k"}, "helm": {"chart": "app"}},
            "verify: the source reads a chart of a chart repository",
        ),
        (
            {"helm": {"values": {"a": "x" * 300_000}}},
            "helm: values: 300008 bytes as JSON, over the limit",
        ),
    ],
)
def test_an_invalid_source_is_set_aside_naming_the_field(
    tmp_path: Path, fields: dict[str, Any], message: str
) -> None:
    good = source(name="good")
    config = load(write(tmp_path, {"sources": [good, source(**{"name": "bad", **fields})]}))

    assert [s.name for s in config.sources] == ["good"]
    [(name, error)] = config.invalid_sources
    assert name == "bad" and "source bad: " in error and message in error


def test_verification_is_on_with_keys_in_the_mode_given(tmp_path: Path) -> None:
    keys = {"mode": "TagAndHEAD", "allowedSignersFile": "/etc/gitopsd/keys/allowed_signers"}
    plain, verified = load(
        write(tmp_path, {"sources": [source(name="plain"), source(name="signed", verify=keys)]})
    ).sources

    assert not plain.spec.verify.enabled
    assert verified.spec.verify == Verification(
        mode=VerifyMode.TAG_AND_HEAD,
        allowed_signers_file=Path("/etc/gitopsd/keys/allowed_signers"),
    )
    assert verified.spec.verify.enabled


def test_a_source_decrypts_with_the_keys_its_decryption_block_names(tmp_path: Path) -> None:
    keys = {"ageKeyFile": "/etc/gitopsd/sops/identities.agekey"}
    local = {"repository": "/srv/app", "decryption": {"pgpKeyFile": "/k.asc"}}
    plain, decrypting, directory = load(
        write(
            tmp_path,
            {
                "sources": [
                    source(name="plain"),
                    source(name="secret", decryption=keys),
                    source(name="local", **local),
                ]
            },
        )
    ).sources

    assert not plain.spec.decryption.enabled
    assert decrypting.spec.decryption == Decryption(
        age_key_file=Path("/etc/gitopsd/sops/identities.agekey")
    )
    assert directory.spec.decryption == Decryption(pgp_key_file=Path("/k.asc"))


def test_a_source_name_must_suit_labels_and_metrics(tmp_path: Path) -> None:
    config = load(write(tmp_path, {"sources": [source(name="App_1")]}))

    assert config.sources == ()
    assert "name: use lower-case letters" in config.invalid_sources[0][1]


def test_an_empty_webhook_secret_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")

    config = load(write(tmp_path, {"sources": [source(webhookSecretFile=str(empty))]}))

    assert "is empty" in config.invalid_sources[0][1]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({}, "sources: expected a list ([] for none)"),
        ({"sources": {}}, "sources: expected a list ([] for none)"),
        ({"sources": [source(), source()]}, "duplicate names ['app']"),
        ({"listen": "everywhere", "sources": [source()]}, "listen: expected host:port"),
        ({"sources": [source()], "threads": 4}, "unknown field(s) threads"),
        ({"sources": [source()], "objectSeriesBudget": -1}, "objectSeriesBudget: expected"),
        (
            {"sources": [source()], "leaderElection": {"leaseDuration": "5s"}},
            "retryPeriod < renewDeadline < leaseDuration",
        ),
        (
            {"sources": [], "network": {"clusterNetworks": ["10.96.0.0/33"]}},
            "network: clusterNetworks: '10.96.0.0/33' is not a CIDR",
        ),
        ({"sources": [], "network": {"fetchDeadline": "0s"}}, "network: fetchDeadline: expected"),
        ({"sources": [], "network": {"gitDeadline": "-1s"}}, "network: gitDeadline: expected"),
        ({"sources": [], "poolProgressDeadline": "soon"}, "poolProgressDeadline: expected"),
    ],
)
def test_an_invalid_file_is_an_error_naming_the_field(
    tmp_path: Path, document: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(write(tmp_path, document))

    assert message in str(raised.value) and "gitopsd.yaml" in str(raised.value)


def test_ta05_the_network_settings_reach_every_source_and_gitsync(tmp_path: Path) -> None:
    """TA-05: the fetch and git deadlines and the fenced networks are the administrator's,
    set once for the file sources and the GitSyncs alike; by default 5 minutes, 1 minute
    and no cluster network."""
    network = {
        "fetchDeadline": "45s",
        "gitDeadline": "10m",
        "clusterNetworks": ["10.96.0.0/12", "fd00::/8"],
    }
    config = load(write(tmp_path, {"sources": [source()], "network": network}))

    [app] = config.sources
    assert app.spec.network == config.network == config.git_syncs.network
    assert config.network.fetch_deadline_seconds == 45
    assert config.network.git_deadline_seconds == 600
    assert config.network.cluster_networks == ("10.96.0.0/12", "fd00::/8")
    defaults = load(write(tmp_path, {"sources": []}))
    assert defaults.network.fetch_deadline_seconds == 300
    assert defaults.network.git_deadline_seconds == 60
    assert (defaults.network.cluster_networks, defaults.pool_progress_seconds) == ((), 300)


def test_unreadable_or_malformed_files_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        load(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("listen: 127.0.0.1:9290\nsources: [unclosed\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml:3:1: "):
        load(broken)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "sources: []\nlisten: a:1\nlisten: b:2\n",
            "gitopsd.yaml:3:1: duplicate key 'listen' at lines 2 and 3",
        ),
        ("sources: !!python/object:os.system []\n", "gitopsd.yaml:1:10: tag"),
        ("sources: []\n---\nsources: []\n", "gitopsd.yaml:3: expected one YAML document"),
        ("sources: []\nlisten: \xff\n", "gitopsd.yaml:2: invalid UTF-8"),
    ],
)
def test_the_file_is_read_as_strictly_as_manifests(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "gitopsd.yaml"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(ConfigError) as raised:
        load(path)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("1h30m", 5400), ("1.5s", 1.5), ("", None), ("5", None)],
)
def test_durations(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "size"),
    [("1048576", 1 << 20), ("512Ki", 512 << 10), ("64Mi", 64 << 20), ("1Gi", 1 << 30)]
    + [(text, None) for text in ("", "3MB", "-1", "1.5Mi", "Mi", "1e6")],
)
def test_sizes(text: str, size: int | None) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("size", "text"),
    [(3 << 20, "3Mi"), (2 << 30, "2Gi"), (512 << 10, "512Ki"), (1536, "1536"), (50_000, "50000")],
)
def test_sizes_are_written_the_way_they_are_read(size: int, text: str) -> None:
    assert format_size(size) == text
    assert parse_size(text) == size


@pytest.mark.parametrize("variant", ["manager", "namespaced"])
def test_the_shipped_in_cluster_configuration_loads_with_no_sources(variant: str) -> None:
    config = load(Path(__file__).resolve().parents[2] / "config" / variant / "gitopsd.yaml")

    assert config.sources == () and config.listen_address == ("0.0.0.0", 9290)  # noqa: S104 - the pod IP
    assert config.leader_election.enabled and config.cache_dir == Path("/var/cache/gitopsd")
    # the cluster-wide install serves GitSyncSets beside GitSyncs; the namespaced one neither
    assert config.git_syncs.sets is (variant == "manager")


def test_gitsyncsets_are_served_only_when_asked(tmp_path: Path) -> None:
    asked = {"gitSyncs": {"enabled": True, "sets": True}, "sources": []}
    assert load(write(tmp_path, asked)).git_syncs.sets
    assert not load(write(tmp_path, {"gitSyncs": {"enabled": True}, "sources": []})).git_syncs.sets
    with pytest.raises(ConfigError, match="sets"):
        load(write(tmp_path, {"gitSyncs": {"sets": "yes"}, "sources": []}))


def test_depends_on_names_other_sources_and_is_read_in_order(tmp_path: Path) -> None:
    sources = [
        source(name="db"),
        source(name="certs"),
        source(name="app", dependsOn=["db", "certs"]),
    ]

    config = load(write(tmp_path, {"sources": sources}))

    assert {s.name: s.depends_on for s in config.sources} == {
        "db": (),
        "certs": (),
        "app": ("db", "certs"),
    }


def test_a_dependency_set_aside_still_counts_as_a_source(tmp_path: Path) -> None:
    """The dependent runs, and waits: the error of the one it needs says why."""
    sources = [source(name="db", interval="soon"), source(name="app", dependsOn=["db"])]

    config = load(write(tmp_path, {"sources": sources}))

    assert [s.name for s in config.sources] == ["app"]
    assert [name for name, _ in config.invalid_sources] == ["db"]


def test_a_cycle_of_dependencies_is_an_error_naming_the_cycle(tmp_path: Path) -> None:
    sources = [
        source(name="a", dependsOn=["b"]),
        source(name="b", dependsOn=["c"]),
        source(name="c", dependsOn=["a"]),
        source(name="d", dependsOn=["a"]),
    ]

    with pytest.raises(ConfigError, match=r"dependsOn forms a cycle: a -> b -> c -> a$"):
        load(write(tmp_path, {"sources": sources}))


@pytest.mark.parametrize(
    ("graph", "cycle"),
    [
        ({}, None),
        ({"a": ()}, None),
        ({"a": ("b",), "b": ()}, None),
        ({"a": ("b", "c"), "b": ("c",), "c": ()}, None),  # a diamond is no cycle
        ({"a": ("a",)}, ["a", "a"]),
        ({"a": ("b",), "b": ("a",)}, ["a", "b", "a"]),
        ({"x": ("a",), "a": ("b",), "b": ("a",)}, ["a", "b", "a"]),
        ({"a": ("missing",)}, None),
    ],
)
def test_cycles_are_found_as_the_path_that_closes_them(
    graph: dict[str, tuple[str, ...]], cycle: list[str] | None
) -> None:
    assert cycle_in(graph) == cycle


def test_the_control_api_listens_on_loopback_only(tmp_path: Path) -> None:
    assert load(write(tmp_path, {"sources": []})).control_address == ("127.0.0.1", 9091)
    assert load(write(tmp_path, {"sources": [], "controlListen": "[::1]:7"})).control_address == (
        "::1",
        7,
    )
    with pytest.raises(ConfigError, match=r"controlListen: '0\.0\.0\.0:9091' is not on loopback"):
        load(write(tmp_path, {"sources": [], "controlListen": "0.0.0.0:9091"}))


def test_ta06_probes_and_metrics_listen_apart_from_the_webhooks(tmp_path: Path) -> None:
    config = load(write(tmp_path, {"sources": []}))
    assert (config.listen_address, config.probe_address) == (
        ("127.0.0.1", 9290),
        ("127.0.0.1", 9092),
    )
    moved = load(write(tmp_path, {"sources": [], "probeListen": "0.0.0.0:8081"}))
    assert moved.probe_address == ("0.0.0.0", 8081)  # noqa: S104 - the pod IP
    with pytest.raises(ConfigError, match=r"probeListen: '0\.0\.0\.0:9290' has the port of listen"):
        load(write(tmp_path, {"sources": [], "probeListen": "0.0.0.0:9290"}))


def test_ta03_each_namespaces_share_has_documented_defaults_and_is_set_in_the_file(
    tmp_path: Path,
) -> None:
    assert load(write(tmp_path, {"sources": []})).tenant_quota == TenantQuota()
    assert (TenantQuota.objects, TenantQuota.git_syncs, TenantQuota.threads) == (10_000, 25, 2)
    assert (TenantQuota.requests_per_second, TenantQuota.request_burst) == (50, 300)
    assert TenantQuota.health_rule_seconds_per_minute == 10
    quota = {"objects": 500, "gitSyncs": 3, "threads": 1, "requestsPerSecond": 5}
    quota |= {"requestBurst": 9, "healthRuleSecondsPerMinute": 4, "gitSyncSets": 2}
    read = load(write(tmp_path, {"sources": [], "tenantQuota": quota}))
    assert read.tenant_quota == TenantQuota(
        500,
        3,
        1,
        requests_per_second=5,
        request_burst=9,
        health_rule_seconds_per_minute=4,
        git_sync_sets=2,
    )
    assert TenantQuota.git_sync_sets == 5
    with pytest.raises(ConfigError, match="tenantQuota: threads: expected a positive whole"):
        load(write(tmp_path, {"sources": [], "tenantQuota": {"threads": 0}}))
    with pytest.raises(ConfigError, match=r"tenantQuota: unknown field\(s\) memory"):
        load(write(tmp_path, {"sources": [], "tenantQuota": {"memory": "1Gi"}}))


def test_drift_rules_are_set_per_source(tmp_path: Path) -> None:
    rule = {"name": "hpa", "paths": ["spec.replicas"], "managers": ["kube-*"], "action": "accept"}
    config = load(write(tmp_path, {"sources": [source(drift=[rule])]}))

    [read] = config.sources[0].settings.drift_rules
    assert (read.label, read.action, read.managers) == ("hpa", "accept", ("kube-*",))


def test_an_invalid_drift_rule_names_the_file_line_source_and_rule(tmp_path: Path) -> None:
    path = tmp_path / "gitopsd.yaml"
    path.write_text(
        "sources:\n"
        "  - name: good\n"
        "    repository: https://git.example.com/app.git\n"
        "  - name: bad\n"
        "    repository: https://git.example.com/app.git\n"
        "    drift:\n"
        "      - {paths: [spec.replicas], action: accept}\n"
        "      - {paths: ['spec..replicas'], action: ignore}\n"
    )
    config = load(path)

    [(name, error)] = config.invalid_sources
    assert name == "bad"
    assert error.startswith(f"{path}:4: source bad: drift[1]: paths: 'spec..replicas'")
