"""OCI artifacts as a source of manifests: oci://HOST/PATH with a tag, a semver range or a
digest, in the format `flux push artifact` writes (pushed with Flux's own client library)
and in ORAS's (pushed by oras), from the real distribution registry behind its token flow,
synced into the real control plane. The revision is TAG@sha256:DIGEST; a tag moved to
other content is a new revision; what the registry says is checked against its digests."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gitopsd.errors import ExitCode
from tests.harness.archives import archive
from tests.harness.artifacts import Artifacts
from tests.harness.cli import Gitopsd, Run
from tests.harness.cluster_reads import config_map_names, config_map_value
from tests.harness.commands import scope
from tests.harness.controlplane import Binaries
from tests.harness.daemon import Daemons
from tests.harness.gitsyncs import create, get, wait_ready
from tests.harness.operators import operator
from tests.harness.registry import Registry, serving_lying_registry, serving_registry
from tests.harness.waiting import wait_for

APP = "charts/app"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
FLUX_CONFIG = "application/vnd.cncf.flux.config.v1+json"
FLUX_CONTENT = "application/vnd.cncf.flux.content.v1.tar+gzip"


def config(name: str, value: str = "v") -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  k: {value}\n"


@pytest.fixture
def registry(binaries: Binaries, tmp_path: Path) -> Iterator[Registry]:
    with serving_registry(binaries, tmp_path / "registry") as served:
        yield served


@pytest.fixture
def artifacts(binaries: Binaries, registry: Registry, tmp_path: Path) -> Artifacts:
    (tmp_path / "pushed").mkdir()
    return Artifacts(binaries, registry, tmp_path / "pushed")


def credentials(registry: Registry, tmp_path: Path) -> list[str]:
    password = tmp_path / "registry-password"
    password.write_text(registry.password)
    return ["--username", registry.username, "--password-file", str(password)]


def sync(gitopsd: Gitopsd, artifacts: Artifacts, ref: str, namespace: str, *flags: str) -> Run:
    url = artifacts.url(APP)
    return gitopsd("sync", url, "--ref", ref, *scope(namespace), *flags, "-o", "json")


def revision(run: Run) -> str:
    found: str = run.document("SyncResult")["revision"]
    return found


def test_a_flux_artifact_is_synced_by_tag_range_and_digest_named_by_its_digest(
    gitopsd: Gitopsd,
    artifacts: Artifacts,
    registry: Registry,
    tmp_path: Path,
    namespace: str,
    admin_api: Any,
) -> None:
    """Plain manifests and a kustomization, as `flux push artifact` packs a directory."""
    kustomization = "resources: [c.yaml]\nnamePrefix: k-\n"
    kustomized = {"app/kustomization.yaml": kustomization, "app/c.yaml": config("c")}
    one = artifacts.flux_push(APP, "v1.0.0", {"a.yaml": config("a", "one"), **kustomized})
    two = artifacts.flux_push(APP, "v1.1.0", {"a.yaml": config("a", "two"), **kustomized})
    artifacts.flux_push(APP, "v2.0.0", {"a.yaml": config("a", "three")})
    keys = credentials(registry, tmp_path)

    by_tag = sync(gitopsd, artifacts, "v1.0.0", namespace, *keys)
    assert by_tag.code == ExitCode.OK, by_tag.text
    assert revision(by_tag) == f"v1.0.0@{one}"
    assert config_map_value(admin_api, namespace, "a") == "one"
    assert config_map_names(admin_api, namespace) >= {"a", "k-c"}
    by_range = sync(gitopsd, artifacts, "^1.0", namespace, *keys)
    assert (by_range.code, revision(by_range)) == (ExitCode.OK, f"v1.1.0@{two}"), by_range.text
    assert config_map_value(admin_api, namespace, "a") == "two"
    by_digest = sync(gitopsd, artifacts, f"@{one}", namespace, *keys)
    assert (by_digest.code, revision(by_digest)) == (ExitCode.OK, one), by_digest.text
    assert config_map_value(admin_api, namespace, "a") == "one"


def test_a_tag_moved_to_other_content_is_a_new_revision_and_prunes_what_left(
    gitopsd: Gitopsd,
    artifacts: Artifacts,
    registry: Registry,
    tmp_path: Path,
    namespace: str,
    admin_api: Any,
) -> None:
    keys = [*credentials(registry, tmp_path), "--prune"]
    first = artifacts.flux_push(APP, "latest", {"a.yaml": config("a"), "b.yaml": config("b")})
    assert revision(sync(gitopsd, artifacts, "HEAD", namespace, *keys)) == f"latest@{first}"

    moved = artifacts.flux_push(APP, "latest", {"a.yaml": config("a", "moved")})
    run = sync(gitopsd, artifacts, "HEAD", namespace, *keys)

    assert run.code == ExitCode.OK, run.text
    assert moved != first and revision(run) == f"latest@{moved}"
    assert config_map_value(admin_api, namespace, "a") == "moved"
    assert "b" not in config_map_names(admin_api, namespace)


def test_an_oras_artifact_is_read_as_oras_pulls_it(
    gitopsd: Gitopsd,
    artifacts: Artifacts,
    registry: Registry,
    tmp_path: Path,
    namespace: str,
    admin_api: Any,
) -> None:
    """A file per layer, named by its title; a directory as one layer, unpacked under it."""
    files = {"a.yaml": config("a"), "more/b.yaml": config("b"), "more/c.yaml": config("c")}
    artifacts.oras_push(APP, "v1", files, "a.yaml", "more")

    run = sync(gitopsd, artifacts, "v1", namespace, *credentials(registry, tmp_path))

    assert run.code == ExitCode.OK, run.text
    assert config_map_names(admin_api, namespace) >= {"a", "b", "c"}


def hostile_title(artifacts: Artifacts) -> tuple[dict[str, Any], str]:
    layer = artifacts.manifest(APP, "v1")["layers"][0]
    layer["annotations"]["org.opencontainers.image.title"] = "../../escape.yaml"
    return {**artifacts.manifest(APP, "v1"), "layers": [layer]}, "points outside the artifact"


def no_layer(artifacts: Artifacts) -> tuple[dict[str, Any], str]:
    manifest = artifacts.manifest(APP, "v1")
    manifest["layers"][0]["annotations"] = {}
    return manifest, "holds neither a Flux content layer (application/vnd.cncf.flux.content"


@pytest.mark.parametrize("case", [hostile_title, no_layer])
def test_an_artifact_gitopsd_cannot_read_safely_is_refused_and_nothing_applied(
    gitopsd: Gitopsd,
    artifacts: Artifacts,
    registry: Registry,
    tmp_path: Path,
    namespace: str,
    admin_api: Any,
    case: Any,
) -> None:
    artifacts.oras_push(APP, "v1", {"a.yaml": config("a")}, "a.yaml")
    manifest, why = case(artifacts)
    artifacts.put_manifest(APP, "v2", manifest)

    run = sync(gitopsd, artifacts, "v2", namespace, *credentials(registry, tmp_path))

    assert run.code in (ExitCode.INVALID, ExitCode.SOURCE_FAILED), run.text
    assert why in run.err, run.err
    assert config_map_names(admin_api, namespace) == set()


def test_what_is_no_artifact_of_manifests_is_refused_naming_why(
    gitopsd: Gitopsd,
    artifacts: Artifacts,
    registry: Registry,
    tmp_path: Path,
    namespace: str,
) -> None:
    """A Helm chart (read as a chart instead), a tag that is not there, a signature check
    an artifact cannot answer, a ref that is no tag, range nor digest."""
    registry.publish({"hello/Chart.yaml": "apiVersion: v2\nname: hello\nversion: 1.0.0\n"}, "1.0.0")
    keys = credentials(registry, tmp_path)
    hello = artifacts.url("charts/hello")
    chart = gitopsd("validate", hello, "--ref", "1.0.0", *keys, "--allow-insecure-source")
    missing = sync(gitopsd, artifacts, "v9", namespace, *keys)
    verified = sync(gitopsd, artifacts, "v1", namespace, *keys, "--verify-public-keys", "/dev/null")
    nonsense = sync(gitopsd, artifacts, "!!", namespace, *keys)

    assert chart.code == ExitCode.SOURCE_FAILED, chart.text
    assert "a Helm chart, not an artifact of manifests" in chart.err, chart.err
    assert missing.code == ExitCode.SOURCE_FAILED, missing.text
    assert verified.code == ExitCode.INVALID, verified.text
    assert "the source is an OCI artifact: only a git revision" in verified.err, verified.err
    assert nonsense.code == ExitCode.INVALID, nonsense.text
    assert "neither a tag, a semver range nor @sha256:DIGEST" in nonsense.err, nonsense.err


def test_a_gitsync_syncs_an_artifact_with_its_secrets_credentials_and_follows_its_tag(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    artifacts: Artifacts,
    registry: Registry,
) -> None:
    first = artifacts.flux_push(APP, "stable", {"a.yaml": config("a", "one")})
    core: Any = client.CoreV1Api(admin_api)
    login = {"username": registry.username, "password": registry.password}
    data = {key: base64.b64encode(value.encode()).decode() for key, value in login.items()}
    annotation = {"gitopsd.io/git-credentials-for": artifacts.url(APP)}
    core.create_namespaced_secret(
        namespace, {"metadata": {"name": "registry", "annotations": annotation}, "data": data}
    )
    operator(daemons, namespace)
    repository = {"url": artifacts.url(APP), "ref": "stable", "secretRef": {"name": "registry"}}
    create(admin_api, namespace, "app", {"repository": repository})
    ready = wait_ready(admin_api, namespace, "app", "True", "Succeeded", deadline=90)
    assert ready["status"]["lastAppliedRevision"] == f"stable@{first}"

    moved = artifacts.flux_push(APP, "stable", {"a.yaml": config("a", "two")})

    def applied() -> bool:
        found = get(admin_api, namespace, "app") or {}
        return (found.get("status") or {}).get("lastAppliedRevision") == f"stable@{moved}"

    wait_for(applied, "the moved tag applied", 90)
    assert config_map_value(admin_api, namespace, "a") == "two"


def flux_artifact(files: dict[str, bytes]) -> tuple[dict[str, Any], bytes]:
    """A manifest of Flux's layout and its layer, made here (for a registry that lies)."""
    layer = archive(files)
    config = {"mediaType": FLUX_CONFIG, "digest": digest_of(b"{}"), "size": 2}
    content = {"mediaType": FLUX_CONTENT, "digest": digest_of(layer), "size": len(layer)}
    manifest = {"schemaVersion": 2, "mediaType": MANIFEST, "config": config, "layers": [content]}
    return manifest, layer


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_what_a_registry_serves_is_checked_against_its_digests(
    gitopsd: Gitopsd, tmp_path: Path, namespace: str, admin_api: Any
) -> None:
    """A layer whose bytes are not its digest's, a manifest named by a digest it does not
    have: refused, nothing applied."""
    manifest, layer = flux_artifact({"a.yaml": config("a").encode()})
    body = json.dumps(manifest).encode()
    other, _ = flux_artifact({"b.yaml": config("b").encode()})
    with serving_lying_registry() as registry:
        registry.paths["/v2/app/manifests/swapped"] = body
        registry.paths[f"/v2/app/blobs/{manifest['layers'][0]['digest']}"] = layer + b"\n"
        registry.paths[f"/v2/app/manifests/{digest_of(body)}"] = json.dumps(other).encode()
        url = f"{registry.url}/app"
        swapped = gitopsd("sync", url, "--ref", "swapped", *scope(namespace))
        named = gitopsd("sync", url, "--ref", f"@{digest_of(body)}", *scope(namespace))

    assert swapped.code == ExitCode.SOURCE_FAILED, swapped.text
    assert "the blob's sha256 is not the digest its manifest gives" in swapped.err, swapped.err
    assert named.code == ExitCode.SOURCE_FAILED, named.text
    assert "the manifest's sha256 is not its digest" in named.err, named.err
    assert config_map_names(admin_api, namespace) == set()
