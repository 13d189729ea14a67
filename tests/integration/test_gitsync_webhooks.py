"""A GitSync's webhook (SE-20): a push announced by GitHub, GitLab or a generic HMAC sender,
signed with the token of a Secret in the GitSync's namespace, is applied at once; the
GitSyncs that share its repository read the commit too, and nothing unsigned or unknown is
accepted."""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any

import pytest
from kubernetes import client

from tests.harness import audit
from tests.harness.cluster_reads import config_map_value
from tests.harness.controlplane import AUDITED_USER, ControlPlane
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import GROUP, PLURAL, VERSION, condition, create, get, wait_ready
from tests.harness.manifests import each_in_its_folder
from tests.harness.operators import audited_operator, operator
from tests.harness.waiting import wait_for
from tests.harness.webhooks import PUSH, TOKEN, hook_secret, secret_data


@pytest.mark.case("SE-20")
def test_se20_a_signed_push_is_applied_at_once_and_read_by_the_gitsyncs_sharing_it(
    daemons: Daemons,
    admin_api: Any,
    gitsync_crd: str,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(each_in_its_folder("ab", "one"))
    core: Any = client.CoreV1Api(admin_api)
    hook_secret(core, namespace)
    daemon = operator(daemons, namespace)
    repository = {"url": git_server.file_url(git_repo)}
    webhook = {"secretRef": {"name": "hook"}}
    # hourly: whatever is applied within the test was announced
    create(
        admin_api,
        namespace,
        "a",
        {"repository": repository, "paths": ["a"], "interval": "1h", "webhook": webhook},
    )
    create(admin_api, namespace, "b", {"repository": repository, "paths": ["b"], "interval": "1h"})
    for name in "ab":
        wait_ready(admin_api, namespace, name, "True", "Succeeded")
    hook = f"/hooks/gitsyncs/{namespace}/a"

    assert daemon.post(hook, PUSH, {}) == 401
    assert daemon.post(hook, PUSH, {"X-Gitlab-Token": "guess"}) == 401
    assert daemon.post(f"/hooks/gitsyncs/{namespace}/b", PUSH, {"X-Gitlab-Token": "x"}) == 404
    assert daemon.post(f"/hooks/gitsyncs/{namespace}/c", PUSH, {"X-Gitlab-Token": "x"}) == 404

    github = "sha256=" + hmac.new(TOKEN, PUSH, hashlib.sha256).hexdigest()
    generic = "sha512=" + hmac.new(TOKEN, PUSH, hashlib.sha512).hexdigest()
    for value, headers in (
        ("two", {"X-Hub-Signature-256": github}),
        ("three", {"X-Gitlab-Token": TOKEN.decode()}),
        ("four", {"X-Signature": generic}),
    ):
        git_repo.commit(each_in_its_folder("ab", value))
        assert daemon.post(hook, PUSH, headers) == 202
        wait_for(lambda: values(admin_api, namespace) == [value, value], f"both at {value}")  # noqa: B023 - waited for in this turn of the loop


def test_a_gitsync_reads_its_secret_once_at_creation_and_again_only_when_it_changes(
    daemons: Daemons,
    admin_api: Any,
    gitsync_crd: str,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
    control_plane: ControlPlane,
) -> None:
    """Its webhook token is read when the GitSync is read afresh, not at each poll's end (a
    thousand GitSyncs polling each minute made that most of an idle daemon's requests), nor
    when the daemon's own finalizer joins it (a thousand created at once read each twice)."""
    git_repo.commit(each_in_its_folder("a", "one"))
    core: Any = client.CoreV1Api(admin_api)
    hook_secret(core, namespace)
    daemon = audited_operator(daemons, control_plane, namespace)
    repository = {"url": git_server.file_url(git_repo)}
    spec = {"repository": repository, "paths": ["a"], "webhook": {"secretRef": {"name": "hook"}}}
    created = time.time()
    create(admin_api, namespace, "a", spec)  # polled every second
    wait_ready(admin_api, namespace, "a", "True", "Succeeded")
    started, source = time.time(), f"{namespace}/a"
    polls = daemon.value("gitopsd_reconcile_total", source=source)
    daemon.wait_value("gitopsd_reconcile_total", lambda v: v >= polls + 3, "3 polls", source=source)

    def secrets_read(since: float | None = None) -> list[audit.Write]:
        logged = audit.requests(control_plane, AUDITED_USER, since or started)
        return [r for r in logged if r.resource == "secrets"]

    assert secrets_read() == []
    assert [(r.verb, r.name) for r in secrets_read(created)] == [("get", "hook")]
    client.CustomObjectsApi(admin_api).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "a", {"metadata": {"labels": {"x": "y"}}}
    )
    wait_for(secrets_read, "the changed GitSync's Secret read afresh")

    rotated = b"a-rotated-token-77e0"
    core.patch_namespaced_secret("hook", namespace, {"data": {"token": secret_data(rotated)}})
    signed = {
        "X-Hub-Signature-256": "sha256=" + hmac.new(rotated, PUSH, hashlib.sha256).hexdigest()
    }
    assert daemon.post(f"/hooks/gitsyncs/{namespace}/a", PUSH, signed) == 401  # the old token
    wait_for(
        lambda: daemon.post(f"/hooks/gitsyncs/{namespace}/a", PUSH, signed) == 202,
        "the rotated token read after a refused call",
    )


def values(admin_api: Any, namespace: str) -> list[str | None]:
    return [config_map_value(admin_api, namespace, name) for name in "ab"]


def test_a_webhook_whose_secret_is_missing_stalls_its_gitsync_naming_the_field(
    daemons: Daemons,
    admin_api: Any,
    gitsync_crd: str,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(each_in_its_folder("a", "one"))
    daemon = operator(daemons, namespace)
    spec = {
        "repository": {"url": git_server.file_url(git_repo)},
        "webhook": {"secretRef": {"name": "nope"}},
    }
    create(admin_api, namespace, "a", spec)

    def stalled() -> dict[str, Any] | None:
        ready = condition(get(admin_api, namespace, "a"), "Ready")
        return ready if ready.get("status") == "False" else None

    ready = wait_for(stalled, "Ready=False")
    assert f"Secret {namespace}/nope (spec.webhook.secretRef) not found" in ready["message"]
    assert config_map_value(admin_api, namespace, "a") is None  # nothing applied meanwhile
    assert daemon.post(f"/hooks/gitsyncs/{namespace}/a", PUSH, {"X-Gitlab-Token": "x"}) == 404
