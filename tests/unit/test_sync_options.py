"""The annotations of the tools users come from, as a table: what each means to gitopsd, and
what gitopsd says it does not honour."""

from __future__ import annotations

import pytest

from gitopsd.objects import wave_of
from gitopsd.sync_options import Option, options_of, problem, prune_disabled, unhonoured


def annotated(**annotations: str) -> dict[str, object]:
    return {"metadata": {"name": "x", "annotations": annotations}}


ARGO_OPTIONS = "argocd.argoproj.io/sync-options"
CASES: dict[str, tuple[dict[str, str], set[Option], bool]] = {
    "gitopsd's own options": (
        {"gitopsd.io/sync-options": "replace-on-immutable, merge"},
        {Option.REPLACE_ON_IMMUTABLE, Option.MERGE},
        False,
    ),
    "gitopsd's prune opt-out": ({"gitopsd.io/prune": "disabled"}, set(), True),
    "Argo CD Prune=false": ({ARGO_OPTIONS: "Prune=false"}, set(), True),
    "Argo CD Delete=false": ({ARGO_OPTIONS: "Delete=false"}, set(), True),
    "Argo CD Replace=true, ServerSideApply=true": (
        {ARGO_OPTIONS: "ServerSideApply=true,Replace=true"},
        {Option.REPLACE_ON_IMMUTABLE},
        False,
    ),
    "Argo CD IgnoreExtraneous": (
        {"argocd.argoproj.io/compare-options": "IgnoreExtraneous"},
        {Option.IGNORE_EXTRANEOUS},
        False,
    ),
    "Flux prune: disabled": ({"kustomize.toolkit.fluxcd.io/prune": "disabled"}, set(), True),
    "Flux ssa: Ignore": ({"kustomize.toolkit.fluxcd.io/ssa": "Ignore"}, {Option.SKIP}, False),
    "Flux ssa: IfNotPresent": (
        {"kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent"},
        {Option.CREATE_ONLY},
        False,
    ),
    "Flux ssa: Merge": ({"kustomize.toolkit.fluxcd.io/ssa": "Merge"}, {Option.MERGE}, False),
    "Flux ssa: Override is what gitopsd does": (
        {"kustomize.toolkit.fluxcd.io/ssa": "Override"},
        set(),
        False,
    ),
    "Flux force: enabled": (
        {"kustomize.toolkit.fluxcd.io/force": "enabled"},
        {Option.REPLACE_ON_IMMUTABLE},
        False,
    ),
    "Flux reconcile: disabled": (
        {"kustomize.toolkit.fluxcd.io/reconcile": "disabled"},
        {Option.SKIP},
        False,
    ),
    "what gitopsd always does": (
        {ARGO_OPTIONS: "ServerSideApply=true,PruneLast=true,ApplyOutOfSyncOnly=true"},
        set(),
        False,
    ),
    "none": ({}, set(), False),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_each_annotation_means_what_it_means_to_its_tool(case: str) -> None:
    annotations, options, never_deleted = CASES[case]
    body = annotated(**annotations)
    assert options_of(body) == options
    assert prune_disabled(body) == never_deleted
    assert unhonoured(body) == ()


def test_argo_cds_sync_wave_is_read_where_gitopsds_is_not_written() -> None:
    assert wave_of(annotated(**{"argocd.argoproj.io/sync-wave": "-2"})) == -2
    both = {"argocd.argoproj.io/sync-wave": "-2", "gitopsd.io/sync-wave": "3"}
    assert wave_of(annotated(**both)) == 3


def test_what_gitopsd_cannot_honour_is_said_each_time() -> None:
    body = annotated(
        **{
            ARGO_OPTIONS: "Validate=false,Prune=false,PruneLast=true,Force=true",
            "argocd.argoproj.io/compare-options": "ServerSideDiff=true",
            "kustomize.toolkit.fluxcd.io/ssa": "Sometimes",
            "argocd.argoproj.io/hook": "PreSync",  # hooks are honoured (synchooks)
        }
    )
    said = unhonoured(body)
    assert len(said) == 4
    assert "'ServerSideDiff=true'" in said[0]  # by annotation, then as written
    assert "argocd.argoproj.io/sync-options: 'Validate=false' is not honoured" in said[1]
    assert "'Force=true'" in said[2]  # PruneLast=true is what gitopsd does anyway
    assert "kustomize.toolkit.fluxcd.io/ssa: 'Sometimes'" in said[3]
    assert prune_disabled(body)  # what it can honour, it does


def test_an_unknown_option_of_gitopsds_own_is_a_problem() -> None:
    assert "unknown option 'replace'" in problem(
        annotated(**{"gitopsd.io/sync-options": "replace"})
    )
    assert problem(annotated(**{"gitopsd.io/sync-options": "skip,create-only"})) == ""
