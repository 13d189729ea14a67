"""A GitSync's webhook (SE-20): a push announced by GitHub, GitLab or a generic HMAC sender,
signed with the token of a Secret in the GitSync's namespace, is applied at once; the
GitSyncs that share its repository read the commit too, and nothing unsigned or unknown is
accepted."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from kubernetes import client

from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.waiting import wait_for
from tests.integration.test_daemon import config_map_value
from tests.integration.test_gitsync import condition, create, get, operator, wait_ready
from tests.integration.test_shared_fetches import each_in_its_folder

TOKEN = b"a-webhook-token-9d1c"
PUSH = json.dumps({"ref": "refs/heads/main", "after": "0" * 40}).encode()


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
    core.create_namespaced_secret(
        namespace, {"metadata": {"name": "hook"}, "data": {"token": _b64(TOKEN)}}
    )
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


def values(admin_api: Any, namespace: str) -> list[str | None]:
    return [config_map_value(admin_api, namespace, name) for name in "ab"]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


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
