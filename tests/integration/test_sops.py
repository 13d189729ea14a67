"""SOPS: a revision's encrypted files, decrypted with the source's keys before anything reads
them (manifests, a kustomization's generator files and resources, a chart's values files),
encrypted by the real sops with real age and OpenPGP keys, synced into the real control
plane. A decrypted value is Secret data: a canary never appears in any output, plain or in
base64; a file that does not decrypt refuses the whole revision, naming the file and why."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gitopsd.errors import ExitCode
from gitopsd.gitsync import GROUP, PLURAL, RECONCILE_REQUESTED_ANNOTATION, VERSION
from tests.harness.cli import Gitopsd, Run
from tests.harness.cluster_reads import config_map_data_value, config_map_value
from tests.harness.commands import scope
from tests.harness.controlplane import Binaries
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import condition, create, get, wait_ready
from tests.harness.manifests import config_map_with_value
from tests.harness.operators import operator
from tests.harness.sops import AgeKey, Sops, for_kms_only, tampered
from tests.harness.waiting import wait_for

CANARY = "canary-7f3a9c-never-shown"


def config(name: str, value: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  k: {value}\n"


def secret(name: str, value: str) -> str:
    return (
        f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n"
        f"stringData:\n  password: {value}\n"
    )


@pytest.fixture
def sops(binaries: Binaries, tmp_path: Path) -> Iterator[Sops]:
    made = Sops(binaries.sops, binaries.age_keygen, tmp_path)
    yield made
    made.close()


@pytest.fixture
def age(sops: Sops) -> AgeKey:
    return sops.age()


def identity_file(tmp_path: Path, key: AgeKey) -> list[str]:
    (tmp_path / "identities.agekey").write_bytes(key.identity)
    return ["--sops-age-key-file", str(tmp_path / "identities.agekey")]


def secret_value(admin_api: Any, namespace: str, name: str, key: str = "password") -> str:
    core: Any = client.CoreV1Api(admin_api)
    found = core.read_namespaced_secret(name, namespace)
    return base64.b64decode(found.data[key]).decode()


def never_shown(run: Run, *values: str) -> None:
    """No form of a decrypted value in what a person or a program reads."""
    for value in values:
        for form in (value, base64.b64encode(value.encode()).decode()):
            assert form not in run.text, f"{form!r} shown in:\n{run.text}"


@pytest.mark.case("SE-18")
def test_an_encrypted_secret_is_applied_decrypted_and_its_values_never_shown(
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    sops: Sops,
    age: AgeKey,
    tmp_path: Path,
    namespace: str,
    admin_api: Any,
) -> None:
    """age and OpenPGP: one file encrypted for both decrypts with either key alone; a diff
    and a sync of a new value, and a diff of a live edit (its JSON patch too), name the
    Secret and its field, never a value."""
    openpgp = sops.openpgp("team@example.com")
    sealed = sops.encrypt("secret.yaml", secret("db", CANARY), age=(age,), openpgp=(openpgp,))
    git_repo.commit({"secret.yaml": sealed})
    url = git_server.file_url(git_repo)
    (tmp_path / "team.asc").write_bytes(openpgp.private)
    with_openpgp = ["--sops-pgp-key-file", str(tmp_path / "team.asc")]

    first = gitopsd("sync", url, *scope(namespace), *identity_file(tmp_path, age))
    assert first.code == ExitCode.OK, first.text
    assert secret_value(admin_api, namespace, "db") == CANARY
    changed = f"{CANARY}-rotated"
    rotated = sops.encrypt("secret.yaml", secret("db", changed), age=(age,), openpgp=(openpgp,))
    git_repo.commit({"secret.yaml": rotated})
    diff = gitopsd("diff", url, *scope(namespace), *with_openpgp)
    synced = gitopsd("sync", url, *scope(namespace), *with_openpgp, "-o", "json")

    assert diff.code == 1 and "Secret" in diff.out and "stringData" not in diff.err, diff.text
    assert synced.code == ExitCode.OK, synced.text
    assert secret_value(admin_api, namespace, "db") == changed
    edited = {"stringData": {"password": f"{CANARY}-edited"}}
    gitopsd.kubectl("patch", "secret/db", "-n", namespace, "-p", json.dumps(edited))
    drift = gitopsd("diff", url, *scope(namespace), *with_openpgp, "-o", "json")
    assert drift.code == 1, drift.text
    assert [d["object"]["kind"] for d in drift.document("DiffResult")["drift"]] == ["Secret"]
    for run in (first, diff, synced, drift):
        never_shown(run, CANARY, changed, f"{CANARY}-edited")


@pytest.mark.case("SE-18")
def test_a_new_encryption_of_the_same_values_is_no_drift_and_no_write(
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    sops: Sops,
    age: AgeKey,
    tmp_path: Path,
    namespace: str,
    admin_api: Any,
) -> None:
    """sops encrypts with a new data key and IVs each time: other ciphertext, same Secret."""
    first = sops.encrypt("secret.yaml", secret("db", CANARY), age=(age,))
    again = sops.encrypt("secret.yaml", secret("db", CANARY), age=(age,))
    assert first != again
    url = git_server.file_url(git_repo)
    keys = identity_file(tmp_path, age)
    git_repo.commit({"secret.yaml": first})
    assert gitopsd("sync", url, *scope(namespace), *keys).code == ExitCode.OK
    core: Any = client.CoreV1Api(admin_api)
    version = core.read_namespaced_secret("db", namespace).metadata.resource_version

    git_repo.commit({"secret.yaml": again})
    run = gitopsd("sync", url, *scope(namespace), *keys, "-o", "json")

    assert run.code == ExitCode.OK, run.text
    actions = {item["action"] for item in run.document("SyncResult")["outcomes"]}
    assert actions == {"unchanged"}, run.out
    assert core.read_namespaced_secret("db", namespace).metadata.resource_version == version


@pytest.mark.case("SE-18")
def test_every_format_decrypts_where_kustomize_and_helm_read_it(
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    sops: Sops,
    age: AgeKey,
    tmp_path: Path,
    namespace: str,
    admin_api: Any,
) -> None:
    """A kustomization's secretGenerator reads an encrypted dotenv file and an encrypted
    binary file, and its resources an encrypted JSON Secret, all decrypted before kustomize
    runs; a chart's encrypted values file is decrypted before helm runs."""
    json_secret = (
        '{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "from-json"}, '
        f'"stringData": {{"password": "{CANARY}-json"}}}}'
    )
    kustomization = (
        "resources: [secret.json]\nsecretGenerator:\n- name: generated\n  envs: [app.env]\n"
        "  files: [tls.key]\ngeneratorOptions:\n  disableNameSuffixHash: true\n"
    )
    chart: dict[str, str | bytes | None] = {
        "chart/Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\n",
        "chart/templates/secret.yaml": secret("from-values", "{{ .Values.password }}"),
        "chart/secrets.yaml": sops.encrypt(
            "secrets.yaml", f"password: {CANARY}-values\n", age=(age,), regex=None
        ),
    }

    def whole(name: str, text: str) -> bytes:
        return sops.encrypt(name, text, age=(age,), regex=None)

    git_repo.commit(
        {
            "app/kustomization.yaml": kustomization,
            "app/secret.json": sops.encrypt("secret.json", json_secret, age=(age,)),
            "app/app.env": whole("app.env", f"PASSWORD={CANARY}-env\n"),
            "app/tls.key": whole("tls.key", f"{CANARY}-binary\n"),
            **chart,
        }
    )
    url = git_server.file_url(git_repo)
    values = ["--helm-values", "secrets.yaml"]

    run = gitopsd("sync", url, *scope(namespace), *identity_file(tmp_path, age), *values)

    assert run.code == ExitCode.OK, run.text
    assert secret_value(admin_api, namespace, "from-json") == f"{CANARY}-json"
    assert secret_value(admin_api, namespace, "generated", "PASSWORD") == f"{CANARY}-env"
    assert secret_value(admin_api, namespace, "generated", "tls.key") == f"{CANARY}-binary\n"
    assert secret_value(admin_api, namespace, "from-values") == f"{CANARY}-values"
    never_shown(run, f"{CANARY}-json", f"{CANARY}-env", f"{CANARY}-binary", f"{CANARY}-values")


