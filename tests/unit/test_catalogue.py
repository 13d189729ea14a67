"""The README's reliability table is what the tests cite (tests/catalogue.py writes it)."""

from __future__ import annotations

from tests.catalogue import CASES, README, citations, with_table


def test_the_readmes_table_is_written_from_the_tests() -> None:
    readme = README.read_text()
    assert readme == with_table(readme), (
        "README's catalogue table is stale: python -m tests.catalogue"
    )


def test_every_id_a_test_cites_is_a_case_of_the_catalogue() -> None:
    unknown = sorted(set(citations()) - set(CASES))
    assert unknown == [], f"cited by tests, not in tests/catalogue.py: {unknown}"


def test_a_decision_is_stated_only_for_a_case_a_test_holds_to_it() -> None:
    cited = citations()
    undecided = [
        case_id for case_id, case in CASES.items() if case.decision and case_id not in cited
    ]
    assert undecided == []
