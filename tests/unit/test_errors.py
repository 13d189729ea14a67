"""Each error reason carries what cures it and the exit code it ends a command with: one
table, asked by the daemon's worker (retry or wait), a GitSync's status (Stalled or not)
and the command line (its exit code)."""

from __future__ import annotations

import pytest

from gitopsd.errors import (
    ApplyError,
    ClusterError,
    ClusterReason,
    ConfigError,
    ConfigReason,
    ExitCode,
    GitopsdError,
    ManifestError,
    ManifestReason,
    Remedy,
    SourceError,
    SourceReason,
)
from gitopsd.gitsync.status import Failure

CASES: dict[str, tuple[GitopsdError, Remedy, ExitCode]] = {
    "an invalid flag or spec": (ConfigError("bad"), Remedy.PERSON, ExitCode.INVALID),
    "a manifest's syntax": (
        ManifestError("a.yaml:3: bad", ManifestReason.SYNTAX),
        Remedy.NEW_REVISION,
        ExitCode.INVALID,
    ),
    "an object outside the source's namespace": (
        ManifestError("a.yaml:1: outside", ManifestReason.OUT_OF_NAMESPACE),
        Remedy.NEW_REVISION,
        ExitCode.INVALID,
    ),
    "a file that does not decrypt with the source's keys": (
        ManifestError("s.yaml: a SOPS-encrypted file", ManifestReason.DECRYPTION_FAILED),
        Remedy.PERSON,
        ExitCode.INVALID,
    ),
    "a kind the cluster does not serve yet": (
        ManifestError("a.yaml:1: Widget", ManifestReason.UNKNOWN_KIND),
        Remedy.BACK_OFF,
        ExitCode.INVALID,
    ),
    "git unreachable": (SourceError("down"), Remedy.BACK_OFF, ExitCode.SOURCE_FAILED),
    "git refused the credentials": (
        SourceError("denied", SourceReason.AUTH),
        Remedy.PERSON,
        ExitCode.SOURCE_FAILED,
    ),
    "an unknown host key": (
        SourceError("key", SourceReason.HOSTKEY),
        Remedy.PERSON,
        ExitCode.SOURCE_FAILED,
    ),
    "a missing ref": (
        SourceError("no ref", SourceReason.REF_MISSING),
        Remedy.BACK_OFF,
        ExitCode.SOURCE_FAILED,
    ),
    "the API server failing": (ClusterError("500"), Remedy.BACK_OFF, ExitCode.CLUSTER_FAILED),
    "RBAC forbidding a request": (
        ClusterError("no", ClusterReason.FORBIDDEN),
        Remedy.PERSON,
        ExitCode.CLUSTER_FAILED,
    ),
    "the server refusing a manifest as invalid": (
        ApplyError(["apps/Deployment/team/web: spec.replicas: invalid"]),
        Remedy.BACK_OFF,
        ExitCode.INVALID,
    ),
    "a conflict with another manager": (
        ApplyError(["web: conflict"], ClusterReason.CONFLICT),
        Remedy.BACK_OFF,
        ExitCode.CLUSTER_FAILED,
    ),
    "a wave not healthy": (
        ApplyError(["wave 1"], ClusterReason.UNHEALTHY),
        Remedy.BACK_OFF,
        ExitCode.UNHEALTHY,
    ),
    "a write fenced by a stop": (
        ClusterError("not sent", ClusterReason.FENCED),
        Remedy.BACK_OFF,
        ExitCode.CLUSTER_FAILED,
    ),
    "a tenant over its share of the daemon": (
        ConfigError("over tenantQuota.objects", ConfigReason.QUOTA_EXCEEDED),
        Remedy.PERSON,
        ExitCode.INVALID,
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_each_reason_carries_its_remedy_and_exit_code(case: str) -> None:
    error, remedy, exit_code = CASES[case]
    assert (error.remedy, error.exit_code) == (remedy, exit_code)


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_gitsync_is_stalled_exactly_when_retrying_alone_cannot_cure_it(case: str) -> None:
    error, remedy, exit_code = CASES[case]
    failure = Failure.of(error)
    assert failure.stalled == (remedy != Remedy.BACK_OFF)
    assert failure.exit_code == exit_code


def test_reasons_of_one_spelling_in_two_stages_keep_their_own_codes() -> None:
    """ "invalid" is a reason of the config, the manifests and the cluster alike."""
    assert ConfigError("x").remedy == Remedy.PERSON
    assert ManifestError("x", ManifestReason.INVALID).remedy == Remedy.NEW_REVISION
    assert ClusterError("x", ClusterReason.INVALID).remedy == Remedy.BACK_OFF