def wrong_key(sops: Sops, age: AgeKey) -> tuple[bytes, str]:
    other = sops.age()
    return (
        sops.encrypt("secret.yaml", secret("db", CANARY), age=(other,)),
        "no key of the source's decrypts it (it is encrypted for age)",
    )


def changed_after_encryption(sops: Sops, age: AgeKey) -> tuple[bytes, str]:
    sealed = sops.encrypt("secret.yaml", secret("db", CANARY), age=(age,))
    return (
        tampered(sealed, "name: db", "name: dc"),
        "its MAC does not match its values: it was changed after it was encrypted",
    )


def for_aws_kms_only(sops: Sops, age: AgeKey) -> tuple[bytes, str]:
    sealed = sops.encrypt("secret.yaml", secret("db", CANARY), age=(age,))
    return (
        for_kms_only(sealed),
        "it is encrypted for AWS KMS only: gitopsd decrypts with age and OpenPGP keys",
    )


@pytest.mark.case("SE-18")
@pytest.mark.parametrize("case", [wrong_key, changed_after_encryption, for_aws_kms_only])
def test_a_file_that_does_not_decrypt_refuses_the_revision_naming_it_and_why(
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    sops: Sops,
    age: AgeKey,
    tmp_path: Path,
    namespace: str,
    admin_api: Any,
    case: Any,
) -> None:
    """Nothing of the revision is applied, nothing is pruned."""
    url = git_server.file_url(git_repo)
    keys = [*identity_file(tmp_path, age), "--prune"]
    git_repo.commit({"a.yaml": config("a", "one"), "b.yaml": config("b", "v")})
    assert gitopsd("sync", url, *scope(namespace), *keys).code == ExitCode.OK
    sealed, why = case(sops, age)

    git_repo.commit({"a.yaml": config("a", "two"), "b.yaml": None, "secret.yaml": sealed})
    run = gitopsd("sync", url, *scope(namespace), *keys)

    assert run.code == ExitCode.INVALID, run.text
    assert f"secret.yaml: a SOPS-encrypted file that does not decrypt: {why}" in run.err, run.err
    assert config_map_value(admin_api, namespace, "a") == "one"
    assert config_map_value(admin_api, namespace, "b") == "v"
    never_shown(run, CANARY)


