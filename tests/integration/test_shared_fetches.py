"""Sources of one repository and ref share its fetches (docs/ARCHITECTURE.md, The story):
against real git over file://, a fetch within a reader's freshness is not repeated, a new
commit one reader fetches is told to the others, and GitSyncs share a cached repository
only with GitSyncs that hold the same credentials."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from kubernetes import client

from gitopsd.config import SourceSpec
from gitopsd.source import FetchLedger
from tests.harness.cli import Gitopsd
from tests.harness.cluster_reads import config_map_value
from tests.harness.daemon import Daemons
from tests.harness.gitserver import GitRepo, GitServer
from tests.harness.gitsyncs import GROUP, PLURAL, VERSION, create, credentials_secret, wait_ready
from tests.harness.manifests import config_map_files_with_data, each_in_its_folder
from tests.harness.operators import operator
from tests.harness.waiting import wait_for


def test_a_recent_fetch_is_used_and_a_new_commit_is_told_to_the_other_readers(
    git_server: GitServer, git_repo: GitRepo, tmp_path: Path
) -> None:
    first = git_repo.commit(config_map_files_with_data("a"))
    spec = SourceSpec(url=git_server.file_url(git_repo), allow_insecure=True)
    ledger = FetchLedger()
    told = {"hourly": threading.Event(), "eager": threading.Event()}
    hourly = ledger.join(spec, tmp_path, 3600, told["hourly"].set)
    eager = ledger.join(spec, tmp_path, 0, told["eager"].set)

    assert hourly.fetch().sha == first
    second = git_repo.commit(config_map_files_with_data("a", value="two"))
    assert hourly.fetch().sha == first  # fetched within the hour: git was not asked

    assert eager.fetch().sha == second  # it accepts no fetch but its own
    assert told["hourly"].is_set() and not told["eager"].is_set()
    assert hourly.fetch().sha == second  # told, it reads the new commit without a fetch

    third = git_repo.commit(config_map_files_with_data("a", value="three"))
    hourly.forget()  # a webhook announced the push
    assert hourly.fetch().sha == third
    assert told["eager"].is_set()

    eager.leave()
    hourly.leave()
    assert not ledger.readers and not ledger.records


def test_gitsyncs_of_one_repository_share_its_fetches_and_cache_by_credentials(
    daemons: Daemons,
    gitopsd: Gitopsd,
    admin_api: Any,
    gitsync_crd: str,
    git_server: GitServer,
    git_repo: GitRepo,
    namespace: str,
) -> None:
    git_repo.commit(each_in_its_folder("abc", "one"))
    daemon = operator(daemons, namespace)
    secret = credentials_secret(admin_api, namespace, git_server, git_server.http_url(git_repo))
    anonymous = {"url": git_server.file_url(git_repo)}
    with_secret = {"url": git_server.http_url(git_repo), "secretRef": {"name": secret}}
    for name, repository in (("a", anonymous), ("b", anonymous), ("c", with_secret)):
        # hourly: whatever is applied within the test was asked for
        spec = {"repository": repository, "paths": [name], "interval": "1h"}
        create(admin_api, namespace, name, spec)
    for name in "abc":
        wait_ready(admin_api, namespace, name, "True", "Succeeded")

    caches = daemon.workdir / "cache" / "gitsyncs" / "repositories"
    by_credentials = sorted(len(list(folder.glob("*.git"))) for folder in caches.iterdir())
    assert by_credentials == [1, 1]  # a and b share one; c, with its Secret, has its own

    git_repo.commit(each_in_its_folder("abc", "two"))
    request = "gitopsd.io/reconcile-requested-at=now"
    gitopsd.kubectl("annotate", "--overwrite", "-n", namespace, "gitsync/a", request)
    wait_for(lambda: config_map_value(admin_api, namespace, "a") == "two", "a's new commit")
    wait_for(lambda: config_map_value(admin_api, namespace, "b") == "two", "b told of it")
    assert (
        config_map_value(admin_api, namespace, "c") == "one"
    )  # its own URL and credentials: not told

    for name in "ac":
        client.CustomObjectsApi(admin_api).delete_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        )
    wait_for(lambda: len(list(caches.iterdir())) == 1, "c's cache gone with c, b's kept")
    assert len(list(caches.glob("*/*.git"))) == 1
