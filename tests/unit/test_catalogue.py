"""The reliability table of docs/reliability.md is what the tests are marked to prove, as
pytest collects them (tests/catalogue.py writes it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.catalogue import CASES, PAGE, ROOT, Proofs, collect, with_table


@pytest.fixture(scope="module")
def suite() -> Proofs:
    return collect()


def test_the_pages_table_is_written_from_the_tests(suite: Proofs) -> None:
    page = PAGE.read_text()
    assert page == with_table(page, suite), (
        "docs/reliability.md's catalogue table is stale: python -m tests.catalogue"
    )


def test_every_case_a_test_is_marked_with_is_a_case_of_the_catalogue(suite: Proofs) -> None:
    assert sorted(set(suite.files) - set(CASES)) == []
    assert suite.malformed == []


def test_a_test_named_after_a_case_is_marked_with_it(suite: Proofs) -> None:
    assert suite.unmarked == [], "add @pytest.mark.case(...) for the ids in these names"


def test_every_case_is_proven_measured_or_says_why_not(suite: Proofs) -> None:
    silent = [
        case_id
        for case_id, case in CASES.items()
        if case_id not in suite.files and not case.measured and not case.untested
    ]
    assert silent == []


def test_a_reason_or_decision_is_stated_only_where_it_applies(suite: Proofs) -> None:
    undecided = [
        case_id for case_id, case in CASES.items() if case.decision and case_id not in suite.files
    ]
    stale = [case_id for case_id, case in CASES.items() if case.untested and case_id in suite.files]
    assert (undecided, stale) == ([], [])


def test_a_measured_case_names_a_benchmark_that_exists() -> None:
    missing = [
        case.measured
        for case in CASES.values()
        if case.measured and not (ROOT / "tests" / "bench" / f"{case.measured}.py").is_file()
    ]
    assert missing == []


def test_a_comment_a_string_or_a_docstring_counts_for_nothing(tmp_path: Path) -> None:
    (tmp_path / "test_claims.py").write_text(
        '"""SE-21: a module docstring."""\n'
        "import pytest\n"
        "SENTINEL = '/tmp/gitopsd-bi17-sentinel'  # FA-17 in a comment\n"
        "def test_unmarked():\n"
        '    """LD-04: a docstring."""\n'
        "    assert 'SE-14' != SENTINEL\n"
        "@pytest.mark.case('FA-05')\n"
        "def test_marked():\n"
        "    pass\n"
        "@pytest.mark.parametrize('x', [pytest.param(1, id='BI-08 aliases'), 2])\n"
        "def test_parameters(x):\n"
        "    pass\n"
        "@pytest.mark.parametrize('x', [pytest.param(1, marks=pytest.mark.case('BI-09'))])\n"
        "def test_a_marked_parameter(x):\n"
        "    pass\n"
        "def test_fa06_names_a_case_it_is_not_marked_with():\n"
        "    pass\n"
    )

    proofs = collect([tmp_path])

    assert proofs.files == {
        "FA-05": ["test_claims.py"],
        "BI-08": ["test_claims.py"],
        "BI-09": ["test_claims.py"],
    }
    assert [test.rsplit("::", 1)[1] for test in proofs.unmarked] == [
        "test_fa06_names_a_case_it_is_not_marked_with"
    ]