@pytest.mark.case("SE-18")
def test_an_encrypted_file_without_keys_is_refused_and_the_habit_of_sops_is_read(
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    sops: Sops,
    age: AgeKey,
    tmp_path: Path,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    git_repo.commit({"secret.yaml": sops.encrypt("secret.yaml", secret("db", CANARY), age=(age,))})
    url = git_server.file_url(git_repo)
    monkeypatch.delenv("SOPS_AGE_KEY_FILE", raising=False)

    without = gitopsd("validate", url, "--allow-insecure-source")
    identity_file(tmp_path, age)
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(tmp_path / "identities.agekey"))
    habit = gitopsd("validate", url, "--allow-insecure-source")

    assert without.code == ExitCode.INVALID, without.text
    assert "it is encrypted for age, and the source has no decryption keys" in without.err
    assert (habit.code, habit.out) == (ExitCode.OK, "1 objects valid\n"), habit.text


ANNOTATED = f"name: db\n  annotations: {{note: {CANARY}}}"


@pytest.mark.case("SE-18")
@pytest.mark.parametrize(
    "files",
    [
        {
            "app/kustomization.yaml": "configMapGenerator:\n- name: leaked\n  envs: [app.env]\n",
            "app/app.env": f"PASSWORD={CANARY}\n",
        },
        {"config.yaml": config("whole", CANARY)},
        {"secret.yaml": secret("db", CANARY).replace("name: db", ANNOTATED)},
    ],
    ids=["a-config-map-generated-from-it", "a-config-map-encrypted", "an-annotation"],
)
def test_a_decrypted_value_outside_a_secrets_data_refuses_the_revision(
    gitopsd: Gitopsd,
    git_server: GitServer,
    git_repo: GitRepo,
    sops: Sops,
    age: AgeKey,
    tmp_path: Path,
    namespace: str,
    files: dict[str, str],
) -> None:
    """Masking covers a Secret's data and stringData: a decrypted value anywhere else would
    be shown in diffs, logs and Events, so the revision is refused, naming the field only."""
    regex = "^(data|stringData|metadata)$" if "secret.yaml" in files else None
    sealed = {
        name: text
        if name.endswith("kustomization.yaml")
        else sops.encrypt(name, text, age=(age,), regex=regex)
        for name, text in files.items()
    }
    git_repo.commit(sealed)
    url = git_server.file_url(git_repo)

    run = gitopsd("sync", url, *scope(namespace), *identity_file(tmp_path, age))

    assert run.code == ExitCode.INVALID, run.text
    assert "holds a value decrypted from" in run.err, run.err
    assert "may reach only a Secret's data and stringData" in run.err, run.err
    never_shown(run, CANARY)


