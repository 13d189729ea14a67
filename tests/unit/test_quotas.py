"""Each tenant's share of the daemon, counted (TA-03): the objects a namespace's GitSyncs
hold together and how many of them are served, refused past the share with QuotaExceeded
naming the bound; the configuration's own sources are the admin's, not counted."""

from __future__ import annotations

import pytest

from gitopsd.configfile import TenantQuota
from gitopsd.daemon.quotas import Holdings, check_git_sync_sets, check_git_syncs
from gitopsd.errors import ConfigError, ConfigReason
from gitopsd.gitsync.status import Failure
from gitopsd.objects import ObjectKey

SHARE = TenantQuota(objects=100, git_syncs=2)


def test_ta03_a_revision_past_the_namespaces_share_is_refused_naming_the_bound() -> None:
    holdings = Holdings(SHARE)
    holdings.hold("team", 1, "team/a", 60)
    holdings.hold("other", 2, "other/a", 100)  # another namespace's share is its own

    with pytest.raises(ConfigError) as refused:
        holdings.hold("team", 3, "team/b", 41)

    assert refused.value.reason == ConfigReason.QUOTA_EXCEEDED
    message = str(refused.value)
    assert "namespace team may hold 100 objects in the daemon (tenantQuota.objects)" in message
    assert "its other GitSyncs hold 60, and this revision of team/b has 41" in message
    failure = Failure.of(refused.value)
    assert (failure.reason, failure.stalled) == ("QuotaExceeded", True)
    holdings.hold("team", 3, "team/b", 40)  # what fits is held


def test_ta03_a_source_is_counted_once_and_gives_its_share_back_when_it_retires() -> None:
    holdings = Holdings(SHARE)
    holdings.hold("team", 1, "team/a", 90)
    holdings.hold("team", 1, "team/a", 100)  # its new revision replaces its old one
    with pytest.raises(ConfigError):
        holdings.hold("team", 2, "team/b", 1)
    with pytest.raises(ConfigError):
        holdings.hold("team", 1, "team/a", 101)  # refused: its 100 stay held

    holdings.release("team", 1)

    holdings.hold("team", 2, "team/b", 100)


def test_ta03_the_configurations_own_sources_are_not_counted() -> None:
    Holdings(SHARE).hold("", 1, "platform", 1_000_000)


def key(namespace: str, name: str) -> ObjectKey:
    return ObjectKey("gitopsd.io", "GitSync", namespace, name)


def test_ta03_a_gitsync_past_its_namespaces_share_of_gitsyncs_is_refused() -> None:
    served = {key("team", "a"), key("team", "b"), key("other", "a")}

    check_git_syncs(SHARE, served, key("team", "a"))  # one served already is no new one
    check_git_syncs(SHARE, served, key("other", "b"))
    with pytest.raises(ConfigError, match=r"namespace team may have 2 GitSyncs served") as over:
        check_git_syncs(SHARE, served, key("team", "c"))

    assert over.value.reason == ConfigReason.QUOTA_EXCEEDED
    assert "tenantQuota.gitSyncs" in str(over.value) and "team/c" in str(over.value)


def test_a_gitsyncset_past_its_namespaces_share_of_sets_waits_the_oldest_first() -> None:
    def made(at: str) -> dict[str, object]:
        return {"metadata": {"creationTimestamp": at}}

    sets = {
        ObjectKey("gitopsd.io", "GitSyncSet", "team", "young"): made("2026-12-06T10:00:02Z"),
        ObjectKey("gitopsd.io", "GitSyncSet", "team", "old-b"): made("2026-12-06T10:00:01Z"),
        ObjectKey("gitopsd.io", "GitSyncSet", "team", "old-a"): made("2026-12-06T10:00:01Z"),
        ObjectKey("gitopsd.io", "GitSyncSet", "other", "any"): made("2026-12-06T09:00:00Z"),
    }
    two = TenantQuota(git_sync_sets=2)
    for passed in ("old-a", "old-b"):
        check_git_sync_sets(two, sets, ObjectKey("gitopsd.io", "GitSyncSet", "team", passed))
    check_git_sync_sets(
        TenantQuota(git_sync_sets=1), sets, ObjectKey("gitopsd.io", "GitSyncSet", "other", "any")
    )

    with pytest.raises(ConfigError, match=r"namespace team may have 2 GitSyncSets") as over:
        check_git_sync_sets(two, sets, ObjectKey("gitopsd.io", "GitSyncSet", "team", "young"))

    assert over.value.reason == ConfigReason.QUOTA_EXCEEDED
    assert "GitSyncSet young" in str(over.value) and "tenantQuota.gitSyncSets" in str(over.value)