@pytest.mark.case("SE-18")
def test_a_gitsync_decrypts_with_its_namespaces_secret_and_shows_no_value_anywhere(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
    sops: Sops,
    age: AgeKey,
) -> None:
    """Its decryption.secretRef's age identity decrypts its Secret; no form of the value is
    in its status, the namespace's Events and objects, the daemon's logs or metrics. Its
    keys changed to others (read again on a reconcile request, as after a failure), a
    revision is read with them alone (a file decrypted before is not taken from the
    daemon's caches): refused, Ready=False DecryptionFailed, the last revision applied
    stays live."""
    core: Any = client.CoreV1Api(admin_api)
    keys = {"identity.agekey": base64.b64encode(age.identity).decode()}
    core.create_namespaced_secret(namespace, {"metadata": {"name": "sops-keys"}, "data": keys})
    sealed = sops.encrypt("secret.yaml", secret("db", CANARY), age=(age,))
    first = git_repo.commit({"secret.yaml": sealed, "c.yaml": config_map_with_value("c")})
    daemon = operator(daemons, namespace)
    decryption = {"provider": "sops", "secretRef": {"name": "sops-keys"}}
    create(admin_api, namespace, "app", {"repository": {"url": git_server.file_url(git_repo)},
                                         "decryption": decryption})  # fmt: skip
    wait_ready(admin_api, namespace, "app", "True", "Succeeded", deadline=90)
    assert secret_value(admin_api, namespace, "db") == CANARY

    other = base64.b64encode(sops.age().identity).decode()
    core.patch_namespaced_secret("sops-keys", namespace, {"data": {"identity.agekey": other}})
    requested(admin_api, namespace, "app", "rotated")  # its Secrets are read again
    git_repo.commit({"c.yaml": config_map_with_value("c", "two")})
    refused = wait_ready(admin_api, namespace, "app", "False", "DecryptionFailed", deadline=90)

    message = condition(refused, "Ready")["message"]
    assert "secret.yaml: a SOPS-encrypted file that does not decrypt: no key of" in message
    assert refused["status"]["lastAppliedRevision"] == first
    assert config_map_data_value(admin_api, namespace, "c") == "one"
    listed = [core.list_namespaced_event(namespace), core.list_namespaced_config_map(namespace)]
    shown = [
        json.dumps(refused),
        *(json.dumps(admin_api.sanitize_for_serialization(found)) for found in listed),
        daemon.logs(),
        daemon.metrics(),
    ]
    never_shown(Run(0, "\n".join(shown), ""), CANARY)


def requested(admin_api: Any, namespace: str, name: str, at: str) -> None:
    """A reconcile request (`gitopsd reconcile`'s annotation), once the daemon handled it."""
    annotation = {RECONCILE_REQUESTED_ANNOTATION: at}
    client.CustomObjectsApi(admin_api).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name, {"metadata": {"annotations": annotation}}
    )

    def handled() -> bool:
        status = (get(admin_api, namespace, name) or {}).get("status") or {}
        return status.get("lastHandledReconcileAt") == at

    wait_for(handled, f"GitSync {name} handled the request {at}", 30)


@pytest.mark.case("SE-18")
def test_a_gitsyncs_secret_of_keys_for_a_cloud_kms_or_of_no_known_kind_is_refused_by_name(
    admin_api: Any,
    namespace: str,
    gitsync_crd: str,
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
) -> None:
    git_repo.commit({"c.yaml": config_map_with_value("c")})
    core: Any = client.CoreV1Api(admin_api)
    secrets = {"kms": {"sops.aws-kms": "c2VjcmV0"}, "notes": {"notes.txt": "c2VjcmV0"}}
    for name, data in secrets.items():
        core.create_namespaced_secret(namespace, {"metadata": {"name": name}, "data": data})
    operator(daemons, namespace)
    url = git_server.file_url(git_repo)
    for name in secrets:
        decryption = {"provider": "sops", "secretRef": {"name": name}}
        create(admin_api, namespace, name, {"repository": {"url": url}, "decryption": decryption})

    kms = wait_ready(admin_api, namespace, "kms", "False", "Invalid", deadline=60)
    notes = wait_ready(admin_api, namespace, "notes", "False", "Invalid", deadline=60)

    assert "key sops.aws-kms: AWS KMS is out of reach" in condition(kms, "Ready")["message"]
    message = condition(notes, "Ready")["message"]
    assert "key notes.txt: neither age identities (.agekey) nor an OpenPGP key (.asc)" in message
    assert config_map_value(admin_api, namespace, "c") is None


@pytest.mark.case("SE-18")
def test_a_configured_source_decrypts_with_the_key_files_its_configuration_names(
    daemons: Daemons,
    git_server: GitServer,
    git_repo: GitRepo,
    sops: Sops,
    age: AgeKey,
    tmp_path: Path,
    namespace: str,
    admin_api: Any,
) -> None:
    """A file source's decryption.ageKeyFile, as the daemon's configuration names it; its
    logs and metrics show no form of the value."""
    sealed = sops.encrypt("secret.yaml", secret("db", CANARY), age=(age,))
    sha = git_repo.commit({"secret.yaml": sealed})
    keys = tmp_path / "identities.agekey"
    keys.write_bytes(age.identity)
    decryption = {"ageKeyFile": str(keys)}
    daemon = daemons.start(git_server.file_url(git_repo), decryption=decryption)

    daemon.wait_value(
        "gitopsd_source_revision_info", lambda v: v == 1, "the revision", source="app", revision=sha
    )
    core: Any = client.CoreV1Api(admin_api)
    named = "metadata.name=db"
    wait_for(lambda: core.list_namespaced_secret(namespace, field_selector=named).items, "db", 60)
    assert secret_value(admin_api, namespace, "db") == CANARY
    never_shown(Run(0, daemon.logs() + daemon.metrics(), ""), CANARY)
